/* Nested producers: a -pg timer interrupt handler runs while main's -pg calls are being
 * recorded, and SysTick preempts both, so __gnu_mcount_nc is interrupted by itself and by the
 * sampler. Known counts: main -> work ROUNDS, work -> leaf 3 per call, and for each of TICKS
 * timer interrupts timer0_handler -> app_timer_isr 1 and app_timer_isr -> tick 1
 * (timer0_handler is the board's handler, built without -pg; on RISC-V board_timer_handler,
 * called in the machine timer trap, which the sampler shares: no sample lands in the handler).
 * Exit 0; 3 when records were dropped, 4 on a wrong tick count. */
#include <stdint.h>

#include "board.h"
#include "runtime/rackprof.h"

#define ROUNDS 3000u
#define TICKS 400u
/* Prime: the interrupt lands all over the arc path. The RISC-V build sets 39700 (its QEMU boards'
 * core clock is mcycle's 1 GHz, and their timer ticks at 10 MHz: 397 ticks, a prime). */
#ifndef TIMER_PERIOD_CYCLES
#define TIMER_PERIOD_CYCLES 997u
#endif

static volatile uint32_t sink;
static volatile uint32_t ticks;

__attribute__((noipa)) void leaf(uint32_t x) {
    sink += x;
}

__attribute__((noipa)) void tick(void) {
    if (++ticks == TICKS) board_timer_stop();
}

__attribute__((noipa)) void app_timer_isr(void) {
    tick();
}

__attribute__((noipa)) void work(uint32_t round) {
    leaf(round);
    leaf(round + 1);
    leaf(round + 2);
    for (uint32_t i = 0; i < 20u; i++) sink = (sink ^ i) * 33u;
}

int main(void) {
    rackprof_init();
    rackprof_start();
    board_timer_start(TIMER_PERIOD_CYCLES);
    for (uint32_t round = 0; round < ROUNDS; round++) work(round);
    while (ticks < TICKS) {
    }
    rackprof_stop();
    rackprof_flush();
    return rackprof_dropped() != 0 ? 3 : ticks != TICKS ? 4 : 0;
}
