/* A small preemptive round-robin kernel calling the task hooks (RACKPROF_TASKS=1; framed
 * protocol v5; docs/rtos.md). ARMv7-M (mps2-an385): PendSV switches, BASEPRI critical sections.
 *
 * Timers. The runtime's PC sampler owns SysTick (1 kHz, priority 0x40), so the kernel tick is
 * the board's CMSDK TIMER0 (IRQ 8, priority 0x80, app_timer_isr below): every TICK_CYCLES
 * (5.618 ms at 25 MHz, out of step with the sampler) it counts, wakes sleepers and pends PendSV
 * for the time slice. It is the one application interrupt, and the run's length: it stops
 * itself after exactly RUN_TICKS interrupts. PendSV has the lowest priority (0xFF), so a
 * switch happens when every handler is done; the kernel masks only its own level (BASEPRI =
 * 0x80), so SysTick and the UART never wait for it. (Chaining the tick from the sampler's
 * SysTick handler would have tied the kernel to the runtime's rate and changed the runtime.)
 *
 * Loads. Three workers of equal priority are released together every PERIOD_TICKS ticks and
 * each does a fixed number of work units, then sleeps until its next release: sensor 1,
 * control 2, logger 3 units. A unit (8 calls of mix(MIX_ITERS)) is about one tick of CPU
 * (MIX_ITERS is set so), so the designed shares are about 10 %, 20 % and 30 %, exactly 1:2:3
 * among themselves (the same code, the same count of calls), and the idle task takes the
 * rest, about 40 % (a spin loop; see idle()). Round robin with a one-tick slice: control and
 * logger are preempted at tick boundaries while another worker is ready.
 *
 * Tasks and hooks. Each worker runs PERIODS periods, then deletes itself (task_exit:
 * rackprof_task_deleted). The idle task waits for the last tick and all three deletions,
 * stops profiling and exits. A PC sample taken in the tick handler or PendSV is charged to the
 * task it interrupted (whatever TASK_SWITCH precedes it in the stream).
 * Exit 0; 3 when records were dropped, 4 on a wrong tick count, 6 on a wrong period count. */
#include <stdint.h>

#include "board.h"
#include "runtime/cm_regs.h"
#include "runtime/rackprof.h"

/* 5.618 ms: 5 sampler periods and 0.618 of one, so the sampler's phase walks evenly over the
 * tick (5.4 ms would repeat five phases: every period sampled at the same few points). Long
 * enough that the switches' traffic (each sends the caches' counts) costs little CPU. */
#define TICK_CYCLES 140451u
#define PERIOD_TICKS 10u
#define PERIODS 40u
#define RUN_TICKS (PERIODS * PERIOD_TICKS) /* timer interrupts, exactly */
#define MIX_CALLS 8u
#ifndef MIX_ITERS
/* mix's loop is 8 instructions an iteration (-Os, Thumb-2): a unit is 8 x 8 x 2741 = 175 424
 * instructions, 5.614 ms under QEMU -icount shift=5 (32 ns each), 99.9 % of a tick. */
#define MIX_ITERS 2741u
#endif
#define WORKERS 3u
#define STACK_WORDS 256u
#define KERNEL_PRIORITY BOARD_TIMER_PRIORITY /* the tick's: what BASEPRI masks */
#define PENDSV_PRIORITY 0xFFu

enum { READY, SLEEPING, DEAD };

struct task {
    uint32_t* sp; /* first: PendSV_Handler saves and loads it */
    const char* name;
    volatile uint32_t state; /* changed by the tick and by other tasks */
    uint32_t wake;           /* SLEEPING: the tick it is READY again */
    uint32_t units;          /* work units per period: its load */
    uint32_t periods;        /* periods done */
};

static struct task workers[WORKERS];
static struct task idle_task;
static struct task boot_task; /* main's context, saved by the first switch, never resumed */
static uint32_t stacks[WORKERS + 1][STACK_WORDS] __attribute__((aligned(8)));
static uint32_t boot_stack[32] __attribute__((aligned(8)));
struct task* rtos_current = &boot_task;
static volatile uint32_t ticks;
static volatile uint32_t sink;

/* ---- kernel ---------------------------------------------------------------------------- */

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

/* Round robin: the next READY worker after the current one (itself last), else idle. */
static struct task* pick_next(void) {
    unsigned first = 0;
    if (rtos_current >= workers && rtos_current < workers + WORKERS)
        first = (unsigned)(rtos_current - workers) + 1u;
    for (unsigned i = 0; i < WORKERS; i++) {
        struct task* t = &workers[(first + i) % WORKERS];
        if (t->state == READY) return t;
    }
    return &idle_task;
}

/* Called by PendSV_Handler between saving the old task's registers and loading the new's. */
__attribute__((noipa)) void schedule(void) {
    uint32_t key = kernel_lock();
    struct task* next = pick_next();
    if (next != rtos_current) {
        rtos_current = next;
        rackprof_task_switched_in(next, next->name);
    }
    kernel_unlock(key);
}

/* The kernel tick (TIMER0's handler calls it): the one application interrupt. */
__attribute__((noipa)) void app_timer_isr(void) {
    uint32_t now = ++ticks;
    if (now == RUN_TICKS) board_timer_stop();
    for (unsigned i = 0; i < WORKERS; i++) {
        struct task* t = &workers[i];
        if (t->state == SLEEPING && (int32_t)(now - t->wake) >= 0) t->state = READY;
    }
    request_switch(); /* the time slice */
}

/* Blocks the running task until tick `release` (returns at once if that has passed). */
__attribute__((noipa)) static void sleep_until(uint32_t release) {
    uint32_t key = kernel_lock();
    if ((int32_t)(ticks - release) < 0) {
        rtos_current->wake = release;
        rtos_current->state = SLEEPING;
        request_switch();
    }
    kernel_unlock(key);
}

/* Deletes the running task: it is never scheduled again. */
__attribute__((noipa, noreturn)) static void task_exit(void) {
    uint32_t key = kernel_lock();
    rtos_current->state = DEAD;
    rackprof_task_deleted(rtos_current);
    request_switch();
    kernel_unlock(key);
    for (;;) {
    }
}

/* A stack as PendSV leaves one: r4-r11, then the exception frame that returns to
 * entry(task) in thread mode on PSP, with task_exit as its return address (so the profile's
 * caller of each task's entry function is task_exit). */
static void task_create(struct task* t, uint32_t* stack_top, void (*entry)(struct task*),
                        const char* name, uint32_t units) {
    uint32_t* sp = stack_top - 16;
    for (unsigned i = 0; i < 16; i++) sp[i] = 0;
    sp[8] = (uint32_t)t;            /* r0 */
    sp[13] = (uint32_t)task_exit;   /* lr */
    sp[14] = (uint32_t)entry & ~1u; /* pc: no Thumb bit in a stacked PC */
    sp[15] = 0x01000000u;           /* xPSR: T */
    t->sp = sp;
    t->name = name;
    t->units = units;
    t->state = READY;
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

/* ---- application ----------------------------------------------------------------------- */

__attribute__((noipa)) void mix(uint32_t n) {
    for (uint32_t i = 0; i < n; i++) sink = (sink ^ i) * 33u;
}

/* One unit of work: about one tick of CPU. */
__attribute__((noipa)) void work_unit(void) {
    for (uint32_t k = 0; k < MIX_CALLS; k++) mix(MIX_ITERS);
}

/* A worker: `units` units of work per period, released every PERIOD_TICKS from tick 0. */
__attribute__((noipa)) void worker(struct task* self) {
    uint32_t release = 0;
    for (uint32_t p = 0; p < PERIODS; p++) {
        for (uint32_t u = 0; u < self->units; u++) work_unit();
        self->periods++;
        release += PERIOD_TICKS;
        if (p + 1u < PERIODS) sleep_until(release);
    }
    task_exit();
}

static int workers_done(void) {
    for (unsigned i = 0; i < WORKERS; i++)
        if (workers[i].state != DEAD) return 0;
    return 1;
}

__attribute__((noipa, noreturn)) static void finish(void) {
    rackprof_stop();
    rackprof_flush();
    int periods_ok = 1;
    for (unsigned i = 0; i < WORKERS; i++) periods_ok &= workers[i].periods == PERIODS;
    board_exit(rackprof_dropped() != 0 ? 3 : ticks != RUN_TICKS ? 4 : !periods_ok ? 6 : 0);
}

/* The idle task: runs whenever no worker is ready; ends the run after the last tick. It spins
 * rather than WFI: under QEMU -icount sleep=off a WFI warps the virtual clock to the next
 * deadline, and SysTick periods skipped so take one sample, not one each (the idle time would
 * be under-sampled and the SysTick stamps would lose wraps). On hardware WFI is the thing. */
__attribute__((noipa)) void idle(struct task* self) {
    (void)self;
    while (!(ticks == RUN_TICKS && workers_done())) {
    }
    finish();
}

int main(void) {
    rackprof_init();
    SCB_SHPR3 = (SCB_SHPR3 & ~(0xFFu << 16)) | (PENDSV_PRIORITY << 16);
    task_create(&workers[0], stacks[0] + STACK_WORDS, worker, "sensor", 1);
    task_create(&workers[1], stacks[1] + STACK_WORDS, worker, "control", 2);
    task_create(&workers[2], stacks[2] + STACK_WORDS, worker, "logger", 3);
    task_create(&idle_task, stacks[3] + STACK_WORDS, idle, "idle", 0);
    rackprof_start();
    board_timer_start(TICK_CYCLES);
    start_scheduler(boot_stack + sizeof boot_stack / sizeof boot_stack[0]);
}
