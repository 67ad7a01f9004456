// The dashboard's built files (web/dist, installed as share/rackprof/web), served read-only:
// only files below the root, a content type by extension, index.html for the client-side
// routes, long caching for Vite's content-hashed assets and none for the rest.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "web/server/http_message.h"

namespace rackprof::web::server {

class StaticSite {
  public:
    // An empty or missing root serves a 404 that says how to build the dashboard.
    explicit StaticSite(std::filesystem::path root);

    // GET or HEAD of a path outside /api: the file, index.html, or a JSON 404/400.
    Response serve(const Request& request) const;

    const std::filesystem::path& root() const { return root_; }

  private:
    std::filesystem::path root_;  // canonical, or empty
};

// "text/javascript; charset=utf-8" for "app.js"; application/octet-stream when unknown.
std::string_view content_type_for(const std::filesystem::path& file);

// The request path ("/a/b.js?x") as a relative path below the site root ("a/b.js"), with
// %XX decoded; nothing when it could leave the root (.., ., backslashes, NUL, bad escapes).
std::optional<std::filesystem::path> site_relative_path(std::string_view target);

// Where the built dashboard is: `configured` when set, else share/rackprof/web under the
// prefix the binary runs from (<prefix>/bin/rackprof), else the source tree's web/dist.
std::filesystem::path find_web_root(const std::filesystem::path& configured,
                                    const std::filesystem::path& executable,
                                    const std::filesystem::path& source_dist);

}  // namespace rackprof::web::server
