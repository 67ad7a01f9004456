/* __gnu_mcount_nc: gcc's -pg hook. Every instrumented function starts with
 *     push {lr}              @ the return address into its caller
 *     bl   __gnu_mcount_nc   @ lr = where the callee continues
 * so on entry lr is inside the callee ("self") and [sp] holds the return address into the
 * caller ("from"). We must return to the callee with r0-r3 (its arguments) intact, the
 * caller's return address back in lr, and gcc's pushed word removed from the stack.
 * While profiling is off nothing is recorded. */
    .syntax unified
    .thumb
    .text
    .global __gnu_mcount_nc
    .type   __gnu_mcount_nc, %function
    .thumb_func
__gnu_mcount_nc:
#if defined(__ARM_ARCH_6M__) || defined(__ARM_ARCH_8M_BASE__)
    /* Thumb-1 (ARMv6-M, ARMv8-M Baseline): only r0-r7 can be loaded, and pop cannot write lr, so go through r0. */
    push  {r0-r3, lr}         @ [sp+16] = where the callee continues, [sp+20] = from
    ldr   r0, =rackprof_on
    ldrb  r0, [r0]
    cmp   r0, #0
    beq   1f
    ldr   r0, [sp, #20]       @ from
    mov   r1, lr              @ self
    bl    rp_wire_arc
1:  ldr   r0, [sp, #16]
    mov   ip, r0
    ldr   r0, [sp, #20]
    mov   lr, r0              @ the caller's return address, as the callee expects
    pop   {r0-r3}
    add   sp, #8              @ our lr slot and gcc's push {lr}
    bx    ip
#else
    ldr   ip, =rackprof_on    @ off: three instructions and the return
    ldrb  ip, [ip]
    cmp   ip, #0
    beq   1f
    push  {r0-r3, lr}         @ 24 bytes with gcc's push: the stack stays 8-byte aligned
    ldr   r0, [sp, #20]       @ from
    mov   r1, lr              @ self
    bl    rp_wire_arc
    pop   {r0-r3, lr}
1:  mov   ip, lr
    pop   {lr}                @ the caller's return address
    bx    ip
#endif
    .size __gnu_mcount_nc, . - __gnu_mcount_nc
    .ltorg
