/* The application's thread on the process stack (PSP), as an RTOS runs its tasks, and a -pg
 * timer interrupt on the main stack (MSP): the SysTick sampler must read the stacked PC from
 * the stack EXC_RETURN names, PSP when it interrupts the thread, MSP when it interrupts the
 * timer handler. main (on MSP) sets PSP to psp_stack, sets CONTROL.SPSEL and runs psp_thread
 * there (run_on_psp, below); profiling starts and stops inside the thread, so every PC sample
 * interrupted either the thread (on PSP) or the timer handler (on MSP), never main.
 * Known counts: psp_thread -> psp_work ROUNDS, psp_work -> psp_leaf 3 per call, and for each
 * of TICKS timer interrupts timer0_handler -> app_timer_isr 1 and app_timer_isr -> isr_spin 1.
 * Time: the thread's functions take most of it, isr_spin about a quarter (tests/e2e checks
 * where the samples land). With an FPU (mps2-an386) both sides keep FP state live, so the
 * exceptions stack extended frames (the PC is still at offset 24).
 * Exit 0; 3 when records were dropped, 4 on a wrong tick count, 5 when the thread did not run
 * on the process stack. */
#include <stdint.h>

#include "board.h"
#include "runtime/rackprof.h"

#define ROUNDS 500u
#define TICKS 50u
#define TIMER_PERIOD_CYCLES 92503u /* 3.7 ms at 25 MHz: a prime, out of step with SysTick */
#define WORK_SPINS 1500u
#define ISR_SPINS 4000u
#define PSP_STACK_WORDS 256u

static uint32_t psp_stack[PSP_STACK_WORDS] __attribute__((aligned(8)));
static volatile uint32_t sink;
static volatile uint32_t ticks;
static volatile uint32_t thread_on_psp;
#if defined(__ARM_FP)
static volatile float fsink;
#endif

/* Sets PSP to stack_top, switches thread mode to it (CONTROL.SPSEL = 1), calls fn there, and
 * switches back to MSP. Assembly (no -pg: no arc of its own), Thumb-1 so every board runs it. */
void run_on_psp(void (*fn)(void), uint32_t* stack_top);
__asm__(".pushsection .text.run_on_psp,\"ax\",%progbits\n"
        "    .syntax unified\n"
        "    .thumb\n"
        "    .global run_on_psp\n"
        "    .type   run_on_psp, %function\n"
        "    .thumb_func\n"
        "run_on_psp:\n"
        "    push  {r4, lr}\n"          /* on MSP, taken back once on MSP again */
        "    msr   psp, r1\n"
        "    mrs   r2, control\n"
        "    movs  r3, #2\n"
        "    orrs  r2, r3\n"             /* SPSEL: thread mode uses PSP */
        "    msr   control, r2\n"
        "    isb\n"
        "    blx   r0\n"                 /* fn() on the process stack */
        "    mrs   r2, control\n"        /* clear SPSEL only (FPCA may be set by now) */
        "    movs  r3, #2\n"
        "    bics  r2, r3\n"
        "    msr   control, r2\n"
        "    isb\n"
        "    pop   {r4, pc}\n"
        "    .size   run_on_psp, . - run_on_psp\n"
        ".popsection\n");

__attribute__((noipa)) void psp_leaf(uint32_t x) {
    sink += x;
}

__attribute__((noipa)) void psp_work(uint32_t round) {
    psp_leaf(round);
    psp_leaf(round + 1);
    psp_leaf(round + 2);
    for (uint32_t i = 0; i < WORK_SPINS; i++) {
        sink = (sink ^ i) * 33u;
#if defined(__ARM_FP)
        fsink = fsink * 0.5f + (float)i; /* FP state live in the thread: extended frames */
#endif
    }
}

__attribute__((noipa)) void isr_spin(void) {
    for (uint32_t i = 0; i < ISR_SPINS; i++) {
        sink = (sink ^ i) * 17u;
#if defined(__ARM_FP)
        fsink = fsink * 0.25f + 1.0f; /* and in the handler, stacked on MSP */
#endif
    }
    if (++ticks == TICKS) board_timer_stop();
}

__attribute__((noipa)) void app_timer_isr(void) {
    isr_spin();
}

__attribute__((noipa)) void psp_thread(void) {
    uint32_t control, sp;
    __asm volatile("mrs %0, control" : "=r"(control));
    __asm volatile("mov %0, sp" : "=r"(sp));
    thread_on_psp = (control & 2u) && sp > (uint32_t)psp_stack &&
                    sp <= (uint32_t)(psp_stack + PSP_STACK_WORDS);
    rackprof_start();
    board_timer_start(TIMER_PERIOD_CYCLES);
    for (uint32_t round = 0; round < ROUNDS; round++) psp_work(round);
    while (ticks < TICKS) {
    }
    rackprof_stop();
}

int main(void) {
    rackprof_init();
    run_on_psp(psp_thread, psp_stack + PSP_STACK_WORDS);
    rackprof_flush();
    return rackprof_dropped() != 0 ? 3 : ticks != TICKS ? 4 : !thread_on_psp ? 5 : 0;
}
