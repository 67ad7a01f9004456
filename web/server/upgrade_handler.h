// What a WebSocket upgrade is handed to (the live feeds implement it). Apart from
// http_message.h so that only the server and the feeds see Beast's sockets.
#pragma once

#include <boost/beast/core/tcp_stream.hpp>

#include <memory>
#include <optional>

#include "web/server/http_message.h"

namespace rackprof::web::server {

// Takes over WebSocket upgrades (the live feeds).
class UpgradeHandler {
  public:
    virtual ~UpgradeHandler() = default;
    // Takes over an upgrade request (nothing returned: the stream is its own now, and it keeps
    // `slot`, the connection's place under the server's limits, while the connection lives),
    // or answers why not: 404 when it is not one of its paths, 401 without the token it needs.
    virtual std::optional<Response> accept(boost::beast::tcp_stream& stream, const Request& request,
                                           std::shared_ptr<const void> slot) = 0;
};

}  // namespace rackprof::web::server
