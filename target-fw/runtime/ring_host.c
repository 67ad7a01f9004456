#include "ring_host.h"

#include "ring.h"

volatile uint32_t rp_host_dropped;

int rp_host_push(const uint8_t* record, unsigned n) {
    int at = rp_ring_reserve(n);
    if (at < 0) {
        rp_word_add(&rp_host_dropped, 1);
        return 0;
    }
    for (unsigned i = 0; i < n; i++) {
        rp_host_preempt();
        rp_ring_buf[(unsigned)(at + i) & RP_RING_MASK] = record[i];
    }
    rp_ring_commit();
    return 1;
}

unsigned rp_host_used(void) {
    return rp_ring_used();
}

uint8_t rp_host_peek(unsigned offset) {
    return rp_ring_peek(offset);
}

void rp_host_consume(unsigned n) {
    rp_ring_consume(n);
}

unsigned rp_host_capacity(void) {
    return RACKPROF_RING_BYTES;
}

unsigned rp_host_room(void) {
    uint8_t reserved = (uint8_t)(rp_ring_state >> 8);
    return RACKPROF_RING_BYTES - (uint8_t)(reserved - rp_ring_tail);
}

int rp_host_quiescent(void) {
    uint32_t state = rp_ring_state;
    return (state >> 16) == 0 && (uint8_t)state == (uint8_t)(state >> 8);
}

void rp_host_reset(uint8_t index) {
    rp_ring_state = (uint32_t)index | ((uint32_t)index << 8);
    rp_ring_tail = index;
}
