/* Compat mode: the thesis' legacy format byte for byte ('A' from self, 'P' pc; big-endian
 * addresses of RACKPROF_ADDR_BYTES bytes). No markers, no drop report on the wire: the drop
 * count is kept for rackprof_dropped(). */
#include "rackprof_config.h"
#include "ring.h"
#include "wire.h"

#define A RACKPROF_ADDR_BYTES

static void put_be(uint8_t* out, uint32_t addr) {
    for (int i = A - 1; i >= 0; i--) {
        out[i] = (uint8_t)addr;
        addr >>= 8;
    }
}

void rp_wire_arc(uint32_t from, uint32_t self) {
    uint8_t record[1 + 2 * A];
    record[0] = 'A';
    put_be(record + 1, from);
    put_be(record + 1 + A, self);
    rp_push(record, sizeof record, 0);
}

void rp_wire_pc(uint32_t pc) {
    uint8_t record[1 + A];
    record[0] = 'P';
    put_be(record + 1, pc);
    rp_push(record, sizeof record, 0);
}

void rp_wire_start(void) {}
void rp_wire_stop(void) {}
void rp_wire_tick(void) {}

int rp_wire_peek(uint8_t* byte) {
    if (!rp_ring_used()) return 0;
    *byte = rp_ring_peek(0);
    return 1;
}

void rp_wire_advance(void) {
    rp_ring_consume(1);
}

int rp_wire_idle(void) {
    return rp_ring_used() == 0;
}
