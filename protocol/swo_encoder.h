// The bytes a Cortex-M's ITM/DWT and TPIU put on SWO, for tests and the simulator.
//
// ItmEncoder writes packets exactly as the ITM does: the shortest local timestamp form, an
// extension packet whenever the stimulus port page changes (the page is forgotten at a sync,
// as the decoder does). TpiuFramer packs streams into 16-byte formatter frames as the
// CoreSight formatter does: data in even bytes loses bit 0 to the aux byte, an ID change that
// lands mid-pair uses the "following byte is still the old ID" aux bit, the ID is repeated
// every 8 frames, full syncs go between frames and half-syncs on pair boundaries.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "protocol/itm_packet.h"

namespace rackprof::protocol {

class ItmEncoder {
  public:
    explicit ItmEncoder(std::vector<std::uint8_t>& out) : out_(out) {}

    // Any packet ItmDecoder can report; software ports 0..255.
    void packet(const ItmPacket& packet);

    void sync();
    void overflow() { out_.push_back(0x70); }
    void software(std::uint16_t port, std::uint32_t value, std::uint8_t size);
    void pc_sample(std::uint32_t pc) { hardware(2, pc, 4); }
    void pc_sleep() { hardware(2, 0, 1); }
    void exception(std::uint16_t number, std::uint8_t fn);
    void local_timestamp(std::uint32_t cycles, std::uint8_t tc = 0);
    void global_timestamp1(std::uint32_t low26, std::uint8_t flags = 0);
    void global_timestamp2(std::uint64_t high);

  private:
    void header_and_payload(std::uint8_t header, std::uint32_t value, std::uint8_t size);
    void hardware(unsigned disc, std::uint32_t value, std::uint8_t size);
    void continued(std::uint8_t header, std::uint64_t value, unsigned min_bytes);

    std::vector<std::uint8_t>& out_;
    std::uint16_t page_ = 0;
};

class TpiuFramer {
  public:
    explicit TpiuFramer(std::vector<std::uint8_t>& out) : out_(out) {}

    // Bytes of one trace source (ID 1..0x6F).
    void write(std::uint8_t id, std::span<const std::uint8_t> data);
    // Pads the frame in progress with ID 0 (null) bytes and puts a full sync after it.
    void full_sync();
    // A half-sync at the next pair boundary of the frame in progress.
    void half_sync();
    // Pads the frame in progress (if any) so every byte written so far is out.
    void flush();

  private:
    static constexpr int kIdRepeatFrames = 8;

    void put(std::uint8_t id, std::uint8_t byte);
    void put_id(std::uint8_t id);
    void put_data(std::uint8_t byte);
    void put_slot(std::uint8_t stored, bool aux);
    void end_frame();

    std::vector<std::uint8_t>& out_;
    std::array<std::uint8_t, 16> frame_{};
    unsigned pos_ = 0;
    std::uint8_t aux_ = 0;
    int current_ = -1;  // the stream the decoder is told the bytes belong to
    int frames_since_id_ = 0;
    std::vector<std::uint8_t> half_syncs_;  // positions in the frame in progress
};

}  // namespace rackprof::protocol
