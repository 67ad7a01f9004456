/* Reset handler and the 16 core exception vectors shared by every Cortex-M board. Each board
 * adds its own interrupt vectors in section .vectors.irq (board.c). Built without -pg. */
#include <stdint.h>

#include "board.h"

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern uint32_t __stack_top[];
int main(void);
void SysTick_Handler(void);

void Reset_Handler(void) {
#if defined(__ARM_FP)
    /* CPACR: CP10 and CP11 (the FPU) fully accessible before any FP instruction runs (hard-float
     * builds; the runtime itself is built with -mgeneral-regs-only). */
    *(volatile uint32_t*)0xE000ED88u |= 0xFu << 20;
    __asm volatile("dsb\n\tisb" ::: "memory");
#endif
    for (uint32_t *src = __data_load, *dst = __data_start; dst < __data_end;) *dst++ = *src++;
    for (uint32_t* dst = __bss_start; dst < __bss_end;) *dst++ = 0;
    board_exit(main());
}

/* The ITM transport's consumer (runtime/itm.c) defines its own; unused otherwise. */
__attribute__((weak)) void PendSV_Handler(void) {
    board_exit(0x7F);
}

/* Applications that start the board timer define their own. */
__attribute__((weak)) void app_timer_isr(void) {}

/* A fault or an unexpected interrupt ends the run with a code a test can see. */
static void Fault_Handler(void) {
    board_exit(0x7F);
}

__attribute__((section(".vectors.core"), used)) static void (*const core_vectors[16])(void) = {
    (void (*)(void))__stack_top,
    Reset_Handler,
    Fault_Handler, /* NMI */
    Fault_Handler, /* HardFault */
    Fault_Handler,
    Fault_Handler,
    Fault_Handler,
    0,
    0,
    0,
    0,
    Fault_Handler, /* SVCall */
    0,
    0,
    PendSV_Handler,
    SysTick_Handler,
};

void board_nvic_enable(unsigned irq, uint8_t priority) {
    /* Word access: ARMv6-M has no byte access to the priority registers. */
    volatile uint32_t* ipr = (volatile uint32_t*)(0xE000E400u + 4u * (irq / 4u));
    unsigned shift = 8u * (irq % 4u);
    *ipr = (*ipr & ~(0xFFu << shift)) | ((uint32_t)priority << shift);
    *(volatile uint32_t*)(0xE000E100u + 4u * (irq / 32u)) = 1u << (irq % 32u);
}

/* Semihosting SYS_EXIT_EXTENDED (0x20): QEMU exits with the given code. */
void board_exit(int code) {
    uint32_t block[2] = {0x20026u /* ADP_Stopped_ApplicationExit */, (uint32_t)code};
    register uint32_t op __asm("r0") = 0x20u;
    register uint32_t* arg __asm("r1") = block;
    __asm volatile("bkpt 0xab" : : "r"(op), "r"(arg) : "memory");
    for (;;) {
    }
}
