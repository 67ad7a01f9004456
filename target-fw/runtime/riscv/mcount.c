/* _mcount: gcc's -pg hook on RISC-V. After the prologue every instrumented function does
 *     mv   a0, ra        # the return address into its caller: "from"
 *     call _mcount       # ra = where the callee continues: "self"
 * and gcc treats it as an ordinary call (the callee's arguments are already in saved
 * registers), so the hook is plain C, built without -pg. rp_wire_arc masks interrupts
 * (mstatus.MIE) around the arc cache's update; while profiling is off nothing is recorded. */
#include <stdint.h>

#include "../wire.h"

void _mcount(uintptr_t from);

void _mcount(uintptr_t from) {
    if (!rackprof_on) return;
    rp_wire_arc((uint32_t)from, (uint32_t)(uintptr_t)__builtin_return_address(0));
}
