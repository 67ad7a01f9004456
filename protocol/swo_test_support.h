// What the SWO tests share: sinks that keep everything, and random chunk boundaries.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "protocol/itm_packet.h"
#include "protocol/record_sink.h"

namespace rackprof::protocol::testing {

struct PacketCollector : ItmPacketSink {
    std::vector<ItmPacket> packets;
    void on_packet(const ItmPacket& packet) override { packets.push_back(packet); }
};

struct RecordCollector : RecordSink {
    std::vector<Record> records;
    std::vector<StreamEvent> events;
    void on_records(std::span<const Record> batch) override {
        records.insert(records.end(), batch.begin(), batch.end());
    }
    void on_event(const StreamEvent& event) override { events.push_back(event); }
};

// Chunks of `size` bytes cut at random places: 1..max_chunk bytes each.
inline std::vector<std::span<const std::uint8_t>> random_chunks(std::span<const std::uint8_t> bytes,
                                                                std::mt19937_64& rng,
                                                                std::size_t max_chunk) {
    std::vector<std::span<const std::uint8_t>> chunks;
    std::size_t pos = 0;
    while (pos < bytes.size()) {
        const std::size_t n = std::min(bytes.size() - pos, 1 + rng() % max_chunk);
        chunks.push_back(bytes.subspan(pos, n));
        pos += n;
    }
    return chunks;
}

}  // namespace rackprof::protocol::testing
