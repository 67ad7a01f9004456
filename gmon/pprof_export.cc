#include "gmon/pprof_export.h"

#include <zlib.h>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "gmon/function_index.h"
#include "gmon/stacks.h"
#include "pprof/profile.pb.h"

namespace rackprof::gmon {

namespace {

namespace pb = perftools::profiles;

// profile.proto's string table: index 0 is "", every string once.
class StringTable {
  public:
    explicit StringTable(pb::Profile& profile) : profile_(profile) { (*this)(""); }
    std::int64_t operator()(const std::string& s) {
        const auto [it, added] = index_.try_emplace(s, static_cast<std::int64_t>(index_.size()));
        if (added) profile_.add_string_table(s);
        return it->second;
    }

  private:
    pb::Profile& profile_;
    std::unordered_map<std::string, std::int64_t> index_;
};

// The rate the samples were taken at: the override, an imported gmon.out's, else the source's.
std::uint32_t rate_of(const ExportInput& input) {
    if (input.profile_options.prof_rate_override) return input.profile_options.prof_rate_override;
    const auto& shapes = input.source.histograms;
    if (shapes && !shapes->empty() && shapes->front().prof_rate) return shapes->front().prof_rate;
    return input.source.prof_rate ? input.source.prof_rate : 1000;
}

// A summary value as one line of text: "3", "blinky", "1, 2, 3"; empty for nulls and objects,
// but a stored session's object stands for its id.
std::string text_of(const nlohmann::json& value) {
    if (value.is_object()) return value.contains("id") ? text_of(value["id"]) : std::string();
    if (value.is_string()) return value.get<std::string>();
    if (value.is_number() || value.is_boolean()) return value.dump();
    if (!value.is_array()) return {};
    std::string out;
    for (const auto& item : value) {
        const std::string item_text = text_of(item);
        if (item_text.empty()) continue;
        out += (out.empty() ? "" : ", ") + item_text;
    }
    return out;
}

// Builds the profile: functions, locations and samples, each table filled as it is needed.
class PprofBuilder {
  public:
    explicit PprofBuilder(const ExportInput& input)
        : input_(input), strings_(profile_), elf_(input.source.elf.get()) {
        if (elf_) functions_by_address_.emplace(*elf_);
    }

    std::string build() {
        header();
        labels();
        const auto& aggregate = *input_.source.aggregate;
        if (elf_) {
            stacked_samples();
        } else {  // no names, so no call graph to stack by: each PC a one-frame sample
            for (const auto& pc : aggregate.pc_samples())
                sample({location(pc.pc)}, static_cast<std::int64_t>(pc.count), 0);
        }
        for (const auto& arc : aggregate.arcs()) {
            sample({location(arc.self_pc), location(arc.from_pc)}, 0,
                   static_cast<std::int64_t>(arc.count));
        }
        mapping();
        std::string bytes;
        if (!profile_.SerializeToString(&bytes))
            throw std::runtime_error("pprof: the profile could not be serialized");
        return bytes;
    }

  private:
    void header() {
        auto* samples = profile_.add_sample_type();
        samples->set_type(strings_("samples"));
        samples->set_unit(strings_("count"));
        auto* calls = profile_.add_sample_type();
        calls->set_type(strings_("calls"));
        calls->set_unit(strings_("count"));
        profile_.set_default_sample_type(strings_("samples"));
        const std::uint32_t rate = rate_of(input_);
        period_ns_ = 1'000'000'000 / rate;
        profile_.mutable_period_type()->set_type(strings_("cpu"));
        profile_.mutable_period_type()->set_unit(strings_("nanoseconds"));
        profile_.set_period(period_ns_);
        profile_.set_duration_nanos(
            static_cast<std::int64_t>(input_.source.aggregate->total_samples()) * period_ns_);
        profile_.add_comment(strings_("rackprof: PC samples at " + std::to_string(rate) +
                                      " Hz and call arcs (samples/count, calls/count)"));
        for (const auto& [key, value] : input_.summary.items()) {
            const std::string text = text_of(value);
            if (!text.empty()) profile_.add_comment(strings_(key + ": " + text));
        }
    }

    // A session's board and id label every sample (a merged selection has no such one).
    void labels() {
        for (const char* key : {"board", "session"}) {
            const auto it = input_.summary.find(key);
            if (it == input_.summary.end()) continue;
            const std::string text = text_of(*it);
            if (!text.empty() && !it->is_array())
                labels_.emplace_back(strings_(key), strings_(text));
        }
    }

    // The PC samples on the stacks gprof's call graph implies (gmon/stacks.h): each stack's
    // samples spread over its leaf function's sampled PCs in proportion (largest remainders,
    // so a stack keeps its count exactly), its callers at their call sites. pprof's flat is
    // then gprof's self time and its cum gprof's self + children.
    void stacked_samples() {
        const Profile profile = profile_of(input_.source, input_.profile_options);
        const EstimatedStacks stacks = estimate_stacks(profile);
        std::map<std::uint64_t, std::size_t> frame_at;  // a symbol's entry -> its index
        for (std::size_t i = 0; i < profile.symbols.size(); ++i)
            frame_at.emplace(profile.symbols[i].addr, i);
        const auto frame_of = [&](std::uint64_t pc) {
            const ProfileSymbol* symbol = symbol_at(pc);
            const auto it = symbol ? frame_at.find(symbol->addr) : frame_at.end();
            return it == frame_at.end() ? kUnknownFrame : it->second;
        };
        std::map<std::size_t, std::vector<PcCount>> pcs_of;
        for (const auto& pc : input_.source.aggregate->pc_samples())
            pcs_of[frame_of(pc.pc)].push_back(pc);
        // The busiest call site of each caller -> callee pair, where a caller's frame points.
        std::map<std::pair<std::size_t, std::size_t>, ArcCount> site_of;
        for (const auto& arc : input_.source.aggregate->arcs()) {
            auto& best = site_of[{frame_of(arc.from_pc), frame_of(arc.self_pc)}];
            if (arc.count > best.count) best = arc;
        }
        // Each stack's callers (leaf first) at their call sites, grouped by the leaf function.
        std::map<std::size_t, std::vector<LeafStack>> by_leaf;
        for (const EstimatedStack& stack : stacks.stacks) {
            LeafStack leaf{stack.samples, {}};
            for (std::size_t i = stack.frames.size() - 1; i-- > 0;) {
                const std::size_t caller = stack.frames[i], callee = stack.frames[i + 1];
                const auto site = site_of.find({caller, callee});
                leaf.callers.push_back(location(
                    site != site_of.end() ? site->second.from_pc : profile.symbols[caller].addr));
            }
            by_leaf[stack.frames.back()].push_back(std::move(leaf));
        }
        for (const auto& [frame, group] : by_leaf) {
            if (const auto pcs = pcs_of.find(frame); pcs != pcs_of.end()) {
                spread(group, pcs->second);
            } else if (frame != kUnknownFrame) {  // samples kept where a path was cut
                for (const LeafStack& stack : group)
                    sample_at(location(profile.symbols[frame].addr), stack.callers, stack.samples);
            }
        }
        // PCs outside the profile's histogram (beyond the firmware's code): stacks of their own.
        if (!by_leaf.count(kUnknownFrame)) {
            for (const auto& pc : pcs_of[kUnknownFrame]) sample_at(location(pc.pc), {}, pc.count);
        }
    }

    struct LeafStack {
        std::uint64_t samples = 0;
        std::vector<std::uint64_t> callers;  // location ids, leaf's caller first
    };

    // One function's stacks over its sampled PCs: cell (stack, pc) near samples * count / sum,
    // in integers whose sums are exact both ways (each stack's samples, each PC's count): the
    // floors first, then what each row and column still lacks, filled in order.
    void spread(const std::vector<LeafStack>& stacks, const std::vector<PcCount>& pcs) {
        std::uint64_t rows = 0, columns = 0;
        for (const auto& s : stacks) rows += s.samples;
        for (const auto& pc : pcs) columns += pc.count;
        std::vector<std::vector<std::uint64_t>> cell(stacks.size(),
                                                     std::vector<std::uint64_t>(pcs.size()));
        std::vector<std::uint64_t> row_left(stacks.size()), column_left(pcs.size());
        for (std::size_t i = 0; i < pcs.size(); ++i) column_left[i] = pcs[i].count;
        for (std::size_t j = 0; j < stacks.size(); ++j) {
            row_left[j] = stacks[j].samples;
            for (std::size_t i = 0; i < pcs.size(); ++i) {
                // With rows != columns (a cut path's samples), rows decide: scaled columns.
                const double exact = static_cast<double>(stacks[j].samples) *
                                     static_cast<double>(pcs[i].count) /
                                     static_cast<double>(columns);
                cell[j][i] = std::min({static_cast<std::uint64_t>(exact), row_left[j],
                                       rows == columns ? column_left[i] : row_left[j]});
                row_left[j] -= cell[j][i];
                if (rows == columns) column_left[i] -= cell[j][i];
            }
        }
        for (std::size_t j = 0, i = 0; j < stacks.size(); ++j) {
            while (row_left[j] > 0) {
                if (rows != columns) {  // the largest cell takes what rounding left
                    const auto most = std::max_element(
                        pcs.begin(), pcs.end(), [](auto& a, auto& b) { return a.count < b.count; });
                    cell[j][static_cast<std::size_t>(most - pcs.begin())] += row_left[j];
                    break;
                }
                while (column_left[i] == 0) ++i;
                const std::uint64_t take = std::min(row_left[j], column_left[i]);
                cell[j][i] += take;
                row_left[j] -= take;
                column_left[i] -= take;
            }
        }
        for (std::size_t j = 0; j < stacks.size(); ++j) {
            for (std::size_t i = 0; i < pcs.size(); ++i)
                if (cell[j][i]) sample_at(location(pcs[i].pc), stacks[j].callers, cell[j][i]);
        }
    }

    void sample_at(std::uint64_t leaf, const std::vector<std::uint64_t>& callers,
                   std::uint64_t samples) {
        std::vector<std::uint64_t> ids{leaf};
        ids.insert(ids.end(), callers.begin(), callers.end());
        sample(ids, static_cast<std::int64_t>(samples), 0);
    }

    void sample(const std::vector<std::uint64_t>& locations, std::int64_t samples,
                std::int64_t calls) {
        auto* s = profile_.add_sample();
        for (const auto id : locations) s->add_location_id(id);
        s->add_value(samples);
        s->add_value(calls);
        for (const auto& [key, str] : labels_) {
            auto* label = s->add_label();
            label->set_key(key);
            label->set_str(str);
        }
    }

    // The gprof symbol holding `addr`, or none.
    const ProfileSymbol* symbol_at(std::uint64_t addr) const {
        return functions_by_address_ ? functions_by_address_->holding(addr) : nullptr;
    }

    std::uint64_t function(const ProfileSymbol& symbol) {
        const auto [it, added] = functions_.try_emplace(&symbol, functions_.size() + 1);
        if (added) {
            auto* f = profile_.add_function();
            f->set_id(it->second);
            f->set_name(strings_(symbol.name));
            f->set_system_name(strings_(symbol.name));
            // The function's entry in DWARF's line table, as the profile engine names it.
            if (const auto entry = elf_->source_of(symbol.addr)) {
                f->set_filename(strings_(entry->file));
                f->set_start_line(entry->line);
                has_filenames_ = true;
            }
        }
        return it->second;
    }

    std::uint64_t location(std::uint64_t addr) {
        const auto [it, added] = locations_.try_emplace(addr, locations_.size() + 1);
        if (!added) return it->second;
        auto* l = profile_.add_location();
        l->set_id(it->second);
        l->set_mapping_id(1);
        l->set_address(addr);
        if (const ProfileSymbol* symbol = symbol_at(addr)) {
            auto* line = l->add_line();
            line->set_function_id(function(*symbol));
            if (const auto source = elf_->source_of(addr)) line->set_line(source->line);
            has_line_numbers_ = has_line_numbers_ || line->line() > 0;
        }
        return it->second;
    }

    // The firmware's code (else the range the addresses span), named by its ELF and build-id.
    void mapping() {
        auto* m = profile_.add_mapping();
        m->set_id(1);
        auto range = code_range_of(input_.source);
        if (!range && !locations_.empty())
            range = CodeRange{locations_.begin()->first, locations_.rbegin()->first + 1};
        if (range) {
            m->set_memory_start(range->first);
            m->set_memory_limit(range->second);
        }
        if (elf_) {
            m->set_filename(strings_(elf_->path().string()));
            m->set_build_id(strings_(elf_->build_id()));
        }
        m->set_has_functions(functions_by_address_ && !functions_by_address_->empty());
        m->set_has_filenames(has_filenames_);
        m->set_has_line_numbers(has_line_numbers_);
    }

    const ExportInput& input_;
    pb::Profile profile_;
    StringTable strings_;
    const Symbolizer* elf_;
    std::optional<FunctionIndex> functions_by_address_;  // with an ELF
    std::int64_t period_ns_ = 0;
    std::vector<std::pair<std::int64_t, std::int64_t>> labels_;  // key, value (string indices)
    std::map<const ProfileSymbol*, std::uint64_t> functions_;
    std::map<std::uint64_t, std::uint64_t> locations_;  // address -> id
    bool has_filenames_ = false;
    bool has_line_numbers_ = false;
};

constexpr int kGzipWindow = 15 + 16;  // zlib's window bits plus 16: a gzip header and trailer

}  // namespace

std::string pprof_profile(const ExportInput& input) {
    return gzip(PprofBuilder(input).build());
}

std::string gzip(std::string_view bytes) {
    z_stream z{};
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK)
        throw std::runtime_error("gzip: zlib could not start");
    std::string out(deflateBound(&z, bytes.size()), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    z.avail_in = static_cast<uInt>(bytes.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int result = deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    if (result != Z_STREAM_END) throw std::runtime_error("gzip: zlib could not compress");
    return out;
}

std::string gunzip(std::string_view bytes) {
    z_stream z{};
    if (inflateInit2(&z, kGzipWindow) != Z_OK)
        throw std::runtime_error("gunzip: zlib could not start");
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    z.avail_in = static_cast<uInt>(bytes.size());
    std::string out;
    int result = Z_OK;
    while (result == Z_OK) {
        char buffer[1 << 14];
        z.next_out = reinterpret_cast<Bytef*>(buffer);
        z.avail_out = sizeof buffer;
        result = inflate(&z, Z_NO_FLUSH);
        out.append(buffer, sizeof buffer - z.avail_out);
        if (result == Z_BUF_ERROR && z.avail_in == 0) break;  // cut short
    }
    inflateEnd(&z);
    if (result != Z_STREAM_END) throw std::runtime_error("gunzip: not a whole gzip stream");
    return out;
}

}  // namespace rackprof::gmon
