// A board's settings from an API body, checked for what a board made over HTTP may open: a link
// the configuration allows and firmware from the store, never a path of the caller's choosing
// (the daemon would read that file and serve it).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "daemon/config/config.h"
#include "daemon/config/link_policy.h"
#include "daemon/service/firmware_store.h"

namespace rackprof::daemon::service {

// `name` (when set) is the path's and wins over the body's. "firmware": an uploaded image's id,
// standing for its stored ELF. Throws ServiceError: kBadRequest (not JSON), kInvalid (a field),
// kForbidden (a link `links` does not allow, an ELF outside the store).
config::BoardConfig board_from_body(nlohmann::json body, const std::string& name,
                                    const FirmwareStore& firmware, const config::LinkPolicy& links);

}  // namespace rackprof::daemon::service
