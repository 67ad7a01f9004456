#include "ring.h"

uint8_t rp_ring_buf[RACKPROF_RING_BYTES];
volatile uint32_t rp_ring_state;
volatile uint8_t rp_ring_tail;
