#include "probe/stack_unwinder.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <optional>
#include <span>
#include <stdexcept>

#include "probe/gdb_packet.h"
#include "probe/thumb_frames.h"

namespace rackprof::probe {

namespace {

char* debuginfo_path = nullptr;
// The firmware ELF is its own debuginfo (its .debug_frame); nothing is looked up elsewhere.
const Dwfl_Callbacks kCallbacks = {
    dwfl_build_id_find_elf,
    dwfl_standard_find_debuginfo,
    dwfl_offline_section_address,
    &debuginfo_path,
};

constexpr pid_t kThread = 1;  // the core: one "thread" of one "process"

// Cortex-M's EXC_RETURN values (0xFFFFFFxx; 0xF0000000 and up is never code): the return
// address a handler's outermost frame holds.
bool is_exception_return(std::uint64_t pc) {
    return pc >= 0xF0000000u && pc <= 0xFFFFFFFFu;
}

std::string dwfl_error() {
    const char* message = dwfl_errmsg(-1);
    return message ? message : "unknown libdwfl error";
}

// A frame's registers as far as stepping without CFI needs them.
struct FrameRegisters {
    std::uint64_t pc = 0;  // Thumb bit clear
    std::uint64_t sp = 0;
    std::optional<std::uint64_t> r7;
    std::optional<std::uint64_t> lr;  // only the sampled frame's is known
};

struct CodeSection {
    std::uint64_t address = 0;
    std::vector<std::uint8_t> bytes;
};

}  // namespace

struct StackUnwinder::State {
    Dwfl* dwfl = nullptr;
    Dwfl_Module* module = nullptr;
    std::uint64_t entry_function = 0;
    std::vector<CodeSection> code;        // the ELF's executable sections, for prologues
    const TargetStack* sample = nullptr;  // the one being unwound
    bool memory_missed = false;           // the unwinder asked for a word not read

    ~State() {
        if (dwfl) dwfl_end(dwfl);
    }
};

namespace {

using State = StackUnwinder::State;

pid_t next_thread(Dwfl*, void* arg, void** thread_arg) {
    if (*thread_arg != nullptr) return 0;  // one thread only
    *thread_arg = arg;
    return kThread;
}

bool get_thread(Dwfl*, pid_t tid, void* arg, void** thread_arg) {
    *thread_arg = arg;
    return tid == kThread;
}

// The 32-bit little-endian word at `address` in the stack memory read with the sample.
std::optional<std::uint64_t> stack_word(const TargetStack& s, std::uint64_t address) {
    if (address < s.stack_address || address - s.stack_address + 4 > s.memory.size())
        return std::nullopt;
    return little_endian_value(std::string_view(s.memory).substr(address - s.stack_address, 4));
}

// Only the stack memory read with the sample: anything else is not known.
bool memory_read(Dwfl*, Dwarf_Addr address, Dwarf_Word* result, void* arg) {
    auto* state = static_cast<State*>(arg);
    const auto word = stack_word(*state->sample, address);
    if (!word) {
        state->memory_missed = true;
        return false;
    }
    *result = *word;
    return true;
}

bool set_initial_registers(Dwfl_Thread* thread, void* thread_arg) {
    const auto* state = static_cast<const State*>(thread_arg);
    Dwarf_Word regs[16];
    for (int i = 0; i < 16; ++i) regs[i] = state->sample->registers[static_cast<std::size_t>(i)];
    if (!dwfl_thread_state_registers(thread, 0, 16, regs)) return false;
    // Without it libdwfl would take the return-address register (lr) for the first pc.
    dwfl_thread_state_register_pc(thread, regs[15]);
    return true;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {
    next_thread, get_thread, memory_read, set_initial_registers, nullptr, nullptr,
};

struct Walk {
    const StackUnwinder* unwinder;
    const State* state;
    std::size_t max_frames;
    UnwoundStack out;
    bool ended = false;  // the walk decided the end (complete or cut), not libdwfl
    std::optional<FrameRegisters> newest;  // the registers of the newest frame taken
};

void cut(Walk& walk, std::string why) {
    walk.out.truncated = walk.ended = true;
    walk.out.stopped = std::move(why);
}

std::string hex(std::uint64_t address) {
    char text[24];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(address));
    return text;
}

// Takes the frame at `pc` into the walk; false where the walk ends at it (complete or cut).
bool take_frame(Walk& walk, std::uint64_t pc, bool activation) {
    if (pc == 0 || is_exception_return(pc)) {
        walk.ended = true;  // the outermost frame of thread mode or of a handler
        return false;
    }
    if (walk.out.pcs.size() >= walk.max_frames) {
        cut(walk, "deeper than " + std::to_string(walk.max_frames) + " frames");
        return false;
    }
    // A return address's call is the instruction before it.
    const std::uint64_t function = walk.unwinder->function_of(activation ? pc : pc - 1);
    if (function == 0) {
        cut(walk, hex(pc) + " is in no function of the ELF");
        return false;
    }
    walk.out.pcs.push_back(pc);
    walk.out.functions.push_back(function);
    if (function == walk.state->entry_function) {
        walk.ended = true;  // the reset handler: nothing called it
        return false;
    }
    return true;
}

int on_frame(Dwfl_Frame* frame, void* arg) {
    auto* walk = static_cast<Walk*>(arg);
    Dwarf_Addr pc = 0;
    bool activation = false;
    if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_OK;  // libdwfl reports it
    pc &= ~Dwarf_Addr{1};
    if (!take_frame(*walk, pc, activation)) return DWARF_CB_ABORT;
    // Kept for stepping on without CFI, should libdwfl find none here.
    const TargetStack& sample = *walk->state->sample;
    FrameRegisters regs{pc, 0, std::nullopt, std::nullopt};
    Dwarf_Word value = 0;
    if (walk->out.pcs.size() == 1) {
        regs.sp = sample.registers[13];
        regs.r7 = sample.registers[7];
        regs.lr = sample.registers[14];
    } else if (dwfl_frame_reg(frame, 13, &value) == 0) {
        regs.sp = value;
        if (dwfl_frame_reg(frame, 7, &value) == 0) regs.r7 = value;
    } else {
        walk->newest.reset();
        return DWARF_CB_OK;
    }
    walk->newest = regs;
    return DWARF_CB_OK;
}

// The code of the function at `function`: to its symbol's end, or its section's for a symbol
// without a size.
std::span<const std::uint8_t> code_of(const State& state, std::uint64_t function) {
    GElf_Sym symbol;
    GElf_Word section = 0;
    const char* name = dwfl_module_addrsym(state.module, function | 1, &symbol, &section);
    for (const CodeSection& c : state.code) {
        if (function < c.address || function - c.address >= c.bytes.size()) continue;
        std::size_t size = c.bytes.size() - (function - c.address);
        if (name && symbol.st_size > 0) size = std::min<std::size_t>(size, symbol.st_size);
        return {c.bytes.data() + (function - c.address), size};
    }
    return {};
}

// One frame up from `regs` (the walk's newest frame) by its prologue or epilogue; the
// caller's registers, or nothing where the walk was cut.
std::optional<FrameRegisters> step_without_cfi(Walk& walk, const FrameRegisters& regs,
                                               const TargetStack& sample) {
    const bool innermost = walk.out.pcs.size() == 1;
    const std::uint64_t function = walk.out.functions.back();
    const auto frame =
        analyze_thumb_frame(code_of(*walk.state, function), function, regs.pc, innermost);
    if (!frame) {
        cut(walk, "no CFI at " + hex(regs.pc) + ", and its prologue is not understood");
        return std::nullopt;
    }
    if (frame->frame_pointer && !frame->read_ahead && !regs.r7) {
        cut(walk, "no CFI at " + hex(regs.pc) + ", and its frame pointer is not known");
        return std::nullopt;
    }
    const std::uint64_t cfa = frame->frame_pointer && !frame->read_ahead
                                  ? *regs.r7 + frame->fp_to_cfa
                                  : regs.sp + frame->sp_depth;
    const auto saved = [&](int r) { return stack_word(sample, cfa - frame->saved[r]); };
    const int ret = frame->return_register;
    const std::optional<std::uint64_t> caller =
        frame->saved[ret] ? saved(ret) : (ret == 14 && innermost ? regs.lr : std::nullopt);
    if (!caller) {
        cut(walk, "no CFI at " + hex(regs.pc) + ", and its return address was not read");
        return std::nullopt;
    }
    ++walk.out.frames_without_cfi;
    FrameRegisters next{*caller & ~std::uint64_t{1}, cfa, regs.r7, std::nullopt};
    if (frame->saved[7]) next.r7 = saved(7);
    return next;
}

}  // namespace

StackUnwinder::StackUnwinder(const std::filesystem::path& elf) : state_(std::make_unique<State>()) {
    state_->dwfl = dwfl_begin(&kCallbacks);
    if (!state_->dwfl) throw std::runtime_error("libdwfl: " + dwfl_error());
    state_->module = dwfl_report_offline(state_->dwfl, "firmware", elf.c_str(), -1);
    if (!state_->module || dwfl_report_end(state_->dwfl, nullptr, nullptr) != 0)
        throw std::runtime_error(elf.string() + ": " + dwfl_error());
    GElf_Addr bias = 0;
    Elf* image = dwfl_module_getelf(state_->module, &bias);
    GElf_Ehdr header;
    if (!image || !gelf_getehdr(image, &header))
        throw std::runtime_error(elf.string() + ": not an ELF file");
    if (header.e_machine != EM_ARM)
        throw std::runtime_error(elf.string() + ": stacks are unwound for ARM firmware only");
    if (!dwfl_attach_state(state_->dwfl, image, kThread, &kThreadCallbacks, state_.get()))
        throw std::runtime_error(elf.string() + ": libdwfl cannot unwind it: " + dwfl_error());
    state_->entry_function = function_of(header.e_entry & ~GElf_Addr{1});
    for (Elf_Scn* scn = elf_nextscn(image, nullptr); scn; scn = elf_nextscn(image, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS ||
            !(shdr.sh_flags & SHF_EXECINSTR))
            continue;
        const Elf_Data* data = elf_getdata(scn, nullptr);
        if (!data || !data->d_buf) continue;
        const auto* bytes = static_cast<const std::uint8_t*>(data->d_buf);
        state_->code.push_back({shdr.sh_addr, {bytes, bytes + data->d_size}});
    }
}

StackUnwinder::~StackUnwinder() = default;

std::uint64_t StackUnwinder::function_of(std::uint64_t address) const {
    GElf_Sym symbol;
    GElf_Word section = 0;
    // Thumb functions' symbols are their start + 1: looked up so, a function's first
    // instruction is its own, not the function before it.
    const char* name = dwfl_module_addrsym(state_->module, address | 1, &symbol, &section);
    if (!name || GELF_ST_TYPE(symbol.st_info) != STT_FUNC) return 0;
    return symbol.st_value & ~GElf_Addr{1};
}

UnwoundStack StackUnwinder::unwind(const TargetStack& stack, std::size_t max_frames) {
    state_->sample = &stack;
    state_->memory_missed = false;
    Walk walk{this, state_.get(), max_frames, {}, false, std::nullopt};
    const int result = dwfl_getthread_frames(state_->dwfl, kThread, on_frame, &walk);
    if (walk.ended || result == 0) {
        state_->sample = nullptr;
        return std::move(walk.out);
    }
    const std::string why = state_->memory_missed ? "the stack reaches past the memory read"
                                                  : "unwinding failed: " + dwfl_error();
    // libdwfl could go no further (no CFI for the newest frame): its prologue steps on.
    std::optional<FrameRegisters> regs = walk.newest;
    while (regs && !walk.ended) {
        regs = step_without_cfi(walk, *regs, stack);
        if (regs && !take_frame(walk, regs->pc, false)) break;
    }
    state_->sample = nullptr;
    if (!walk.ended) cut(walk, why);
    return std::move(walk.out);
}

}  // namespace rackprof::probe
