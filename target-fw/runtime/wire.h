/* The wire encoders (compat.c or framed.c; exactly one is linked) and the shared producer path
 * (runtime.c). */
#ifndef RACKPROF_WIRE_H
#define RACKPROF_WIRE_H

#include <stdint.h>

#include "port.h"
#include "rackprof_config.h"

/* Items with a cycle stamp are sent: enter/exit events or task switches (rp_stamp()). */
#define RP_STAMPS (RACKPROF_EVENTS || RACKPROF_TASKS)

/* Producers, called only while profiling is on. */
void rp_wire_arc(uint32_t from, uint32_t self); /* from __gnu_mcount_nc, any context */
void rp_wire_pc(uint32_t pc);                   /* from the SysTick handler */
/* RACKPROF_EVENTS: a function entered (enter = 1) or left, from the -finstrument-functions
 * hooks in any context. */
void rp_wire_event(int enter, uint32_t callee, uint32_t call_site);
/* RP_STAMPS: the cycle stamp now (runtime.c), any context. */
uint32_t rp_stamp(void);
/* RACKPROF_COUNTERS: the DWT's counters on (counters.c), from rackprof_init(). */
void rp_counters_init(void);
/* The frames' CRC-16/CCITT-FALSE (framed.c), for the host's frames too (counters.c). */
uint16_t rp_crc16(const uint8_t* data, unsigned n);
/* Thread mode, around switching profiling on and off. */
void rp_wire_start(void);
/* RACKPROF_TASKS: after START, the task running now, if the kernel named one (framed.c). */
void rp_wire_task_restart(void);
void rp_wire_stop(void);
/* Every SysTick, on or off: periodic work of the encoder. */
void rp_wire_tick(void);

/* Consumer (UART ISR): the next byte to send, without taking it; -1 when there is none. */
int rp_wire_peek(void);
void rp_wire_advance(void);
/* 1 when everything produced so far has been handed to the UART. */
int rp_wire_idle(void);

/* Reserves n bytes of the queue for one record; returns the start index (RP_RING_MASK it), or
 * -1 when the record is dropped (the policy below). rp_queue_end() publishes it. */
int rp_queue_begin(unsigned n, int wait);
void rp_queue_end(void);

/* Queues one record. wait = 0: a full queue drops it (counted) unless the blocking build
 * option is set and this is thread mode; wait = 1: thread mode waits for room. */
void rp_push(const uint8_t* record, unsigned n, int wait);

/* Wakes the consumer: the UART interrupt, or PendSV when the ITM registers are written. */
#if RACKPROF_ITM == RACKPROF_ITM_REGS
void rp_itm_kick(void);
#define rp_kick rp_itm_kick
#else
#define rp_kick port_uart_kick
#endif

extern volatile uint8_t rackprof_on;
extern volatile uint32_t rp_dropped;

#endif
