// The API's routes, one file per resource; each handler reads its parameters, calls the rack
// service once and shapes the reply.
#pragma once

#include <string>

#include "web/api/route_table.h"

namespace rackprof::web::api {

// /healthz, /readyz, /api/v1/version, /api/v1/openapi.json (status.cc).
void add_status_routes(RouteTable& routes);
// /api/v1/boards... (boards.cc).
void add_board_routes(RouteTable& routes);
// /api/v1/sessions... except exports and firmware (sessions.cc).
void add_session_routes(RouteTable& routes);
// /api/v1/firmware and /api/v1/sessions/{id}/firmware (firmware.cc).
void add_firmware_routes(RouteTable& routes);
// /api/v1/sessions/{id}/export/{format} and its older aliases (exports.cc).
void add_export_routes(RouteTable& routes);
// /api/v1/profile: a selection of sessions merged (fleet profiles).
void add_selection_routes(RouteTable& routes);
// /sessions/{id}/lines and /disasm, and a selection's (/profile/lines, /profile/disasm).
void add_annotate_routes(RouteTable& routes);
// /sessions/{id}/tasks, /interrupts, /timeline: a session split by task (RackService::time_view).
void add_time_routes(RouteTable& routes);
// The Content-Disposition of a download named `filename`, whatever bytes it holds: only
// [A-Za-z0-9._:+@-] in filename=, '_' for the rest; UTF-8 letters also as filename*.
std::string content_disposition(const std::string& filename);

// The OpenAPI document (web/api/openapi.json, embedded at build time).
const std::string& openapi_document();

}  // namespace rackprof::web::api
