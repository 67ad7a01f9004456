#include "probe/firmware_identity.h"

#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <stdexcept>

namespace rackprof::probe {

namespace {

std::uint32_t word(const std::string& bytes, std::size_t at) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + at;
    return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
           std::uint32_t{p[3]} << 24;
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
    static constexpr char kHex[] = "0123456789abcdef";
    std::string id;
    for (std::size_t i = 16; i < 16 + id_size; ++i) {
        const auto b = static_cast<unsigned char>(bytes[i]);
        id += kHex[b >> 4];
        id += kHex[b & 15];
    }
    return id;
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

}  // namespace rackprof::probe
