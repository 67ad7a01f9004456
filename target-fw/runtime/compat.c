/* Compat mode: the thesis' legacy format byte for byte ('A' from self, 'P' pc; big-endian
 * addresses of RACKPROF_ADDR_BYTES bytes). No markers, no drop report on the wire: the drop
 * count is kept for rackprof_dropped(). */
#include "rackprof_config.h"
#include "ring.h"
#include "wire.h"

#define A RACKPROF_ADDR_BYTES

/* Records are written straight into the queue: no copy, and a small stack frame. */
static void put_be(unsigned at, uint32_t addr) {
    for (unsigned i = A; i > 0; i--) {
        rp_ring_buf[(at + i) & RP_RING_MASK] = (uint8_t)addr;
        addr >>= 8;
    }
}

void rp_wire_arc(uint32_t from, uint32_t self) {
    int at = rp_queue_begin(1 + 2 * A, 0);
    if (at < 0) return;
    rp_ring_buf[(unsigned)at & RP_RING_MASK] = 'A';
    put_be((unsigned)at, from);
    put_be((unsigned)at + A, self);
    rp_queue_end();
}

void rp_wire_pc(uint32_t pc) {
    int at = rp_queue_begin(1 + A, 0);
    if (at < 0) return;
    rp_ring_buf[(unsigned)at & RP_RING_MASK] = 'P';
    put_be((unsigned)at, pc);
    rp_queue_end();
}

void rp_wire_start(void) {}
void rp_wire_stop(void) {}
void rp_wire_tick(void) {}

int rp_wire_peek(void) {
    return rp_ring_used() ? rp_ring_peek(0) : -1;
}

void rp_wire_advance(void) {
    rp_ring_consume(1);
}

int rp_wire_idle(void) {
    return rp_ring_used() == 0;
}
