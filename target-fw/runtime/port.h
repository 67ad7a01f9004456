/* What a board provides to the runtime (boards/<name>/board.c). */
#ifndef RACKPROF_PORT_H
#define RACKPROF_PORT_H

#include <stdint.h>

/* Core clock in Hz: SysTick counts it. */
uint32_t port_core_clock_hz(void);
/* Configures the UART for transmission with its TX interrupt enabled at the highest priority. */
void port_uart_init(void);
/* Hands one byte to the UART; 0 when it cannot take one now (its TX interrupt will follow). */
int port_uart_put(uint8_t byte);
/* The next byte the UART received, or -1 when none is waiting (RACKPROF_COUNTERS builds). */
int port_uart_get(void);
/* Makes the UART TX interrupt run soon (sets it pending), so transmission (re)starts. */
void port_uart_kick(void);
/* The board's UART interrupt handler acknowledges the interrupt and calls this. */
void rackprof_uart_isr(void);

#endif
