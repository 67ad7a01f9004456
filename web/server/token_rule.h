// Who needs the API token, and whether a request carries it: one rule for the REST routes
// (web/api) and the WebSocket feeds (web/feeds).
#pragma once

#include <string>
#include <string_view>

namespace rackprof::web::server {

// Who may call a route: anyone (health probes), readers (a token only with token_for_reads),
// writers (a token whenever one is required).
enum class Access { kPublic, kRead, kWrite };

struct TokenRule {
    std::string token;             // "" : no token configured
    bool require_token = false;    // write routes need "Authorization: Bearer <token>"
    bool token_for_reads = false;  // with require_token: read routes need it too
    bool needs_token(Access access) const;
    // `authorization`: the header's value; the scheme in any case ("bearer", RFC 7235).
    bool admits(Access access, std::string_view authorization) const;
    // The same for a token given bare (a WebSocket's ?token=, which browsers can set).
    bool admits_token(Access access, std::string_view given) const;
};

// "Bearer abc" (the scheme in any case, one or more spaces) -> "abc"; "" when it is not one.
std::string_view bearer_credentials(std::string_view authorization);

// Equal (and `secret` not empty). Equal lengths are compared in a time that never depends on
// where the first difference is, so a client cannot guess the secret byte by byte; a length
// that differs is refused at once.
bool same_secret(std::string_view given, std::string_view secret);

}  // namespace rackprof::web::server
