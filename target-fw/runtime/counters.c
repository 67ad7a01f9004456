/* Counter campaigns (RACKPROF_COUNTERS; framed protocol v3, protocol/framed-protocol.md): the
 * host sends COUNTER_CONFIG frames down the UART naming a run, a counter mask and up to
 * RACKPROF_COUNTER_SLOTS functions; for that run the -finstrument-functions hooks count each
 * named function's inclusive DWT counts (snapshot at its outermost entry, the difference added
 * at the matching exit), and rackprof_campaign_end() queues one FUNCTION_COUNTS per function
 * and RUN_TOTALS. ARMv7-M only (the DWT's CYCCNT and its five 8-bit event counters).
 *
 * The 8-bit counters (CPICNT, EXCCNT, SLEEPCNT, LSUCNT, FOLDCNT) wrap at 256: they are read at
 * every hook of every instrumented function and extended in software, which is exact while
 * fewer than 256 of an event happen between two hooks (a long leaf function with more stalls
 * than that loses multiples of 256; CYCCNT, 32 bits, does not). The hooks' own cycles fall
 * inside the functions that are counted, as with any instrumentation. */
#include <stdint.h>

#include "atomic_word.h"
#include "cm_regs.h"
#include "port.h"
#include "rackprof.h"
#include "rackprof_config.h"
#include "wire.h"

#if !RACKPROF_COUNTERS
#error "counters.c is the RACKPROF_COUNTERS build's"
#endif

/* CYCCNT, CPICNT, EXCCNT, SLEEPCNT, LSUCNT, FOLDCNT: consecutive words (ARMv7-M ARM
 * C1.8.7-C1.8.12), in the order of the wire's counter mask bits. */
#define DWT_COUNTER(i) ((&DWT_CYCCNT)[i])
#define DWT_CTRL_EVENTS                                                                    \
    (DWT_CTRL_CPIEVTENA | DWT_CTRL_EXCEVTENA | DWT_CTRL_SLEEPEVTENA | DWT_CTRL_LSUEVTENA | \
     DWT_CTRL_FOLDEVTENA)

#define COUNTERS 6u
#define ALL_COUNTERS 0x3Fu
#define A RACKPROF_ADDR_BYTES

enum { TAG_COUNTER_CONFIG = 0x0E, TAG_FUNCTION_COUNTS = 0x0F, TAG_RUN_TOTALS = 0x10 };

struct slot {
    uint32_t fn; /* without the Thumb bit */
    uint32_t depth;
    uint32_t calls;
    uint64_t snapshot[COUNTERS];
    uint64_t acc[COUNTERS];
};

static struct slot slots[RACKPROF_COUNTER_SLOTS];
static uint8_t slot_count, run_mask, armed, configured, refused;
static uint16_t run_id;
static uint64_t now[COUNTERS]; /* the counters, extended to 64 bits */
static uint32_t last[COUNTERS];
static uint64_t run_start[COUNTERS];

/* Reads every counter and adds what it moved since the last read. */
static void read_counters(void) {
    uint32_t c = DWT_COUNTER(0);
    now[0] += c - last[0];
    last[0] = c;
    for (unsigned i = 1; i < COUNTERS; i++) {
        c = DWT_COUNTER(i) & 0xFFu;
        now[i] += (c - last[i]) & 0xFFu;
        last[i] = c;
    }
}

static struct slot* find(void* fn) {
    uint32_t a = (uint32_t)fn & ~1u;
    for (unsigned i = 0; i < slot_count; i++) {
        if (slots[i].fn == a) return &slots[i];
    }
    return 0;
}

void __cyg_profile_func_enter(void* this_fn, void* call_site) {
    (void)call_site;
    if (!armed) return;
    uint32_t key = rp_irq_save();
    read_counters();
    struct slot* s = find(this_fn);
    if (s) {
        s->calls++;
        if (s->depth++ == 0) {
            for (unsigned i = 0; i < COUNTERS; i++) s->snapshot[i] = now[i];
        }
    }
    rp_irq_restore(key);
}

void __cyg_profile_func_exit(void* this_fn, void* call_site) {
    (void)call_site;
    if (!armed) return;
    uint32_t key = rp_irq_save();
    read_counters();
    struct slot* s = find(this_fn);
    if (s && s->depth && --s->depth == 0) {
        for (unsigned i = 0; i < COUNTERS; i++) s->acc[i] += now[i] - s->snapshot[i];
    }
    rp_irq_restore(key);
}

/* ---- the host's frames ------------------------------------------------------------------- */

#define RX_MAX 256u
static uint8_t rx[RX_MAX];
static unsigned rx_len;
static uint8_t rx_overlong;

/* COBS-decodes rx[0..n) in place; the decoded length, or -1 when it is not valid COBS. */
static int cobs_decode_in_place(unsigned n) {
    unsigned in = 0, out = 0;
    while (in < n) {
        unsigned code = rx[in++];
        if (code == 0 || in + code - 1 > n) return -1;
        for (unsigned i = 1; i < code; i++) rx[out++] = rx[in++];
        if (code != 0xFFu && in < n) rx[out++] = 0;
    }
    return (int)out;
}

static uint32_t get_le(const uint8_t* p, unsigned bytes) {
    uint32_t v = 0;
    for (unsigned i = bytes; i-- > 0;) v = (v << 8) | p[i];
    return v;
}

/* A whole frame from the host: checked, then its COUNTER_CONFIG items applied (the last one
 * wins). Anything else in it is ignored; a bad frame changes nothing. */
static void host_frame(unsigned n) {
    int len = cobs_decode_in_place(n);
    if (len < 5) return;
    unsigned body = (unsigned)len - 2u;
    if (rp_crc16(rx, body) != (uint16_t)get_le(rx + body, 2)) return;
    unsigned pos = 2;
    while (pos < body) {
        if (rx[pos] != TAG_COUNTER_CONFIG || pos + 5 > body) return;
        unsigned count = rx[pos + 4];
        if (pos + 5 + count * A > body) return;
        run_id = (uint16_t)get_le(rx + pos + 1, 2);
        run_mask = rx[pos + 3];
        refused = count > RACKPROF_COUNTER_SLOTS || (run_mask & ~ALL_COUNTERS) != 0;
        slot_count = refused ? 0 : (uint8_t)count;
        for (unsigned i = 0; i < slot_count; i++) {
            struct slot* s = &slots[i];
            s->fn = get_le(rx + pos + 5 + i * A, A) & ~1u;
            s->depth = 0;
            s->calls = 0;
            for (unsigned c = 0; c < COUNTERS; c++) s->acc[c] = 0;
        }
        configured = 1;
        pos += 5 + count * A;
    }
}

static void host_byte(uint8_t b) {
    if (b == 0) {
        if (!rx_overlong && rx_len) host_frame(rx_len);
        rx_len = 0;
        rx_overlong = 0;
    } else if (rx_len < RX_MAX) {
        rx[rx_len++] = b;
    } else {
        rx_overlong = 1;
    }
}

/* ---- the run ------------------------------------------------------------------------------ */

void rp_counters_init(void) {
    DEMCR |= DEMCR_TRCENA;
    DWT_CTRL |= DWT_CTRL_CYCCNTENA | DWT_CTRL_EVENTS;
    for (unsigned i = 0; i < COUNTERS; i++) last[i] = DWT_COUNTER(i) & (i ? 0xFFu : ~0u);
}

int rackprof_campaign_wait(void) {
    rackprof_flush(); /* the HELLO and COUNTERS first, so the host knows whom it talks to */
    configured = 0;
    while (!configured) {
        int b = port_uart_get();
        if (b >= 0) host_byte((uint8_t)b);
    }
    uint32_t key = rp_irq_save();
    read_counters();
    for (unsigned i = 0; i < COUNTERS; i++) run_start[i] = now[i];
    armed = !refused;
    rp_irq_restore(key);
    return run_mask != 0 || slot_count != 0; /* nothing to count: the campaign is over */
}

static uint8_t* put_leb128(uint8_t* out, uint64_t v) {
    while (v >= 0x80u) {
        *out++ = (uint8_t)(v | 0x80u);
        v >>= 7;
    }
    *out++ = (uint8_t)v;
    return out;
}

static uint8_t* put_counts(uint8_t* out, const uint64_t* counts) {
    for (unsigned i = 0; i < COUNTERS; i++) {
        if (run_mask & (1u << i)) out = put_leb128(out, counts[i]);
    }
    return out;
}

void rackprof_campaign_end(void) {
    uint32_t key = rp_irq_save();
    read_counters();
    armed = 0;
    rp_irq_restore(key);
    uint8_t item[1 + 2 + 1 + A + 10 + 10 * COUNTERS];
    uint8_t mask = refused ? 0 : run_mask;
    for (unsigned i = 0; i < slot_count; i++) {
        item[0] = TAG_FUNCTION_COUNTS;
        item[1] = (uint8_t)run_id;
        item[2] = (uint8_t)(run_id >> 8);
        item[3] = mask;
        uint32_t fn = slots[i].fn;
        for (unsigned b = 0; b < A; b++) item[4 + b] = (uint8_t)(fn >> (8 * b));
        uint8_t* end = put_counts(put_leb128(item + 4 + A, slots[i].calls), slots[i].acc);
        rp_push(item, (unsigned)(end - item), 1);
    }
    uint64_t totals[COUNTERS];
    for (unsigned i = 0; i < COUNTERS; i++) totals[i] = now[i] - run_start[i];
    item[0] = TAG_RUN_TOTALS;
    item[1] = (uint8_t)run_id;
    item[2] = (uint8_t)(run_id >> 8);
    item[3] = mask;
    item[4] = refused ? 0 : slot_count;
    uint8_t* end = refused ? item + 5 : put_counts(item + 5, totals);
    rp_push(item, (unsigned)(end - item), 1);
    rackprof_flush();
}
