/* ARM MPS2 with the AN505 image (Cortex-M33 in an IoTKit, 20 MHz), running Secure: every
 * peripheral through its Secure alias (address + 0x10000000), every interrupt left Secure
 * (NVIC_ITNS resets to 0). QEMU: -M mps2-an505, UART0 = the first -serial. Facts from QEMU's
 * hw/arm/mps2-tz.c and hw/arm/armsse.c (IoTKit), checked by running the examples. */
#include <stdint.h>

#include "board.h"
#include "runtime/port.h"

/* CMSDK APB UART0: 0x40200000 Non-secure, 0x50200000 Secure (behind APB PPC EXP1, which
 * resets Secure-only). */
#if RACKPROF_NONSECURE
/* mps2-an505-ns: the Non-secure image, its UART0 and TIMER0 made Non-secure by the Secure
 * boot (boards/mps2-an505-ns/secure_boot.c), reached through their Non-secure aliases. */
#define AN505_PERIPH_ALIAS 0x00000000u
#else
#define AN505_PERIPH_ALIAS 0x10000000u
#endif
#define UART0_BASE (0x40200000u + AN505_PERIPH_ALIAS)
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
/* UART0 RX is NVIC IRQ 32, TX 33 (the IoTKit's own interrupts take 0-31; mps2-tz.c's
 * get_sse_irq_in subtracts 32 for the SSE's EXP_IRQ lines). Checked under QEMU 7.2 with -d int:
 * the UART's own TX interrupts arrive as exception 49. */
#define UART0_TX_IRQ 33u
#define CORE_CLOCK_HZ 20000000u /* MAINCLK = SYSCLK, also the APB peripherals' clock */
#define BAUD 1250000u

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

/* IoTKit CMSDK APB TIMER0 (MAINCLK), 0x40000000 / Secure 0x50000000, IRQ 3. */
#define TIMER0_BASE (0x40000000u + AN505_PERIPH_ALIAS)
#define TIMER_CTRL (*(volatile uint32_t*)(TIMER0_BASE + 0x00u))
#define TIMER_VALUE (*(volatile uint32_t*)(TIMER0_BASE + 0x04u))
#define TIMER_RELOAD (*(volatile uint32_t*)(TIMER0_BASE + 0x08u))
#define TIMER_INTCLEAR (*(volatile uint32_t*)(TIMER0_BASE + 0x0Cu))
#define TIMER_CTRL_ENABLE_IRQ 9u
#define TIMER0_IRQ 3u

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

__attribute__((section(".vectors.irq"), used)) static void (*const irq_vectors[34])(void) = {
    [TIMER0_IRQ] = timer0_handler,
    [UART0_TX_IRQ] = uart0_tx_handler,
};
