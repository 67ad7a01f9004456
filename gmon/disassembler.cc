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
    return handle.open;
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
            out.push_back({insn->address, insn->size, std::move(text)});
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
