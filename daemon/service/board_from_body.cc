#include "daemon/service/board_from_body.h"

#include <filesystem>

namespace rackprof::daemon::service {

namespace {

void check_api_board(const config::BoardConfig& board, const FirmwareStore& firmware,
                     const config::LinkPolicy& links) {
    try {
        links.check(board.link);
    } catch (const std::invalid_argument& e) {
        throw ServiceError(Failure::kForbidden, std::string("link: ") + e.what());
    }
    if (!board.elf.empty() && !firmware.holds(board.elf)) {
        throw ServiceError(Failure::kForbidden,
             "elf: over HTTP, firmware comes from the store: upload it (PUT /api/v1/firmware) "
             "and name its id as \"firmware\"");
    }
}

}  // namespace

config::BoardConfig board_from_body(nlohmann::json body, const std::string& name,
                                    const FirmwareStore& firmware,
                                    const config::LinkPolicy& links) {
    try {
        if (!name.empty() && body.is_object()) {
            if (body.contains("name") && body["name"] != name)
                throw ServiceError(Failure::kInvalid, "name: the path names the board");
            body["name"] = name;
        }
        if (body.is_object() && body.contains("firmware")) {
            const std::string id =
                body["firmware"].is_string() ? body["firmware"].get<std::string>() : "";
            const auto path = firmware.find(id);
            if (!path) throw ServiceError(Failure::kInvalid, "firmware: no uploaded firmware with that id");
            body.erase("firmware");
            body["elf"] = path->string();
        }
        config::BoardConfig board = config::board_from_json(body);
        check_api_board(board, firmware, links);
        return board;
    } catch (const nlohmann::json::exception&) {
        throw ServiceError(Failure::kBadRequest, "the body is not JSON");
    } catch (const config::BoardFieldError& e) {
        throw ServiceError(Failure::kInvalid, e.key() + ": " + e.what());
    }
}

}  // namespace rackprof::daemon::service
