/* SysTick_Handler: takes one PC sample. The interrupted code's PC is in the exception frame
 * (r0, r1, r2, r3, r12, lr, pc, xpsr) on the stack it was using: EXC_RETURN bit 2 (in lr on
 * entry) says which, MSP (0) or PSP (1), so bare-metal and RTOS threads need no build switch.
 * This is the first instruction of the handler, so MSP still points at the frame when the
 * interrupted code ran on MSP. Padding and FPU state are stored above the PC: offset 24 holds. */
#include "rackprof_config.h"
    .syntax unified
    .thumb
    .text
    .global SysTick_Handler
    .type   SysTick_Handler, %function
    .thumb_func
SysTick_Handler:
#if RACKPROF_SAMPLER_STACK == 1   /* tests only: always MSP */
    mrs   r0, msp
#elif RACKPROF_SAMPLER_STACK == 2 /* tests only: always PSP */
    mrs   r0, psp
#else
    mov   r0, lr
    movs  r1, #4
    tst   r0, r1
    beq   1f
    mrs   r0, psp
    b     2f
1:  mrs   r0, msp
#endif
2:  ldr   r0, [r0, #24]       @ stacked PC
    ldr   r1, =rp_sample      @ tail call: lr still holds EXC_RETURN, so it returns from the
    bx    r1                  @ exception (bx reaches anywhere, b might not on Thumb-1)
    .size SysTick_Handler, . - SysTick_Handler
    .ltorg
