// The OpenAPI document and the route table describe the same API, so neither can drift.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "gmon/export.h"
#include "web/api/api.h"
#include "web/api/handlers.h"

namespace rackprof::web::api {
namespace {

using nlohmann::json;

TEST_CASE("the OpenAPI document parses and is OpenAPI 3") {
    const json doc = json::parse(openapi_document());
    REQUIRE(doc.contains("openapi"));
    CHECK(doc["openapi"].get<std::string>().rfind("3.", 0) == 0);
    CHECK(doc["paths"].is_object());
}

TEST_CASE("the OpenAPI document lists exactly the route table's methods and paths") {
    const json doc = json::parse(openapi_document());
    std::set<std::pair<std::string, std::string>> documented;
    for (const auto& [path, item] : doc["paths"].items()) {
        for (const auto& [method, operation] : item.items()) {
            const std::string where = method + " " + path;  // CAPTURE takes no bindings (clang 14)
            CAPTURE(where);
            CHECK(operation.contains("responses"));
            documented.emplace(method, path);
        }
    }
    const auto served = api_routes().endpoints();
    for (const auto& e : served) {
        CAPTURE(e.first + " " + e.second);
        CHECK(documented.count(e));
    }
    for (const auto& e : documented) {
        CAPTURE(e.first + " " + e.second);
        CHECK(served.count(e));
    }
    CHECK(documented == served);
}

// The export routes' {format} enums are the registry's names: a session exports every format,
// a selection those made whole from its sums (ndjson and raw pages, and the views that decode
// raw bytes again, belong to one session).
TEST_CASE("the OpenAPI document's export formats are the export registry's") {
    const json doc = json::parse(openapi_document());
    const auto format_enum = [&](const char* path) {
        for (const auto& p : doc["paths"][path]["get"]["parameters"]) {
            if (p["name"] == "format") return p["schema"]["enum"].get<std::vector<std::string>>();
        }
        return std::vector<std::string>{};
    };
    std::vector<std::string> all;
    std::vector<std::string> whole;
    for (const auto& f : gmon::export_formats()) {
        all.emplace_back(f.name);
        if (f.for_selections()) whole.emplace_back(f.name);
    }
    CHECK(format_enum("/api/v1/sessions/{id}/export/{format}") == all);
    CHECK(format_enum("/api/v1/profile/export/{format}") == whole);
}

}  // namespace
}  // namespace rackprof::web::api
