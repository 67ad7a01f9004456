/* The transmit ring (ring.h) behind plain functions, compiled as C for the host's unit test
 * (ring_host_test.cc, built by target-fw/host_tests.cmake): ring.h's inline producer and
 * consumer steps as the firmware compiles them, callable from C++. */
#ifndef RACKPROF_RING_HOST_H
#define RACKPROF_RING_HOST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* rp_push's path for a producer that never waits (runtime.c: rp_queue_begin, the copy,
 * rp_queue_end): reserve, write the bytes with a preemption point before each, commit. A full
 * ring drops the record and counts it in rp_host_dropped. Returns 1 when queued, 0 when
 * dropped. */
int rp_host_push(const uint8_t* record, unsigned n);
extern volatile uint32_t rp_host_dropped;

/* The consumer: published bytes not yet taken, one of them, taking them. */
unsigned rp_host_used(void);
uint8_t rp_host_peek(unsigned offset);
void rp_host_consume(unsigned n);

/* The ring's size, and its room for a new reservation now (every reserved byte counts). */
unsigned rp_host_capacity(void);
unsigned rp_host_room(void);
/* 1 when no writer is in progress and everything reserved is published. */
int rp_host_quiescent(void);
/* An empty ring whose indices all stand at `index` (8 bits, as the state word keeps them). */
void rp_host_reset(uint8_t index);

#ifdef __cplusplus
}
#endif

#endif
