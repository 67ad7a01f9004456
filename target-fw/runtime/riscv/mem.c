/* memcpy and memset: a freestanding gcc may call them for any struct copy or clearing, and on
 * RISC-V at -Os it does (the arc cache's 12-byte entries); there is no libc to provide them.
 * Word copies when everything is aligned (the runtime's structs are). Built without the loop
 * idiom pass, which would turn these loops back into calls to themselves. */
#include <stddef.h>
#include <stdint.h>

typedef uint32_t __attribute__((may_alias)) word_t;

#define NO_LIBCALLS __attribute__((optimize("no-tree-loop-distribute-patterns")))

NO_LIBCALLS void* memcpy(void* restrict dst, const void* restrict src, size_t n) {
    uint8_t* d = dst;
    const uint8_t* s = src;
    if ((((uintptr_t)d | (uintptr_t)s | n) & 3u) == 0) {
        for (; n; n -= 4, d += 4, s += 4) *(word_t*)d = *(const word_t*)s;
        return dst;
    }
    while (n--) *d++ = *s++;
    return dst;
}

NO_LIBCALLS void* memset(void* dst, int value, size_t n) {
    uint8_t* d = dst;
    while (n--) *d++ = (uint8_t)value;
    return dst;
}
