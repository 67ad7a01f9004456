#include "storage/record_codec.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "storage/storage_error.h"

namespace rackprof::storage {
namespace {

using protocol::Record;
using Bytes = std::vector<std::uint8_t>;

TEST_CASE("the packed bytes are the database's: pinned for each kind, with and without a count") {
    CHECK(pack_records(std::vector{Record::pc_sample(0x14B4)}) == Bytes{0x02, 0xB4, 0x14, 0, 0});
    CHECK(pack_records(std::vector{Record::arc(0x153D, 0x14E5)}) ==
          Bytes{0x01, 0x3D, 0x15, 0, 0, 0xE5, 0x14, 0, 0});
    CHECK(pack_records(std::vector{Record::pc_sample(0x08000000, 70000)}) ==
          Bytes{0x82, 0x70, 0x11, 0x01, 0, 0, 0, 0, 0x08});
    CHECK(pack_records(std::vector{Record::arc(0xFFFFFFFF, 0, 7)}) ==
          Bytes{0x81, 7, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0});
    CHECK(pack_records(std::vector<Record>{}).empty());
    CHECK(unpack_records(Bytes{}).empty());
}

TEST_CASE("records round trip at every kind and at the edges of each field") {
    // Record counts are 32-bit (protocol/record.h), so the blob's 32-bit count holds any of them.
    std::vector<Record> records;
    for (const std::uint32_t count : {0u, 1u, 2u, 0xFFFFu, 0x80000000u, 0xFFFFFFFFu}) {
        for (const std::uint32_t pc : {0u, 1u, 0x8001u, 0x80000000u, 0xFFFFFFFFu}) {
            records.push_back(Record::pc_sample(pc, count));
            records.push_back(Record::arc(pc, ~pc, count));
        }
    }
    CHECK(unpack_records(pack_records(records)) == records);
}

TEST_CASE("a blob cut anywhere is an error unless the cut falls between records") {
    const std::vector<Record> records = {Record::arc(0x153D, 0x14E5), Record::pc_sample(0x14B4),
                                         Record::arc(0xFFFFFFFF, 0, 7),
                                         Record::pc_sample(0x08000000, 70000)};
    const Bytes blob = pack_records(records);
    const std::vector<std::size_t> boundaries = {0, 9, 14, 27, 36};
    REQUIRE(blob.size() == boundaries.back());
    for (std::size_t size = 0; size < blob.size(); ++size) {
        CAPTURE(size);
        const Bytes cut(blob.begin(), blob.begin() + static_cast<std::ptrdiff_t>(size));
        std::size_t whole = 0;
        while (boundaries[whole + 1] <= size) ++whole;
        if (boundaries[whole] == size) {
            CHECK(unpack_records(cut) ==
                  std::vector<Record>(records.begin(),
                                      records.begin() + static_cast<std::ptrdiff_t>(whole)));
        } else {
            CHECK_THROWS_WITH_AS(unpack_records(cut), doctest::Contains("truncated"), StorageError);
        }
    }
}

TEST_CASE("an unknown kind is an error") {
    for (const std::uint8_t head : {0x00, 0x03, 0x7F, 0x80, 0xFF}) {
        CAPTURE(int{head});
        CHECK_THROWS_WITH_AS(unpack_records(Bytes{head, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
                             doctest::Contains("unknown kind"), StorageError);
    }
}

}  // namespace
}  // namespace rackprof::storage
