/* Build-time options of the runtime (pass -DNAME=value to change them). */
#ifndef RACKPROF_CONFIG_H
#define RACKPROF_CONFIG_H

/* Wire mode: 0 = compat (the thesis' legacy format), 1 = framed protocol v1. */
#ifndef RACKPROF_FRAMED
#define RACKPROF_FRAMED 0
#endif

/* Bytes per address on the wire: 3 (flash below 16 MiB) or 4. */
#ifndef RACKPROF_ADDR_BYTES
#define RACKPROF_ADDR_BYTES 3
#endif

/* PC samples per second (SysTick rate). */
#ifndef RACKPROF_SAMPLE_HZ
#define RACKPROF_SAMPLE_HZ 1000
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
#if RACKPROF_FRAME_BODY > 254 || RACKPROF_FRAME_BODY < 48
#error "RACKPROF_FRAME_BODY must be 48..254 (a HELLO needs 45)"
#endif

#endif
