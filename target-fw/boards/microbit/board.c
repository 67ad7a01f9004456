/* BBC micro:bit v1 (nRF51822, Cortex-M0, 16 MHz): UART0 at 0x40002000, IRQ 2. The nRF51 UART
 * has no "busy" status: a byte is in flight from the TXD write until the TXDRDY event.
 * QEMU: -M microbit, UART0 = the first -serial. */
#include <stdint.h>

#include "board.h"
#include "runtime/port.h"

#define UART0_BASE 0x40002000u
#define REG(offset) (*(volatile uint32_t*)(UART0_BASE + (offset)))
#define TASKS_STARTTX REG(0x008u)
#define EVENTS_TXDRDY REG(0x11Cu)
#define INTENSET REG(0x304u)
#define ENABLE REG(0x500u)
#define PSELTXD REG(0x50Cu)
#define TXD REG(0x51Cu)
#define BAUDRATE REG(0x524u)
#define INT_TXDRDY (1u << 7)
#define ENABLE_UART 4u
#define BAUD_1M 0x10000000u
#define TX_PIN 24u
#define UART0_IRQ 2u
#define CORE_CLOCK_HZ 16000000u

static volatile uint8_t tx_busy; /* touched only by the UART interrupt handler */

uint32_t port_core_clock_hz(void) {
    return CORE_CLOCK_HZ;
}

void port_uart_init(void) {
    PSELTXD = TX_PIN;
    BAUDRATE = BAUD_1M;
    ENABLE = ENABLE_UART;
    INTENSET = INT_TXDRDY;
    TASKS_STARTTX = 1;
    board_nvic_enable(UART0_IRQ, 0);
}

int port_uart_put(uint8_t byte) {
    if (tx_busy) return 0;
    tx_busy = 1;
    TXD = byte;
    return 1;
}

void port_uart_kick(void) {
    board_nvic_set_pending(UART0_IRQ);
}

/* TIMER0 at 16 MHz (prescaler 0), 32-bit, cleared on compare 0; IRQ 8. */
#define TIMER0_BASE 0x40008000u
#define TIMER(offset) (*(volatile uint32_t*)(TIMER0_BASE + (offset)))
#define TIMER_START TIMER(0x000u)
#define TIMER_STOP TIMER(0x004u)
#define TIMER_CLEAR TIMER(0x00Cu)
#define TIMER_EVENTS_COMPARE0 TIMER(0x140u)
#define TIMER_SHORTS TIMER(0x200u)
#define TIMER_INTENSET TIMER(0x304u)
#define TIMER_MODE TIMER(0x504u)
#define TIMER_BITMODE TIMER(0x508u)
#define TIMER_PRESCALER TIMER(0x510u)
#define TIMER_CC0 TIMER(0x540u)
#define SHORTS_COMPARE0_CLEAR 1u
#define INT_COMPARE0 (1u << 16)
#define BITMODE_32 3u
#define TIMER0_IRQ 8u

void board_timer_start(uint32_t period_cycles) {
    TIMER_MODE = 0;
    TIMER_BITMODE = BITMODE_32;
    TIMER_PRESCALER = 0;
    TIMER_CC0 = period_cycles;
    TIMER_SHORTS = SHORTS_COMPARE0_CLEAR;
    TIMER_INTENSET = INT_COMPARE0;
    board_nvic_enable(TIMER0_IRQ, BOARD_TIMER_PRIORITY);
    TIMER_CLEAR = 1;
    TIMER_START = 1;
}

void board_timer_stop(void) {
    TIMER_STOP = 1;
}

static void timer0_handler(void) {
    /* A call, not a tail call, so the -pg arc into app_timer_isr has this function as its
     * caller rather than an EXC_RETURN value. */
    app_timer_isr();
    TIMER_EVENTS_COMPARE0 = 0;
}

static void uart0_handler(void) {
    if (EVENTS_TXDRDY) {
        EVENTS_TXDRDY = 0;
        tx_busy = 0;
    }
    rackprof_uart_isr();
}

__attribute__((section(".vectors.irq"), used)) static void (*const irq_vectors[])(void) = {
    0,             /* 0: POWER_CLOCK */
    0,             /* 1: RADIO */
    uart0_handler, /* 2: UART0 */
    0,
    0,
    0,
    0,
    0,              /* 3-7 */
    timer0_handler, /* 8: TIMER0 */
};
