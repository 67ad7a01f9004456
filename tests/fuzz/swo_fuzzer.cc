// libFuzzer target: protocol "itm" (SWO) through the registry: TPIU deframer, ITM decoder,
// the stimulus ports' uses and an inner framed decoder. Settings bits:
//   bit 0  TPIU formatter frames          bit 4  a code range [0, 0x10000) is known
//   bit 1  console on port 0              bit 5  the inner framed width is 3 (else 4)
//   bit 2  orbstat on port 30             bit 6  the ITM's TPIU stream ID is 2 (else 1)
//   bit 3  framed records on port 1
#include <variant>

#include "protocol/swo_decoder.h"
#include "tests/fuzz/decoder_runs.h"

namespace rackprof::fuzz {
namespace {

using protocol::StreamEvent;

protocol::WireSpec swo_spec(std::uint8_t settings) {
    protocol::SwoOptions swo;
    swo.tpiu = settings & 1;
    if (settings & 2) swo.console_port = 0;
    if (settings & 4) swo.orbstat_port = 30;
    if (settings & 8) swo.framed_port = 1;
    swo.tpiu_stream = settings & 64 ? 2 : 1;
    std::optional<protocol::AddressRange> range;
    if (settings & 16) range = protocol::AddressRange{0, 0x10000};
    return {"itm", "bin", settings & 32 ? 3 : 4, range, swo};
}

// Events keep stream order per source only: the SWO layer's own (console text, orbstat's
// function events) and the inner framed decoder's (HELLO, markers, ENTER/EXIT with their
// 32-bit stamps, EventsLost, the counter campaign items) may interleave differently.
std::vector<StreamEvent> events_from(const std::vector<StreamEvent>& events, bool inner) {
    std::vector<StreamEvent> out;
    for (const StreamEvent& e : events) {
        const auto* function = std::get_if<protocol::FunctionEvent>(&e);
        const bool from_inner = std::holds_alternative<protocol::TargetHello>(e) ||
                                std::holds_alternative<protocol::ProfilingMarker>(e) ||
                                std::holds_alternative<protocol::EventsLost>(e) ||
                                std::holds_alternative<protocol::CounterCapabilities>(e) ||
                                std::holds_alternative<protocol::CounterConfig>(e) ||
                                std::holds_alternative<protocol::FunctionCounts>(e) ||
                                std::holds_alternative<protocol::RunTotals>(e) ||
                                (function && function->stamp_bits == 32);
        if (from_inner == inner) out.push_back(e);
    }
    return out;
}

const protocol::SwoDecoder& swo_of(const DecoderRun& run) {
    const auto* swo = dynamic_cast<const protocol::SwoDecoder*>(run.decoder.get());
    FUZZ_CHECK(swo != nullptr);
    return *swo;
}

// Every wire byte in exactly one TPIU bucket; every ITM byte decoded or discarded.
void check_layers(const protocol::SwoDecoder& swo, const protocol::WireSpec& spec, Bytes wire) {
    const auto& tpiu = swo.tpiu_stats();
    const auto& itm = swo.itm_stats();
    if (spec.swo.tpiu) {
        FUZZ_CHECK(tpiu.bytes_in == wire.size());
        FUZZ_CHECK(tpiu.bytes_in == tpiu.bytes_out + tpiu.bytes_skipped + tpiu.bytes_padding +
                                        tpiu.bytes_format + tpiu.bytes_sync + tpiu.bytes_discarded);
        FUZZ_CHECK(itm.bytes_in == tpiu.bytes_out);
    } else {
        FUZZ_CHECK(tpiu == protocol::TpiuStats{});
        FUZZ_CHECK(itm.bytes_in == wire.size());
    }
    FUZZ_CHECK(itm.bytes_in == itm.bytes_decoded + itm.bytes_discarded);
    if (!spec.swo.framed_port) FUZZ_CHECK(swo.swo_stats().framed_bytes == 0);
}

}  // namespace
}  // namespace rackprof::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace rackprof::fuzz;
    const SettingsInput in = split_input(data, size);
    const auto spec = swo_spec(in.settings);
    auto runs = run_chunkings(spec, in);
    for (DecoderRun& run : runs) sort_records(run.records);
    const auto& first = swo_of(runs.front());
    for (const DecoderRun& run : runs) {
        const auto& swo = swo_of(run);
        check_layers(swo, spec, in.payload);
        FUZZ_CHECK(run.records == runs.front().records);
        FUZZ_CHECK(events_from(run.events, false) == events_from(runs.front().events, false));
        FUZZ_CHECK(events_from(run.events, true) == events_from(runs.front().events, true));
        FUZZ_CHECK(swo.swo_stats() == first.swo_stats());
        FUZZ_CHECK(swo.itm_stats() == first.itm_stats());
        FUZZ_CHECK(swo.tpiu_stats() == first.tpiu_stats());
        FUZZ_CHECK(swo.exceptions() == first.exceptions());
    }
    if (spec.code_range) {
        for (const auto& r : runs.front().records) {
            // The inner framed decoder has no range check; only the SWO layer's own are bound.
            if (!spec.swo.framed_port) FUZZ_CHECK(spec.code_range->contains(r.self_pc));
        }
    }
    return 0;
}
