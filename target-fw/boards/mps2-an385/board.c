/* ARM MPS2 AN385 (Cortex-M3, 25 MHz): UART0 is a CMSDK APB UART at 0x40004000, its TX
 * interrupt is IRQ 1. QEMU: -M mps2-an385, UART0 = the first -serial. Also the board code of
 * mps2-an386 (the same FPGA image with a Cortex-M4: -M mps2-an386). */
#include <stdint.h>

#include "board.h"
#include "runtime/port.h"

#define UART0_BASE 0x40004000u
#define UART_DATA (*(volatile uint32_t*)(UART0_BASE + 0x00u))
#define UART_STATE (*(volatile uint32_t*)(UART0_BASE + 0x04u))
#define UART_CTRL (*(volatile uint32_t*)(UART0_BASE + 0x08u))
#define UART_INTCLEAR (*(volatile uint32_t*)(UART0_BASE + 0x0Cu))
#define UART_BAUDDIV (*(volatile uint32_t*)(UART0_BASE + 0x10u))
#define STATE_TX_FULL 1u
#define STATE_RX_FULL 2u
#define CTRL_TX_ENABLE 1u
#define CTRL_RX_ENABLE 2u
#define CTRL_TX_IRQ_ENABLE 4u
#define INT_TX 1u
#define UART0_TX_IRQ 1u
#define CORE_CLOCK_HZ 25000000u
#define BAUD 1500000u

uint32_t port_core_clock_hz(void) {
    return CORE_CLOCK_HZ;
}

void port_uart_init(void) {
    UART_BAUDDIV = CORE_CLOCK_HZ / BAUD; /* 16: the smallest divider the UART accepts */
    UART_CTRL = CTRL_TX_ENABLE | CTRL_RX_ENABLE | CTRL_TX_IRQ_ENABLE;
    board_nvic_enable(UART0_TX_IRQ, 0);
}

int port_uart_put(uint8_t byte) {
    if (UART_STATE & STATE_TX_FULL) return 0;
    UART_DATA = byte;
    return 1;
}

int port_uart_get(void) {
    if (!(UART_STATE & STATE_RX_FULL)) return -1;
    return (int)(UART_DATA & 0xFFu);
}

void port_uart_kick(void) {
    board_nvic_set_pending(UART0_TX_IRQ);
}

/* CMSDK APB timer 0 (PCLK = core clock), IRQ 8. */
#define TIMER0_BASE 0x40000000u
#define TIMER_CTRL (*(volatile uint32_t*)(TIMER0_BASE + 0x00u))
#define TIMER_VALUE (*(volatile uint32_t*)(TIMER0_BASE + 0x04u))
#define TIMER_RELOAD (*(volatile uint32_t*)(TIMER0_BASE + 0x08u))
#define TIMER_INTCLEAR (*(volatile uint32_t*)(TIMER0_BASE + 0x0Cu))
#define TIMER_CTRL_ENABLE_IRQ 9u
#define TIMER0_IRQ 8u

void board_timer_start(uint32_t period_cycles) {
    TIMER_RELOAD = period_cycles - 1u;
    TIMER_VALUE = period_cycles - 1u;
    board_nvic_enable(TIMER0_IRQ, BOARD_TIMER_PRIORITY);
    TIMER_CTRL = TIMER_CTRL_ENABLE_IRQ;
}

void board_timer_stop(void) {
    TIMER_CTRL = 0;
}

static void timer0_handler(void) {
    /* A call, not a tail call, so the -pg arc into app_timer_isr has this function as its
     * caller rather than an EXC_RETURN value. */
    app_timer_isr();
    TIMER_INTCLEAR = 1u;
}

static void uart0_tx_handler(void) {
    UART_INTCLEAR = INT_TX;
    rackprof_uart_isr();
}

__attribute__((section(".vectors.irq"), used)) static void (*const irq_vectors[])(void) = {
    0,                /* 0: UART0 RX */
    uart0_tx_handler, /* 1: UART0 TX */
    0,
    0,
    0,
    0,
    0,
    0,              /* 2-7 */
    timer0_handler, /* 8: TIMER0 */
};
