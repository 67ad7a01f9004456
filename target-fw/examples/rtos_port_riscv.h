/* The example kernel's RISC-V part (qemu-virt, rv32imac, machine mode), included by rtos.c
 * after its task types: switches on the CLINT's machine software interrupt, critical sections
 * with mstatus.MIE, the tick on the runtime's shared CLINT timer.
 *
 * Timers. A hart has one mtimecmp, and the runtime's PC sampler uses it. The runtime already
 * shares it with the board's application timer (runtime/riscv/arch.c keeps both deadlines,
 * arms the earlier, and serves whichever have passed in one timer trap, the sample first), so
 * the tick is that timer, board_timer_start(TICK_CYCLES), as the ARM kernel's is TIMER0: a
 * period of its own (5.618 ms, 56 180 mtime ticks), out of step with the sampler's 1 ms. A tick
 * every N samples (a hook in the sampler's handler) would have been simpler, but its phase
 * would be locked to the sampler: every period sampled at the same few points of the tick.
 *
 * Switch. The CLINT's machine software interrupt (msip) is this port's PendSV: request_switch()
 * sets hart 0's msip; the trap is taken when MIE is set again, that is after the timer trap
 * that requested it (traps do not nest: the hart clears MIE on entry), or at kernel_unlock()
 * in a task. Its handler (rtos_switch_trap) saves the task's registers on the task's stack,
 * calls schedule() and loads rtos_current's. The kernel's vector table (mtvec, vectored mode)
 * sends that one cause there and every other trap to the runtime's rp_trap_entry, which reads
 * mcause itself: the sampler's path is one jump longer, nothing else changes.
 *
 * Critical sections mask mstatus.MIE: the tick shares its trap with the sampler, so there is
 * no level that masks the one and not the other (ARM's BASEPRI). They are a few instructions
 * (schedule() runs in the switch's trap, masked anyway). A sample that falls in the tick, the
 * switch or a masked stretch is taken when MIE is set again: at the task interrupted, or for a
 * switch, at the first instruction of the task switched in (its TASK_SWITCH already sent). */

#define CLINT_MSIP (*(volatile uint32_t*)(RACKPROF_CLINT_BASE + 0x0u)) /* hart 0 */
#define MIE_MSIE (1u << 3)
#define MCAUSE_MSI 0x8003u    /* rp_trap_context's form: bit 15 interrupt, cause 3 */
#define STACK_ALIGN 16        /* the RISC-V psABI's sp alignment */
#define BOOT_STACK_WORDS 256u /* the first switch runs on it: its frame, schedule()'s calls */

/* 5.618 ms, as the ARM kernel's tick (5.618 sampler periods): in core cycles, which on
 * qemu-virt are mcycle's virtual nanoseconds (boards/qemu-virt); board_timer_start() makes them
 * 56 180 ticks of the 10 MHz mtime. */
#define TICK_CYCLES 5618000u
#ifndef MIX_ITERS
/* mix's loop is 7 instructions an iteration (-Os, rv32imac: bne, lw, xor, mul, addi, sw, j): a
 * unit is 8 x 7 x 3133 = 175 448 instructions, 5.614 ms under QEMU -icount shift=5 (32 ns
 * each), 99.9 % of a tick. */
#define MIX_ITERS 3133u
#endif

/* Masks every interrupt (the timer: tick and sampler; the switch); inlined, never
 * instrumented. csrrci returns the old mstatus. */
__attribute__((always_inline, no_instrument_function)) static inline uint32_t kernel_lock(void) {
    uint32_t old;
    __asm volatile("csrrci %0, mstatus, 8" : "=r"(old)::"memory");
    return old;
}
__attribute__((always_inline, no_instrument_function)) static inline void kernel_unlock(
    uint32_t old) {
    /* MIE again only if it was set; a switch requested under the lock is taken here */
    __asm volatile("csrs mstatus, %0" ::"r"(old & 8u) : "memory");
}

static void request_switch(void) {
    CLINT_MSIP = 1u;
}

/* The frame rtos_switch_trap saves (32 words on the task's stack, 16-byte aligned): x1 at 0,
 * x5-x31 at 4 x (n - 4), mepc at 112, the runtime's rp_trap_context at 116. A new task's
 * "returns" to entry(t) (mepc, a0) in machine mode with MIE set (mstatus.MPIE, which every
 * switch's trap entry leaves set), with ra = task_exit (so the profile's caller of each task's
 * entry function is task_exit, as on ARM). sp, gp, tp are not in it: gp and tp never change,
 * sp is the task's saved pointer itself. The port's functions are inlined and never
 * instrumented: they add no -pg arc and no ENTER/EXIT of their own. */
#define FRAME_WORDS 32u
#define FRAME_A0 6u /* x10 */
__attribute__((always_inline, no_instrument_function)) static inline uint32_t* port_task_frame(
    uint32_t* stack_top, void (*entry)(struct task*), struct task* t) {
    uint32_t* sp = stack_top - FRAME_WORDS;
    for (unsigned i = 0; i < FRAME_WORDS; i++) sp[i] = 0;
    sp[0] = (uint32_t)task_exit; /* ra */
    sp[FRAME_A0] = (uint32_t)t;  /* a0 */
    sp[28] = (uint32_t)entry;    /* mepc */
    return sp;
}

/* The machine software interrupt: the switch. Entered from thread code only (MIE is clear in
 * every trap), so the frame goes on the running task's stack, and its sp into its TCB.
 * rp_trap_context says "the software interrupt" while schedule() runs (its enter/exit events
 * and records are a handler's), and is restored from the incoming task's frame. msip is
 * cleared first: a request made from here on is a new one. Assembly: no -pg hook, no register
 * touched before it is saved. */
void rtos_switch_trap(void);
__asm__(
    ".pushsection .text.rtos_switch_trap,\"ax\",@progbits\n"
    "    .balign 4\n"
    "    .global rtos_switch_trap\n"
    "    .type   rtos_switch_trap, @function\n"
    "rtos_switch_trap:\n"
    "    addi  sp, sp, -128\n"
    "    sw    x1, 0(sp)\n"
    "    .irp n, 5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
    "    sw    x\\n, (\\n - 4) * 4(sp)\n"
    "    .endr\n"
    "    csrr  t0, mepc\n"
    "    sw    t0, 112(sp)\n"
    "    la    t0, rp_trap_context\n"
    "    lw    t1, 0(t0)\n"
    "    sw    t1, 116(sp)\n"
    "    li    t1, 0x8003\n" /* MCAUSE_MSI */
    "    sw    t1, 0(t0)\n"
    "    li    t0, 0x02000000\n" /* CLINT msip, hart 0 */
    "    sw    zero, 0(t0)\n"
    "    la    t0, rtos_current\n"
    "    lw    t1, 0(t0)\n"
    "    sw    sp, 0(t1)\n" /* rtos_current->sp */
    "    call  schedule\n"
    "    la    t0, rtos_current\n"
    "    lw    t1, 0(t0)\n"
    "    lw    sp, 0(t1)\n"
    "    lw    t1, 116(sp)\n"
    "    la    t0, rp_trap_context\n"
    "    sw    t1, 0(t0)\n"
    "    lw    t0, 112(sp)\n"
    "    csrw  mepc, t0\n"
    "    lw    x1, 0(sp)\n"
    "    .irp n, 5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
    "    lw    x\\n, (\\n - 4) * 4(sp)\n"
    "    .endr\n"
    "    addi  sp, sp, 128\n"
    "    mret\n"
    "    .size   rtos_switch_trap, . - rtos_switch_trap\n"
    ".popsection\n");

/* mtvec in vectored mode: exceptions at the base, interrupt n at base + 4 n. Only the software
 * interrupt (3) is the kernel's; the rest go to the runtime's entry unchanged (the timer, 7:
 * sampler and tick; anything else: board_trap). Full-size jumps: each slot is 4 bytes. */
void rtos_vectors(void);
__asm__(
    ".pushsection .text.rtos_vectors,\"ax\",@progbits\n"
    "    .balign 64\n"
    "    .global rtos_vectors\n"
    "    .type   rtos_vectors, @function\n"
    "rtos_vectors:\n"
    "    .option push\n"
    "    .option norvc\n"
    "    j     rp_trap_entry\n" /* exceptions; 0: user software */
    "    j     rp_trap_entry\n"
    "    j     rp_trap_entry\n"
    "    j     rtos_switch_trap\n" /* 3: machine software */
    "    .rept 8\n"                /* 4-11: the timers, the external interrupts */
    "    j     rp_trap_entry\n"
    "    .endr\n"
    "    .option pop\n"
    "    .size   rtos_vectors, . - rtos_vectors\n"
    ".popsection\n");

/* Before the tasks are made: the kernel's vector table (mtvec's mode 1: vectored). */
__attribute__((always_inline, no_instrument_function)) static inline void port_init(void) {
    __asm volatile("csrw mtvec, %0" ::"r"((uint32_t)rtos_vectors | 1u));
}

/* Moves main onto the boot stack, enables the software interrupt and requests the first
 * switch, which saves this context (one frame, 32 words) in boot_task and never comes back.
 * One asm statement: C code must not run on a stack pointer changed under it. */
__attribute__((always_inline, no_instrument_function, noreturn)) static inline void port_start(
    uint32_t* boot_stack_top) {
    __asm volatile(
        "mv    sp, %0\n\t"
        "csrs  mie, %1\n\t"
        "sw    %2, 0(%3)\n" /* CLINT_MSIP = 1 */
        "1:    j 1b" ::"r"(boot_stack_top),
        "r"(MIE_MSIE), "r"(1u), "r"(&CLINT_MSIP)
        : "memory");
    __builtin_unreachable();
}
