/* The thesis' fig. 4: fast() and slow() both call doSomething(), slow() with nine times the
 * work. gprof charges doSomething's time to its callers by call counts (50/50), although
 * slow() causes 90% of it: multiple-caller conflation. ROUNDS calls each, then exit 0. */
#include <stdint.h>

#include "runtime/rackprof.h"

#ifndef ROUNDS /* the plain build (no instrumentation) runs until a probe's test stops it */
#define ROUNDS 40u
#endif
/* Enough work that a call's own time dwarfs the profiler's cost at its entry and exit: the
 * enter-exit build's stamps show doSomething under slow() taking about 9x its time under fast()
 * (the hooks add about 200 cycles per call, which fewer iterations would make felt). The
 * -long build raises it tenfold, for a probe sampling the same run its stamps measure. */
#ifndef FAST_WORK
#define FAST_WORK 2000u
#endif
#define SLOW_WORK (9u * FAST_WORK)

static volatile uint32_t sink;

__attribute__((noipa)) void doSomething(uint32_t work) {
    for (uint32_t i = 0; i < work; i++) sink += i;
}

__attribute__((noipa)) void fast(void) {
    doSomething(FAST_WORK);
}

__attribute__((noipa)) void slow(void) {
    doSomething(SLOW_WORK);
}

int main(void) {
    rackprof_init();
    rackprof_start();
    for (uint32_t round = 0; round < ROUNDS; round++) {
        fast();
        slow();
    }
    rackprof_stop();
    rackprof_puts("conflation: done\n"); /* console text: ITM builds send it on port 0 */
    rackprof_flush();
    return rackprof_dropped() == 0 ? 0 : 3;
}
