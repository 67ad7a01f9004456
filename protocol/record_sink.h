// Where a decoder delivers records: in batches, so the per-record cost stays inline. Events
// (hello, console text, markers) are rare and arrive one at a time, in stream order relative
// to the record batches around them.
#pragma once

#include <span>
#include <vector>

#include "protocol/record.h"
#include "protocol/stream_event.h"

namespace rackprof::protocol {

class RecordSink {
  public:
    virtual ~RecordSink() = default;
    virtual void on_records(std::span<const Record> batch) = 0;
    virtual void on_event(const StreamEvent& /*event*/) {}
};

// Records kept in order; events dropped.
struct RecordCollector : RecordSink {
    std::vector<Record> records;
    void on_records(std::span<const Record> batch) override {
        records.insert(records.end(), batch.begin(), batch.end());
    }
};

}  // namespace rackprof::protocol
