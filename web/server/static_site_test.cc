#include "web/server/static_site.h"

#include <doctest/doctest.h>

#include <unistd.h>
#include <fstream>

namespace fs = std::filesystem;
using namespace rackprof::web::server;

namespace {

// A built site in a fresh temporary folder, and a secret file beside it.
struct SiteDir {
    fs::path top = fs::temp_directory_path() / ("rackprof-site-" + std::to_string(::getpid()));
    fs::path root = top / "dist";
    SiteDir() {
        fs::remove_all(top);
        fs::create_directories(root / "assets");
        write(root / "index.html", "<!doctype html><title>rackprof</title>");
        write(root / "assets/app-1a2b.js", "console.log(1)");
        write(root / "assets/app-1a2b.css", "body{}");
        write(root / "assets/viz.wasm", std::string("\0asm", 4));
        write(root / "logo.svg", "<svg/>");
        write(top / "secret.txt", "secret");
    }
    ~SiteDir() { fs::remove_all(top); }
    static void write(const fs::path& p, const std::string& text) {
        std::ofstream(p, std::ios::binary) << text;
    }
};

Response get(const StaticSite& site, const std::string& target) {
    Request r{http::verb::get, target, 11};
    return site.serve(r);
}

}  // namespace

TEST_CASE("files are served with their content types and cache rules") {
    SiteDir dir;
    StaticSite site(dir.root);
    auto index = get(site, "/");
    CHECK(index.result() == http::status::ok);
    CHECK(index[http::field::content_type] == "text/html; charset=utf-8");
    CHECK(index[http::field::cache_control] == "no-cache");
    CHECK(index.body().find("<title>rackprof</title>") != std::string::npos);
    CHECK(index["Content-Security-Policy"].find("default-src 'self'") != std::string_view::npos);

    auto js = get(site, "/assets/app-1a2b.js?v=1");
    CHECK(js.result() == http::status::ok);
    CHECK(js[http::field::content_type] == "text/javascript; charset=utf-8");
    CHECK(js[http::field::cache_control] == "public, max-age=31536000, immutable");
    CHECK(js.body() == "console.log(1)");
    CHECK(get(site, "/assets/app-1a2b.css")[http::field::content_type] ==
          "text/css; charset=utf-8");
    auto wasm = get(site, "/assets/viz.wasm");
    CHECK(wasm[http::field::content_type] == "application/wasm");
    CHECK(wasm.body().size() == 4);
    auto svg = get(site, "/logo.svg");
    CHECK(svg[http::field::content_type] == "image/svg+xml");
    CHECK(svg[http::field::cache_control] == "no-cache");  // not under assets/: may change
}

TEST_CASE("client-side routes get index.html, missing assets a JSON 404") {
    SiteDir dir;
    StaticSite site(dir.root);
    for (const char* route : {"/sessions", "/sessions/7/profile", "/rack?board=x"}) {
        auto r = get(site, route);
        CHECK(r.result() == http::status::ok);
        CHECK(r.body().find("<title>rackprof</title>") != std::string::npos);
        CHECK(r[http::field::cache_control] == "no-cache");
    }
    auto missing = get(site, "/assets/gone-99.js");
    CHECK(missing.result() == http::status::not_found);
    CHECK(missing[http::field::content_type] == "application/json");
    CHECK(missing.body().find("\"not_found\"") != std::string::npos);
}

TEST_CASE("paths cannot leave the root") {
    SiteDir dir;
    fs::create_symlink(dir.top / "secret.txt", dir.root / "escape.txt");
    StaticSite site(dir.root);
    for (const char* target : {"/../secret.txt", "/assets/../../secret.txt", "/%2e%2e/secret.txt",
                               "/%2E%2E%2Fsecret.txt", "/assets/%2e%2e/%2e%2e/secret.txt",
                               "/..%5csecret.txt", "/a%00b", "/%zz", "/%2", "/./index.html"}) {
        INFO(target);
        auto r = get(site, target);
        CHECK(r.result() == http::status::bad_request);
        CHECK(r.body().find("secret") == std::string::npos);
    }
    auto link = get(site, "/escape.txt");
    CHECK(link.result() == http::status::not_found);
    CHECK(link.body().find("secret\"") == std::string::npos);
}

TEST_CASE("relative paths are decoded and checked") {
    CHECK(site_relative_path("/") == fs::path());
    CHECK(site_relative_path("/a/b%20c.js?x=/../") == fs::path("a/b c.js"));
    CHECK(site_relative_path("//assets//x.js") == fs::path("assets/x.js"));
    CHECK_FALSE(site_relative_path("/a/../b"));
    CHECK_FALSE(site_relative_path("/a/%2e%2e"));
    CHECK_FALSE(site_relative_path("/a%"));
}

TEST_CASE("an unbuilt dashboard says how to build it") {
    StaticSite none("");
    auto r = get(none, "/");
    CHECK(r.result() == http::status::not_found);
    CHECK(r.body().find("setup.sh") != std::string::npos);
    StaticSite missing("/nonexistent/rackprof/web");
    CHECK(get(missing, "/index.html").result() == http::status::not_found);
}

TEST_CASE("the web root: configured, else installed beside the binary, else the source tree") {
    SiteDir dir;
    CHECK(find_web_root("/etc/x", "/usr/bin/rackprof", "/src/web/dist") == "/etc/x");
    CHECK(find_web_root("", "/nonexistent/bin/rackprof", "/src/web/dist") == "/src/web/dist");
    const fs::path prefix = dir.top / "prefix";
    fs::create_directories(prefix / "bin");
    fs::create_directories(prefix / "share/rackprof/web");
    SiteDir::write(prefix / "share/rackprof/web/index.html", "x");
    CHECK(find_web_root("", prefix / "bin/rackprof", "/src/web/dist") ==
          prefix / "share/rackprof/web");
}

TEST_CASE("content types by extension") {
    CHECK(content_type_for("a.mjs") == "text/javascript; charset=utf-8");
    CHECK(content_type_for("a.json") == "application/json");
    CHECK(content_type_for("noext") == "application/octet-stream");
    CHECK(content_type_for("a.exe") == "application/octet-stream");
}
