// The API's JSON views of a board and of a stored session, as web/api/openapi.json shows them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/service/rack_types.h"
#include "storage/session_store.h"

namespace rackprof::daemon::service {

// "storage_state": ok | storage_error, and what storage said ("storage_error", null when ok).
void add_storage_state(nlohmann::json& out, const std::string& storage_error);

nlohmann::json board_json(const BoardStatus& board);

// Where a session's data is missing; what each gap lost, or null where that is unknown.
nlohmann::json gaps_json(const std::vector<storage::Gap>& gaps);

// `storage_error`: what storage says while its commits fail; shown only while it captures.
nlohmann::json session_json(const storage::SessionInfo& session, const std::string& storage_error);

}  // namespace rackprof::daemon::service
