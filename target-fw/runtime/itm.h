/* The ITM transport (itm.c), used by runtime.c when RACKPROF_ITM is set. */
#ifndef RACKPROF_ITM_H
#define RACKPROF_ITM_H

#include <stdint.h>

/* Registers: DEMCR.TRCENA, ITM_TCR/TER, DWT_CTRL's PC sampler (not yet on), PendSV priority.
 * Over UART: the board's UART. */
void rp_itm_init(void);

/* RACKPROF_ITM_REGS: DWT PC sampling on or off; pends the consumer (PendSV). */
void rp_itm_sampling(int on);
void rp_itm_kick(void);
/* RACKPROF_ITM_REGS: the DWT's real sampling rate (its period is a multiple of 1024 cycles). */
uint32_t rp_itm_sample_hz(void);

/* RACKPROF_ITM_OVER_UART: queues a PC sample (SysTick); the UART handler's byte source. */
void rp_itm_pc(uint32_t pc);
int rp_itm_peek(void);
void rp_itm_advance(void);
int rp_itm_idle(void);

#endif
