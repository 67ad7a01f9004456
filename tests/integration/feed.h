// A WebSocket client of a running daemon's feeds, for the few suites that read them: apart from
// test_support.h so the other suites are not compiled with Beast's WebSocket.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace rackprof::testing {

// A WebSocket feed of a running daemon (e.g. /api/v1/sessions/ID/live), read message by message.
struct Feed {
    boost::asio::io_context io;
    boost::beast::websocket::stream<boost::asio::ip::tcp::socket> ws{io};
    Feed(const std::string& port, const std::string& path) {
        boost::asio::ip::tcp::resolver resolver(io);
        boost::asio::connect(ws.next_layer(), resolver.resolve("127.0.0.1", port));
        ws.handshake("127.0.0.1", path);
    }
    nlohmann::json next() {
        boost::beast::flat_buffer buffer;
        ws.read(buffer);
        return nlohmann::json::parse(boost::beast::buffers_to_string(buffer.data()));
    }
};

}  // namespace rackprof::testing
