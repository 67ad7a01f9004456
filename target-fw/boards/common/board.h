/* What every board offers the examples (beside the runtime's port.h). */
#ifndef RACKPROF_BOARD_H
#define RACKPROF_BOARD_H

#include <stdint.h>

/* Ends the program: under QEMU the emulator exits with this code (semihosting). */
void board_exit(int code) __attribute__((noreturn));

#if !defined(__riscv)
/* NVIC: enables external interrupt irq at priority (0 = highest; upper bits used). */
void board_nvic_enable(unsigned irq, uint8_t priority);
/* NVIC: makes external interrupt irq pending. */
static inline void board_nvic_set_pending(unsigned irq) {
    *(volatile uint32_t*)(0xE000E200u + 4u * (irq / 32u)) = 1u << (irq % 32u);
}
#endif

/* A periodic timer interrupt for applications (below SysTick's priority, so the sampler can
 * preempt it): calls app_timer_isr(), which the application defines, every period_cycles core
 * clock cycles until board_timer_stop(). RISC-V: the CLINT's machine timer trap, shared with the
 * sampler (boards/riscv-common), so the sampler never preempts it; the period is rounded down
 * to whole mtime ticks. */
void board_timer_start(uint32_t period_cycles);
void board_timer_stop(void);
void app_timer_isr(void);
#define BOARD_TIMER_PRIORITY 0x80u

#endif
