#include "ring.h"

#include "atomic_word.h"

uint8_t rp_ring_buf[RACKPROF_RING_BYTES];
volatile uint32_t rp_ring_state;
volatile uint8_t rp_ring_tail;

int rp_ring_reserve(unsigned n) {
    uint32_t key;
    for (;;) {
        uint32_t state = rp_word_begin(&rp_ring_state, &key);
        uint8_t reserved = (uint8_t)(state >> 8);
        if ((uint8_t)(reserved - rp_ring_tail) + n > RACKPROF_RING_BYTES) {
            rp_word_abort(key);
            return -1;
        }
        uint32_t next = (state & 0xFFu) | ((uint32_t)(uint8_t)(reserved + n) << 8) |
                        ((state & 0xFF0000u) + 0x10000u);
        if (rp_word_commit(&rp_ring_state, next, key)) return reserved;
    }
}

int rp_ring_commit(void) {
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
