/* Read-modify-write of one 32-bit word that nested producers (thread code, then a handler that
 * preempts it, then a higher-priority handler...) cannot tear.
 *   ARMv7-M, ARMv8-M (Mainline and Baseline): LDREX/STREX. Exception entry and return clear the
 *            local monitor, so an update that was interrupted fails its STREX and is retried:
 *            nothing is ever masked.
 *   ARMv6-M: no exclusives; PRIMASK is set for the few instructions between load and store.
 *   RISC-V (machine mode): mstatus.MIE is cleared for those few instructions, as on ARMv6-M, so
 *            RV32IMC (no A extension, no LR/SC) works the same as RV32IMAC. */
#ifndef RACKPROF_ATOMIC_WORD_H
#define RACKPROF_ATOMIC_WORD_H

#include <stdint.h>

/* Interrupts masked and restored: also used where a short critical section is the simplest
 * correct answer on every architecture (the arc cache). Cortex-M: PRIMASK; RISC-V: mstatus.MIE
 * (csrrci clears it and returns the old mstatus; restore sets MIE again only if it was set). */
#if defined(__riscv)
#define RP_MSTATUS_MIE 0x8u
static inline uint32_t rp_irq_save(void) {
    uint32_t mstatus;
    __asm volatile("csrrci %0, mstatus, 8" : "=r"(mstatus)::"memory");
    return mstatus;
}
static inline void rp_irq_restore(uint32_t mstatus) {
    __asm volatile("csrs mstatus, %0" ::"r"(mstatus & RP_MSTATUS_MIE) : "memory");
}
#else
static inline uint32_t rp_irq_save(void) {
    uint32_t primask;
    __asm volatile("mrs %0, primask\n\tcpsid i" : "=r"(primask)::"memory");
    return primask;
}
static inline void rp_irq_restore(uint32_t primask) {
    __asm volatile("msr primask, %0" ::"r"(primask) : "memory");
}
#endif

#if defined(RACKPROF_HOST_TEST)

/* The host's unit test (ring_host_test.cc). A compare-and-swap stands in for LDREX/STREX: the
 * store fails when the word changed since the load, the guarantee the ring builds on. Each
 * rp_host_preempt() call is a point where an interrupt may come; the test nests producers and
 * the consumer there. */
void rp_host_preempt(void);

static inline uint32_t rp_word_begin(volatile uint32_t* word, uint32_t* key) {
    rp_host_preempt();
    *key = __atomic_load_n(word, __ATOMIC_SEQ_CST);
    rp_host_preempt();
    return *key;
}
static inline int rp_word_commit(volatile uint32_t* word, uint32_t value, uint32_t key) {
    rp_host_preempt();
    int stored =
        __atomic_compare_exchange_n(word, &key, value, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    rp_host_preempt();
    return stored;
}

#elif defined(__ARM_ARCH_6M__) || defined(__riscv)

static inline uint32_t rp_word_begin(volatile uint32_t* word, uint32_t* key) {
    *key = rp_irq_save();
    return *word;
}
static inline int rp_word_commit(volatile uint32_t* word, uint32_t value, uint32_t key) {
    *word = value;
    rp_irq_restore(key);
    return 1;
}

#else

static inline uint32_t rp_word_begin(volatile uint32_t* word, uint32_t* key) {
    uint32_t value;
    (void)key;
    __asm volatile("ldrex %0, [%1]" : "=r"(value) : "r"(word) : "memory");
    return value;
}
static inline int rp_word_commit(volatile uint32_t* word, uint32_t value, uint32_t key) {
    uint32_t failed;
    (void)key;
    __asm volatile("strex %0, %2, [%1]" : "=&r"(failed) : "r"(word), "r"(value) : "memory");
    return failed == 0;
}
#endif

/* *word += delta, atomically. */
static inline void rp_word_add(volatile uint32_t* word, uint32_t delta) {
    uint32_t key;
    uint32_t value;
    do {
        value = rp_word_begin(word, &key);
    } while (!rp_word_commit(word, value + delta, key));
}

#endif
