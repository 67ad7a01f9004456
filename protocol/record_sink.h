// Where a decoder delivers records: in batches, so the per-record cost stays inline.
#pragma once

#include <span>

#include "protocol/record.h"

namespace rackprof::protocol {

class RecordSink {
  public:
    virtual ~RecordSink() = default;
    virtual void on_records(std::span<const Record> batch) = 0;
};

}  // namespace rackprof::protocol
