/* mps2-an505-ns only: Non-secure code calling a Secure service through its SG veneer.
 * ns_caller() calls rackprof_secure_work through its veneer (the Secure side, secure_boot.c: not
 * -pg, not in the Non-secure image) and ns_spin() does comparable work in Non-secure code; ROUNDS
 * of each. -pg records main->ns_caller and main->ns_spin but no arc into the Secure service (its
 * code has no mcount call); SysTick_NS samples taken while the Secure side runs are sent as
 * samples of rackprof_in_secure (the sampler cannot read a Secure stack): about half. */
#include <stdint.h>

#include "runtime/rackprof.h"
#include "secure_service.h"

#define ROUNDS 40u
#define WORK 20000u

static volatile uint32_t sink;

__attribute__((noipa)) void ns_caller(void) {
    sink += RACKPROF_SECURE_WORK(WORK);
}

__attribute__((noipa)) void ns_spin(void) {
    for (uint32_t i = 0; i < WORK; i++) sink += i;
}

int main(void) {
    rackprof_init();
    rackprof_start();
    for (uint32_t round = 0; round < ROUNDS; round++) {
        ns_caller();
        ns_spin();
    }
    rackprof_stop();
    rackprof_puts("secure_call: done\n");
    rackprof_flush();
    return rackprof_dropped() == 0 ? 0 : 3;
}
