/* The Cortex-M system registers the runtime touches, in one place: SysTick, the SCB, the debug
 * monitor control, the DWT and the ITM. Names as the ARMv7-M ARM (DDI 0403E) spells them, the
 * field names as CMSIS does (without its _Msk); CMSIS's register name is noted where it
 * differs. Plain macros rather than CMSIS's structs: no CMSIS headers on the build path, and
 * every access stays a load or store at a constant address. ARMv8-M Mainline keeps these
 * addresses and fields (from Secure state they are the Secure instances; SysTick_NS is at
 * 0xE002E010, the Non-secure alias of the SCS). */
#ifndef RACKPROF_CM_REGS_H
#define RACKPROF_CM_REGS_H

#include <stdint.h>

#define CM_REG32(addr) (*(volatile uint32_t*)(addr))

/* SysTick (B3.3; every core). */
#define SYST_CSR CM_REG32(0xE000E010u) /* CMSIS: SysTick->CTRL */
#define SYST_RVR CM_REG32(0xE000E014u) /* SysTick->LOAD */
#define SYST_CVR CM_REG32(0xE000E018u) /* SysTick->VAL */
#define SYST_CSR_ENABLE (1u << 0)
#define SYST_CSR_TICKINT (1u << 1)
#define SYST_CSR_CLKSOURCE (1u << 2) /* the core clock, not the external reference */

/* System control block (B3.2; every core). */
#define SCB_ICSR CM_REG32(0xE000ED04u)
#define SCB_SHPR3 CM_REG32(0xE000ED20u) /* SysTick [31:24] and PendSV [23:16] priorities */
#define SCB_ICSR_PENDSVSET (1u << 28)

/* Debug exception and monitor control (C1.6.5; ARMv7-M). */
#define DEMCR CM_REG32(0xE000EDFCu) /* CMSIS: CoreDebug->DEMCR */
#define DEMCR_TRCENA (1u << 24)     /* powers the DWT and the ITM */

/* Data watchpoint and trace unit (C1.8; ARMv7-M). CYCCNT is followed by CPICNT, EXCCNT,
 * SLEEPCNT, LSUCNT and FOLDCNT, one word each. */
#define DWT_CTRL CM_REG32(0xE0001000u)
#define DWT_CYCCNT CM_REG32(0xE0001004u)
#define DWT_CTRL_CYCCNTENA (1u << 0)
#define DWT_CTRL_POSTPRESET(n) ((uint32_t)(n) << 1) /* [4:1] reload of POSTCNT */
#define DWT_CTRL_POSTINIT(n) ((uint32_t)(n) << 5)   /* [8:5] its first value */
#define DWT_CTRL_CYCTAP (1u << 9)                   /* POSTCNT counts at CYCCNT[10], not [6] */
#define DWT_CTRL_SYNCTAP(n) ((uint32_t)(n) << 10)   /* [11:10] sync packets: 1 = CYCCNT[24] */
#define DWT_CTRL_PCSAMPLENA (1u << 12)              /* a PC sample each time POSTCNT wraps */
#define DWT_CTRL_CPIEVTENA (1u << 17)
#define DWT_CTRL_EXCEVTENA (1u << 18)
#define DWT_CTRL_SLEEPEVTENA (1u << 19)
#define DWT_CTRL_LSUEVTENA (1u << 20)
#define DWT_CTRL_FOLDEVTENA (1u << 21)

/* Instrumentation trace macrocell (C1.7; ARMv7-M). A stimulus port takes 8-, 16- or 32-bit
 * writes (CMSIS: ITM->PORT[n].u8, .u16, .u32); read, bit 0 says it can take one. */
#define ITM_STIM(port) CM_REG32(0xE0000000u + 4u * (port))
#define ITM_STIM16(port) (*(volatile uint16_t*)(0xE0000000u + 4u * (port)))
#define ITM_STIM8(port) (*(volatile uint8_t*)(0xE0000000u + 4u * (port)))
#define ITM_TER CM_REG32(0xE0000E00u)
#define ITM_TCR CM_REG32(0xE0000E80u)
#define ITM_LAR CM_REG32(0xE0000FB0u) /* CoreSight lock access (locked on some cores) */
#define ITM_LAR_UNLOCK 0xC5ACCE55u    /* its key */
#define ITM_TCR_ITMENA (1u << 0)
#define ITM_TCR_TSENA (1u << 1)   /* local timestamps */
#define ITM_TCR_SYNCENA (1u << 2) /* sync packets, at DWT_CTRL.SYNCTAP's rate */
#define ITM_TCR_DWTENA (1u << 3)  /* DWT packets (PC samples) forwarded; CMSIS: TXENA */
#define ITM_TCR_TRACEBUSID(id) ((uint32_t)(id) << 16) /* [22:16]: the TPIU stream's ID */
#define ITM_TCR_BUSY (1u << 23)

#endif
