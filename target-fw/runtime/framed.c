/* Framed mode: protocol/framed-protocol.md (rackprof framed protocol v1).
 *
 * Producers queue items exactly as they appear in a frame body; the UART ISR packs the queued
 * items into frames (seq, items, CRC-16, COBS, 0x00) so producers pay no framing cost.
 * An arc cache and a PC cache accumulate repeats and send ARC_N / PC_N when an entry is
 * evicted, once a second (RACKPROF_FLUSH_TICKS) and at rackprof_stop(). */
#include <stdint.h>

#include "arch.h"
#include "itm.h"
#include "port.h"
#include "rackprof.h"
#include "rackprof_config.h"
#include "ring.h"
#include "wire.h"

#ifndef RACKPROF_FLUSH_TICKS
#define RACKPROF_FLUSH_TICKS RACKPROF_SAMPLE_HZ
#endif

#define A RACKPROF_ADDR_BYTES

enum {
    TAG_HELLO = 0x01,
    TAG_ARC = 0x02,
    TAG_ARC_N = 0x03,
    TAG_PC = 0x04,
    TAG_PC_N = 0x05,
    TAG_DROPPED = 0x06,
    TAG_START = 0x07,
    TAG_STOP = 0x08,
    TAG_ENTER = 0x09, /* version 2: callee A, call site A, stamp u32 */
    TAG_EXIT = 0x0A,
    TAG_ENTER_IN_HANDLER = 0x0B, /* the same, then the exception number u16 (IPSR) */
    TAG_EXIT_IN_HANDLER = 0x0C,
    TAG_COUNTERS = 0x0D,        /* version 3: counter mask u8, slots u8 */
    TAG_FUNCTION_COUNTS = 0x0F, /* run u16, mask u8, function A, calls W, W per counter */
    TAG_RUN_TOTALS = 0x10,      /* run u16, mask u8, functions u8, W per counter */
    TAG_TASK_SWITCH = 0x13,     /* version 5: task A, stamp u32, name_len u8, name bytes */
    TAG_TASK_DELETED = 0x14,    /* version 5: task A, stamp u32 */
};
/* Version 2 only when enter/exit events are sent: a host that knows version 1 alone refuses
 * such a stream (and still reads every other build). Likewise 3 with counter campaigns and 5
 * with task items (RACKPROF_TASKS). */
#define PROTOCOL_VERSION \
    (RACKPROF_TASKS ? 5u : RACKPROF_COUNTERS ? 3u : RACKPROF_EVENTS ? 2u : 1u)
#define FLAG_ARC_CACHE 1u
#define FLAG_BLOCKING 2u
#define FLAG_EVENTS 4u
#define FLAG_CYCLE_COUNTER 8u
#define FLAG_COUNTERS 16u
#define FLAG_ARCH 32u /* an architecture byte (RP_ARCH_CODE) follows the build-id */
#define FLAG_TASKS 64u
#define MAX_BUILD_ID 20u
#define LEB_MAX 5u

/* Linker-script symbols (boards/common/sections.ld). */
extern const uint8_t __text_start[], __text_end[];
extern const uint8_t __build_id_note_start[], __build_id_note_end[];

/* ---- producers ---------------------------------------------------------------------------- */

static uint8_t* put_le(uint8_t* out, uint32_t value, unsigned bytes) {
    for (unsigned i = 0; i < bytes; i++, value >>= 8) *out++ = (uint8_t)value;
    return out;
}

static uint8_t* put_leb128(uint8_t* out, uint32_t value) {
    while (value >= 0x80u) {
        *out++ = (uint8_t)(value | 0x80u);
        value >>= 7;
    }
    *out++ = (uint8_t)value;
    return out;
}

struct arc_entry {
    uint32_t from, self, count;
};
struct pc_entry {
    uint32_t pc, count;
};
static struct arc_entry arc_cache[RACKPROF_ARC_CACHE];
static struct pc_entry pc_cache[RACKPROF_PC_CACHE]; /* SysTick's alone: no locking needed */
static uint16_t ticks_since_flush;

static void send_arc(struct arc_entry e, int wait) {
    uint8_t item[1 + 2 * A + LEB_MAX];
    item[0] = e.count == 1 ? TAG_ARC : TAG_ARC_N;
    uint8_t* end = put_le(put_le(item + 1, e.from, A), e.self, A);
    if (e.count != 1) end = put_leb128(end, e.count);
    rp_push(item, (unsigned)(end - item), wait);
}

static void send_pc(struct pc_entry e, int wait) {
    uint8_t item[1 + A + LEB_MAX];
    item[0] = e.count == 1 ? TAG_PC : TAG_PC_N;
    uint8_t* end = put_le(item + 1, e.pc, A);
    if (e.count != 1) end = put_leb128(end, e.count);
    rp_push(item, (unsigned)(end - item), wait);
}

/* Two-way set-associative: a pair of hot arcs that hash alike (a loop calling two functions)
 * would otherwise evict each other on every call. A miss replaces the less-counted way. */
static struct arc_entry* arc_set(uint32_t from, uint32_t self) {
    uint32_t hash = (from * 2654435761u) ^ (self * 40503u);
    return &arc_cache[(hash >> 16) & (RACKPROF_ARC_CACHE - 2u)];
}

static int arc_is(const struct arc_entry* e, uint32_t from, uint32_t self) {
    return e->count && e->count != UINT32_MAX && e->from == from && e->self == self;
}

void rp_wire_arc(uint32_t from, uint32_t self) {
    struct arc_entry* e = arc_set(from, self);
    /* mcount may run in thread mode and in any handler that was built with -pg: the set is
     * read and updated with interrupts masked for these few instructions. */
    uint32_t key = rp_irq_save();
    if (!arc_is(e, from, self)) {
        if (arc_is(e + 1, from, self) || e[1].count < e[0].count) e++;
    }
    if (arc_is(e, from, self)) {
        e->count++;
        rp_irq_restore(key);
        return;
    }
    struct arc_entry victim = *e;
    e->from = from;
    e->self = self;
    e->count = 1;
    rp_irq_restore(key);
    if (victim.count) send_arc(victim, 0);
}

void rp_wire_pc(uint32_t pc) {
    struct pc_entry* e = &pc_cache[(pc >> 1) & (RACKPROF_PC_CACHE - 1u)];
    if (e->count && e->count != UINT32_MAX && e->pc == pc) {
        e->count++;
        return;
    }
    struct pc_entry victim = *e;
    e->pc = pc;
    e->count = 1;
    if (victim.count) send_pc(victim, 0);
}

#if RP_STAMPS
/* Writes `bytes` bytes of value, little-endian, at *at in the queue (inside a reservation). */
static void ring_put(unsigned* at, uint32_t value, unsigned bytes) {
    for (unsigned i = 0; i < bytes; i++, value >>= 8)
        rp_ring_buf[(*at)++ & RP_RING_MASK] = (uint8_t)value;
}
#endif

#if RACKPROF_EVENTS

/* One ENTER or EXIT item, queued uncached (each event is its own fact), written straight into
 * its reservation (no staging copy: this runs twice per call); dropped and counted like any
 * record when the queue is full. */
void rp_wire_event(int enter, uint32_t callee, uint32_t call_site) {
    uint32_t exception = rp_handler();
    int reserved = rp_queue_begin(1 + 2 * A + 4 + (exception ? 2u : 0u), 0);
    if (reserved < 0) return;
    unsigned at = (unsigned)reserved;
    uint32_t stamp = rp_stamp();
    ring_put(&at, (enter ? TAG_ENTER : TAG_EXIT) + (exception ? 2u : 0u), 1);
    ring_put(&at, callee, A);
    ring_put(&at, call_site, A);
    ring_put(&at, stamp, 4);
    if (exception) ring_put(&at, exception, 2);
    rp_queue_end();
}

/* gcc's -finstrument-functions hooks: this_fn is the function's address, call_site the return
 * address in its caller. Profiling off costs the flag test. */
void __cyg_profile_func_enter(void* this_fn, void* call_site) {
    if (rackprof_on) rp_wire_event(1, (uint32_t)this_fn, (uint32_t)call_site);
}
void __cyg_profile_func_exit(void* this_fn, void* call_site) {
    if (rackprof_on) rp_wire_event(0, (uint32_t)this_fn, (uint32_t)call_site);
}
#endif

/* ITM builds send PC samples as DWT packets, never as items: their PC cache is never filled,
 * so it is not flushed either (and the linker drops it). */
#define CACHE_ENTRIES (RACKPROF_ARC_CACHE + (RACKPROF_ITM ? 0 : RACKPROF_PC_CACHE))

/* Sends and empties one entry of the caches, numbered arcs first. wait: see rp_push(). */
static void flush_entry(unsigned i, int wait) {
    if (RACKPROF_ITM || i < RACKPROF_ARC_CACHE) {
        uint32_t key = rp_irq_save();
        struct arc_entry e = arc_cache[i];
        arc_cache[i].count = 0;
        rp_irq_restore(key);
        if (e.count) send_arc(e, wait);
    } else {
#if RACKPROF_TASKS
        /* A task hook flushes below the sampler (SysTick; RISC-V's timer trap, from thread
         * mode), which may be counting into this very entry: mask it (PRIMASK, mstatus.MIE). */
        uint32_t key = rp_irq_save();
#endif
        struct pc_entry e = pc_cache[i - RACKPROF_ARC_CACHE];
        pc_cache[i - RACKPROF_ARC_CACHE].count = 0;
#if RACKPROF_TASKS
        rp_irq_restore(key);
#endif
        if (e.count) send_pc(e, wait);
    }
}

void rp_wire_start(void) {
    static const uint8_t start = TAG_START;
    rp_push(&start, 1, 1);
}

void rp_wire_stop(void) {
    static const uint8_t stop = TAG_STOP;
    for (unsigned i = 0; i < CACHE_ENTRIES; i++) flush_entry(i, 1);
    rp_push(&stop, 1, 1);
}

void rp_wire_tick(void) {
    /* Each entry is sent at least every RACKPROF_FLUSH_TICKS, one entry at a time so a tick
     * never floods the queue. The SysTick handler is the PC cache's only writer. */
    static unsigned next;
    if (rackprof_on && ++ticks_since_flush >= RACKPROF_FLUSH_TICKS / CACHE_ENTRIES) {
        ticks_since_flush = 0;
        flush_entry(next, 0);
        next = (next + 1) % CACHE_ENTRIES;
    }
    if (rp_ring_used()) rp_kick();
}

#if RACKPROF_TASKS
/* ---- tasks (version 5) ------------------------------------------------------------------- */

#define TASK_NAME_MAX 32u /* the spec's limit */

/* Handles whose name was sent since reset or their TASK_DELETED; 0 is a free slot. */
static uint32_t named_tasks[RACKPROF_MAX_TASKS];
/* The task running now, as the kernel last said: announced again at rackprof_start(). */
static uint32_t current_task;
static const char* current_name;
/* The task of the last TASK_SWITCH queued, and the drop count then: a kernel that calls the
 * hook at every scheduler run (FreeRTOS) switches to the running task again and again. */
static uint32_t announced_task;
static uint32_t dropped_at_announce;

/* The slot holding handle (0: a free slot), or 0 when there is none. */
static uint32_t* named_slot(uint32_t handle) {
    for (unsigned i = 0; i < RACKPROF_MAX_TASKS; i++)
        if (named_tasks[i] == handle) return &named_tasks[i];
    return 0;
}

static unsigned name_length(const char* name) {
    unsigned n = 0;
    while (name && n < TASK_NAME_MAX && name[n]) n++;
    return n;
}

/* Queues TASK_SWITCH (with n bytes of name) or TASK_DELETED; 0 when the queue was full (the
 * item is dropped and counted, never waited for: the caller may be PendSV, or masked). */
static int queue_task_item(uint8_t tag, uint32_t handle, const char* name, unsigned n) {
    int reserved = rp_queue_begin(1 + A + 4 + (tag == TAG_TASK_SWITCH ? 1 + n : 0), 0);
    if (reserved < 0) return 0;
    unsigned at = (unsigned)reserved;
    uint32_t stamp = rp_stamp(); /* inside the reservation: stamps rise in queue order */
    ring_put(&at, tag, 1);
    ring_put(&at, handle, A);
    ring_put(&at, stamp, 4);
    if (tag == TAG_TASK_SWITCH) {
        ring_put(&at, n, 1);
        for (unsigned i = 0; i < n; i++) ring_put(&at, (uint8_t)name[i], 1);
    }
    rp_queue_end();
    return 1;
}

/* Sends what both caches hold: counts sent after a TASK_SWITCH are charged to the task it
 * names, so none may still hold the previous task's calls or samples. Never waits. */
static void flush_caches(void) {
    for (unsigned i = 0; i < CACHE_ENTRIES; i++) flush_entry(i, 0);
}

/* TASK_SWITCH for task, with its name unless it was sent before (and the table remembers it;
 * a full table names the task every time). The table is updated only once the item is
 * queued, so a dropped switch does not lose the name. */
static void announce(uint32_t task, const char* name) {
    flush_caches();
    uint32_t key = rp_irq_save(); /* the table and the item, as one step */
    uint32_t* slot = task ? named_slot(task) : 0;
    int known = slot != 0;
    if (!known && task) slot = named_slot(0);
    if (queue_task_item(TAG_TASK_SWITCH, task, name, known ? 0u : name_length(name))) {
        if (slot) *slot = task;
        announced_task = task;
        dropped_at_announce = rp_dropped;
    }
    rp_irq_restore(key);
}

void rackprof_task_switched_in(const void* handle, const char* name) {
    uint32_t key = rp_irq_save();
    current_task = (uint32_t)handle;
    current_name = name;
    rp_irq_restore(key);
    /* The same task again, nothing lost since it was named: the host knows who runs. After a
     * drop it is sent again, ending the host's "unknown" stretch. */
    if (handle && (uint32_t)handle == announced_task && rp_dropped == dropped_at_announce) return;
    if (rackprof_on) announce((uint32_t)handle, name);
}

void rackprof_task_deleted(const void* handle) {
    uint32_t task = (uint32_t)handle;
    uint32_t key = rp_irq_save();
    /* Forgotten whether or not the item goes out: a handle that comes back is named again. */
    uint32_t* slot = task ? named_slot(task) : 0;
    if (slot) *slot = 0;
    if (current_task == task) current_task = 0;
    if (announced_task == task) announced_task = 0;
    if (rackprof_on) queue_task_item(TAG_TASK_DELETED, task, 0, 0);
    rp_irq_restore(key);
}

void rp_wire_task_restart(void) {
    uint32_t key = rp_irq_save();
    uint32_t task = current_task;
    const char* name = current_name;
    rp_irq_restore(key);
    if (task) announce(task, name);
}
#endif

/* ---- consumer: frames ------------------------------------------------------------------------ */

static uint8_t body[RACKPROF_FRAME_BODY];
static uint8_t frame[RACKPROF_FRAME_BODY + 2]; /* COBS code byte + body + delimiter */
static uint8_t frame_len, frame_pos;
static uint16_t seq;
static uint8_t hello_sent;
static uint32_t dropped_sent;

uint16_t rp_crc16(const uint8_t* data, unsigned n) {
    uint16_t crc = 0xFFFFu;
    while (n--) {
        crc ^= (uint16_t)(*data++ << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (uint16_t)((crc & 0x8000u) ? ((unsigned)crc << 1) ^ 0x1021u : (unsigned)crc << 1);
    }
    return crc;
}

/* COBS for a body of at most 254 bytes: one code byte, zeros replaced by run lengths. */
static unsigned cobs_encode(const uint8_t* in, unsigned n, uint8_t* out) {
    unsigned code_at = 0, o = 1;
    uint8_t code = 1;
    for (unsigned i = 0; i < n; i++) {
        if (in[i] == 0) {
            out[code_at] = code;
            code_at = o++;
            code = 1;
        } else {
            out[o++] = in[i];
            code++;
        }
    }
    out[code_at] = code;
    return o;
}

static unsigned put_hello(unsigned n) {
    const uint8_t* note = __build_id_note_start;
    /* A GNU note: namesz, descsz, type, "GNU\0", then descsz bytes of build-id. */
    uint32_t id_len = 0;
    if (__build_id_note_end - note >= 16) id_len = note[4] | (uint32_t)note[5] << 8;
    if (id_len > MAX_BUILD_ID) id_len = MAX_BUILD_ID;
    body[n++] = TAG_HELLO;
    body[n++] = PROTOCOL_VERSION;
    body[n++] = A;
    body[n++] = FLAG_ARC_CACHE | (RACKPROF_BLOCKING ? FLAG_BLOCKING : 0u) |
                (RACKPROF_EVENTS ? FLAG_EVENTS : 0u) |
                (RP_STAMPS && RACKPROF_CYCLE_COUNTER ? FLAG_CYCLE_COUNTER : 0u) |
                (RACKPROF_COUNTERS ? FLAG_COUNTERS : 0u) | FLAG_ARCH |
                (RACKPROF_TASKS ? FLAG_TASKS : 0u);
    put_le(body + n, (uint32_t)__text_start, 4);
    put_le(body + n + 4, (uint32_t)__text_end, 4);
    /* The DWT's period is coarse: its HELLO carries the rate it really samples at. */
    put_le(body + n + 8,
           RACKPROF_ITM == RACKPROF_ITM_REGS ? rp_itm_sample_hz() : RACKPROF_SAMPLE_HZ, 4);
    put_le(body + n + 12, port_core_clock_hz(), 4);
    n += 16;
    body[n++] = (uint8_t)id_len;
    for (uint32_t i = 0; i < id_len; i++) body[n++] = note[16 + i];
    body[n++] = RP_ARCH_CODE;
#if RACKPROF_COUNTERS
    body[n++] = TAG_COUNTERS; /* all six DWT counters, the slots of counters.c */
    body[n++] = 0x3Fu;
    body[n++] = RACKPROF_COUNTER_SLOTS;
#endif
    return n;
}

/* Length of the queued item at the tail (the queue holds whole items only). */
static unsigned queued_item_len(void) {
    unsigned n;
    switch (rp_ring_peek(0)) {
        case TAG_ARC:
            return 1 + 2 * A;
        case TAG_PC:
            return 1 + A;
        case TAG_ARC_N:
            n = 1 + 2 * A;
            break;
        case TAG_PC_N:
            n = 1 + A;
            break;
        case TAG_ENTER:
        case TAG_EXIT:
            return 1 + 2 * A + 4;
        case TAG_ENTER_IN_HANDLER:
        case TAG_EXIT_IN_HANDLER:
            return 1 + 2 * A + 4 + 2;
#if RACKPROF_TASKS
        case TAG_TASK_SWITCH:
            return 1 + A + 4 + 1 + rp_ring_peek(1 + A + 4);
        case TAG_TASK_DELETED:
            return 1 + A + 4;
#endif
#if RACKPROF_COUNTERS
        case TAG_FUNCTION_COUNTS:
        case TAG_RUN_TOTALS: {
            /* Fixed bytes, then LEB128 values: calls (FUNCTION_COUNTS) and one per mask bit. */
            unsigned mask = rp_ring_peek(3), values = 0;
            for (unsigned b = 0; b < 6; b++) values += (mask >> b) & 1u;
            if (rp_ring_peek(0) == TAG_FUNCTION_COUNTS) {
                n = 4 + A;
                values++;
            } else {
                n = 5;
            }
            while (values--) {
                while (rp_ring_peek(n) & 0x80u) n++;
                n++;
            }
            return n;
        }
#endif
        default:
            return 1; /* START, STOP */
    }
    while (rp_ring_peek(n) & 0x80u) n++;
    return n + 1;
}

/* Packs what is queued into the next frame; 0 when there is nothing to send. */
static int build_frame(void) {
    unsigned n = 2; /* after seq */
    if (!hello_sent) {
        n = put_hello(n);
        hello_sent = 1;
    } else {
        uint32_t dropped = rp_dropped;
        if (dropped != dropped_sent) {
            body[n++] = TAG_DROPPED;
            put_le(body + n, dropped, 4);
            n += 4;
            dropped_sent = dropped;
        }
        while (rp_ring_used()) {
            unsigned len = queued_item_len();
            if (n + len + 2 > RACKPROF_FRAME_BODY) break;
            for (unsigned i = 0; i < len; i++) body[n++] = rp_ring_peek(i);
            rp_ring_consume(len);
        }
    }
    if (n == 2) return 0;
    put_le(body, seq++, 2);
    put_le(body + n, rp_crc16(body, n), 2);
    frame_len = (uint8_t)cobs_encode(body, n + 2, frame);
    frame[frame_len++] = 0;
    frame_pos = 0;
    return 1;
}

int rp_wire_peek(void) {
    if (frame_pos == frame_len && !build_frame()) return -1;
    return frame[frame_pos];
}

void rp_wire_advance(void) {
    frame_pos++;
}

int rp_wire_idle(void) {
    return hello_sent && frame_pos == frame_len && rp_ring_used() == 0 &&
           dropped_sent == rp_dropped;
}
