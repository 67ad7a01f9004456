#include "gmon/static_calls.h"

#include <algorithm>
#include <set>

#include "gmon/function_code.h"
#include "gmon/function_index.h"

namespace rackprof::gmon {

namespace {

// Functions whose address (with the Thumb bit on ARM) is a naturally aligned word of the
// image's loaded contents: the vector table, handler tables, literal pools.
void mark_address_taken(const Symbolizer& elf, StaticCallGraph& graph) {
    const int width = elf.layout().addr_bytes == 8 ? 8 : 4;
    std::vector<std::pair<std::uint64_t, std::size_t>> by_value;
    for (std::size_t f = 0; f < graph.functions.size(); ++f)
        by_value.emplace_back(graph.functions[f].addr | (elf.arm() ? 1u : 0u), f);
    std::sort(by_value.begin(), by_value.end());
    for (const auto& [base, bytes] : elf.loaded_sections()) {
        const std::size_t skip = (width - base % width) % width;
        for (std::size_t at = skip; at + width <= bytes.size(); at += width) {
            std::uint64_t v = 0;
            for (int k = width; k-- > 0;)
                v = (v << 8) | static_cast<std::uint8_t>(bytes[at + static_cast<std::size_t>(k)]);
            const auto it = std::lower_bound(by_value.begin(), by_value.end(),
                                             std::pair<std::uint64_t, std::size_t>{v, 0});
            if (it != by_value.end() && it->first == v)
                graph.functions[it->second].address_taken = true;
        }
    }
}

}  // namespace

StaticCallGraph static_call_graph(const Symbolizer& elf) {
    StaticCallGraph graph;
    const FunctionIndex index(elf);
    for (const ProfileSymbol& s : index.symbols())
        graph.functions.push_back({s.name, s.addr, s.end_addr + 1, false});
    std::set<std::pair<std::size_t, std::size_t>> calls;
    for (std::size_t f = 0; f < graph.functions.size(); ++f) {
        const auto& fn = graph.functions[f];
        for (const Instruction& i : function_instructions(elf, fn.addr, fn.end)) {
            if (i.flow == Instruction::Flow::kNext) continue;
            if (i.target == 0) {
                graph.indirect_calls += i.flow == Instruction::Flow::kCall;
                continue;
            }
            const ProfileSymbol* callee = index.holding(i.target);
            if (!callee) continue;
            // A jump inside the function is its own control flow; to another function's
            // start it is a tail call, which returns for the caller.
            if (i.flow == Instruction::Flow::kJump &&
                (callee->addr == fn.addr || (i.target & ~std::uint64_t{1}) != callee->addr))
                continue;
            const auto at = std::lower_bound(
                graph.functions.begin(), graph.functions.end(), callee->addr,
                [](const StaticCallGraph::Function& g, std::uint64_t a) { return g.addr < a; });
            if (at != graph.functions.end() && at->addr == callee->addr)
                calls.emplace(f, static_cast<std::size_t>(at - graph.functions.begin()));
        }
    }
    graph.calls.assign(calls.begin(), calls.end());
    mark_address_taken(elf, graph);
    return graph;
}

}  // namespace rackprof::gmon
