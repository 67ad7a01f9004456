/* QEMU -M virt, rv32 (-bios none): RAM at 0x80000000, where the hart starts; UART0 an NS16550A
 * at 0x10000000 (its interrupt, PLIC source 10, is not used: boards/riscv-common drains the
 * queue from the kick); the CLINT at 0x02000000 with mtime at 10 MHz (rackprof_config.h). */
#include <stdint.h>

#include "runtime/port.h"

#define UART0_BASE 0x10000000u
#define UART_REG(offset) (*(volatile uint8_t*)(UART0_BASE + (offset)))
#define UART_RBR UART_REG(0u) /* read; THR when written; DLL with LCR.DLAB */
#define UART_THR UART_REG(0u)
#define UART_DLL UART_REG(0u)
#define UART_IER UART_REG(1u) /* DLM with LCR.DLAB */
#define UART_DLM UART_REG(1u)
#define UART_FCR UART_REG(2u)
#define UART_LCR UART_REG(3u)
#define UART_LSR UART_REG(5u)
#define LCR_8N1 0x03u
#define LCR_DLAB 0x80u
#define FCR_FIFO_RESET 0x07u
#define LSR_DATA_READY 0x01u
#define LSR_THR_EMPTY 0x20u
#define UART_CLOCK_HZ 3686400u /* the device tree's clock-frequency */
#define BAUD 115200u

/* mcycle's rate under QEMU -icount: it counts virtual nanoseconds, whatever the shift (QEMU
 * 7.2 reads icount's clock for it). Without -icount it counts host ticks: run with -icount. */
#define CORE_CLOCK_HZ 1000000000u

uint32_t port_core_clock_hz(void) {
    return CORE_CLOCK_HZ;
}

void port_uart_init(void) {
    uint32_t divisor = UART_CLOCK_HZ / (16u * BAUD);
    UART_LCR = LCR_DLAB;
    UART_DLL = (uint8_t)divisor;
    UART_DLM = (uint8_t)(divisor >> 8);
    UART_LCR = LCR_8N1;
    UART_FCR = FCR_FIFO_RESET;
    UART_IER = 0; /* polled: no PLIC driver here */
}

int port_uart_put(uint8_t byte) {
    if (!(UART_LSR & LSR_THR_EMPTY)) return 0;
    UART_THR = byte;
    return 1;
}

int port_uart_get(void) {
    if (!(UART_LSR & LSR_DATA_READY)) return -1;
    return UART_RBR;
}
