/* ITM transport (ARMv7-M, RACKPROF_ITM): the framed encoder's bytes on stimulus port
 * RACKPROF_ITM_PORT, console text on RACKPROF_CONSOLE_PORT, PC samples as DWT periodic PC
 * sample packets. Packet formats: ARMv7-M ARM (DDI 0403E) appendix D4; registers: C1.6.5
 * (DEMCR), C1.7 (ITM_STIMx, ITM_TER, ITM_TCR, ITM_LAR) and C1.8.7 (DWT_CTRL).
 *
 *   RACKPROF_ITM_REGS: the consumer (PendSV, lowest priority) writes the stimulus ports, the
 *     DWT samples the PC in hardware. The TPIU and the SWO pin (baud, NRZ/Manchester,
 *     formatter) are left to the debugger, as OpenOCD and J-Link set them up.
 *   RACKPROF_ITM_OVER_UART: the same packets built here and sent by the board's UART (its
 *     interrupt is the consumer); PC samples come from the SysTick sampler. */
#include <stdint.h>

#include "atomic_word.h"
#include "cm_regs.h"
#include "itm.h"
#include "port.h"
#include "rackprof.h"
#include "rackprof_config.h"
#include "wire.h"

#if RACKPROF_ITM

/* Takes up to four bytes of the framed encoder's output: one 32-bit stimulus write's worth. */
static unsigned take_framed(uint8_t out[4]) {
    unsigned n = 0;
    int byte;
    while (n < 4 && (byte = rp_wire_peek()) >= 0) {
        out[n++] = (uint8_t)byte;
        rp_wire_advance();
    }
    return n;
}

#endif

#if RACKPROF_ITM == RACKPROF_ITM_REGS

#define ITM_BUS_ID 1u             /* what rackprof's tpiu_stream defaults to */
#define DWT_CTRL_KEEP 0xFFFF0000u /* read-only ID bits and event/trace enables: not ours */
#define PENDSV_PRIORITY 0xFFu     /* lowest: the drain runs whenever nothing else does */
#define CYCLES_PER_TAP 1024u

/* A sample every (POSTPRESET + 1) * 1024 cycles: the closest to RACKPROF_SAMPLE_HZ the
 * 4-bit field allows (25 MHz, 1000 Hz: 16 * 1024 cycles = 1526 Hz at most). */
static uint32_t postpreset(void) {
    uint32_t taps = port_core_clock_hz() / RACKPROF_SAMPLE_HZ / CYCLES_PER_TAP;
    if (taps < 1u) taps = 1u;
    if (taps > 16u) taps = 16u;
    return taps - 1u;
}

uint32_t rp_itm_sample_hz(void) {
    return port_core_clock_hz() / ((postpreset() + 1u) * CYCLES_PER_TAP);
}

void rp_itm_init(void) {
    DEMCR |= DEMCR_TRCENA;
    ITM_LAR = ITM_LAR_UNLOCK;
    while (ITM_TCR & ITM_TCR_BUSY) {
    }
    ITM_TCR = ITM_TCR_ITMENA | ITM_TCR_TSENA | ITM_TCR_SYNCENA | ITM_TCR_DWTENA |
              ITM_TCR_TRACEBUSID(ITM_BUS_ID);
    ITM_TER |= (1u << RACKPROF_ITM_PORT) | (1u << RACKPROF_CONSOLE_PORT);
    /* The counter fields are set while the cycle counter is stopped, then it starts; PC
     * sampling itself is switched by rp_itm_sampling(). */
    uint32_t n = postpreset();
    DWT_CTRL = (DWT_CTRL & DWT_CTRL_KEEP) | DWT_CTRL_POSTPRESET(n) | DWT_CTRL_POSTINIT(n) |
               DWT_CTRL_CYCTAP | DWT_CTRL_SYNCTAP(1);
    DWT_CTRL |= DWT_CTRL_CYCCNTENA;
    SCB_SHPR3 = (SCB_SHPR3 & 0xFF00FFFFu) | (PENDSV_PRIORITY << 16);
}

void rp_itm_sampling(int on) {
    if (on)
        DWT_CTRL |= DWT_CTRL_PCSAMPLENA;
    else
        DWT_CTRL &= ~DWT_CTRL_PCSAMPLENA;
}

void rp_itm_kick(void) {
    SCB_ICSR = SCB_ICSR_PENDSVSET;
}

/* A debugger may switch the ITM or the port off: a disabled port is never ready (the
 * check CMSIS's ITM_SendChar makes), so its writes are skipped rather than waited for. */
static int port_open(unsigned port) {
    return (ITM_TCR & ITM_TCR_ITMENA) && (ITM_TER & (1u << port));
}

/* Reading a stimulus port gives FIFOREADY in bit 0; n bytes go out as 4, 2 or 2 + 1. */
static void stim_write(unsigned port, const uint8_t* bytes, unsigned n) {
    if (!port_open(port)) return;
    while (n) {
        while (!(ITM_STIM(port) & 1u)) {
        }
        if (n == 4) {
            ITM_STIM(port) = bytes[0] | (uint32_t)bytes[1] << 8 | (uint32_t)bytes[2] << 16 |
                             (uint32_t)bytes[3] << 24;
            return;
        }
        if (n >= 2) {
            ITM_STIM16(port) = (uint16_t)(bytes[0] | bytes[1] << 8);
            bytes += 2;
            n -= 2;
        } else {
            ITM_STIM8(port) = bytes[0];
            n = 0;
        }
    }
}

/* The consumer: drains what the encoder has into the stimulus port. */
void PendSV_Handler(void) {
    uint8_t bytes[4];
    unsigned n;
    while ((n = take_framed(bytes)) != 0) stim_write(RACKPROF_ITM_PORT, bytes, n);
}

void rackprof_puts(const char* text) {
    for (;;) {
        unsigned n = 0;
        while (n < 4 && text[n]) n++;
        if (n == 0) return;
        stim_write(RACKPROF_CONSOLE_PORT, (const uint8_t*)text, n == 3 ? 2 : n);
        text += n == 3 ? 2 : n;
    }
}

#elif RACKPROF_ITM == RACKPROF_ITM_OVER_UART

#define SYNC_ZEROS 5u /* 0x00 x5 then 0x80: at least 47 zero bits, then a one */
#define OVERFLOW_PACKET 0x70u
#define PC_SAMPLE_HEADER 0x17u    /* hardware source, discriminator 2, 4 bytes */
#define SLEEP_SAMPLE_HEADER 0x15u /* the same, 1 byte: 0x00 = the core was sleeping */
#define SLEEP_SAMPLE 1u           /* in the queue (Thumb PCs are even) */
#define THUMB_WFI 0xBF30u
#define THUMB_WFE 0xBF20u
#define PC_QUEUE 8u
#define CONSOLE_BYTES 64u

extern const uint8_t __text_start[], __text_end[];

/* The packet being sent: at most a sync (6 bytes) or a 2-byte + 1-byte software pair (5). */
static uint8_t packet[6];
static uint8_t packet_len, packet_pos;
static uint8_t synced;
static uint32_t overflows_sent; /* rp_dropped when the last overflow packet was built */

/* PC samples: the SysTick handler is the only producer, the UART handler (which preempts it)
 * the only consumer, so free-running indices need no atomics. */
static volatile uint32_t pc_queue[PC_QUEUE];
static volatile uint8_t pc_head, pc_tail;

/* Console text: thread mode produces, the UART handler consumes. */
static volatile uint8_t console_buf[CONSOLE_BYTES];
static volatile uint8_t console_head, console_tail;

void rp_itm_init(void) {
    port_uart_init();
}

/* The return address after a WFI or WFE: the sample interrupted a sleeping core. */
static int after_sleep(uint32_t pc) {
    if (pc < (uint32_t)__text_start + 2u || pc > (uint32_t)__text_end) return 0;
    uint16_t previous = *(const uint16_t*)(pc - 2u);
    return previous == THUMB_WFI || previous == THUMB_WFE;
}

void rp_itm_pc(uint32_t pc) {
    uint8_t head = pc_head;
    if ((uint8_t)(head - pc_tail) == PC_QUEUE) {
        rp_word_add(&rp_dropped, 1); /* sent as an overflow packet */
    } else {
        pc_queue[head % PC_QUEUE] = after_sleep(pc) ? SLEEP_SAMPLE : pc;
        pc_head = (uint8_t)(head + 1u);
    }
    port_uart_kick();
}

/* Software source packet header: port in [7:3], bit 2 = 0 (software), size code in [1:0]. */
static uint8_t software_header(unsigned port, unsigned bytes) {
    return (uint8_t)((port << 3) | (bytes == 4 ? 3u : bytes));
}

static unsigned put_le32(uint8_t* out, uint32_t value) {
    for (unsigned i = 0; i < 4; i++, value >>= 8) out[i] = (uint8_t)value;
    return 4;
}

/* n (1..4) bytes as software packets of port: one packet, or 2 + 1 for three bytes. */
static unsigned put_software(uint8_t* out, unsigned port, const uint8_t* bytes, unsigned n) {
    unsigned first = n == 3 ? 2 : n, o = 0;
    out[o++] = software_header(port, first);
    for (unsigned i = 0; i < first; i++) out[o++] = bytes[i];
    if (n == 3) {
        out[o++] = software_header(port, 1);
        out[o++] = bytes[2];
    }
    return o;
}

static unsigned take_console(uint8_t out[4]) {
    unsigned n = 0;
    uint8_t tail = console_tail;
    while (n < 4 && tail != console_head) out[n++] = console_buf[tail++ % CONSOLE_BYTES];
    console_tail = tail;
    return n;
}

/* Builds the next packet, in the order a real ITM would favour: sync first, then overflow,
 * hardware (PC sample) packets, then software packets. 0 when there is nothing to send. */
static unsigned build_packet(void) {
    uint8_t bytes[4];
    unsigned n;
    if (!synced) {
        for (n = 0; n < SYNC_ZEROS; n++) packet[n] = 0;
        packet[n++] = 0x80;
        synced = 1;
        return n;
    }
    uint32_t dropped = rp_dropped;
    if (dropped != overflows_sent) {
        overflows_sent = dropped;
        packet[0] = OVERFLOW_PACKET;
        return 1;
    }
    if (pc_tail != pc_head) {
        uint32_t pc = pc_queue[pc_tail % PC_QUEUE];
        pc_tail = (uint8_t)(pc_tail + 1u);
        if (pc == SLEEP_SAMPLE) {
            packet[0] = SLEEP_SAMPLE_HEADER;
            packet[1] = 0;
            return 2;
        }
        packet[0] = PC_SAMPLE_HEADER;
        return 1 + put_le32(packet + 1, pc);
    }
    if ((n = take_console(bytes)) != 0)
        return put_software(packet, RACKPROF_CONSOLE_PORT, bytes, n);
    if ((n = take_framed(bytes)) != 0) return put_software(packet, RACKPROF_ITM_PORT, bytes, n);
    return 0;
}

int rp_itm_peek(void) {
    if (packet_pos == packet_len) {
        packet_len = (uint8_t)build_packet();
        packet_pos = 0;
        if (packet_len == 0) return -1;
    }
    return packet[packet_pos];
}

void rp_itm_advance(void) {
    packet_pos++;
}

int rp_itm_idle(void) {
    return synced && packet_pos == packet_len && pc_tail == pc_head &&
           console_tail == console_head && overflows_sent == rp_dropped && rp_wire_idle();
}

/* Thread mode: waits for room (the UART drains the queue meanwhile). */
void rackprof_puts(const char* text) {
    for (; *text; text++) {
        while ((uint8_t)(console_head - console_tail) == CONSOLE_BYTES) port_uart_kick();
        console_buf[console_head % CONSOLE_BYTES] = (uint8_t)*text;
        console_head = (uint8_t)(console_head + 1u);
    }
    port_uart_kick();
}

#endif
