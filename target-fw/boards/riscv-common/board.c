/* Board code shared by the RISC-V boards (machine mode): traps other than the machine timer,
 * the application timer (board.h) on the runtime's CLINT timer, and the UART drain. Built
 * without -pg. */
#include <stdint.h>

#include "board.h"
#include "runtime/atomic_word.h"
#include "runtime/port.h"
#include "runtime/rackprof_config.h"

#define MCAUSE_BREAKPOINT 3u
#define EXIT_FAULT 0x7F

/* No external interrupt is enabled (the UART needs none, below): any other trap is a fault,
 * and the run ends with a code a test can see. An ebreak with no semihosting host behind it
 * (board_exit's own) stops here rather than trapping again. */
void board_trap(uint32_t mcause, uint32_t mepc) {
    (void)mepc;
    if (mcause == MCAUSE_BREAKPOINT)
        for (;;) {
        }
    board_exit(EXIT_FAULT);
}

/* Applications that start the board timer define their own. */
__attribute__((weak)) void app_timer_isr(void) {}

void board_timer_start(uint32_t period_cycles) {
    uint64_t ticks = (uint64_t)period_cycles * RACKPROF_MTIME_HZ / port_core_clock_hz();
    rp_riscv_app_timer(ticks ? (uint32_t)ticks : 1u);
}

void board_timer_stop(void) {
    rp_riscv_app_timer(0);
}

void board_timer_handler(void) {
    app_timer_isr();
    /* Nothing may follow a tail call: this keeps it a call, so the -pg arc into
     * app_timer_isr has this function as its caller, as on the Cortex-M boards. */
    __asm volatile("" ::: "memory");
}

/* Interrupt-driven transmission would need the PLIC (and its UART source): instead the kick
 * drains the queue itself, interrupts masked, never re-entered. QEMU's UARTs take every byte
 * at once; a real UART takes what its FIFO holds, and the rest waits for the next kick (every
 * sampler tick kicks while bytes are queued; rackprof_flush kicks until all are sent). */
void port_uart_kick(void) {
    static uint8_t draining;
    uint32_t key = rp_irq_save();
    if (!draining) {
        draining = 1;
        rackprof_uart_isr();
        draining = 0;
    }
    rp_irq_restore(key);
}
