// A board's settings from an API body: the path's name, firmware from the store only, links
// the configuration allows.
#include "daemon/service/board_from_body.h"

#include <doctest/doctest.h>

#include "daemon/service/failure_of_test.h"
#include "daemon/service/scratch_rack_test.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::daemon::service {
namespace {

TEST_CASE("board from body: the path names the board, firmware comes from the store") {
    ScratchDir dir;
    FirmwareStore firmware(dir.path / "firmware");
    const config::LinkPolicy links{config::default_api_links()};
    const nlohmann::json body = {{"link", "serial:///dev/rackprof/A5028?baud=1500000"}};

    const config::BoardConfig named = board_from_body(body, "b2", firmware, links);
    CHECK(named.name == "b2");
    CHECK(failure_of([&] {
              board_from_body({{"name", "other"}, {"link", body["link"]}}, "b2", firmware, links);
          }) == Failure::kInvalid);

    gmon::write_synthetic_elf(dir.path / "app.elf", {{"main", 0x100, 0x20}}, 0x100, 0x200);
    const std::string id = firmware.put(dir.path / "app.elf").view["id"];
    nlohmann::json with_firmware = body;
    with_firmware["firmware"] = id;
    CHECK(board_from_body(with_firmware, "b2", firmware, links).elf == *firmware.find(id));
    with_firmware["firmware"] = "ab";
    CHECK(failure_of([&] { board_from_body(with_firmware, "b2", firmware, links); }) ==
          Failure::kInvalid);

    gmon::write_synthetic_elf(dir.path / "mine.elf", {{"main", 0x100, 0x20}}, 0x100, 0x200);
    nlohmann::json with_path = body;
    with_path["elf"] = (dir.path / "mine.elf").string();  // a path of the caller's choosing
    CHECK(failure_of([&] { board_from_body(with_path, "b2", firmware, links); }) ==
          Failure::kForbidden);
}

TEST_CASE("board from body: links the configuration does not allow, and bodies that are not") {
    ScratchDir dir;
    FirmwareStore firmware(dir.path / "firmware");
    const config::LinkPolicy links{config::default_api_links()};
    CHECK(failure_of([&] {
              board_from_body({{"link", "file:///etc/passwd"}}, "b", firmware, links);
          }) == Failure::kForbidden);
    CHECK(failure_of([&] {
              board_from_body({{"link", "usb://x"}}, "b", firmware, links);
          }) == Failure::kInvalid);
    CHECK_THROWS_AS(board_from_body(nlohmann::json::array(), "", firmware, links), ServiceError);
}

}  // namespace
}  // namespace rackprof::daemon::service
