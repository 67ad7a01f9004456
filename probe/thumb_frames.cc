#include "probe/thumb_frames.h"

#include <capstone/capstone.h>

#include <memory>

namespace rackprof::probe {

namespace {

// Instructions a prologue can hold at most before the body: GCC's longest (push.w, vpush,
// sub.w, add r7) is four, scheduled among the body's first loads.
constexpr int kPrologueInstructions = 24;
constexpr int kEpilogueInstructions = 8;

// r0..r15 for capstone's register ids; -1 for any other (s/d registers, apsr, ...).
int core_register(unsigned reg) {
    if (reg >= ARM_REG_R0 && reg <= ARM_REG_R12) return static_cast<int>(reg - ARM_REG_R0);
    if (reg == ARM_REG_SP) return 13;
    if (reg == ARM_REG_LR) return 14;
    if (reg == ARM_REG_PC) return 15;
    return -1;
}

// Bytes of a vpush's or vpop's register list: d registers 8 each, s registers 4.
std::uint32_t vfp_bytes(const cs_arm& arm) {
    std::uint32_t bytes = 0;
    for (int i = 0; i < arm.op_count; ++i) {
        const unsigned reg = arm.operands[i].reg;
        bytes += reg >= ARM_REG_D0 && reg <= ARM_REG_D31 ? 8 : 4;
    }
    return bytes;
}

bool is_reg(const cs_arm_op& op, arm_reg reg) {
    return op.type == ARM_OP_REG && op.reg == static_cast<int>(reg);
}

// An immediate added to or taken from sp: "sub sp, #8", "sub sp, sp, #8" (any width).
std::optional<std::uint32_t> sp_immediate(const cs_arm& arm) {
    if (arm.op_count == 2 && is_reg(arm.operands[0], ARM_REG_SP) &&
        arm.operands[1].type == ARM_OP_IMM)
        return static_cast<std::uint32_t>(arm.operands[1].imm);
    if (arm.op_count == 3 && is_reg(arm.operands[0], ARM_REG_SP) &&
        is_reg(arm.operands[1], ARM_REG_SP) && arm.operands[2].type == ARM_OP_IMM)
        return static_cast<std::uint32_t>(arm.operands[2].imm);
    return std::nullopt;
}

// Whether the instruction writes `reg`: its first operand, or a writeback to it.
bool writes(const cs_insn& insn, arm_reg reg) {
    const cs_arm& arm = insn.detail->arm;
    if (arm.op_count > 0 && is_reg(arm.operands[0], reg)) return true;
    for (int i = 0; i < arm.op_count; ++i) {
        const cs_arm_op& op = arm.operands[i];
        if (arm.writeback && op.type == ARM_OP_MEM && op.mem.base == static_cast<unsigned>(reg))
            return true;
        if ((insn.id == ARM_INS_POP || insn.id == ARM_INS_LDM) && is_reg(op, reg)) return true;
    }
    return false;
}

bool ends_prologue(const cs_insn& insn) {
    switch (insn.id) {
        case ARM_INS_B:
        case ARM_INS_BL:
        case ARM_INS_BLX:
        case ARM_INS_BX:
        case ARM_INS_CBZ:
        case ARM_INS_CBNZ:
        case ARM_INS_POP:
        case ARM_INS_LDM:
        case ARM_INS_TBB:
        case ARM_INS_TBH:
            return true;
        default:
            return false;
    }
}

// A register list stored below sp (push, stmdb sp!): the lowest register lowest.
void push_registers(const cs_arm& arm, int first, ThumbFrame& frame) {
    const auto n = static_cast<std::uint32_t>(arm.op_count - first);
    frame.sp_depth += 4 * n;
    for (int i = first; i < arm.op_count; ++i) {
        const int r = core_register(arm.operands[i].reg);
        if (r >= 0) frame.saved[r] = frame.sp_depth - 4 * static_cast<std::uint32_t>(i - first);
    }
}

// One prologue instruction's effect on the frame; false for a write to sp not understood.
bool apply_prologue(const cs_insn& insn, ThumbFrame& frame) {
    const cs_arm& arm = insn.detail->arm;
    switch (insn.id) {
        case ARM_INS_PUSH:
            push_registers(arm, 0, frame);
            return true;
        case ARM_INS_STMDB:
            if (!is_reg(arm.operands[0], ARM_REG_SP) || !arm.writeback) break;
            push_registers(arm, 1, frame);
            return true;
        case ARM_INS_VPUSH:
            frame.sp_depth += vfp_bytes(arm);
            return true;
        case ARM_INS_STR:  // str rN, [sp, #-4]!
            if (arm.op_count == 2 && arm.writeback && arm.operands[1].type == ARM_OP_MEM &&
                arm.operands[1].mem.base == ARM_REG_SP && arm.operands[1].mem.disp < 0) {
                frame.sp_depth += static_cast<std::uint32_t>(-arm.operands[1].mem.disp);
                const int r = core_register(arm.operands[0].reg);
                if (r >= 0) frame.saved[r] = frame.sp_depth;
                return true;
            }
            break;
        case ARM_INS_SUB:
        case ARM_INS_SUBW:
            if (const auto imm = sp_immediate(arm)) {
                frame.sp_depth += *imm;
                return true;
            }
            break;
        case ARM_INS_ADD:
        case ARM_INS_ADDW:  // add r7, sp, #imm: a frame pointer
            if (arm.op_count == 3 && is_reg(arm.operands[0], ARM_REG_R7) &&
                is_reg(arm.operands[1], ARM_REG_SP) && arm.operands[2].type == ARM_OP_IMM) {
                frame.frame_pointer = true;
                frame.fp_to_cfa = frame.sp_depth - static_cast<std::uint32_t>(arm.operands[2].imm);
                return true;
            }
            break;
        case ARM_INS_MOV:  // mov r7, sp
            if (arm.op_count == 2 && is_reg(arm.operands[0], ARM_REG_R7) &&
                is_reg(arm.operands[1], ARM_REG_SP)) {
                frame.frame_pointer = true;
                frame.fp_to_cfa = frame.sp_depth;
                return true;
            }
            break;
        default:
            break;
    }
    return !writes(insn, ARM_REG_SP);
}

// The frame at `pc` read from the code still to run, where it runs straight to the return
// (no branch, no conditional instruction): the stack it frees on the way, the registers it
// reloads, then the return (pop {..., pc}, bx lr, or a tail call out of the function). This
// covers the epilogue, and body code just before it.
std::optional<ThumbFrame> ahead_of(csh cs, cs_insn* insn, std::span<const std::uint8_t> code,
                                   std::uint64_t function, std::uint64_t pc) {
    std::array<std::int64_t, 16> popped_at;  // bytes above the current sp; -1: not popped
    popped_at.fill(-1);
    std::uint32_t above = 0;  // bytes between the current sp and the next slot to free
    const std::uint8_t* bytes = code.data() + (pc - function);
    std::size_t size = code.size() - (pc - function);
    std::uint64_t address = pc;
    const auto inside = [&](std::int64_t target) {
        return target >= static_cast<std::int64_t>(function) &&
               target < static_cast<std::int64_t>(function + code.size());
    };
    for (int n = 0; n < kEpilogueInstructions && cs_disasm_iter(cs, &bytes, &size, &address, insn);
         ++n) {
        const cs_arm& arm = insn->detail->arm;
        if (arm.cc != ARM_CC_AL && arm.cc != ARM_CC_INVALID) return std::nullopt;
        bool returns = false;
        if (insn->id == ARM_INS_ADD || insn->id == ARM_INS_ADDW) {
            if (const auto imm = sp_immediate(arm)) {
                above += *imm;
            } else if (writes(*insn, ARM_REG_SP) || writes(*insn, ARM_REG_PC)) {
                return std::nullopt;
            }
        } else if (insn->id == ARM_INS_VPOP) {
            above += vfp_bytes(arm);
        } else if (insn->id == ARM_INS_POP ||
                   (insn->id == ARM_INS_LDM && is_reg(arm.operands[0], ARM_REG_SP) &&
                    arm.writeback)) {
            for (int i = insn->id == ARM_INS_POP ? 0 : 1; i < arm.op_count; ++i) {
                const int r = core_register(static_cast<unsigned>(arm.operands[i].reg));
                if (r < 0) return std::nullopt;
                popped_at[static_cast<std::size_t>(r)] = above;
                above += 4;
                returns = r == 15;
            }
        } else if (insn->id == ARM_INS_BX && arm.op_count == 1 &&
                   is_reg(arm.operands[0], ARM_REG_LR)) {
            returns = true;
        } else if (insn->id == ARM_INS_B && arm.op_count == 1 &&
                   arm.operands[0].type == ARM_OP_IMM && !inside(arm.operands[0].imm)) {
            returns = true;  // a tail call: the frame is gone, the callee returns for it
        } else if (ends_prologue(*insn) || insn->id == ARM_INS_IT || writes(*insn, ARM_REG_SP) ||
                   writes(*insn, ARM_REG_PC) || writes(*insn, ARM_REG_LR)) {
            return std::nullopt;  // a branch, or sp or the return address otherwise changed
        }
        if (!returns) continue;
        ThumbFrame frame;
        frame.sp_depth = above;
        for (std::size_t r = 0; r < popped_at.size(); ++r) {
            if (popped_at[r] >= 0)
                frame.saved[r] = above - static_cast<std::uint32_t>(popped_at[r]);
        }
        frame.read_ahead = true;
        frame.return_register = frame.saved[15] ? 15 : 14;
        return frame;
    }
    return std::nullopt;
}

struct Capstone {
    csh handle = 0;
    Capstone() {
        if (cs_open(CS_ARCH_ARM, static_cast<cs_mode>(CS_MODE_THUMB | CS_MODE_MCLASS), &handle) !=
            CS_ERR_OK)
            handle = 0;
        if (handle) cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON);
    }
    ~Capstone() {
        if (handle) cs_close(&handle);
    }
};

}  // namespace

std::optional<ThumbFrame> analyze_thumb_frame(std::span<const std::uint8_t> code,
                                              std::uint64_t function, std::uint64_t pc,
                                              bool innermost) {
    if (pc < function || pc - function >= code.size()) return std::nullopt;
    thread_local Capstone cs;
    if (!cs.handle) return std::nullopt;
    std::unique_ptr<cs_insn, void (*)(cs_insn*)> insn(cs_malloc(cs.handle),
                                                      [](cs_insn* i) { cs_free(i, 1); });
    if (innermost) {
        if (auto frame = ahead_of(cs.handle, insn.get(), code, function, pc)) return frame;
    }
    ThumbFrame frame;
    ThumbFrame before_lr_push;  // the frame before a lone push {lr}
    bool lone_lr_push = false;
    const std::uint8_t* bytes = code.data();
    std::size_t size = code.size();
    std::uint64_t address = function;
    for (int n = 0; n < kPrologueInstructions && address < pc &&
                    cs_disasm_iter(cs.handle, &bytes, &size, &address, insn.get());
         ++n) {
        if (ends_prologue(*insn)) {
            // -pg's call sequence, push {lr}; bl __gnu_mcount_nc: the callee pops that lr
            // (ARM's mcount ABI), so once it has returned the push is undone. Nothing else
            // calls with the stack 4 bytes off its 8-byte alignment.
            if (insn->id == ARM_INS_BL && lone_lr_push) frame = before_lr_push;
            break;
        }
        const cs_arm& arm = insn->detail->arm;
        const bool lr_only =
            insn->id == ARM_INS_PUSH && arm.op_count == 1 && is_reg(arm.operands[0], ARM_REG_LR);
        if (lr_only) before_lr_push = frame;
        lone_lr_push = lr_only;
        if (!apply_prologue(*insn, frame)) return std::nullopt;
    }
    return frame;
}

}  // namespace rackprof::probe
