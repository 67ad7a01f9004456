// BFD's bfd_find_nearest_line (binutils 2.40 bfd/dwarf2.c and elf.c) as gprof calls it, over
// libdw for the units, DIEs and file tables. The line program is decoded here rather than
// taken from dwarf_getsrclines: libdw sorts a unit's rows by address and so forgets which
// sequence a row belongs to, and BFD's answer depends on exactly that.
#include "gmon/gprof_lines.h"

#include <elfutils/libdw.h>

#include <dwarf.h>
#include <algorithm>
#include <cstring>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

namespace rackprof::gmon {

namespace {

using Range = std::pair<std::uint64_t, std::uint64_t>;  // [low, high)

// Opcodes elfutils' dwarf.h does not name.
constexpr std::uint8_t kExtendedOp = 0;
constexpr std::uint8_t kHpSourceFileCorrelation = 0x80;

struct LineRow {
    std::uint64_t addr = 0;
    int file = -1;  // index into Unit::files; -1: "<unknown>"
    unsigned line = 0;
    bool end = false;
};

struct Sequence {
    std::uint64_t low = 0;
    std::vector<LineRow> rows;  // ascending; the last is the end_sequence row
    std::size_t order = 0;      // BFD sorts equal sequences by this (newest first)
    std::uint64_t high() const { return rows.back().addr; }
};

struct Function {
    std::string name;
    bool named = false;
    bool is_linkage = false;  // BFD's flag: the name is final (a run may set it, see find())
    std::vector<Range> ranges;
};

struct Unit {
    std::vector<std::string> files;  // by DWARF file number; "<unknown>" where none
    std::vector<Sequence> sequences;
    std::vector<Function> functions;  // in DIE order
    std::vector<Range> own_ranges;    // the unit DIE's (DW_AT_ranges, low and high pc)
};

bool covers(const std::vector<Range>& ranges, std::uint64_t addr) {
    return std::any_of(ranges.begin(), ranges.end(),
                       [&](const Range& r) { return r.first <= addr && addr < r.second; });
}

bool covers(const std::vector<Sequence>& sequences, std::uint64_t addr) {
    return std::any_of(sequences.begin(), sequences.end(),
                       [&](const Sequence& s) { return s.low <= addr && addr < s.high(); });
}

bool covers_functions(const Unit& unit, std::uint64_t addr) {
    return std::any_of(unit.functions.begin(), unit.functions.end(),
                       [&](const Function& f) { return covers(f.ranges, addr); });
}

// A cursor over a section's bytes; every read past the end fails the cursor.
class ByteReader {
  public:
    ByteReader(std::string_view bytes, std::size_t at, bool big)
        : bytes_(bytes), at_(at), big_(big) {}
    bool ok() const { return ok_; }
    std::size_t at() const { return at_; }
    void seek(std::size_t at) { at <= bytes_.size() ? void(at_ = at) : void(ok_ = false); }
    std::uint64_t fixed(std::size_t n) {
        if (!ok_ || n > 8 || bytes_.size() - at_ < n) return fail();
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const auto byte = static_cast<std::uint8_t>(bytes_[at_ + (big_ ? i : n - 1 - i)]);
            v = (v << 8) | byte;
        }
        at_ += n;
        return v;
    }
    std::uint64_t uleb() { return leb(false); }
    std::int64_t sleb() { return static_cast<std::int64_t>(leb(true)); }

  private:
    std::uint64_t fail() {
        ok_ = false;
        return 0;
    }
    std::uint64_t leb(bool is_signed) {
        std::uint64_t v = 0;
        unsigned shift = 0;
        std::uint8_t byte = 0x80;
        while (ok_ && (byte & 0x80)) {
            byte = static_cast<std::uint8_t>(fixed(1));
            if (shift < 64) v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
            shift += 7;
        }
        if (is_signed && shift < 64 && (byte & 0x40)) v |= ~std::uint64_t{0} << shift;
        return v;
    }
    std::string_view bytes_;
    std::size_t at_;
    bool big_;
    bool ok_ = true;
};

// add_line_info(): rows arrive in program order; within a sequence the last row at an
// address replaces the one before it, and a row out of order is put in its place.
void add_row(std::vector<Sequence>& sequences, const LineRow& row) {
    Sequence* seq = sequences.empty() ? nullptr : &sequences.back();
    if (seq && seq->rows.back().addr == row.addr && seq->rows.back().end == row.end) {
        seq->rows.back() = row;
    } else if (!seq || seq->rows.back().end) {
        sequences.push_back({row.addr, {row}, 0});
    } else if (row.end || row.addr > seq->rows.back().addr) {
        seq->rows.push_back(row);
    } else {
        const auto at =
            std::lower_bound(seq->rows.begin(), seq->rows.end(), row.addr,
                             [](const LineRow& r, std::uint64_t addr) { return r.addr < addr; });
        seq->rows.insert(at, row);
        seq->low = std::min(seq->low, row.addr);
    }
}

struct LineHeader {
    unsigned version = 0;
    std::uint8_t min_insn = 1;
    std::uint8_t max_ops = 1;
    std::int8_t line_base = 0;
    std::uint8_t line_range = 0;
    std::uint8_t opcode_base = 0;
    std::vector<std::uint8_t> opcode_lengths;
    std::size_t program = 0;  // where the opcodes start
    std::size_t end = 0;      // one past the unit's last byte
};

bool read_header(ByteReader& in, LineHeader& h) {
    std::uint64_t length = in.fixed(4);
    std::size_t offset_size = 4;
    if (length == 0xffffffff) {
        length = in.fixed(8);
        offset_size = 8;
    }
    h.end = in.at() + length;
    h.version = static_cast<unsigned>(in.fixed(2));
    if (h.version < 2 || h.version > 5) return false;
    if (h.version >= 5) in.fixed(2);  // address and segment selector sizes
    const std::uint64_t header_length = in.fixed(offset_size);
    h.program = in.at() + header_length;
    h.min_insn = static_cast<std::uint8_t>(in.fixed(1));
    h.max_ops = h.version >= 4 ? static_cast<std::uint8_t>(in.fixed(1)) : 1;
    in.fixed(1);  // default_is_stmt: BFD keeps every row
    h.line_base = static_cast<std::int8_t>(in.fixed(1));
    h.line_range = static_cast<std::uint8_t>(in.fixed(1));
    h.opcode_base = static_cast<std::uint8_t>(in.fixed(1));
    for (unsigned i = 1; i < h.opcode_base; ++i)
        h.opcode_lengths.push_back(static_cast<std::uint8_t>(in.fixed(1)));
    return in.ok() && h.max_ops > 0 && h.end >= h.program;
}

// The address advance of `ops` operations (op_index is always 0 on a one-op machine).
std::uint64_t advance(const LineHeader& h, std::uint64_t ops, unsigned& op_index) {
    if (h.max_ops == 1) return ops * h.min_insn;
    const std::uint64_t total = op_index + ops;
    op_index = static_cast<unsigned>(total % h.max_ops);
    return total / h.max_ops * h.min_insn;
}

// decode_line_info()'s state machine, one sequence after another to the unit's end. A
// malformed program gives no rows at all, as BFD then drops the unit's table.
std::vector<Sequence> decode_program(ByteReader& in, const LineHeader& h, int first_file,
                                     int files) {
    std::vector<Sequence> sequences;
    auto file_of = [&](std::uint64_t n) {
        return n < static_cast<std::uint64_t>(files) ? int(n) : -1;
    };
    in.seek(h.program);
    while (in.ok() && in.at() < h.end) {
        std::uint64_t address = 0;
        unsigned op_index = 0;
        int file = file_of(static_cast<std::uint64_t>(first_file));
        std::int64_t line = 1;
        bool end = false;
        auto emit = [&](bool is_end) {
            add_row(sequences, {address, file, static_cast<unsigned>(line), is_end});
        };
        while (!end && in.ok() && in.at() < h.end) {
            const auto op = static_cast<std::uint8_t>(in.fixed(1));
            if (op >= h.opcode_base) {
                if (h.line_range == 0) return {};
                const unsigned adjusted = op - h.opcode_base;
                address += advance(h, adjusted / h.line_range, op_index);
                line += h.line_base + static_cast<int>(adjusted % h.line_range);
                emit(false);
                continue;
            }
            switch (op) {
                case kExtendedOp: {
                    const std::uint64_t length = in.uleb();
                    const std::size_t next = in.at() + length;
                    const auto sub = static_cast<std::uint8_t>(in.fixed(1));
                    if (sub == DW_LNE_end_sequence) {
                        end = true;
                        emit(true);
                    } else if (sub == DW_LNE_set_address) {
                        address = in.fixed(length > 0 ? length - 1 : 0);
                        op_index = 0;
                    } else if (sub != DW_LNE_define_file && sub != DW_LNE_set_discriminator &&
                               sub != kHpSourceFileCorrelation) {
                        return {};  // "mangled line number section"
                    }
                    in.seek(next);
                    break;
                }
                case DW_LNS_copy:
                    emit(false);
                    break;
                case DW_LNS_advance_pc:
                    address += advance(h, in.uleb(), op_index);
                    break;
                case DW_LNS_advance_line:
                    line += in.sleb();
                    break;
                case DW_LNS_set_file:
                    file = file_of(in.uleb());
                    break;
                case DW_LNS_set_column:
                    in.uleb();
                    break;
                case DW_LNS_negate_stmt:
                case DW_LNS_set_basic_block:
                    break;
                case DW_LNS_const_add_pc:
                    if (h.line_range == 0) return {};
                    address += advance(h, (255u - h.opcode_base) / h.line_range, op_index);
                    break;
                case DW_LNS_fixed_advance_pc:
                    address += in.fixed(2);
                    op_index = 0;
                    break;
                default:
                    for (unsigned i = 0; op > 0 && i < h.opcode_lengths[op - 1u]; ++i) in.uleb();
            }
        }
    }
    if (!in.ok()) return {};
    return sequences;
}

// sort_line_sequences(): by start, the longest first; a sequence inside the one before it is
// dropped, one overlapping it starts where it ends.
std::vector<Sequence> sorted_sequences(std::vector<Sequence> raw) {
    for (std::size_t i = 0; i < raw.size(); ++i) raw[i].order = raw.size() - 1 - i;
    std::sort(raw.begin(), raw.end(), [](const Sequence& l, const Sequence& r) {
        if (l.low != r.low) return l.low < r.low;
        if (l.high() != r.high()) return l.high() > r.high();
        return l.order < r.order;
    });
    std::vector<Sequence> kept;
    for (Sequence& s : raw) {
        if (!kept.empty() && s.low < kept.back().high()) {
            if (s.high() <= kept.back().high()) continue;
            s.low = kept.back().high();
        }
        kept.push_back(std::move(s));
    }
    return kept;
}

// lookup_address_in_line_info_table().
const LineRow* find_row(const Unit& unit, std::uint64_t addr) {
    const auto& seqs = unit.sequences;
    const auto seq = std::upper_bound(seqs.begin(), seqs.end(), addr,
                                      [](std::uint64_t a, const Sequence& s) { return a < s.low; });
    if (seq == seqs.begin()) return nullptr;
    const Sequence& s = *(seq - 1);
    if (addr >= s.high()) return nullptr;
    const auto row = std::upper_bound(s.rows.begin(), s.rows.end(), addr,
                                      [](std::uint64_t a, const LineRow& r) { return a < r.addr; });
    if (row == s.rows.begin()) return nullptr;
    return &*(row - 1);
}

// lookup_address_in_function_table(): the smallest range holding the address, the later
// function on a tie.
Function* find_function(Unit& unit, std::uint64_t addr) {
    Function* best = nullptr;
    std::uint64_t best_length = ~std::uint64_t{0};
    for (Function& f : unit.functions) {
        for (const auto& [low, high] : f.ranges) {
            if (addr < low || addr >= high) continue;
            if (high - low <= best_length) {
                best = &f;
                best_length = high - low;
            }
        }
    }
    return best;
}

// BFD's mangle_style() == 0: languages whose DW_AT_name is the symbol's name.
bool name_is_linkage(int lang) {
    switch (lang) {
        case DW_LANG_C89:
        case DW_LANG_C:
        case DW_LANG_Cobol74:
        case DW_LANG_Cobol85:
        case DW_LANG_Fortran77:
        case DW_LANG_Pascal83:
        case DW_LANG_PLI:
        case DW_LANG_C99:
        case DW_LANG_UPC:
        case DW_LANG_C11:
        case DW_LANG_Mips_Assembler:
            return true;
        default:
            return false;
    }
}

struct NameState {
    Function* f;
    int lang;
    int depth;
};

// scan_unit_for_symbols() and find_abstract_instance(): a name from the DIE's attributes in
// their order; an abstract origin or specification lends its own.
int name_attribute(Dwarf_Attribute* attr, void* arg) {
    auto* s = static_cast<NameState*>(arg);
    const unsigned code = dwarf_whatattr(attr);
    if (code == DW_AT_name) {
        const char* name = dwarf_formstring(attr);
        if (!s->f->named && name) {
            s->f->name = name;
            s->f->named = true;
            if (name_is_linkage(s->lang)) s->f->is_linkage = true;
        }
    } else if (code == DW_AT_linkage_name || code == DW_AT_MIPS_linkage_name) {
        if (const char* name = dwarf_formstring(attr)) {
            s->f->name = name;
            s->f->named = true;
            s->f->is_linkage = true;
        }
    } else if ((code == DW_AT_specification || (code == DW_AT_abstract_origin && s->depth == 0)) &&
               s->depth < 8) {
        Dwarf_Die origin;
        if (dwarf_formref_die(attr, &origin)) {
            NameState inner{s->f, s->lang, s->depth + 1};
            Dwarf_Die cu;
            if (dwarf_diecu(&origin, &cu, nullptr, nullptr)) inner.lang = dwarf_srclang(&cu);
            dwarf_getattrs(&origin, name_attribute, &inner, 0);
        }
    }
    return DWARF_CB_OK;
}

std::vector<Range> ranges_of(Dwarf_Die* die) {
    std::vector<Range> out;
    if (!dwarf_hasattr(die, DW_AT_high_pc) && !dwarf_hasattr(die, DW_AT_ranges)) return out;
    Dwarf_Addr base = 0, low = 0, high = 0;
    for (ptrdiff_t at = 0; (at = dwarf_ranges(die, at, &base, &low, &high)) > 0;) {
        if (low != high) out.emplace_back(low, high);
    }
    return out;
}

void collect_functions(Dwarf_Die* parent, int lang, Unit& unit) {
    Dwarf_Die child;
    if (dwarf_child(parent, &child) != 0) return;
    do {
        const int tag = dwarf_tag(&child);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_entry_point ||
            tag == DW_TAG_inlined_subroutine) {
            Function f;
            NameState state{&f, lang, 0};
            dwarf_getattrs(&child, name_attribute, &state, 0);
            f.ranges = ranges_of(&child);
            unit.functions.push_back(std::move(f));
        }
        if (dwarf_haschildren(&child)) collect_functions(&child, lang, unit);
    } while (dwarf_siblingof(&child, &child) == 0);
}

}  // namespace

class DwarfLineIndex {
  public:
    std::vector<Unit> units;
    // Every range a unit answers for (its own, its sequences', its functions'), sorted by
    // start with the highest end so far (BFD's watermark): the units that may hold an address
    // are found without a walk over all of them.
    struct Span {
        std::uint64_t low, high, reach;
        std::size_t unit;
    };
    std::vector<Span> spans;

    std::vector<std::size_t> units_at(std::uint64_t addr) const {
        std::vector<std::size_t> out;
        auto it = std::partition_point(spans.begin(), spans.end(),
                                       [&](const Span& s) { return s.reach <= addr; });
        for (; it != spans.end() && it->low <= addr; ++it) {
            if (addr < it->high) out.push_back(it->unit);
        }
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
        return out;
    }
};

namespace {

void read_unit(Dwarf_Die* cudie, std::string_view lines, bool big, DwarfLineIndex& index) {
    Unit unit;
    Dwarf_Files* files = nullptr;
    std::size_t nfiles = 0;
    if (dwarf_getsrcfiles(cudie, &files, &nfiles) == 0) {
        for (std::size_t i = 0; i < nfiles; ++i) {
            const char* name = dwarf_filesrc(files, i, nullptr, nullptr);
            unit.files.emplace_back(name ? name : "<unknown>");
        }
    }
    Dwarf_Attribute attr;
    Dwarf_Word offset = 0;
    if (dwarf_attr(cudie, DW_AT_stmt_list, &attr) && dwarf_formudata(&attr, &offset) == 0 &&
        offset < lines.size()) {
        ByteReader in(lines, offset, big);
        LineHeader h;
        if (read_header(in, h)) {
            // Before DWARF 5 file numbers start at 1 (libdw's entry 0 is a placeholder).
            const int first = h.version >= 5 ? 0 : 1;
            if (h.version < 5 && !unit.files.empty()) unit.files[0] = "<unknown>";
            unit.sequences =
                sorted_sequences(decode_program(in, h, first, static_cast<int>(unit.files.size())));
        }
    }
    collect_functions(cudie, dwarf_srclang(cudie), unit);
    unit.own_ranges = ranges_of(cudie);
    const std::size_t n = index.units.size();
    auto span = [&](std::uint64_t low, std::uint64_t high) {
        index.spans.push_back({low, high, high, n});
    };
    for (const auto& [low, high] : unit.own_ranges) span(low, high);
    for (const Sequence& seq : unit.sequences) span(seq.low, seq.high());
    for (const Function& f : unit.functions) {
        for (const auto& [low, high] : f.ranges) span(low, high);
    }
    index.units.push_back(std::move(unit));
}

// libdw's lazily filled caches are not safe to fill from two threads at once.
std::mutex& dwarf_mutex() {
    static std::mutex m;
    return m;
}

}  // namespace

struct GprofSourceLookup::ElfFunctionCache {
    const ElfSymbol* func = nullptr;
    std::uint64_t size = 0;
};

// Which units BFD has read and decoded, and when: it reads units one after another only as
// far as a question needs, decodes a unit's lines and functions when first asked, and asks
// the units it has read in the order their ranges were recorded, so that where ranges overlap
// (code dropped by --gc-sections, all at address 0) the first unit to claim an address is the
// one BFD happened to read or decode first.
struct GprofSourceLookup::Answer {
    std::size_t unit = 0;
    const LineRow* row = nullptr;
    Function* function = nullptr;
};

struct GprofSourceLookup::ReadState {
    std::size_t parsed = 0;                 // units read, in .debug_info order
    std::vector<std::uint64_t> read_at;     // per unit: when its own ranges were recorded
    std::vector<std::uint64_t> decoded_at;  // when its lines and functions were; 0: not yet
    std::uint64_t clock = 0;
};

GprofSourceLookup::GprofSourceLookup(const Symbolizer& elf)
    : elf_(elf),
      index_(std::make_unique<DwarfLineIndex>()),
      cache_(std::make_unique<ElfFunctionCache>()),
      state_(std::make_unique<ReadState>()) {
    Dwarf* dwarf = elf.dwarf();
    if (!dwarf) return;
    std::lock_guard lock(dwarf_mutex());
    const std::string_view lines = elf.section_bytes(".debug_line");
    const bool big = elf.layout().order == ByteOrder::kBig;
    Dwarf_CU* cu = nullptr;
    Dwarf_Half version = 0;
    std::uint8_t unit_type = 0;
    Dwarf_Die cudie, subdie;
    while (dwarf_get_units(dwarf, cu, &cu, &version, &unit_type, &cudie, &subdie) == 0) {
        if (unit_type == DW_UT_compile || unit_type == DW_UT_partial)
            read_unit(&cudie, lines, big, *index_);
    }
    auto& spans = index_->spans;
    std::sort(spans.begin(), spans.end(),
              [](const auto& l, const auto& r) { return l.low < r.low; });
    for (std::size_t i = 1; i < spans.size(); ++i)
        spans[i].reach = std::max(spans[i].reach, spans[i - 1].reach);
    state_->read_at.assign(index_->units.size(), 0);
    state_->decoded_at.assign(index_->units.size(), 0);
}

GprofSourceLookup::~GprofSourceLookup() = default;

// _bfd_elf_find_function() with elf32_arm_maybe_function_sym(): the .text symbol nearest
// below the address (the larger on a tie), remembered while addresses stay inside it.
const char* GprofSourceLookup::elf_function(std::uint64_t addr) {
    auto size_of = [&](const ElfSymbol& s) -> std::uint64_t {
        if (s.debugging || s.object || s.tls || !s.defined || s.section != elf_.text_index())
            return 0;
        if (s.notype && s.size == 0 && s.local && s.hidden) return 0;  // annobin's markers
        if (elf_.arm()) {
            if (!s.notype && !s.function) return 0;
            const char* n = s.name.c_str();
            if (s.local && n[0] == '$' && n[1] >= 'a' && n[1] <= 'z' && (n[2] == 0 || n[2] == '.'))
                return 0;  // mapping and tagging symbols
        }
        return s.size ? s.size : 1;
    };
    ElfFunctionCache& c = *cache_;
    if (!c.func || addr < c.func->addr || addr >= c.func->addr + c.size) {
        c = {};
        std::uint64_t low = 0;
        for (const ElfSymbol& s : elf_.symbols()) {
            const std::uint64_t size = size_of(s);
            if (size != 0 && s.addr <= addr && (s.addr > low || (s.addr == low && size > c.size))) {
                c.func = &s;
                c.size = size;
                low = s.addr;
            }
        }
    }
    return c.func ? c.func->name.c_str() : nullptr;
}

// comp_unit_find_nearest_line(): the unit's row and function for the address, its lines and
// functions decoded on first use.
bool GprofSourceLookup::ask(std::size_t u, std::uint64_t addr, Answer& answer) {
    ReadState& st = *state_;
    if (st.decoded_at[u] == 0) st.decoded_at[u] = ++st.clock;
    Unit& unit = index_->units[u];
    answer.unit = u;
    answer.row = find_row(unit, addr);
    answer.function = find_function(unit, addr);
    return answer.row || answer.function;
}

// _bfd_dwarf2_find_nearest_line()'s search: the units read so far that claim the address, in
// the order they claimed it; those read with no range at all; then units not yet read.
GprofSourceLookup::Answer GprofSourceLookup::search(std::uint64_t addr) {
    ReadState& st = *state_;
    Answer answer;
    std::vector<std::pair<std::uint64_t, std::size_t>> claims;
    for (const std::size_t u : index_->units_at(addr)) {
        if (u >= st.parsed) continue;
        const Unit& unit = index_->units[u];
        if (covers(unit.own_ranges, addr)) {
            claims.emplace_back(st.read_at[u], u);
        } else if (st.decoded_at[u] &&
                   (covers(unit.sequences, addr) || covers_functions(unit, addr))) {
            claims.emplace_back(st.decoded_at[u], u);
        }
    }
    std::sort(claims.begin(), claims.end());
    for (const auto& [when, u] : claims) {
        if (ask(u, addr, answer)) return answer;
    }
    auto rangeless = [&](std::size_t u) {
        const Unit& unit = index_->units[u];
        return unit.own_ranges.empty() && (st.decoded_at[u] == 0 || unit.sequences.empty());
    };
    for (std::size_t u = 0; u < st.parsed; ++u) {
        if (rangeless(u) && ask(u, addr, answer)) return answer;
    }
    while (st.parsed < index_->units.size()) {
        const std::size_t u = st.parsed++;
        st.read_at[u] = ++st.clock;
        const Unit& unit = index_->units[u];
        if ((unit.own_ranges.empty() || covers(unit.own_ranges, addr)) && ask(u, addr, answer))
            return answer;
    }
    return {};
}

std::vector<std::uint64_t> GprofSourceLookup::change_points(std::uint64_t low,
                                                            std::uint64_t high) const {
    if (low >= high) return {};
    std::vector<std::uint64_t> points = {low};
    auto add = [&](std::uint64_t a) {
        if (a > low && a < high) points.push_back(a);
    };
    for (const Unit& unit : index_->units) {
        for (const auto& [from, to] : unit.own_ranges) add(from), add(to);
        for (const Sequence& seq : unit.sequences) {
            add(seq.low);
            for (const LineRow& row : seq.rows) add(row.addr);
        }
        for (const Function& f : unit.functions) {
            for (const auto& [from, to] : f.ranges) add(from), add(to);
        }
    }
    for (const ElfSymbol& sym : elf_.symbols()) {
        if (sym.section != elf_.text_index()) continue;
        add(sym.addr);
        add(sym.addr + std::max<std::uint64_t>(sym.size, 1));
    }
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
    return points;
}

std::optional<GprofSourceLine> GprofSourceLookup::find(std::uint64_t addr) {
    const Answer answer = search(addr);
    const LineRow* row = answer.row;
    Function* function = answer.function;
    const Unit* unit = row ? &index_->units[answer.unit] : nullptr;
    const char* name = nullptr;
    if (function && function->is_linkage) {
        name = function->name.c_str();
    } else {
        name = elf_function(addr);
        if (function) {
            if (!name) {
                name = function->named ? function->name.c_str() : nullptr;
            } else if (!function->ranges.empty() &&
                       cache_->func->addr == function->ranges[0].first) {
                function->name = name;
                function->named = true;
            }
            function->is_linkage = true;  // BFD: "stop a repeated search of symbols"
        }
    }
    if (!row || !name || row->line == 0) return std::nullopt;
    const std::string& file = row->file < 0 ? std::string("<unknown>") : unit->files[row->file];
    return GprofSourceLine{file, name, static_cast<int>(row->line)};
}

}  // namespace rackprof::gmon
