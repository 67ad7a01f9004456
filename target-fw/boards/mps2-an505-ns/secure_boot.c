/* The Secure boot of the mps2-an505-ns board: the only code that runs Secure. It makes the
 * Non-secure image's memory, UART0, TIMER0 and every interrupt Non-secure, then enters the
 * Non-secure reset handler with BXNS. It lives in the first 64 KiB of SSRAM1 (Secure alias
 * 0x10000000, QEMU's initial Secure VTOR) in sections of its own (memory.ld), so it never
 * calls into the Non-secure image. Register facts from QEMU 7.2: hw/misc/iotkit-secctl.c (the
 * Secure privilege control block), hw/misc/tz-mpc.c (MPC registers, block size = BLK_CFG),
 * hw/arm/mps2-tz.c (MPC addresses, APB PPC EXP1 port 5 = UART0), hw/arm/armsse.c (APB PPC0
 * port 0 = TIMER0, the control block at 0x50080000, the IDAU's NSC from NSCCFG). Built
 * without -pg, with -mcmse: rackprof_secure_work is a Secure service the Non-secure side calls
 * through its SG veneer (ld puts it in .gnu.sgstubs, memory.ld places that in SFLASH). */
#include <arm_cmse.h>
#include <stdint.h>

#include "secure_service.h"

#define SECURE __attribute__((section(".secure.text")))
#define REG(addr) (*(volatile uint32_t*)(addr))

extern uint32_t __text_start[]; /* the Non-secure vector table (sections.ld) */
extern uint32_t __secure_stack_top[], __secure_region_size[];

/* IoTKit Secure privilege control block: a 1 in an NS register makes that PPC port
 * Non-secure. */
#define SECCTL 0x50080000u
#define NSCCFG (SECCTL + 0x14u)       /* bit 0 CODENSC: the IDAU calls 0x1xxxxxxx NSC, not Secure */
#define APBNSPPC0 (SECCTL + 0x70u)    /* IoTKit APB PPC0: port 0 TIMER0 (0x40000000) */
#define APBNSPPCEXP1 (SECCTL + 0x84u) /* the FPGA's APB PPC EXP1: port 5 UART0 (0x40200000) */
#define PPC0_TIMER0 (1u << 0)
#define PPCEXP1_UART0 (1u << 5)

/* Memory Protection Controllers of SSRAM1 (code) and SSRAM2 (data); a 1 in the look-up table
 * makes that block Non-secure (only NS transactions pass), a 0 Secure. */
#define MPC_SSRAM1 0x58007000u
#define MPC_SSRAM2 0x58008000u
#define MPC_BLK_MAX 0x10u
#define MPC_BLK_CFG 0x14u
#define MPC_BLK_IDX 0x18u
#define MPC_BLK_LUT 0x1Cu

#define SAU_CTRL 0xE000EDD0u
#define SAU_CTRL_ALLNS 2u /* SAU off: the IDAU alone decides (address bit 28: Secure) */
#define NVIC_ITNS(n) (0xE000E380u + 4u * (n))
#define VTOR_NS 0xE002ED08u /* the Non-secure SCB through its Secure-side alias */

SECURE static void secure_exit(int code) {
    uint32_t block[2] = {0x20026u, (uint32_t)code};
    register uint32_t op __asm("r0") = 0x20u;
    register uint32_t* arg __asm("r1") = block;
    __asm volatile("bkpt 0xab" : : "r"(op), "r"(arg) : "memory");
    for (;;) {
    }
}

/* Blocks from byte offset ns_from on Non-secure, those below it Secure. */
SECURE static void mpc_ns_from(uint32_t mpc, uint32_t ns_from) {
    uint32_t block = 32u << REG(mpc + MPC_BLK_CFG);
    uint32_t words = REG(mpc + MPC_BLK_MAX) + 1u;
    for (uint32_t w = 0; w < words; w++) {
        uint32_t lut = 0;
        for (uint32_t i = 0; i < 32u; i++) {
            if ((w * 32u + i) * block >= ns_from) lut |= 1u << i;
        }
        REG(mpc + MPC_BLK_IDX) = w;
        REG(mpc + MPC_BLK_LUT) = lut;
    }
}

/* The Secure service: `rounds` turns of a register-only loop (Secure code must not touch the
 * Non-secure RAM: the MPC lets only Non-secure transactions through it). */
__attribute__((cmse_nonsecure_entry, noinline)) SECURE uint32_t
rackprof_secure_work(uint32_t rounds) {
    uint32_t acc = 0;
    for (uint32_t i = 0; i < rounds; i++) {
        acc += i;
        __asm volatile("" : "+r"(acc));
    }
    return acc;
}

SECURE static void secure_fault(void) {
    secure_exit(0x7E);
}

SECURE static void secure_reset(void) {
    mpc_ns_from(MPC_SSRAM1, (uint32_t)__secure_region_size);
    mpc_ns_from(MPC_SSRAM2, 0);
    REG(APBNSPPC0) = PPC0_TIMER0;
    REG(APBNSPPCEXP1) = PPCEXP1_UART0;
    REG(SAU_CTRL) = SAU_CTRL_ALLNS;
    REG(NSCCFG) = 1u; /* the SG veneers in 0x1xxxxxxx are Non-secure callable */
    for (uint32_t n = 0; n < 4u; n++) REG(NVIC_ITNS(n)) = 0xFFFFFFFFu; /* every IRQ to NS */
    REG(VTOR_NS) = (uint32_t)__text_start;
    __asm volatile("dsb\n\tisb" ::: "memory");
    uint32_t ns_msp = __text_start[0];
    uint32_t ns_reset = __text_start[1] & ~1u; /* bit 0 clear: BXNS goes Non-secure */
    __asm volatile("msr msp_ns, %0\n\tbxns %1" : : "r"(ns_msp), "r"(ns_reset) : "memory");
    secure_exit(0x7D);
}

__attribute__((section(".secure.vectors"), used)) static void (*const secure_vectors[16])(void) = {
    (void (*)(void))__secure_stack_top,
    secure_reset,
    secure_fault,
    secure_fault, /* HardFault: every Secure fault escalates here */
    secure_fault,
    secure_fault,
    secure_fault,
    secure_fault, /* SecureFault */
    0,
    0,
    0,
    secure_fault,
    secure_fault,
    0,
    secure_fault,
    secure_fault,
};
