/* A blinky-like loop: toggle an LED, wait 10 ms in a layered busy-wait, as the thesis' blinky
 * does (a wait per millisecond calling a wait per cycle batch). BLINKS toggles, IDLE_SLEEPS
 * waits for an interrupt in WFI, then exit 0 (3 if
 * records were dropped). Most of the traffic is the same few arcs and PCs again and again. */
#include <stdint.h>

#include "runtime/rackprof.h"

#define BLINKS 100u
#define WAIT_MS 10u
#define SPINS_PER_US 2u
#define IDLE_SLEEPS 10u

static volatile uint32_t led;
static volatile uint32_t spin;

__attribute__((noipa)) void led_set(uint32_t on) {
    led = on;
}

__attribute__((noipa)) void led_toggle(void) {
    led_set(!led);
}

__attribute__((noipa)) void wait_us(uint32_t us) {
    for (spin = 0; spin < us * SPINS_PER_US; spin++) {
    }
}

__attribute__((noipa)) void wait_ms(uint32_t ms) {
    for (uint32_t i = 0; i < ms; i++) wait_us(1000);
}

int main(void) {
    rackprof_init();
    rackprof_start();
    for (uint32_t i = 0; i < BLINKS; i++) {
        led_toggle();
        wait_ms(WAIT_MS);
    }
    /* Idle at the end, as a real blinky would: the samples that interrupt WFI are sleep
     * samples in ITM builds. */
    for (uint32_t i = 0; i < IDLE_SLEEPS; i++) __asm volatile("wfi");
    rackprof_stop();
    rackprof_puts("blinky: done\n"); /* console text: ITM builds send it on port 0 */
    rackprof_flush();
    return rackprof_dropped() == 0 ? 0 : 3;
}
