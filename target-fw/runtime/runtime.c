/* Switching profiling on and off, the queue's producer policy, SysTick (Cortex-M; RISC-V's
 * sampler timer is in riscv/arch.c), the UART consumer. */
#include "rackprof.h"

#include "arch.h"
#include "itm.h"
#include "port.h"
#include "rackprof_config.h"
#include "ring.h"
#include "wire.h"

volatile uint8_t rackprof_on; /* read by __gnu_mcount_nc before anything else */
volatile uint32_t rp_dropped;

/* Below the UART (priority 0), so the queue drains while the sampler runs, and above the
 * application's interrupts (the thesis' rule for steady sampling). */
#define SYSTICK_PRIORITY 0x40u

/* The consumer's byte source and its idle test: the encoder's bytes, or with ITM over the UART
 * those bytes wrapped in ITM packets beside the PC sample packets. */
#if RACKPROF_ITM == RACKPROF_ITM_OVER_UART
#define next_byte rp_itm_peek
#define take_byte rp_itm_advance
#define all_sent rp_itm_idle
#else
#define next_byte rp_wire_peek
#define take_byte rp_wire_advance
#define all_sent rp_wire_idle
#endif

#if RACKPROF_SAMPLE_DITHER
static uint32_t rp_sample_reload; /* the SysTick reload of the undithered period */
static uint16_t rp_dither_lfsr = 0xACE1u;

/* The next reload: the period plus -N..N-1 cycles from the LFSR (taps 16, 14, 13, 11: all
 * 65535 states). SysTick has already reloaded for the interval now running, so this sets the
 * one after it: the intervals are jittered all the same. */
static void rp_dither_reload(void) {
    uint16_t l = rp_dither_lfsr;
    l = (uint16_t)((l >> 1) ^ ((l & 1u) ? 0xB400u : 0u));
    rp_dither_lfsr = l;
    SYST_RVR = rp_sample_reload - RACKPROF_SAMPLE_DITHER + (l & (2u * RACKPROF_SAMPLE_DITHER - 1u));
}
#endif

/* SysTick stamps count whole periods of one length: a dithered period would make them lie. */
#if RACKPROF_SAMPLE_DITHER && RP_STAMPS && !RACKPROF_CYCLE_COUNTER
#error "RACKPROF_SAMPLE_DITHER needs RACKPROF_CYCLE_COUNTER=1 for enter/exit and task stamps"
#endif

#if RP_STAMPS && !RACKPROF_CYCLE_COUNTER
static uint32_t stamp_wraps;  /* SysTick periods seen, modulo 2^32 */
static uint32_t stamp_period; /* cycles per SysTick period (no division per stamp) */
static uint32_t stamp_last_count;
static uint8_t stamp_wrap_counted; /* a reader counted this period's wrap before the tick */
#endif

#if !defined(__riscv)
/* SysTick at RACKPROF_SAMPLE_HZ on the core clock, its priority, the events' clock. */
void rp_sampler_start(void) {
    SCB_SHPR3 = (SCB_SHPR3 & 0x00FFFFFFu) | (SYSTICK_PRIORITY << 24);
    SYST_RVR = port_core_clock_hz() / RACKPROF_SAMPLE_HZ - 1u;
#if RACKPROF_SAMPLE_DITHER
    rp_sample_reload = SYST_RVR;
#endif
    SYST_CVR = 0;
    SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_TICKINT | SYST_CSR_CLKSOURCE;
#if RP_STAMPS && !RACKPROF_CYCLE_COUNTER
    stamp_period = SYST_RVR + 1u;
#endif
#if RP_STAMPS && RACKPROF_CYCLE_COUNTER
    DEMCR |= DEMCR_TRCENA;
    DWT_CYCCNT = 0;
    DWT_CTRL |= DWT_CTRL_CYCCNTENA;
#endif
}
#endif

void rackprof_init(void) {
#if RACKPROF_ITM
    rp_itm_init();
#else
    port_uart_init();
#endif
    rp_sampler_start();
#if RACKPROF_COUNTERS
    rp_counters_init();
#endif
}

#if RP_STAMPS && RACKPROF_CYCLE_COUNTER
uint32_t rp_stamp(void) {
    return rp_cycles();
}
#elif RP_STAMPS

/* SysTick's count extended by its wraps, in core cycles since init (modulo 2^32). The count
 * runs down, so a reader that finds it above the last count read knows it reloaded: one wrap,
 * which it counts and flags. The SysTick interrupt is the wrap itself: its handler counts the
 * wrap unless a reader already did (the flag) -- reading alone would miss one when the handler
 * read last, a whole period ago, at a count no lower than now. Masked, so nested readers never
 * see the count and the wraps out of step. (COUNTFLAG is not used: under QEMU a read could see
 * the reloaded count before the flag was set.) */
static uint32_t stamp_at(uint32_t count) {
    return stamp_wraps * stamp_period + (stamp_period - 1u - count);
}

uint32_t rp_stamp(void) {
    uint32_t key = rp_irq_save();
    uint32_t count = SYST_CVR;
    if (count > stamp_last_count) {
        stamp_wraps++;
        stamp_wrap_counted = 1;
    }
    stamp_last_count = count;
    uint32_t stamp = stamp_at(count);
    rp_irq_restore(key);
    return stamp;
}

static void stamp_tick(void) {
    uint32_t key = rp_irq_save();
    uint32_t count = SYST_CVR;
    if (count > stamp_last_count || !stamp_wrap_counted) stamp_wraps++;
    stamp_wrap_counted = 0;
    stamp_last_count = count;
    rp_irq_restore(key);
}
#endif

void rackprof_start(void) {
    rp_wire_start();
    rackprof_on = 1;
#if RACKPROF_TASKS
    rp_wire_task_restart(); /* records from here on belong to the task running now */
#endif
#if RACKPROF_ITM == RACKPROF_ITM_REGS
    rp_itm_sampling(1);
#endif
}

void rackprof_stop(void) {
    /* Handlers run to completion before thread code resumes: once the flag is clear here, no
     * producer is left half way through, and the encoder may flush its caches. */
    rackprof_on = 0;
#if RACKPROF_ITM == RACKPROF_ITM_REGS
    rp_itm_sampling(0);
#endif
    rp_wire_stop();
}

void rackprof_flush(void) {
    while (!all_sent()) rp_kick();
}

uint32_t rackprof_dropped(void) {
    return rp_dropped;
}

#if RACKPROF_TASKS
/* Thread-mode records of different tasks do not nest as handlers do: a task switch between a
 * reservation and its commit would hold back every record queued after it (the queue fills and
 * drops) until that task ran again, or for ever if it never did. So with tasks a thread-mode
 * record is written masked, from its reservation to its commit (tens of instructions); the
 * mask is never held while waiting for room. Handlers run to completion: unchanged. */
static uint32_t thread_record_key;

static inline void record_mask(void) {
    if (rp_handler() == 0) thread_record_key = rp_irq_save();
}
static inline void record_unmask(void) {
    if (rp_handler() == 0) rp_irq_restore(thread_record_key);
}
#else
static inline void record_mask(void) {}
static inline void record_unmask(void) {}
#endif

int rp_queue_begin(unsigned n, int wait) {
    int at;
    record_mask();
    while ((at = rp_ring_reserve(n)) < 0) {
        record_unmask();
        if (!(wait || RACKPROF_BLOCKING) || rp_handler() != 0) {
            rp_word_add(&rp_dropped, 1);
            return -1;
        }
        rp_kick();
        record_mask();
    }
    return at;
}

void rp_queue_end(void) {
    int published = rp_ring_commit();
    record_unmask();
    /* Framed mode batches records into frames: the UART is woken when the queue is half full
     * and on every tick, not for every record. */
    if (published && (!RACKPROF_FRAMED || rp_ring_used() >= RACKPROF_RING_BYTES / 2)) rp_kick();
}

void rp_push(const uint8_t* record, unsigned n, int wait) {
    int at = rp_queue_begin(n, wait);
    if (at < 0) return;
    for (unsigned i = 0; i < n; i++) rp_ring_buf[(unsigned)(at + i) & RP_RING_MASK] = record[i];
    rp_queue_end();
}

/* Called by SysTick_Handler (pc_sampler.S), or on RISC-V by the machine timer trap
 * (riscv/arch.c), with the interrupted code's PC. */
void rp_sample(uint32_t pc) {
#if RP_STAMPS && !RACKPROF_CYCLE_COUNTER
    stamp_tick(); /* this period's wrap */
#endif
    /* With the ITM registers the DWT samples in hardware: the tick only paces the encoder. */
#if RACKPROF_ITM == RACKPROF_ITM_OVER_UART
    if (rackprof_on) rp_itm_pc(pc);
#elif !RACKPROF_ITM
    if (rackprof_on) rp_wire_pc(pc);
#else
    (void)pc;
#endif
#if RACKPROF_SAMPLE_DITHER
    rp_dither_reload();
#endif
    rp_wire_tick();
}

void rackprof_uart_isr(void) {
    int byte;
    while ((byte = next_byte()) >= 0 && port_uart_put((uint8_t)byte)) take_byte();
}

#if !RACKPROF_ITM
void rackprof_puts(const char* text) {
    (void)text;
}
#endif
