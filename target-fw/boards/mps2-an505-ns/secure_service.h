/* The Secure side's services for the Non-secure image of the mps2-an505-ns board
 * (secure_boot.c): the Non-secure caller reaches each through its SG veneer. */
#ifndef SECURE_SERVICE_H
#define SECURE_SERVICE_H
#include <stdint.h>

/* Secure: runs `rounds` turns of a Secure busy loop; returns their sum. */
uint32_t rackprof_secure_work(uint32_t rounds);

/* Non-secure callers use its SG veneer's address (memory.ld: __sg_veneers, the only veneer).
 * Not the symbol: in this one-ELF link ld resolves a Non-secure call to the Secure function
 * itself (__acle_se_rackprof_secure_work, no SG: a SecureFault INVEP under QEMU), the veneer
 * being meant for images linked separately against the Secure import library. A call through
 * a pointer with the Thumb bit set: BLX, the SG switches to Secure. A macro: nothing -pg
 * between the caller and the veneer. */
extern const uint8_t __sg_veneers[];
#define RACKPROF_SECURE_WORK(rounds) \
    (((uint32_t(*)(uint32_t))((uintptr_t)__sg_veneers | 1u))(rounds))

#endif
