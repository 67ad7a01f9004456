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

#include "atomic_word.h"
#include "rackprof_config.h"

#define RP_RING_MASK (RACKPROF_RING_BYTES - 1u)

extern uint8_t rp_ring_buf[RACKPROF_RING_BYTES];
/* [7:0] published head, [15:8] reserved head, [23:16] writers in progress. */
extern volatile uint32_t rp_ring_state;
extern volatile uint8_t rp_ring_tail;

/* Producer side, inline: each is one atomic update of rp_ring_state.
 * Reserves n bytes; returns the start index (use with RP_RING_MASK), or -1 when full. */
static inline int rp_ring_reserve(unsigned n) {
    uint32_t key;
    for (;;) {
        uint32_t state = rp_word_begin(&rp_ring_state, &key);
        uint8_t reserved = (uint8_t)(state >> 8);
        if ((uint8_t)(reserved - rp_ring_tail) + n > RACKPROF_RING_BYTES) {
            /* Full, unless an interrupt came between the load and the tail read (the tail is
             * then newer than the state). Storing the unchanged word succeeds only if none
             * did: then the two reads agree and the queue really is full. */
            if (rp_word_commit(&rp_ring_state, state, key)) return -1;
            continue;
        }
        uint32_t next = (state & 0xFFu) | ((uint32_t)(uint8_t)(reserved + n) << 8) |
                        ((state & 0xFF0000u) + 0x10000u);
        if (rp_word_commit(&rp_ring_state, next, key)) return reserved;
    }
}

/* Ends a reservation; returns 1 when it published (this was the outermost writer). */
static inline int rp_ring_commit(void) {
    uint32_t key;
    for (;;) {
        uint32_t state = rp_word_begin(&rp_ring_state, &key);
        uint32_t writers = ((state >> 16) & 0xFFu) - 1u;
        uint32_t reserved = (state >> 8) & 0xFFu;
        /* The last writer out publishes everything reserved so far. */
        uint32_t next = writers ? (state & 0xFFFFu) | (writers << 16) : reserved | (reserved << 8);
        if (rp_word_commit(&rp_ring_state, next, key)) return writers == 0;
    }
}

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
