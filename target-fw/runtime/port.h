/* What a board provides to the runtime (boards/<name>/board.c). */
#ifndef RACKPROF_PORT_H
#define RACKPROF_PORT_H

#include <stdint.h>

/* Core clock in Hz: SysTick counts it (RISC-V: mcycle counts it, the events' stamps). */
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

#if defined(__riscv)
/* RISC-V machine mode. The board provides: */
/* Every trap but the machine timer interrupt (external interrupts, exceptions), called by the
 * runtime's trap entry (riscv/trap.S) with mcause and mepc. */
void board_trap(uint32_t mcause, uint32_t mepc);
/* The application timer's period has passed: called in the machine timer trap. */
void board_timer_handler(void);
/* The runtime provides (riscv/arch.c): the application timer, on the CLINT beside the sampler
 * (one mtimecmp serves both): board_timer_handler() every period_ticks of mtime; 0 stops it. */
void rp_riscv_app_timer(uint32_t period_ticks);
/* The machine timer interrupt's work, called by the trap entry with mepc. */
void rp_riscv_timer_trap(uint32_t pc);
#endif

#endif
