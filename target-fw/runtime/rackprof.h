/* rackprof target runtime: call arcs from gcc's -pg hook and PC samples from SysTick, sent
 * over an interrupt-driven UART in the thesis' legacy format (compat) or the framed protocol.
 * Build options are in rackprof_config.h. Nothing here may be built with -pg. */
#ifndef RACKPROF_H
#define RACKPROF_H

#include <stdint.h>

#include "rackprof_config.h"

/* Sets up the UART, SysTick and interrupt priorities. Call once, before rackprof_start(). */
void rackprof_init(void);
/* Switches profiling on: arcs and samples are recorded from here on. */
void rackprof_start(void);
/* Switches profiling off; framed mode sends what its caches hold, then a STOP marker. */
void rackprof_stop(void);
/* Waits until every queued byte has left the UART (thread mode only). */
void rackprof_flush(void);
/* Records lost because the queue was full, since reset. */
uint32_t rackprof_dropped(void);
/* Console text on ITM stimulus port RACKPROF_CONSOLE_PORT (ITM builds; thread mode). Other
 * builds have no console channel on their wire: the text is discarded. */
void rackprof_puts(const char* text);

/* Counter campaigns (RACKPROF_COUNTERS builds, ARMv7-M): waits (thread mode, polling the UART's
 * receiver) for the host's next COUNTER_CONFIG and arms per-function counting for it; returns
 * 1 then. Run the workload once, then rackprof_campaign_end(): the run's FUNCTION_COUNTS and
 * RUN_TOTALS are queued and sent. A configuration with no counters and no functions ends
 * the campaign: rackprof_campaign_wait() returns 0. */
int rackprof_campaign_wait(void);
void rackprof_campaign_end(void);

/* RTOS task hooks (framed builds with RACKPROF_TASKS=1; docs/rtos.md): the kernel calls them
 * from its context switch (PendSV, or thread mode) and when it deletes a task; any context
 * SysTick can preempt (RISC-V machine mode: any, traps do not nest). handle: the task's TCB
 * (non-null; sent as its low RACKPROF_ADDR_BYTES bytes); name: a string, up to 32 bytes sent,
 * read at the call. A switch first sends what the arc and PC caches hold, so later counts
 * belong to the task switched in. Without RACKPROF_TASKS they are empty inlines (never
 * instrumented): the wire is unchanged. */
#if RACKPROF_TASKS
void rackprof_task_switched_in(const void* handle, const char* name);
void rackprof_task_deleted(const void* handle);
#else
__attribute__((always_inline, no_instrument_function)) static inline void rackprof_task_switched_in(
    const void* handle, const char* name) {
    (void)handle;
    (void)name;
}
__attribute__((always_inline, no_instrument_function)) static inline void rackprof_task_deleted(
    const void* handle) {
    (void)handle;
}
#endif

#endif
