#include "daemon/service/firmware_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "daemon/capture/board.h"
#include "gmon/profile.h"
#include "gmon/symbolizer.h"

namespace rackprof::daemon::service {

namespace {

// Moves `from` to `to` with a rename; across file systems, by a copy beside `to` renamed into
// place, so `to` is never seen half written.
void place_file(const std::filesystem::path& from, const std::filesystem::path& to) {
    std::error_code ec;
    std::filesystem::rename(from, to, ec);
    if (!ec) return;
    static std::atomic<std::uint64_t> copies{0};  // a name no other copy in flight has
    const auto beside = to.parent_path() /
                        (".upload-" + std::to_string(::getpid()) + "-" + std::to_string(copies++));
    try {
        std::filesystem::copy_file(from, beside);
        std::filesystem::rename(beside, to);
    } catch (...) {
        std::filesystem::remove(beside, ec);
        throw;
    }
}

}  // namespace

Stored FirmwareStore::put(const std::filesystem::path& upload) {
    std::shared_ptr<const gmon::Symbolizer> elf;
    std::size_t functions = 0;
    try {
        elf = gmon::Symbolizer::load(upload);
        functions = gmon::gprof_symbol_table(*elf).size();  // throws when it names none
    } catch (const std::exception&) {
        throw ServiceError(Failure::kNotAnElf, "the body is not a usable ELF file (with symbols)");
    }
    const std::string sha256 = capture::file_sha256(upload);
    const std::string id = elf->build_id().empty() ? sha256 : elf->build_id();
    std::filesystem::create_directories(dir_);
    const auto stored = dir_ / (id + ".elf");
    const bool existed = std::filesystem::exists(stored);
    if (!existed) place_file(upload, stored);
    return {nlohmann::json{{"id", id},
                           {"build_id", elf->build_id()},
                           {"sha256", sha256},
                           {"functions", functions},
                           {"stored", !existed}},
            !existed};
}

nlohmann::json FirmwareStore::list(std::size_t limit) const {
    struct Image {
        std::string id;
        std::uintmax_t bytes;
        std::int64_t stored_ns;
    };
    std::vector<Image> images;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
        const auto& path = entry.path();
        if (path.extension() != ".elf" || !is_id(path.stem().string())) continue;
        std::error_code stat;
        const auto bytes = entry.file_size(stat);
        const auto written = entry.last_write_time(stat);
        if (stat) continue;  // gone meanwhile
        const auto since_epoch = std::chrono::file_clock::to_sys(written).time_since_epoch();
        images.push_back(
            {path.stem().string(), bytes,
             std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch).count()});
    }
    std::sort(images.begin(), images.end(), [](const Image& a, const Image& b) {
        return a.stored_ns != b.stored_ns ? a.stored_ns > b.stored_ns : a.id < b.id;
    });
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t i = 0; i < images.size() && i < limit; ++i)
        out.push_back(
            {{"id", images[i].id}, {"bytes", images[i].bytes}, {"stored_ns", images[i].stored_ns}});
    return out;
}

std::optional<std::filesystem::path> FirmwareStore::find(const std::string& id) const {
    if (!is_id(id)) return std::nullopt;
    auto path = dir_ / (id + ".elf");
    if (!std::filesystem::exists(path)) return std::nullopt;
    return path;
}

bool FirmwareStore::holds(const std::filesystem::path& elf) const {
    std::error_code ec;
    const auto store = std::filesystem::weakly_canonical(dir_, ec);
    const auto file = std::filesystem::weakly_canonical(elf, ec);
    return !ec && file.parent_path() == store;
}

bool FirmwareStore::is_id(const std::string& id) {
    return !id.empty() && id.size() <= 128 &&
           id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace rackprof::daemon::service
