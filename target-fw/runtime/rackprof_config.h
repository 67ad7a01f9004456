/* Build-time options of the runtime (pass -DNAME=value to change them). */
#ifndef RACKPROF_CONFIG_H
#define RACKPROF_CONFIG_H

/* Wire mode: 0 = compat (the thesis' legacy format), 1 = framed protocol v1. */
#ifndef RACKPROF_FRAMED
#define RACKPROF_FRAMED 0
#endif

/* Transport of the framed bytes (ARMv7-M only, needs RACKPROF_FRAMED = 1; itm.c):
 *   0: the board's UART carries the wire format itself (compat or framed);
 *   RACKPROF_ITM_REGS (1): ITM stimulus-port writes, PC samples by the DWT in hardware, the
 *      TPIU/SWO pin left to the debugger; runs on real hardware only (QEMU has no ITM/DWT);
 *   RACKPROF_ITM_OVER_UART (2): the same ITM/DWT packet bytes built in software and sent
 *      through the board's UART (QEMU; a USB-serial adapter on an SWO pin in NRZ mode). */
#define RACKPROF_ITM_REGS 1
#define RACKPROF_ITM_OVER_UART 2
#ifndef RACKPROF_ITM
#define RACKPROF_ITM 0
#endif
/* ITM stimulus ports: framed-protocol bytes, and console text (rackprof_puts). */
#ifndef RACKPROF_ITM_PORT
#define RACKPROF_ITM_PORT 1
#endif
#ifndef RACKPROF_CONSOLE_PORT
#define RACKPROF_CONSOLE_PORT 0
#endif

/* Framed mode: enter/exit events with a 32-bit cycle stamp from -finstrument-functions'
 * __cyg_profile_func_enter/exit (events.c; protocol version 2). Build the application with
 * -finstrument-functions instead of -pg: each entry is also its call's arc on the host. */
#ifndef RACKPROF_EVENTS
#define RACKPROF_EVENTS 0
#endif
/* Framed mode: counter campaigns (counters.c; protocol version 3): the host's COUNTER_CONFIG
 * frames arm per-function counting of the DWT's counters in the -finstrument-functions hooks
 * for RACKPROF_COUNTER_SLOTS functions a run. ARMv7-M only; excludes RACKPROF_EVENTS. */
#ifndef RACKPROF_COUNTERS
#define RACKPROF_COUNTERS 0
#endif
#ifndef RACKPROF_COUNTER_SLOTS
#define RACKPROF_COUNTER_SLOTS 8
#endif
#if RACKPROF_COUNTERS && (RACKPROF_EVENTS || !RACKPROF_FRAMED || RACKPROF_ITM)
#error "RACKPROF_COUNTERS needs the framed protocol on the UART, without RACKPROF_EVENTS"
#endif
/* Framed mode: task items (protocol version 5, docs/rtos.md): rackprof_task_switched_in() and
 * rackprof_task_deleted() queue TASK_SWITCH and TASK_DELETED, stamped like ENTER/EXIT, and the
 * HELLO says version 5 with flags bit 6. 0 (default): the two calls compile to nothing and
 * the wire is that of a build without them, byte for byte. */
#ifndef RACKPROF_TASKS
#define RACKPROF_TASKS 0
#endif
/* Tasks whose name has been sent and not since deleted: a TASK_SWITCH names a task the first
 * time only. With more live tasks than this, the extra ones are named at every switch (more
 * bytes, nothing lost). */
#ifndef RACKPROF_MAX_TASKS
#define RACKPROF_MAX_TASKS 8
#endif
/* The events' clock: 0 = SysTick's current value extended by a count of its wraps (any
 * Cortex-M; exact and deterministic under QEMU -icount, which has no DWT); 1 = a free-running
 * hardware cycle counter: DWT CYCCNT (ARMv7-M hardware with a DWT; QEMU has none), on RISC-V
 * mcycle (always; QEMU -icount counts virtual nanoseconds in it). */
#ifndef RACKPROF_CYCLE_COUNTER
#if defined(__riscv)
#define RACKPROF_CYCLE_COUNTER 1
#else
#define RACKPROF_CYCLE_COUNTER 0
#endif
#endif

/* ARMv8-M with the Security Extension: 1 = this firmware runs Non-secure (behind a Secure
 * boot), so the PC sampler reads its own MSP/PSP, never the _NS banks only Secure code can
 * name, and a tick that interrupted Secure code (a call through an SG veneer) is sent as a
 * sample of rackprof_in_secure (pc_sampler.S). 0 = it runs Secure, as QEMU boots an ELF. */
#ifndef RACKPROF_NONSECURE
#define RACKPROF_NONSECURE 0
#endif

/* Bytes per address on the wire: 3 (flash below 16 MiB) or 4 (RISC-V's default: its boards'
 * code and RAM lie far above 16 MiB). */
#ifndef RACKPROF_ADDR_BYTES
#if defined(__riscv)
#define RACKPROF_ADDR_BYTES 4
#else
#define RACKPROF_ADDR_BYTES 3
#endif
#endif

/* PC samples per second (SysTick rate). */
#ifndef RACKPROF_SAMPLE_HZ
#define RACKPROF_SAMPLE_HZ 1000
#endif

/* Sampling-period dither: 0 (default) off; N, a power of two below the SysTick reload: each
 * tick sets the next reload to the period plus a pseudo-random -N..N-1 core cycles (a 16-bit
 * Galois LFSR; a mask, no division, so Cortex-M0 pays a few cycles). A program whose own loop
 * lasts a multiple of the sampling period is otherwise sampled at the same phase, the same few
 * PCs, every time: the histogram is biased however long it runs. The host's
 * `rackprof check-sync FIXED DITHERED` compares a run without and one with dither and flags it. */
#ifndef RACKPROF_SAMPLE_DITHER
#define RACKPROF_SAMPLE_DITHER 0
#endif

/* Tests only: the stack the PC sampler reads the stacked PC from. 0 (default): the one
 * EXC_RETURN names (MSP or PSP); 1: always MSP; 2: always PSP. 1 and 2 are wrong by design:
 * the e2e test runs the psp example with them to show that its check of where the samples
 * land catches a sampler that reads the wrong stack. */
#ifndef RACKPROF_SAMPLER_STACK
#define RACKPROF_SAMPLER_STACK 0
#endif

/* RISC-V (machine mode): the CLINT, SiFive's layout (hart 0's mtimecmp at +0x4000, mtime at
 * +0xBFF8), and mtime's rate, the sampler's clock. Defaults: QEMU 7.2's virt and sifive_e,
 * whose CLINT ticks at 10 MHz on both (QEMU 8.0 and later, like the FE310's real RTC, give
 * sifive_e 32768 Hz: build for it with -DRACKPROF_MTIME_HZ=32768 and a rate that divides it,
 * e.g. -DRACKPROF_SAMPLE_HZ=1024). */
#ifndef RACKPROF_CLINT_BASE
#define RACKPROF_CLINT_BASE 0x02000000u
#endif
#ifndef RACKPROF_MTIME_HZ
#define RACKPROF_MTIME_HZ 10000000u
#endif

/* Transmit queue size in bytes: a power of two from 16 to 128 (8-bit free-running indices). */
#ifndef RACKPROF_RING_BYTES
#if RACKPROF_FRAMED
#define RACKPROF_RING_BYTES 128
#else
#define RACKPROF_RING_BYTES 32
#endif
#endif

/* 1: when the queue is full, thread-mode producers wait for the UART (the thesis' behaviour;
 * it perturbs timing). 0 (default): the record is dropped and counted. Handlers never wait. */
#ifndef RACKPROF_BLOCKING
#define RACKPROF_BLOCKING 0
#endif

/* Framed mode: entries of the arc cache (two-way sets) and of the PC-sample cache (direct
 * mapped); powers of two. */
#ifndef RACKPROF_ARC_CACHE
#define RACKPROF_ARC_CACHE 32
#endif
#ifndef RACKPROF_PC_CACHE
#define RACKPROF_PC_CACHE 16
#endif

/* Framed mode: largest frame body (seq + items + crc), at most 254. */
#ifndef RACKPROF_FRAME_BODY
#define RACKPROF_FRAME_BODY 64
#endif

#if RACKPROF_SAMPLE_DITHER < 0 || (RACKPROF_SAMPLE_DITHER & (RACKPROF_SAMPLE_DITHER - 1))
#error "RACKPROF_SAMPLE_DITHER must be 0 or a power of two"
#endif
#if (RACKPROF_RING_BYTES & (RACKPROF_RING_BYTES - 1)) || RACKPROF_RING_BYTES < 16 || \
    RACKPROF_RING_BYTES > 128
#error "RACKPROF_RING_BYTES must be a power of two from 16 to 128"
#endif
#if RACKPROF_ADDR_BYTES != 3 && RACKPROF_ADDR_BYTES != 4
#error "RACKPROF_ADDR_BYTES must be 3 or 4"
#endif
#if (RACKPROF_ARC_CACHE & (RACKPROF_ARC_CACHE - 1)) || RACKPROF_ARC_CACHE < 2 || \
    (RACKPROF_PC_CACHE & (RACKPROF_PC_CACHE - 1)) || RACKPROF_PC_CACHE < 1
#error "RACKPROF_ARC_CACHE (>= 2) and RACKPROF_PC_CACHE must be powers of two"
#endif
#if RACKPROF_FRAME_BODY > 254 || RACKPROF_FRAME_BODY < 49
#error "RACKPROF_FRAME_BODY must be 49..254 (a HELLO frame needs 46, 49 with COUNTERS)"
#endif
#if RACKPROF_ITM && !RACKPROF_FRAMED
#error "RACKPROF_ITM carries the framed protocol: set RACKPROF_FRAMED=1"
#endif
#if RACKPROF_EVENTS && !RACKPROF_FRAMED
#error "RACKPROF_EVENTS needs the framed protocol: set RACKPROF_FRAMED=1"
#endif
#if RACKPROF_TASKS && !RACKPROF_FRAMED
#error "RACKPROF_TASKS needs the framed protocol: set RACKPROF_FRAMED=1"
#endif
#if RACKPROF_TASKS && RACKPROF_MAX_TASKS < 1
#error "RACKPROF_MAX_TASKS must be at least 1"
#endif
#if RACKPROF_CYCLE_COUNTER && (defined(__ARM_ARCH_6M__) || defined(__ARM_ARCH_8M_BASE__))
#error "RACKPROF_CYCLE_COUNTER: ARMv6-M and ARMv8-M Baseline have no DWT cycle counter"
#endif
#if RACKPROF_ITM && (defined(__ARM_ARCH_6M__) || defined(__ARM_ARCH_8M_BASE__))
#error "RACKPROF_ITM: ARMv6-M and ARMv8-M Baseline have no ITM or DWT PC sampling"
#endif
#if defined(__riscv)
#if RACKPROF_MTIME_HZ % RACKPROF_SAMPLE_HZ
#error "RACKPROF_SAMPLE_HZ must divide RACKPROF_MTIME_HZ (the HELLO states the rate exactly)"
#endif
#if RACKPROF_ITM || RACKPROF_COUNTERS || !RACKPROF_FRAMED || !RACKPROF_CYCLE_COUNTER
#error "RISC-V: the framed protocol on the UART only (no ITM, DWT counters or compat wire)"
#endif
#if RACKPROF_SAMPLE_DITHER
#error "RACKPROF_SAMPLE_DITHER jitters SysTick's reload: not implemented for the CLINT yet"
#endif
#if RACKPROF_ADDR_BYTES != 4
#error "RISC-V: RACKPROF_ADDR_BYTES=4 (code and RAM lie above 16 MiB)"
#endif
#endif
#if RACKPROF_ITM_PORT > 31 || RACKPROF_CONSOLE_PORT > 31 || \
    RACKPROF_ITM_PORT == RACKPROF_CONSOLE_PORT
#error "RACKPROF_ITM_PORT and RACKPROF_CONSOLE_PORT: two different ports of 0..31"
#endif

#endif
