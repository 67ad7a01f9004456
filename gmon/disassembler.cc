#include "gmon/disassembler.h"

#include <capstone/capstone.h>

#include <cstdio>
#include <memory>

namespace rackprof::gmon {

namespace {

constexpr int kEmArm = 40;
constexpr int kEmX86_64 = 62;

struct Handle {
    csh h = 0;
    bool open = false;
    ~Handle() {
        if (open) cs_close(&h);
    }
};

// Cortex-M runs Thumb only; MCLASS gives its system registers (msr/mrs) their names.
bool open_for(int machine, Handle& handle) {
    cs_err err = CS_ERR_ARCH;
    if (machine == kEmArm) {
        err = cs_open(CS_ARCH_ARM, static_cast<cs_mode>(CS_MODE_THUMB | CS_MODE_MCLASS), &handle.h);
    } else if (machine == kEmX86_64) {
        err = cs_open(CS_ARCH_X86, CS_MODE_64, &handle.h);
    }
    handle.open = err == CS_ERR_OK;
    if (handle.open) cs_option(handle.h, CS_OPT_DETAIL, CS_OPT_ON);
    return handle.open;
}

// The first immediate operand: a branch's destination.
std::uint64_t immediate_target(int machine, const cs_insn& insn) {
    if (machine == kEmArm) {
        const cs_arm& arm = insn.detail->arm;
        for (std::uint8_t i = 0; i < arm.op_count; ++i)
            if (arm.operands[i].type == ARM_OP_IMM)
                return static_cast<std::uint32_t>(arm.operands[i].imm);
        return 0;
    }
    const cs_x86& x86 = insn.detail->x86;
    for (std::uint8_t i = 0; i < x86.op_count; ++i)
        if (x86.operands[i].type == X86_OP_IMM)
            return static_cast<std::uint64_t>(x86.operands[i].imm);
    return 0;
}

Instruction::Flow flow_of(int machine, csh h, const cs_insn& insn) {
    using Flow = Instruction::Flow;
    if (machine == kEmArm) {
        switch (insn.id) {
            case ARM_INS_BL:
            case ARM_INS_BLX:
                return Flow::kCall;
            case ARM_INS_B:
            case ARM_INS_CBZ:
            case ARM_INS_CBNZ:
                return Flow::kJump;
            default:
                return Flow::kNext;
        }
    }
    if (cs_insn_group(h, &insn, CS_GRP_CALL)) return Flow::kCall;
    if (cs_insn_group(h, &insn, CS_GRP_JUMP)) return Flow::kJump;
    return Flow::kNext;
}

Instruction undecoded(std::uint64_t addr, const std::uint8_t* bytes, std::size_t left) {
    char text[24];
    if (left >= 2) {
        std::snprintf(text, sizeof text, ".short 0x%04x", bytes[0] | (bytes[1] << 8));
        return {addr, 2, text};
    }
    std::snprintf(text, sizeof text, ".byte 0x%02x", bytes[0]);
    return {addr, 1, text};
}

}  // namespace

std::vector<Instruction> disassemble(int machine, std::uint64_t addr,
                                     std::span<const std::uint8_t> bytes) {
    std::vector<Instruction> out;
    Handle handle;
    if (bytes.empty() || !open_for(machine, handle)) return out;
    std::unique_ptr<cs_insn, void (*)(cs_insn*)> insn(cs_malloc(handle.h),
                                                      [](cs_insn* i) { cs_free(i, 1); });
    const std::uint8_t* code = bytes.data();
    std::size_t left = bytes.size();
    while (left > 0) {
        if (cs_disasm_iter(handle.h, &code, &left, &addr, insn.get())) {
            std::string text = insn->mnemonic;
            if (insn->op_str[0]) text += std::string(" ") + insn->op_str;
            Instruction decoded{insn->address, insn->size, std::move(text)};
            decoded.flow = flow_of(machine, handle.h, *insn);
            if (decoded.flow != Instruction::Flow::kNext)
                decoded.target = immediate_target(machine, *insn);
            out.push_back(std::move(decoded));
            continue;
        }
        Instruction skipped = undecoded(addr, code, left);
        code += skipped.size;
        left -= skipped.size;
        addr += skipped.size;
        out.push_back(std::move(skipped));
    }
    return out;
}

std::string disassembler_version() {
    int major = 0, minor = 0;
    cs_version(&major, &minor);
    return "capstone " + std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace rackprof::gmon
