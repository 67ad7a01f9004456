#include "probe/stack_unwinder.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <stdexcept>

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

}  // namespace

struct StackUnwinder::State {
    Dwfl* dwfl = nullptr;
    Dwfl_Module* module = nullptr;
    std::uint64_t entry_function = 0;
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

// Only the stack memory read with the sample: anything else is not known.
bool memory_read(Dwfl*, Dwarf_Addr address, Dwarf_Word* result, void* arg) {
    auto* state = static_cast<State*>(arg);
    const TargetStack& s = *state->sample;
    if (address < s.stack_address || address - s.stack_address + 4 > s.memory.size()) {
        state->memory_missed = true;
        return false;
    }
    const auto* p =
        reinterpret_cast<const unsigned char*>(s.memory.data()) + (address - s.stack_address);
    *result =
        Dwarf_Word{p[0]} | Dwarf_Word{p[1]} << 8 | Dwarf_Word{p[2]} << 16 | Dwarf_Word{p[3]} << 24;
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
};

int on_frame(Dwfl_Frame* frame, void* arg) {
    auto* walk = static_cast<Walk*>(arg);
    Dwarf_Addr pc = 0;
    bool activation = false;
    if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_OK;  // libdwfl reports it
    pc &= ~Dwarf_Addr{1};
    if (pc == 0 || is_exception_return(pc)) {
        walk->ended = true;  // the outermost frame of thread mode or of a handler
        return DWARF_CB_ABORT;
    }
    if (walk->out.pcs.size() >= walk->max_frames) {
        walk->out.truncated = walk->ended = true;
        walk->out.stopped = "deeper than " + std::to_string(walk->max_frames) + " frames";
        return DWARF_CB_ABORT;
    }
    // A return address's call is the instruction before it.
    const std::uint64_t function = walk->unwinder->function_of(activation ? pc : pc - 1);
    if (function == 0) {
        walk->out.truncated = walk->ended = true;
        char text[64];
        std::snprintf(text, sizeof text, "0x%llx is in no function of the ELF",
                      static_cast<unsigned long long>(pc));
        walk->out.stopped = text;
        return DWARF_CB_ABORT;
    }
    walk->out.pcs.push_back(pc);
    walk->out.functions.push_back(function);
    if (function == walk->state->entry_function) {
        walk->ended = true;  // the reset handler: nothing called it
        return DWARF_CB_ABORT;
    }
    return DWARF_CB_OK;
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
}

StackUnwinder::~StackUnwinder() = default;

std::uint64_t StackUnwinder::function_of(std::uint64_t address) const {
    GElf_Sym symbol;
    GElf_Word section = 0;
    const char* name = dwfl_module_addrsym(state_->module, address, &symbol, &section);
    if (!name || GELF_ST_TYPE(symbol.st_info) != STT_FUNC) return 0;
    return symbol.st_value & ~GElf_Addr{1};
}

UnwoundStack StackUnwinder::unwind(const TargetStack& stack, std::size_t max_frames) {
    state_->sample = &stack;
    state_->memory_missed = false;
    Walk walk{this, state_.get(), max_frames, {}};
    const int result = dwfl_getthread_frames(state_->dwfl, kThread, on_frame, &walk);
    state_->sample = nullptr;
    if (walk.ended || result == 0) return std::move(walk.out);
    // libdwfl could go no further: the leaf without CFI still has its caller in lr.
    UnwoundStack out = std::move(walk.out);
    out.truncated = true;
    out.stopped = state_->memory_missed ? "the stack reaches past the memory read"
                                        : "unwinding failed: " + dwfl_error();
    if (out.pcs.size() == 1) {
        const std::uint64_t lr = stack.registers[14] & ~std::uint64_t{1};
        if (is_exception_return(lr)) {
            out.truncated = false;
            out.stopped.clear();
        } else if (const std::uint64_t caller = function_of(lr - 1); caller != 0) {
            out.pcs.push_back(lr);
            out.functions.push_back(caller);
            out.stopped = "no CFI at the sampled pc: its caller taken from lr";
        }
    }
    return out;
}

}  // namespace rackprof::probe
