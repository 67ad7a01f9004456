/* SysTick_Handler: takes one PC sample. The interrupted code's PC is in the exception frame
 * (r0, r1, r2, r3, r12, lr, pc, xpsr) on the stack it was using: EXC_RETURN bit 2 (in lr on
 * entry) says which, MSP (0) or PSP (1), so bare-metal and RTOS threads need no build switch.
 * This is the first instruction of the handler, so MSP still points at the frame when the
 * interrupted code ran on MSP. Padding and FPU state are stored above the PC: offset 24 holds.
 * ARMv8-M with the Security Extension (__ARM_FEATURE_CMSE), this firmware running Secure:
 * EXC_RETURN bit 6 (S) says whether the frame is on a Secure stack (MSP_S/PSP_S, what msp/psp
 * name here) or, S = 0, on the interrupted Non-secure code's (MSP_NS/PSP_NS); bit 2 (SPSEL) which
 * of the two. Bit 5 (DCRS) = 0 means the additional state context (integrity signature,
 * reserved word, r4-r11: 40 bytes) was stacked below the basic frame, as when Secure code was
 * preempted by a Non-secure exception that then tail-chained into this one: the PC is at 64.
 * Bits 4 (FType) and 3 (Mode) change nothing: FP state sits above the PC. Only S = 1, DCRS = 1
 * runs under the e2e test on mps2-an505. A Non-secure image (RACKPROF_NONSECURE=1, the
 * mps2-an505-ns board): its handlers' EXC_RETURN.S is 0 when they interrupted its own code, and
 * MSP/PSP name its stacks; S = 1 when they interrupted Secure code (a call through an SG
 * veneer): that frame is on a Secure stack, out of reach, and the sample is sent as one of
 * rackprof_in_secure. */
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
#elif defined(__ARM_FEATURE_CMSE) && !RACKPROF_NONSECURE
    mov   r0, lr
    lsls  r1, r0, #25         @ N = EXC_RETURN.S
    bpl   5f
    movs  r1, #4
    tst   r0, r1
    beq   3f
    mrs   r2, psp             @ PSP_S
    b     4f
3:  mrs   r2, msp             @ MSP_S
4:  lsls  r1, r0, #26         @ N = EXC_RETURN.DCRS
    bmi   7f
    adds  r2, #40             @ DCRS = 0: step over the additional state context
    b     7f
5:  movs  r1, #4              @ S = 0: a Non-secure frame
    tst   r0, r1
    beq   6f
    mrs   r2, psp_ns
    b     7f
6:  mrs   r2, msp_ns
7:  mov   r0, r2
#elif RACKPROF_NONSECURE
    mov   r0, lr
    lsls  r1, r0, #25         @ N = EXC_RETURN.S: this Non-secure handler interrupted Secure
    bpl   8f                  @ code (a call through an SG veneer), whose frame is on a
    ldr   r0, =rackprof_in_secure @ Secure stack it cannot read: a sample of the marker
    movs  r1, #1
    bics  r0, r1              @ its even address, as a stacked PC is
    b     9f
8:  movs  r1, #4
    tst   r0, r1
    beq   1f
    mrs   r0, psp
    b     2f
1:  mrs   r0, msp
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
9:  ldr   r1, =rp_sample      @ tail call: lr still holds EXC_RETURN, so it returns from the
    bx    r1                  @ exception (bx reaches anywhere, b might not on Thumb-1)
    .size SysTick_Handler, . - SysTick_Handler
    .ltorg
#if RACKPROF_NONSECURE && !RACKPROF_SAMPLER_STACK
/* Never runs: its address is the PC sent for every tick that interrupted Secure code, so the
 * profile shows the time spent in Secure calls as this function's (Thumb PCs are even). */
    .global rackprof_in_secure
    .type   rackprof_in_secure, %function
    .thumb_func
rackprof_in_secure:
    bkpt  0
    .size rackprof_in_secure, . - rackprof_in_secure
#endif
