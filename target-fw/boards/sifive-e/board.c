/* QEMU -M sifive_e (HiFive1: FE310, SiFive E31 core, rv32imac): code in the SPI flash's XIP
 * window at 0x20400000 (the mask ROM's reset vector jumps there), 16 KiB of DTIM RAM at
 * 0x80000000, SiFive UART0 at 0x10013000, the CLINT at 0x02000000 (mtime: 10 MHz in QEMU 7.2,
 * 32768 Hz on the FE310 and in QEMU 8.0 and later; rackprof_config.h). */
#include <stdint.h>

#include "runtime/port.h"

#define UART0_BASE 0x10013000u
#define UART_REG(offset) (*(volatile uint32_t*)(UART0_BASE + (offset)))
#define UART_TXDATA UART_REG(0x00u) /* bit 31 read: the TX FIFO is full */
#define UART_RXDATA UART_REG(0x04u) /* bit 31: the RX FIFO was empty */
#define UART_TXCTRL UART_REG(0x08u)
#define UART_RXCTRL UART_REG(0x0Cu)
#define UART_DIV UART_REG(0x18u)
#define FIFO_FLAG (1u << 31)
#define CTRL_ENABLE 1u
#define TLCLK_HZ 16000000u /* the FE310's bus clock after reset; QEMU ignores the divisor */
#define BAUD 115200u

/* mcycle's rate under QEMU -icount: virtual nanoseconds (see boards/qemu-virt). */
#define CORE_CLOCK_HZ 1000000000u

uint32_t port_core_clock_hz(void) {
    return CORE_CLOCK_HZ;
}

void port_uart_init(void) {
    UART_DIV = TLCLK_HZ / BAUD - 1u;
    UART_TXCTRL = CTRL_ENABLE;
    UART_RXCTRL = CTRL_ENABLE;
}

int port_uart_put(uint8_t byte) {
    if (UART_TXDATA & FIFO_FLAG) return 0;
    UART_TXDATA = byte;
    return 1;
}

int port_uart_get(void) {
    uint32_t data = UART_RXDATA;
    if (data & FIFO_FLAG) return -1;
    return (int)(data & 0xFFu);
}
