#include "probe/thumb_frames.h"

#include <doctest/doctest.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <capstone/capstone.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace rackprof::probe {
namespace {

// The compiler's own answer, from the ELF's CFI (libdw): at an address, the CFA as a register
// plus an offset, and where the return address (lr's rule) and r7 are saved below the CFA.
struct CfiRow {
    int cfa_register = -1;
    std::int64_t cfa_offset = 0;
    std::uint32_t lr_saved = 0;  // bytes below the CFA; 0: not saved
    std::uint32_t r7_saved = 0;
};

std::uint32_t saved_below_cfa(Dwarf_Frame* frame, int reg) {
    Dwarf_Op ops_mem[3];
    Dwarf_Op* ops = nullptr;
    std::size_t n = 0;
    if (dwarf_frame_register(frame, reg, ops_mem, &ops, &n) != 0 || n == 0 || !ops) return 0;
    if (ops[0].atom != DW_OP_call_frame_cfa) return 0xFFFFFFFF;  // a rule not compared here
    std::int64_t offset = 0;
    if (n >= 2 && ops[1].atom == DW_OP_plus_uconst)
        offset = static_cast<std::int64_t>(ops[1].number);
    if (n >= 3 && ops[1].atom == DW_OP_consts && ops[2].atom == DW_OP_plus)
        offset = static_cast<std::int64_t>(ops[1].number);
    return static_cast<std::uint32_t>(-offset);
}

std::optional<CfiRow> cfi_row(Dwarf_CFI* cfi, std::uint64_t address) {
    Dwarf_Frame* frame = nullptr;
    if (dwarf_cfi_addrframe(cfi, address, &frame) != 0) return std::nullopt;
    CfiRow row;
    Dwarf_Op* ops = nullptr;
    std::size_t n = 0;
    if (dwarf_frame_cfa(frame, &ops, &n) == 0 && n == 1 && ops[0].atom == DW_OP_bregx) {
        row.cfa_register = static_cast<int>(ops[0].number);
        row.cfa_offset = static_cast<std::int64_t>(ops[0].number2);
    } else if (n == 1 && ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
        row.cfa_register = ops[0].atom - DW_OP_breg0;
        row.cfa_offset = static_cast<std::int64_t>(ops[0].number);
    }
    row.lr_saved = saved_below_cfa(frame, 14);
    row.r7_saved = saved_below_cfa(frame, 7);
    std::free(frame);
    return row;
}

struct Function {
    std::string name;
    std::uint64_t address = 0;
    std::vector<std::uint8_t> code;
};

// The ELF's Thumb functions with their code, and its data-in-code ranges ($d mapping symbols
// up to the next $t): literal pools, where no instruction runs.
void read_functions(Elf* elf, std::vector<Function>& functions,
                    std::map<std::uint64_t, bool>& is_data) {
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_SYMTAB) continue;
        Elf_Data* data = elf_getdata(scn, nullptr);
        for (std::size_t i = 0; i < shdr.sh_size / shdr.sh_entsize; ++i) {
            GElf_Sym sym;
            if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
            const std::string name = elf_strptr(elf, shdr.sh_link, sym.st_name);
            if (name == "$d" || name.rfind("$d.", 0) == 0) is_data[sym.st_value] = true;
            if (name == "$t" || name.rfind("$t.", 0) == 0) is_data[sym.st_value & ~1ull] = false;
            if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size == 0) continue;
            Elf_Scn* text = elf_getscn(elf, sym.st_shndx);
            GElf_Shdr text_hdr;
            if (!text || !gelf_getshdr(text, &text_hdr) || text_hdr.sh_type != SHT_PROGBITS)
                continue;
            const Elf_Data* bytes = elf_getdata(text, nullptr);
            const std::uint64_t address = sym.st_value & ~1ull;
            const auto* at =
                static_cast<const std::uint8_t*>(bytes->d_buf) + (address - text_hdr.sh_addr);
            functions.push_back({name, address, {at, at + sym.st_size}});
        }
    }
}

bool in_data(const std::map<std::uint64_t, bool>& is_data, std::uint64_t address) {
    auto it = is_data.upper_bound(address);
    return it != is_data.begin() && std::prev(it)->second;
}

// Calls visit(pc, next) for each instruction of `f` capstone decodes into `insn` (`next`: the
// address after it), stepping over halfwords that decode to nothing; stops where visit
// returns false.
template <typename Visit>
void for_each_instruction(csh cs, cs_insn* insn, const Function& f, Visit visit) {
    const std::uint8_t* bytes = f.code.data();
    std::size_t size = f.code.size();
    std::uint64_t address = f.address;
    while (size > 0) {
        const std::uint64_t pc = address;
        if (!cs_disasm_iter(cs, &bytes, &size, &address, insn)) {
            bytes += 2, size = size >= 2 ? size - 2 : 0, address += 2;  // data
            continue;
        }
        if (!visit(pc, address)) return;
    }
}

bool lone_lr_push(const cs_insn& insn) {
    const cs_arm& arm = insn.detail->arm;
    return insn.id == ARM_INS_PUSH && arm.op_count == 1 && arm.operands[0].reg == ARM_REG_LR;
}

// Whether the CFI describes the function's pushes at all: libgcc's hand-written routines
// carry CFI that does not (__udivsi3's push {r0, lr} leaves its CFA at sp), and cannot be the
// oracle there.
bool cfi_describes_pushes(csh cs, cs_insn* insn, Dwarf_CFI* cfi, const Function& f) {
    bool described = true;
    const std::uint64_t end = f.address + f.code.size();
    for_each_instruction(cs, insn, f, [&](std::uint64_t pc, std::uint64_t next) {
        // -pg's push {lr} before bl __gnu_mcount_nc has no CFI by design.
        if (insn->id != ARM_INS_PUSH || next >= end || lone_lr_push(*insn)) return true;
        const auto before = cfi_row(cfi, pc);
        const auto after = cfi_row(cfi, next);
        described = !(before && after && after->cfa_offset <= before->cfa_offset);
        return described;
    });
    return described;
}

// An unconditional return or branch: what follows it is reached only by a branch.
bool returns(const cs_insn& insn) {
    const cs_arm& arm = insn.detail->arm;
    if (arm.cc != ARM_CC_AL && arm.cc != ARM_CC_INVALID) return false;
    if (insn.id == ARM_INS_B || insn.id == ARM_INS_BX) return true;
    return (insn.id == ARM_INS_POP || insn.id == ARM_INS_LDM) && arm.op_count > 0 &&
           arm.operands[arm.op_count - 1].reg == ARM_REG_PC;
}

// Whether the CFI follows the function's epilogues: at each pop {..., pc} the CFA is what
// that pop frees.
bool cfi_describes_epilogues(csh cs, cs_insn* insn, Dwarf_CFI* cfi, const Function& f) {
    bool described = true;
    for_each_instruction(cs, insn, f, [&](std::uint64_t pc, std::uint64_t) {
        if (insn->id != ARM_INS_POP || !returns(*insn)) return true;
        const auto row = cfi_row(cfi, pc);
        described =
            !(row && row->cfa_register == 13 && row->cfa_offset != 4 * insn->detail->arm.op_count);
        return described;
    });
    return described;
}

// The analysis at `pc` (the instruction in `insn`) against the CFI's row there; the
// disagreement, or empty.
std::string disagreement(const Function& f, const cs_insn& insn, std::uint64_t pc,
                         const CfiRow& row, const std::optional<ThumbFrame>& frame) {
    std::ostringstream what;
    what << f.name << "+0x" << std::hex << pc - f.address << std::dec << " (" << insn.mnemonic
         << " " << insn.op_str << "): ";
    if (!frame) return what.str() + "not analysed";
    const bool by_fp = frame->frame_pointer && !frame->read_ahead;
    const int cfa_register = by_fp ? 7 : 13;
    const std::int64_t cfa_offset = by_fp ? frame->fp_to_cfa : frame->sp_depth;
    const std::uint32_t ret = frame->saved[frame->return_register];
    if (cfa_register == row.cfa_register && cfa_offset == row.cfa_offset &&
        (row.lr_saved == 0xFFFFFFFF || ret == row.lr_saved) &&
        (row.r7_saved == 0xFFFFFFFF || frame->saved[7] == row.r7_saved))
        return "";
    what << "CFI says CFA r" << row.cfa_register << "+" << row.cfa_offset << ", lr at -"
         << row.lr_saved << ", r7 at -" << row.r7_saved << "; the analysis r" << cfa_register << "+"
         << cfa_offset << ", return address at -" << ret << ", r7 at -" << frame->saved[7];
    return what.str();
}

// Compares the analysis with the CFI at every instruction of `f`; returns the instructions
// compared, and adds each disagreement to `mismatches`.
std::size_t compare_function(csh cs, cs_insn* insn, Dwarf_CFI* cfi, const Function& f,
                             const std::map<std::uint64_t, bool>& is_data,
                             std::vector<std::string>& mismatches) {
    std::size_t compared = 0;
    bool after_lone_lr_push = false, after_return = false;
    const bool epilogues = cfi_describes_epilogues(cs, insn, cfi, f);
    for_each_instruction(cs, insn, f, [&](std::uint64_t pc, std::uint64_t) {
        if (in_data(is_data, pc)) return true;
        // Where GCC's CFI is known not to say what the stack holds: the bl of -pg's
        // push {lr}; bl __gnu_mcount_nc (the push has no CFI of its own; the analysis
        // counts it, as the stack holds it), and padding after the last return.
        const bool mcount_call = insn->id == ARM_INS_BL && after_lone_lr_push;
        const cs_arm& arm = insn->detail->arm;
        const bool nop =
            insn->id == ARM_INS_NOP ||
            (insn->id == ARM_INS_MOV && arm.op_count == 2 && arm.operands[0].reg == ARM_REG_R8 &&
             arm.operands[1].reg == ARM_REG_R8);  // Thumb-1's nop
        const bool padding = nop && after_return;
        after_lone_lr_push = lone_lr_push(*insn);
        after_return = returns(*insn);
        if (mcount_call || padding) return true;
        const auto row = cfi_row(cfi, pc);
        if (!row || row->cfa_register < 0) return true;
        const auto frame = analyze_thumb_frame(f.code, f.address, pc, true);
        // Thumb-1 code's CFI (GCC for ARMv6-M) leaves epilogues undescribed.
        if (frame && frame->read_ahead && !epilogues) return true;
        ++compared;
        if (auto what = disagreement(f, *insn, pc, *row, frame); !what.empty())
            mismatches.push_back(std::move(what));
        return true;
    });
    return compared;
}

// Compares the analysis with the CFI at every instruction of every function that has CFI;
// returns the instructions compared, and adds each disagreement to `mismatches`.
std::size_t compare_with_cfi(const std::filesystem::path& path,
                             std::vector<std::string>& mismatches, std::size_t& skipped_functions) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    Dwarf* dwarf = dwarf_begin(fd, DWARF_C_READ);
    Dwarf_CFI* cfi = dwarf ? dwarf_getcfi(dwarf) : nullptr;
    std::size_t compared = 0;
    if (cfi) {
        std::vector<Function> functions;
        std::map<std::uint64_t, bool> is_data;
        read_functions(dwarf_getelf(dwarf), functions, is_data);
        csh cs;
        REQUIRE(cs_open(CS_ARCH_ARM, static_cast<cs_mode>(CS_MODE_THUMB | CS_MODE_MCLASS), &cs) ==
                CS_ERR_OK);
        cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
        cs_insn* insn = cs_malloc(cs);
        std::vector<std::string> found;
        for (const Function& f : functions) {
            if (!cfi_describes_pushes(cs, insn, cfi, f)) {
                ++skipped_functions;
                continue;
            }
            compared += compare_function(cs, insn, cfi, f, is_data, found);
        }
        for (const std::string& what : found)
            mismatches.push_back(path.filename().string() + " " + what);
        cs_free(insn, 1);
        cs_close(&cs);
    }
    if (dwarf) dwarf_end(dwarf);
    ::close(fd);
    return compared;
}

// The oracle is the compiler: GCC's CFI for the same code says where each frame is at each
// instruction; reading the prologue (or the epilogue ahead) must say the same everywhere.
TEST_CASE(
    "a Thumb frame read from its code agrees with the compiler's CFI at every "
    "instruction of target-fw's firmware") {
    const std::filesystem::path dir = RACKPROF_FIRMWARE_DIR;
    std::vector<std::filesystem::path> images;
    if (std::filesystem::exists(dir)) {
        for (const auto& entry : std::filesystem::directory_iterator(dir)) {
            const auto name = entry.path().filename().string();
            if (entry.path().extension() == ".elf" && (name.find("mps2") != std::string::npos ||
                                                       name.find("microbit") != std::string::npos))
                images.push_back(entry.path());
        }
    }
    if (images.empty()) {
        MESSAGE("SKIP: no Cortex-M firmware in " << dir << " (./setup.sh builds target-fw)");
        return;
    }
    elf_version(EV_CURRENT);
    std::vector<std::string> mismatches;
    std::size_t compared = 0, skipped_functions = 0;
    const std::size_t kShown = std::getenv("THUMB_FRAMES_SHOW_ALL") ? SIZE_MAX : 20;
    for (const auto& image : images)
        compared += compare_with_cfi(image, mismatches, skipped_functions);
    MESSAGE(compared << " instructions of " << images.size() << " images compared, "
                     << mismatches.size() << " disagree; " << skipped_functions
                     << " functions whose CFI does not describe their pushes left out");
    for (std::size_t i = 0; i < mismatches.size() && i < kShown; ++i) MESSAGE(mismatches[i]);
    CHECK(compared > 10000);
    CHECK(mismatches.empty());
}

// A hand-made frame: push.w with r7 and lr, vpush, sub.w, add r7: every kind of step, checked
// at each instruction as the prologue runs, and in its epilogue.
TEST_CASE("a prologue and an epilogue step by step: pushes, vpush, sub, frame pointer") {
    // push.w {r4-r7, r8, lr}; vpush {d8}; sub sp, #16; add r7, sp, #0; bl; nop;
    // add sp, #16; vpop {d8}; pop.w {r4-r7, r8, pc}
    const std::vector<std::uint8_t> code = {
        0x2d, 0xe9, 0xf0, 0x41,  // push.w {r4, r5, r6, r7, r8, lr}
        0x2d, 0xed, 0x02, 0x8b,  // vpush {d8}
        0x84, 0xb0,              // sub sp, #16
        0x00, 0xaf,              // add r7, sp, #0
        0x00, 0xf0, 0x00, 0xf8,  // bl (the next instruction)
        0x00, 0xbf,              // nop
        0x04, 0xb0,              // add sp, #16
        0xbd, 0xec, 0x02, 0x8b,  // vpop {d8}
        0xbd, 0xe8, 0xf0, 0x81,  // pop.w {r4, r5, r6, r7, r8, pc}
    };
    const std::uint64_t f = 0x1000;
    struct Expect {
        std::uint64_t pc;
        std::uint32_t depth;
        bool fp;  // the frame found by the frame pointer (else by sp)
    };
    // From f + 16 on the code runs straight to the return: read ahead, sp is enough.
    const Expect expected[] = {
        {f + 0, 0, false},   {f + 4, 24, false},  {f + 8, 32, false},
        {f + 10, 48, false}, {f + 12, 48, true},  {f + 16, 48, false},
        {f + 18, 48, false}, {f + 20, 32, false}, {f + 24, 24, false},
    };
    for (const Expect& e : expected) {
        CAPTURE(e.pc - f);
        const auto frame = analyze_thumb_frame(code, f, e.pc, true);
        REQUIRE(frame);
        CHECK(frame->sp_depth == e.depth);
        CHECK(frame->saved[frame->return_register] == (e.pc == f ? 0u : 4u));
        CHECK((frame->frame_pointer && !frame->read_ahead) == e.fp);
        if (e.fp) CHECK(frame->fp_to_cfa == 48);
        if (e.pc - f >= 4) CHECK(frame->saved[7] == 12);  // r7 pushed 4th of 6
    }
    // The return address after the bl: the body's frame from the prologue, never read ahead.
    const auto caller = analyze_thumb_frame(code, f, f + 16, false);
    REQUIRE(caller);
    CHECK(caller->sp_depth == 48);
    CHECK(caller->frame_pointer);
    CHECK_FALSE(caller->read_ahead);
    // sp written in a way not understood: no frame rather than a guess.
    const std::vector<std::uint8_t> alloca = {0x80, 0xb5, 0xad, 0xeb, 0x03, 0x0d, 0x00, 0xbf};
    // push {r7, lr}; sub.w sp, sp, r3; nop
    CHECK_FALSE(analyze_thumb_frame(alloca, f, f + 6, true));
}

}  // namespace
}  // namespace rackprof::probe
