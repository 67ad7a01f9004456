/* The transmit queue: a byte ring with many nested producers and one consumer (the UART ISR).
 *
 * A producer reserves space, writes its record, and commits. Producers nest strictly (a handler
 * runs to completion before the code it interrupted resumes), so the published head may only
 * advance when the outermost writer commits: until then an inner writer's bytes sit behind an
 * unfinished outer record. The published head, the reserved head and the count of writers in
 * progress share one word, so each step is one atomic update (atomic_word.h) and the consumer
 * sees whole records only. The consumer alone writes the tail. */
#ifndef RACKPROF_RING_H
#define RACKPROF_RING_H

#include <stdint.h>

#include "rackprof_config.h"

#define RP_RING_MASK (RACKPROF_RING_BYTES - 1u)

extern uint8_t rp_ring_buf[RACKPROF_RING_BYTES];
/* [7:0] published head, [15:8] reserved head, [23:16] writers in progress. */
extern volatile uint32_t rp_ring_state;
extern volatile uint8_t rp_ring_tail;

/* Reserves n bytes; returns the start index (use with RP_RING_MASK), or -1 when full. */
int rp_ring_reserve(unsigned n);
/* Ends a reservation; returns 1 when it published (this was the outermost writer). */
int rp_ring_commit(void);

/* Consumer side. */
static inline uint8_t rp_ring_head(void) {
    return (uint8_t)rp_ring_state;
}
static inline unsigned rp_ring_used(void) {
    return (uint8_t)(rp_ring_head() - rp_ring_tail);
}
static inline uint8_t rp_ring_peek(unsigned offset) {
    return rp_ring_buf[(uint8_t)(rp_ring_tail + offset) & RP_RING_MASK];
}
static inline void rp_ring_consume(unsigned n) {
    rp_ring_tail = (uint8_t)(rp_ring_tail + n);
}

#endif
