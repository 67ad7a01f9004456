/* A workload for counter campaigns (counters mode, framed protocol v3): each run waits for the
 * host's COUNTER_CONFIG, runs the same fixed call graph once, and reports the configured
 * functions' inclusive DWT counts. Most of the cycles go to filter() and to checksum() under
 * encode(); the rest of the functions are cheap, so a campaign for "above 5 %" prunes them.
 *
 *   main -> process -> parse -> (tokenize, classify) ; process -> filter -> (fir, clamp)
 *   process -> encode -> (pack, checksum) ; main -> housekeeping -> (log_event, tick)
 *
 * The host ends the campaign with a configuration of no counters and no functions. */
#include <stdint.h>

#include "runtime/rackprof.h"

static volatile uint32_t sink;

__attribute__((noipa)) static void spin(uint32_t n) {
    for (uint32_t i = 0; i < n; i++) sink = (sink ^ i) * 33u;
}
__attribute__((noipa)) void tokenize(void) { spin(20); }
__attribute__((noipa)) void classify(void) { spin(30); }
__attribute__((noipa)) void parse(void) {
    for (int i = 0; i < 4; i++) tokenize();
    classify();
}
__attribute__((noipa)) void fir(void) { spin(400); }
__attribute__((noipa)) void clamp(void) { spin(10); }
__attribute__((noipa)) void filter(void) {
    for (int i = 0; i < 8; i++) fir();
    clamp();
}
__attribute__((noipa)) void pack(void) { spin(15); }
__attribute__((noipa)) void checksum(void) { spin(900); }
__attribute__((noipa)) void encode(void) {
    pack();
    checksum();
}
__attribute__((noipa)) void process(void) {
    parse();
    filter();
    encode();
}
__attribute__((noipa)) void log_event(void) { spin(5); }
__attribute__((noipa)) void tick(void) { spin(3); }
__attribute__((noipa)) void housekeeping(void) {
    log_event();
    tick();
}

#if RACKPROF_COUNTERS
int main(void) {
    rackprof_init();
    while (rackprof_campaign_wait()) {
        for (int frame = 0; frame < 10; frame++) {
            process();
            housekeeping();
        }
        rackprof_campaign_end();
    }
    rackprof_flush();
    return 0;
}
#else
/* The plain build (no instrumentation, no runtime started): the workload once, then exit. A
 * debugger's campaign resets the core for each run and times main() to board_exit():
 *   rackprof campaign --link gdb://... --elf ... --until board_exit [--clock ADDRESS]
 * Nothing here starts a timer: under QEMU -icount with sleep=off, a pending timer would move
 * the virtual clock on at every debugger stop. */
int main(void) {
    for (int frame = 0; frame < 10; frame++) {
        process();
        housekeeping();
    }
    return 0;
}
#endif
