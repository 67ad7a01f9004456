/* Reset entry of the RISC-V boards (machine mode, one hart): QEMU's virt (-bios none) jumps to
 * the start of RAM, sifive_e's mask ROM to the flash at 0x20400000; the linker script puts
 * .text.start first in both. Sets gp and sp, points mtvec at the runtime's trap entry, copies
 * .data, zeroes .bss, enables interrupts (mie enables none yet: as a Cortex-M leaves reset with
 * PRIMASK clear) and runs board_exit(main()). */
    .section .text.start, "ax"
    .global _start
    .type   _start, @function
_start:
    .option push
    .option norelax                 /* gp is not set yet: no gp-relative relaxation here */
    la    gp, __global_pointer$
    .option pop
    la    sp, __stack_top
    la    t0, rp_trap_entry
    csrw  mtvec, t0
    la    a0, __data_load
    la    a1, __data_start
    la    a2, __data_end
1:  bgeu  a1, a2, 2f
    lw    t0, 0(a0)
    sw    t0, 0(a1)
    addi  a0, a0, 4
    addi  a1, a1, 4
    j     1b
2:  la    a1, __bss_start
    la    a2, __bss_end
3:  bgeu  a1, a2, 4f
    sw    zero, 0(a1)
    addi  a1, a1, 4
    j     3b
4:  csrsi mstatus, 8                /* MIE */
    call  main
    tail  board_exit
    .size _start, . - _start

/* board_exit(code): semihosting SYS_EXIT_EXTENDED (0x20) with the block
 * {ADP_Stopped_ApplicationExit, code}, so QEMU (-semihosting-config enable=on,target=native)
 * exits with `code`. The host recognises the ebreak only between slli x0,x0,0x1f and
 * srai x0,x0,7, all three uncompressed and in one page (the 16-byte alignment). */
    .section .text.board_exit, "ax"
    .global board_exit
    .type   board_exit, @function
    .balign 16
board_exit:
    .option push
    .option norvc
    addi  sp, sp, -16
    li    t0, 0x20026
    sw    t0, 0(sp)
    sw    a0, 4(sp)
    mv    a1, sp
    li    a0, 0x20
    .balign 16
    slli  x0, x0, 0x1f
    ebreak
    srai  x0, x0, 7
5:  j     5b                        /* no semihosting host: the ebreak traps (board_trap) */
    .option pop
    .size board_exit, . - board_exit
