/* A fixed workload with known call counts per arc, for the end-to-end tests. Per round:
 *   main -> middle 1, middle -> leaf 3, middle -> crunch 1, main -> crunch 1,
 *   main -> fact 1, fact -> fact 4 (fact(5)), main -> ping 1, ping -> pong 3, pong -> ping 3
 * (ping(6) -> pong(5) -> ping(4) -> ... -> ping(0): a two-function cycle).
 * ROUNDS rounds, then profiling stops, the queue is flushed and the board exits with 0.
 * crunch() does nearly all the work: it is the hot function. tests/e2e/qemu_e2e.py holds the
 * same table; keep them in step. */
#include <stdint.h>

#include "runtime/rackprof.h"

#define ROUNDS 50u
#define CRUNCH_WORK 2000u

static volatile uint32_t sink;

__attribute__((noipa)) void leaf(uint32_t x) {
    sink += x;
}

__attribute__((noipa)) void crunch(uint32_t units) {
    for (uint32_t i = 0; i < units * CRUNCH_WORK; i++) sink = (sink ^ i) * 33u;
}

__attribute__((noipa)) void middle(uint32_t round) {
    leaf(round);
    leaf(round + 1);
    leaf(round + 2);
    crunch(1);
}

__attribute__((noipa)) uint32_t fact(uint32_t n) {
    return n <= 1 ? 1 : n * fact(n - 1);
}

void pong(uint32_t n);
__attribute__((noipa)) void ping(uint32_t n) {
    if (n) pong(n - 1);
}
__attribute__((noipa)) void pong(uint32_t n) {
    if (n) ping(n - 1);
}

int main(void) {
    rackprof_init();
    rackprof_start();
    for (uint32_t round = 0; round < ROUNDS; round++) {
        middle(round);
        crunch(4);
        sink += fact(5);
        ping(6);
    }
    rackprof_stop();
    rackprof_puts("deterministic: done\n"); /* console text: ITM builds send it on port 0 */
    rackprof_flush();
    return rackprof_dropped() == 0 ? 0 : 3;
}
