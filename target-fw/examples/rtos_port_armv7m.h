/* The example kernel's ARMv7-M part (mps2-an385), included by rtos.c after its task types:
 * PendSV switches, BASEPRI critical sections, the tick on the board's CMSDK TIMER0.
 *
 * Timers. The runtime's PC sampler owns SysTick (1 kHz, priority 0x40), so the kernel tick is
 * the board's CMSDK TIMER0 (IRQ 8, priority 0x80, app_timer_isr): every TICK_CYCLES (5.618 ms
 * at 25 MHz, out of step with the sampler) it counts, wakes sleepers and pends PendSV for the
 * time slice. PendSV has the lowest priority (0xFF), so a switch happens when every handler is
 * done; the kernel masks only its own level (BASEPRI = 0x80), so SysTick and the UART never
 * wait for it. (Chaining the tick from the sampler's SysTick handler would have tied the
 * kernel to the runtime's rate and changed the runtime.) A PC sample taken in the tick handler
 * or PendSV is charged to the task it interrupted. */
#include "runtime/cm_regs.h"

/* 5.618 ms: 5 sampler periods and 0.618 of one, so the sampler's phase walks evenly over the
 * tick (5.4 ms would repeat five phases: every period sampled at the same few points). Long
 * enough that the switches' traffic (each sends the caches' counts) costs little CPU. */
#define TICK_CYCLES 140451u
#ifndef MIX_ITERS
/* mix's loop is 8 instructions an iteration (-Os, Thumb-2): a unit is 8 x 8 x 2741 = 175 424
 * instructions, 5.614 ms under QEMU -icount shift=5 (32 ns each), 99.9 % of a tick. */
#define MIX_ITERS 2741u
#endif
#define KERNEL_PRIORITY BOARD_TIMER_PRIORITY /* the tick's: what BASEPRI masks */
#define PENDSV_PRIORITY 0xFFu

#define STACK_ALIGN 8 /* AAPCS: sp 8-byte aligned at calls and exception entry */
#define BOOT_STACK_WORDS 32u

/* Masks the tick and PendSV (not SysTick, not the UART); inlined, never instrumented. */
__attribute__((always_inline, no_instrument_function)) static inline uint32_t kernel_lock(void) {
    uint32_t old, level = KERNEL_PRIORITY;
    __asm volatile("mrs %0, basepri" : "=r"(old));
    __asm volatile("msr basepri_max, %0" : : "r"(level) : "memory");
    return old;
}
__attribute__((always_inline, no_instrument_function)) static inline void kernel_unlock(
    uint32_t old) {
    /* isb: a PendSV made pending under the lock is taken here, not some instructions later */
    __asm volatile("msr basepri, %0\n\tisb" : : "r"(old) : "memory");
}

static void request_switch(void) {
    SCB_ICSR = SCB_ICSR_PENDSVSET;
}

/* A stack as PendSV leaves one: r4-r11, then the exception frame that returns to entry(t) in
 * thread mode on PSP, with task_exit as its return address (so the profile's caller of each
 * task's entry function is task_exit). Returns the task's saved sp. Inlined and never
 * instrumented, as the code was in task_create: no -pg arc, no ENTER/EXIT of its own. */
__attribute__((always_inline, no_instrument_function)) static inline uint32_t* port_task_frame(
    uint32_t* stack_top, void (*entry)(struct task*), struct task* t) {
    uint32_t* sp = stack_top - 16;
    for (unsigned i = 0; i < 16; i++) sp[i] = 0;
    sp[8] = (uint32_t)t;            /* r0 */
    sp[13] = (uint32_t)task_exit;   /* lr */
    sp[14] = (uint32_t)entry & ~1u; /* pc: no Thumb bit in a stacked PC */
    sp[15] = 0x01000000u;           /* xPSR: T */
    return sp;
}

/* PendSV: saves r4-r11 below the running task's exception frame on its PSP, lets schedule()
 * choose, loads the chosen task's. Every task runs in thread mode on PSP, so EXC_RETURN (lr)
 * is the same for all of them. Assembly: no -pg hook, the registers untouched before saving. */
void PendSV_Handler(void);
__asm__(
    ".pushsection .text.PendSV_Handler,\"ax\",%progbits\n"
    "    .syntax unified\n"
    "    .thumb\n"
    "    .global PendSV_Handler\n"
    "    .type   PendSV_Handler, %function\n"
    "    .thumb_func\n"
    "PendSV_Handler:\n"
    "    mrs   r0, psp\n"
    "    stmdb r0!, {r4-r11}\n"
    "    ldr   r1, =rtos_current\n"
    "    ldr   r2, [r1]\n"
    "    str   r0, [r2]\n" /* rtos_current->sp */
    "    push  {r1, lr}\n" /* 8 bytes: MSP stays 8-byte aligned */
    "    bl    schedule\n"
    "    pop   {r1, lr}\n"
    "    ldr   r2, [r1]\n"
    "    ldr   r0, [r2]\n"
    "    ldmia r0!, {r4-r11}\n"
    "    msr   psp, r0\n"
    "    bx    lr\n"
    "    .size   PendSV_Handler, . - PendSV_Handler\n"
    "    .ltorg\n"
    ".popsection\n");

/* Moves thread mode onto PSP (boot_stack) and pends the first switch, which saves this
 * context in boot_task and never comes back. */
__attribute__((noreturn)) void start_scheduler(uint32_t* psp_top);
__asm__(
    ".pushsection .text.start_scheduler,\"ax\",%progbits\n"
    "    .syntax unified\n"
    "    .thumb\n"
    "    .global start_scheduler\n"
    "    .type   start_scheduler, %function\n"
    "    .thumb_func\n"
    "start_scheduler:\n"
    "    msr   psp, r0\n"
    "    mrs   r1, control\n"
    "    orr   r1, r1, #2\n" /* SPSEL: thread mode uses PSP */
    "    msr   control, r1\n"
    "    isb\n"
    "    ldr   r1, =0xE000ED04\n" /* ICSR */
    "    ldr   r2, =0x10000000\n" /* PENDSVSET */
    "    str   r2, [r1]\n"
    "    dsb\n"
    "    isb\n"
    "1:  b     1b\n"
    "    .size   start_scheduler, . - start_scheduler\n"
    "    .ltorg\n"
    ".popsection\n");

/* Before the tasks are made: PendSV at the lowest priority. */
__attribute__((always_inline, no_instrument_function)) static inline void port_init(void) {
    SCB_SHPR3 = (SCB_SHPR3 & ~(0xFFu << 16)) | (PENDSV_PRIORITY << 16);
}

__attribute__((always_inline, no_instrument_function, noreturn)) static inline void port_start(
    uint32_t* boot_stack_top) {
    start_scheduler(boot_stack_top);
}
