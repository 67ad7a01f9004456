#include "web/server/static_site.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <utility>

#include "web/server/request_target.h"

namespace rackprof::web::server {

namespace fs = std::filesystem;

namespace {

constexpr std::array<std::pair<std::string_view, std::string_view>, 16> kTypes = {{
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".json", "application/json"},
    {".map", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".wasm", "application/wasm"},
    {".woff2", "font/woff2"},
    {".woff", "font/woff"},
    {".txt", "text/plain; charset=utf-8"},
    {".webmanifest", "application/manifest+json"},
    {".jpg", "image/jpeg"},
    {".gif", "image/gif"},
}};

// Scripts only from the site itself; WebAssembly (the Graphviz layout) may compile; inline
// styles are what the chart library sets; feeds are WebSockets back to the daemon.
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' "
    "'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self' ws: wss:; "
    "frame-ancestors 'none'";

Response not_found(const Request& request, const std::string& message) {
    return error_response(http::status::not_found, "not_found", message, request.version(),
                          request.keep_alive());
}

std::optional<std::string> read_file(const fs::path& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::nullopt;
    std::ostringstream out;
    out << f.rdbuf();
    return std::move(out).str();
}

}  // namespace

std::string_view content_type_for(const fs::path& file) {
    const std::string ext = file.extension().string();
    for (const auto& [e, type] : kTypes) {
        if (e == ext) return type;
    }
    return "application/octet-stream";
}

std::optional<fs::path> site_relative_path(std::string_view target) {
    const std::string_view path = target.substr(0, target.find_first_of("?#"));
    const auto decoded_or = percent_decode(path, false);
    if (!decoded_or) return std::nullopt;
    const std::string& decoded = *decoded_or;
    fs::path out;
    std::size_t start = 0;
    while (start <= decoded.size()) {
        const auto slash = decoded.find('/', start);
        const auto end = slash == std::string::npos ? decoded.size() : slash;
        const std::string part = decoded.substr(start, end - start);
        if (part == "." || part == ".." || part.find('\\') != std::string::npos ||
            part.find('\0') != std::string::npos) {
            return std::nullopt;
        }
        if (!part.empty()) out /= part;
        start = end + 1;
    }
    return out;
}

fs::path find_web_root(const fs::path& configured, const fs::path& executable,
                       const fs::path& source_dist) {
    if (!configured.empty()) return configured;
    std::error_code ec;
    const fs::path installed = executable.parent_path().parent_path() / "share/rackprof/web";
    if (!executable.empty() && fs::is_regular_file(installed / "index.html", ec)) return installed;
    return source_dist;
}

StaticSite::StaticSite(fs::path root) {
    std::error_code ec;
    if (!root.empty() && fs::is_directory(root, ec)) root_ = fs::canonical(root, ec);
}

Response StaticSite::serve(const Request& request) const {
    if (root_.empty()) {
        return not_found(request,
                         "the dashboard is not built: run ./setup.sh (it builds web/ui into "
                         "web/dist) or set server.web_root");
    }
    const auto relative = site_relative_path(request.target());
    if (!relative) {
        return error_response(http::status::bad_request, "bad_request",
                              "the path may not contain '.', '..', backslashes or bad escapes",
                              request.version(), request.keep_alive());
    }
    std::error_code ec;
    fs::path file = root_ / *relative;
    const bool is_file = !relative->empty() && fs::is_regular_file(file, ec);
    // A path without a file extension is one of the dashboard's own routes (/sessions/7):
    // the single page answers it. A missing asset (/assets/x.js) is a real 404.
    if (!is_file) {
        if (!relative->empty() && relative->has_extension())
            return not_found(request, "no file " + relative->generic_string());
        file = root_ / "index.html";
    }
    // Symlinks may not lead out of the root.
    const fs::path real = fs::canonical(file, ec);
    const auto [root_end, real_it] =
        std::mismatch(root_.begin(), root_.end(), real.begin(), real.end());
    if (ec || root_end != root_.end()) return not_found(request, "no such file");
    auto body = read_file(real);
    if (!body) return not_found(request, "no such file");

    Response r{http::status::ok, request.version()};
    r.keep_alive(request.keep_alive());
    r.set(http::field::content_type, content_type_for(real));
    r.set("X-Content-Type-Options", "nosniff");
    r.set("Content-Security-Policy", kContentSecurityPolicy);
    // Vite names what it emits under assets/ by content hash: such a URL never changes.
    const bool hashed = relative->begin() != relative->end() && *relative->begin() == "assets";
    r.set(http::field::cache_control,
          hashed && is_file ? "public, max-age=31536000, immutable" : "no-cache");
    r.body() = std::move(*body);
    return r;
}

}  // namespace rackprof::web::server
