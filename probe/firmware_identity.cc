#include "probe/firmware_identity.h"

#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "probe/gdb_client.h"
#include "probe/gdb_packet.h"

namespace rackprof::probe {

namespace {

std::uint64_t word(const std::string& bytes, std::size_t at) {
    return *little_endian_value(std::string_view(bytes).substr(at, 4));
}

constexpr std::uint32_t kNoteGnuBuildId = 3;  // NT_GNU_BUILD_ID

}  // namespace

std::optional<std::string> parse_build_id_note(const std::string& bytes) {
    if (bytes.size() < 16) return std::nullopt;
    const std::uint32_t name_size = word(bytes, 0);
    const std::uint32_t id_size = word(bytes, 4);
    if (name_size != 4 || word(bytes, 8) != kNoteGnuBuildId || bytes.compare(12, 4, "GNU\0", 4))
        return std::nullopt;
    if (id_size == 0 || id_size > 64 || bytes.size() < 16 + std::size_t{id_size})
        return std::nullopt;
    return bytes_to_hex(std::string_view(bytes).substr(16, id_size));
}

std::optional<BuildIdNote> build_id_note(const std::filesystem::path& path) {
    elf_version(EV_CURRENT);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(path.string() + ": cannot open");
    Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
    std::optional<BuildIdNote> found;
    bool is_elf = elf && elf_kind(elf) == ELF_K_ELF;
    for (Elf_Scn* scn = nullptr; is_elf && !found && (scn = elf_nextscn(elf, scn));) {
        GElf_Shdr header;
        if (!gelf_getshdr(scn, &header) || header.sh_type != SHT_NOTE ||
            !(header.sh_flags & SHF_ALLOC))
            continue;
        const Elf_Data* data = elf_getdata(scn, nullptr);
        if (!data || !data->d_buf) continue;
        const std::string bytes(static_cast<const char*>(data->d_buf), data->d_size);
        if (const auto id = parse_build_id_note(bytes))
            found = BuildIdNote{header.sh_addr, 16 + id->size() / 2, *id};
    }
    if (elf) elf_end(elf);
    ::close(fd);
    if (!is_elf) throw std::runtime_error(path.string() + ": not an ELF file");
    return found;
}

IdentityCheck check_identity(GdbClient& gdb, const std::filesystem::path& elf) {
    IdentityCheck check;
    check.note = build_id_note(elf);
    if (!check.note) return check;
    std::string bytes;
    try {
        bytes = gdb.read_memory(check.note->address, check.note->size);
    } catch (const ProbeTimeout&) {
        throw;
    } catch (const ProbeError&) {  // unreadable there: not the ELF's image either
    }
    check.found = parse_build_id_note(bytes);
    return check;
}

std::string IdentityCheck::mismatch(const std::string& elf_name) const {
    if (!note) return "";
    char where[32];
    std::snprintf(where, sizeof where, "0x%llx", static_cast<unsigned long long>(note->address));
    return "the target does not run " + elf_name + ": its memory at " + where + " holds " +
           (found ? "build-id " + *found : std::string("no build-id note")) + ", the ELF's is " +
           note->id;
}

}  // namespace rackprof::probe
