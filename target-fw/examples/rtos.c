/* A small preemptive round-robin kernel calling the task hooks (RACKPROF_TASKS=1; framed
 * protocol v5; docs/rtos.md), the same tasks and loads on two architectures. What differs is
 * in a port header included below: the switch, the critical sections, the tick's period, a
 * new task's first frame (rtos_port_armv7m.h: mps2-an385, PendSV and BASEPRI, the tick on the
 * CMSDK TIMER0; rtos_port_riscv.h: qemu-virt in machine mode, the CLINT's software interrupt
 * and mstatus.MIE, the tick on the runtime's shared CLINT timer). Each port gives
 *   TICK_CYCLES, MIX_ITERS       the tick's period (core cycles) and a work unit's size;
 *   kernel_lock/kernel_unlock    a critical section against the tick and the switch;
 *   request_switch()             makes the switch pending: it runs once no handler is active;
 *   port_task_frame()            a new task's saved context: entry(t), returning to task_exit;
 *   STACK_ALIGN, BOOT_STACK_WORDS  the ABI's stack alignment; main's stack for the first switch;
 *   port_init(), port_start()    before the tasks are made; the first switch (never returns).
 * The switch saves the running task's registers, calls schedule() and loads rtos_current's.
 *
 * The tick (app_timer_isr, the board timer's handler: board_timer_start) is the one
 * application interrupt, and the run's length: it counts, wakes sleepers, requests a switch
 * for the time slice, and stops itself after exactly RUN_TICKS interrupts.
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
 * stops profiling and exits. A PC sample is charged to the task whose TASK_SWITCH precedes it
 * in the stream (the ports say which task a sample taken in the tick or the switch lands in).
 * Exit 0; 3 when records were dropped, 4 on a wrong tick count, 6 on a wrong period count. */
#include <stdint.h>

#include "board.h"
#include "runtime/rackprof.h"

#define PERIOD_TICKS 10u
#define PERIODS 40u
#define RUN_TICKS (PERIODS * PERIOD_TICKS) /* timer interrupts, exactly */
#define MIX_CALLS 8u
#define WORKERS 3u
#define STACK_WORDS 256u

struct task;
__attribute__((noipa, noreturn)) static void task_exit(void);
extern struct task* rtos_current;

#if defined(__riscv)
#include "rtos_port_riscv.h"
#else
#include "rtos_port_armv7m.h"
#endif

enum { READY, SLEEPING, DEAD };

struct task {
    uint32_t* sp; /* first: the switch saves and loads it */
    const char* name;
    volatile uint32_t state; /* changed by the tick and by other tasks */
    uint32_t wake;           /* SLEEPING: the tick it is READY again */
    uint32_t units;          /* work units per period: its load */
    uint32_t periods;        /* periods done */
};

static struct task workers[WORKERS];
static struct task idle_task;
static struct task boot_task; /* main's context, saved by the first switch, never resumed */
static uint32_t stacks[WORKERS + 1][STACK_WORDS] __attribute__((aligned(STACK_ALIGN)));
static uint32_t boot_stack[BOOT_STACK_WORDS] __attribute__((aligned(STACK_ALIGN)));
struct task* rtos_current = &boot_task;
static volatile uint32_t ticks;
static volatile uint32_t sink;

/* ---- kernel ---------------------------------------------------------------------------- */

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

/* Called by the switch between saving the old task's registers and loading the new's. */
__attribute__((noipa)) void schedule(void) {
    uint32_t key = kernel_lock();
    struct task* next = pick_next();
    if (next != rtos_current) {
        rtos_current = next;
        rackprof_task_switched_in(next, next->name);
    }
    kernel_unlock(key);
}

/* The kernel tick (the board timer's handler calls it): the one application interrupt. */
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

/* A task READY to run entry(t) on its own stack. */
static void task_create(struct task* t, uint32_t* stack_top, void (*entry)(struct task*),
                        const char* name, uint32_t units) {
    t->sp = port_task_frame(stack_top, entry, t);
    t->name = name;
    t->units = units;
    t->state = READY;
}

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
 * deadline, and sampler periods skipped so take one sample, not one each (the idle time would
 * be under-sampled; ARM's SysTick stamps would lose wraps). On hardware WFI is the thing. */
__attribute__((noipa)) void idle(struct task* self) {
    (void)self;
    while (!(ticks == RUN_TICKS && workers_done())) {
    }
    finish();
}

int main(void) {
    rackprof_init();
    port_init();
    task_create(&workers[0], stacks[0] + STACK_WORDS, worker, "sensor", 1);
    task_create(&workers[1], stacks[1] + STACK_WORDS, worker, "control", 2);
    task_create(&workers[2], stacks[2] + STACK_WORDS, worker, "logger", 3);
    task_create(&idle_task, stacks[3] + STACK_WORDS, idle, "idle", 0);
    rackprof_start();
    board_timer_start(TICK_CYCLES);
    port_start(boot_stack + sizeof boot_stack / sizeof boot_stack[0]);
}
