// Which firmware a target runs, read through the debugger: the ELF's GNU build-id note sits
// in an allocated section (target-fw's linker script keeps it in flash), so the same bytes at
// the same address of the target's memory name the image it runs, as a HELLO's build-id does
// for a serial link.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace rackprof::probe {

struct BuildIdNote {
    std::uint64_t address = 0;  // where the note is in the target's memory
    std::size_t size = 0;       // the whole note (header, name, id)
    std::string id;             // the build-id, lowercase hex
};

// The ELF's build-id note where it is loaded, or nothing when it has none in an allocated
// section. Throws std::runtime_error for a file that is not an ELF.
std::optional<BuildIdNote> build_id_note(const std::filesystem::path& elf);

// The build-id of a GNU build-id note's bytes (ELF note: namesz, descsz, type 3, "GNU\0",
// the id), lowercase hex, or nothing when the bytes are not one.
std::optional<std::string> parse_build_id_note(const std::string& bytes);

class GdbClient;

// What a target holds where an ELF's build-id note is loaded.
struct IdentityCheck {
    std::optional<BuildIdNote> note;   // the ELF's; none: nothing to compare
    std::optional<std::string> found;  // the build-id in the target's memory there
    bool matches() const { return !note || found == note->id; }
    // "the target does not run fw.elf: its memory at 0x... holds build-id ..., the ELF's is ..."
    std::string mismatch(const std::string& elf_name) const;
};

// Reads the note's bytes back through the debugger (an unreadable address holds none).
// Throws std::runtime_error for a file that is not an ELF, ProbeError for a server gone.
IdentityCheck check_identity(GdbClient& gdb, const std::filesystem::path& elf);

}  // namespace rackprof::probe
