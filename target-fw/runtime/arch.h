/* The runtime's architecture layer: what differs between Cortex-M and RISC-V (machine mode),
 * behind a few small functions, so runtime.c and framed.c hold no core-specific code beyond
 * SysTick. Interrupt masking and the atomic word are in atomic_word.h.
 *   rp_handler()   0 in thread code, else the number of the handler running. Cortex-M: IPSR.
 *                  RISC-V: the trap's mcause in 16 bits (bit 15 = interrupt, the cause code
 *                  below it: 0x8007 the machine timer), set by the trap entry (riscv/trap.S).
 *   rp_cycles()    the events' free-running cycle counter (RACKPROF_CYCLE_COUNTER=1): DWT
 *                  CYCCNT; RISC-V mcycle (under QEMU -icount: virtual nanoseconds).
 *   rp_sampler_start()  the periodic sampler interrupt at RACKPROF_SAMPLE_HZ. Cortex-M: SysTick
 *                  (runtime.c); RISC-V: the CLINT's mtimecmp (riscv/arch.c).
 *   RP_ARCH_CODE   the HELLO's architecture byte, from the compiler's target macros; a port
 *                  for another core may define it first (0 = unknown). */
#ifndef RACKPROF_ARCH_H
#define RACKPROF_ARCH_H

#include <stdint.h>

#include "atomic_word.h"

#if defined(__riscv)

extern volatile uint32_t rp_trap_context; /* riscv/trap.S: 0 outside a trap */

static inline uint32_t rp_handler(void) {
    return rp_trap_context;
}
static inline uint32_t rp_cycles(void) {
    uint32_t cycles;
    __asm volatile("csrr %0, mcycle" : "=r"(cycles));
    return cycles;
}

#else

#include "cm_regs.h"

static inline uint32_t rp_handler(void) {
    uint32_t ipsr;
    __asm volatile("mrs %0, ipsr" : "=r"(ipsr));
    return ipsr;
}
static inline uint32_t rp_cycles(void) {
    return DWT_CYCCNT;
}

#endif

void rp_sampler_start(void);
/* The sampler interrupt's work (runtime.c), given the interrupted code's PC. */
void rp_sample(uint32_t pc);

#ifndef RP_ARCH_CODE
#if defined(__ARM_ARCH_6M__)
#define RP_ARCH_CODE 0x01u
#elif defined(__ARM_ARCH_7M__)
#define RP_ARCH_CODE 0x02u
#elif defined(__ARM_ARCH_7EM__)
#define RP_ARCH_CODE 0x03u
#elif defined(__ARM_ARCH_8M_BASE__)
#define RP_ARCH_CODE 0x04u
#elif defined(__ARM_ARCH_8M_MAIN__)
#define RP_ARCH_CODE 0x05u
#elif defined(__riscv) && __riscv_xlen == 32 && defined(__riscv_atomic)
#define RP_ARCH_CODE 0x11u /* rv32imac */
#elif defined(__riscv) && __riscv_xlen == 32
#define RP_ARCH_CODE 0x10u /* rv32imc */
#else
#define RP_ARCH_CODE 0x00u
#endif
#endif

#endif
