/* rp_trap_entry: the machine-mode trap vector (mtvec, direct mode), set by the board's startup.
 * Saves the caller-saved registers (the C code it calls keeps the rest), notes which trap is
 * running in rp_trap_context (rp_handler(): 0 in thread code, else mcause in 16 bits, bit 15 =
 * interrupt), then:
 *   machine timer interrupt -> rp_riscv_timer_trap(mepc): a PC sample, the board's timer;
 *   anything else           -> board_trap(mcause, mepc) (boards/riscv-common: a fault exits).
 * Traps do not nest (the hart clears MIE on entry and mret restores it); the previous context
 * is kept all the same, so a board handler that re-enables interrupts stays correct. */
    .section .text.rp_trap_entry, "ax"
    .balign 4                       /* mtvec's direct mode: the low two bits are the mode */
    .global rp_trap_entry
    .type   rp_trap_entry, @function
rp_trap_entry:
    addi  sp, sp, -80               /* 16 registers and the previous context; 16-byte aligned */
    sw    ra, 0(sp)
    sw    t0, 4(sp)
    sw    t1, 8(sp)
    sw    t2, 12(sp)
    sw    t3, 16(sp)
    sw    t4, 20(sp)
    sw    t5, 24(sp)
    sw    t6, 28(sp)
    sw    a0, 32(sp)
    sw    a1, 36(sp)
    sw    a2, 40(sp)
    sw    a3, 44(sp)
    sw    a4, 48(sp)
    sw    a5, 52(sp)
    sw    a6, 56(sp)
    sw    a7, 60(sp)
    csrr  a0, mcause
    csrr  a1, mepc
    la    t0, rp_trap_context
    lw    t1, 0(t0)
    sw    t1, 64(sp)
    slli  t2, a0, 17                /* the cause code's low 15 bits */
    srli  t2, t2, 17
    bgez  a0, 1f                    /* bit 31: an interrupt */
    lui   t3, 0x8                   /* 0x8000 */
    or    t2, t2, t3
1:  sw    t2, 0(t0)
    li    t3, 0x80000007            /* machine timer interrupt */
    bne   a0, t3, 2f
    mv    a0, a1
    call  rp_riscv_timer_trap
    j     3f
2:  call  board_trap
3:  lw    t1, 64(sp)
    la    t0, rp_trap_context
    sw    t1, 0(t0)
    lw    ra, 0(sp)
    lw    t0, 4(sp)
    lw    t1, 8(sp)
    lw    t2, 12(sp)
    lw    t3, 16(sp)
    lw    t4, 20(sp)
    lw    t5, 24(sp)
    lw    t6, 28(sp)
    lw    a0, 32(sp)
    lw    a1, 36(sp)
    lw    a2, 40(sp)
    lw    a3, 44(sp)
    lw    a4, 48(sp)
    lw    a5, 52(sp)
    lw    a6, 56(sp)
    lw    a7, 60(sp)
    addi  sp, sp, 80
    mret
    .size rp_trap_entry, . - rp_trap_entry

    .section .sbss.rp_trap_context, "aw", @nobits
    .balign 4
    .global rp_trap_context
    .type   rp_trap_context, @object
rp_trap_context:
    .zero 4
    .size rp_trap_context, 4
