/* RISC-V machine mode: the sampler's timer on the CLINT. A hart has one mtimecmp, so it is
 * shared: the sampler's deadline and the board's application timer (rp_riscv_app_timer, for
 * the nested example) are kept here, mtimecmp holds the earlier one, and each timer trap
 * serves whichever have passed. A deadline advances by whole periods, so the rate holds. */
#include <stdint.h>

#include "../arch.h"
#include "../port.h"
#include "../rackprof_config.h"
#include "../ring.h"
#include "../wire.h"

#define CLINT_REG(offset) (*(volatile uint32_t*)(RACKPROF_CLINT_BASE + (offset)))
#define MTIMECMP_LO CLINT_REG(0x4000u) /* hart 0 */
#define MTIMECMP_HI CLINT_REG(0x4004u)
#define MTIME_LO CLINT_REG(0xBFF8u)
#define MTIME_HI CLINT_REG(0xBFFCu)
#define MIE_MTIE (1u << 7)
#define SAMPLE_PERIOD (RACKPROF_MTIME_HZ / RACKPROF_SAMPLE_HZ)
#define NEVER UINT64_MAX

static uint64_t next_sample = NEVER;
static uint64_t next_app = NEVER;
static uint32_t app_period; /* mtime ticks; 0: the application timer is off */

static uint64_t mtime_now(void) {
    uint32_t hi, lo;
    do { /* RV32 reads the 64-bit count in halves: again if the low half carried between */
        hi = MTIME_HI;
        lo = MTIME_LO;
    } while (hi != MTIME_HI);
    return (uint64_t)hi << 32 | lo;
}

/* mtimecmp := the earlier deadline. The high half is parked at all ones first, so the compare
 * value never passes through an early time that would fire at once. */
static void arm_timer(void) {
    uint64_t at = next_sample < next_app ? next_sample : next_app;
    MTIMECMP_HI = UINT32_MAX;
    MTIMECMP_LO = (uint32_t)at;
    MTIMECMP_HI = (uint32_t)(at >> 32);
}

/* The next deadline one period on; if that has passed too (a long masked stretch before the
 * trap; an application handler that ran longer than its period), one period from now: missed
 * periods are skipped, as a hardware timer's single pending bit would, and the interrupted
 * code runs between two traps of the application timer. */
static uint64_t advance(uint64_t deadline, uint32_t period, uint64_t now) {
    deadline += period;
    return deadline > now ? deadline : now + period;
}

void rp_sampler_start(void) {
    uint32_t key = rp_irq_save();
    next_sample = mtime_now() + SAMPLE_PERIOD;
    arm_timer();
    __asm volatile("csrs mie, %0" ::"r"(MIE_MTIE));
    rp_irq_restore(key);
}

void rp_riscv_app_timer(uint32_t period_ticks) {
    uint32_t key = rp_irq_save();
    app_period = period_ticks;
    next_app = period_ticks ? mtime_now() + period_ticks : NEVER;
    arm_timer();
    __asm volatile("csrs mie, %0" ::"r"(MIE_MTIE));
    rp_irq_restore(key);
}

void rp_riscv_timer_trap(uint32_t pc) {
    uint64_t now = mtime_now();
    uint64_t app_due = next_app;
    int sample = now >= next_sample, app = now >= app_due;
    if (sample) rp_sample(pc);
    if (app) {
        /* What is published goes out first, as a Cortex-M UART interrupt above the timer's
         * would have sent it: the handler's records may wait behind a thread record still
         * being written, and with 4-byte addresses a half-full queue, that record and four
         * in-handler events (nested, enter-exit) would not fit. */
        if (rp_ring_used()) rp_kick();
        board_timer_handler();
    }
    if (sample) next_sample = advance(next_sample, SAMPLE_PERIOD, now);
    /* From the handler's end (it may have run past its period), unless it stopped or
     * restarted the timer. */
    if (app && next_app == app_due) next_app = advance(app_due, app_period, mtime_now());
    arm_timer();
}
