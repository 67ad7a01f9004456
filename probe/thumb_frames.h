// Where a Thumb function's frame is when it has no call-frame information: the compiler's own
// prologue (and epilogue) read back, as GDB's ARM prologue analyzer does, decoded by capstone.
// The prologue's pushes and stack adjustments say how far below the frame's CFA (the sp at the
// function's entry) sp is and where each saved register is; at an epilogue the instructions
// still to run say the same. StackUnwinder steps with it where libdwfl has no CFI to step with.
//
// What the compilers for Cortex-M emit is understood: push/push.w/stmdb sp!, vpush, str
// rN, [sp, #-4]!, sub sp (16- and 32-bit, subw), add r7, sp / mov r7, sp (a frame pointer), and
// at the end add sp, vpop, pop, ldmia sp!, bx lr. Anything else that writes sp in a prologue
// makes the frame unknown rather than guessed.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace rackprof::probe {

struct ThumbFrame {
    // sp at the analysed pc is this many bytes below the CFA.
    std::uint32_t sp_depth = 0;
    // Per register r0..r15: where it is saved, as bytes below the CFA; 0 where it is not (its
    // value is still in the register). r15's slot is the return address of a pop {..., pc}.
    std::array<std::uint32_t, 16> saved{};
    // r7 was made a frame pointer: CFA = r7 + fp_to_cfa (exact even where sp then moves).
    bool frame_pointer = false;
    std::uint32_t fp_to_cfa = 0;
    // Read from the code still to run (an epilogue, or straight-line code up to one), which
    // frees the frame: no frame pointer is needed then.
    bool read_ahead = false;
    // The register holding the return address: 14 (lr) or 15 (saved[15], an epilogue's pop).
    int return_register = 14;
};

// The frame of the function whose code is `code` (loaded at `function`, Thumb bit clear) at
// `pc` inside it. `innermost`: pc is the sampled one, so it may be in the prologue or in an
// epilogue; otherwise pc is a return address (the prologue has run, no epilogue started).
// nullopt where the code does something to sp that is not understood.
std::optional<ThumbFrame> analyze_thumb_frame(std::span<const std::uint8_t> code,
                                              std::uint64_t function, std::uint64_t pc,
                                              bool innermost);

}  // namespace rackprof::probe
