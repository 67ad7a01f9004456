#include "web/api/route_table.h"

#include <algorithm>

#include "web/api/replies.h"
#include "web/server/request_target.h"

namespace rackprof::web::api {

namespace {

bool is_parameter(const std::string& segment) {
    return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

// The path's {name} values if `pattern` matches it; per segment, whether it was literal.
bool matches(const std::vector<std::string>& pattern, const std::vector<std::string>& path,
             std::map<std::string, std::string>& values, std::vector<bool>& literal) {
    if (pattern.size() != path.size()) return false;
    values.clear();
    literal.clear();
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (is_parameter(pattern[i])) {
            values[pattern[i].substr(1, pattern[i].size() - 2)] = path[i];
            literal.push_back(false);
        } else if (pattern[i] == path[i]) {
            literal.push_back(true);
        } else {
            return false;
        }
    }
    return true;
}

}  // namespace

std::vector<std::string> split_path(std::string_view target) {
    std::vector<std::string> parts;
    const std::string_view path = target.substr(0, target.find('?'));
    std::size_t start = 0;
    while (start < path.size()) {
        const auto slash = path.find('/', start);
        const auto end = slash == std::string_view::npos ? path.size() : slash;
        if (end > start) parts.emplace_back(path.substr(start, end - start));
        start = end + 1;
    }
    return parts;
}

std::map<std::string, std::string> query_of(std::string_view target) {
    std::string why;
    auto values = server::query_values(target, &why);
    if (!values) throw HttpError{http::status::bad_request, "bad_query", "the query has " + why};
    return std::move(*values);
}

const std::filesystem::path& Call::upload() const {
    if (body_file.empty())
        throw HttpError{http::status::bad_request, "no_body", "this request needs a body"};
    return body_file;
}

void RouteTable::add(Route route) {
    routes_.push_back(std::move(route));
}

void RouteTable::add_json(http::verb method, std::string pattern, server::Access access,
                          http::status status, JsonView view, std::string summary, bool upload) {
    add({method, std::move(pattern), access,
         [status, view = std::move(view)](const Call& c) {
             return json_reply(c.request, status, view(c));
         },
         std::move(summary), upload});
}

RouteTable::Match RouteTable::match(http::verb method, std::string_view target) const {
    const auto path = split_path(target);
    Match out;
    std::vector<bool> best;  // the literal flags of the most specific pattern so far
    std::string pattern;
    std::map<std::string, std::string> values;
    std::vector<bool> literal;
    for (const auto& r : routes_) {
        if (!matches(split_path(r.pattern), path, values, literal)) continue;
        if (out.path_known && literal <= best) continue;
        out.path_known = true;
        best = literal;
        pattern = r.pattern;
        out.path = values;
    }
    if (!out.path_known) return out;
    const http::verb wanted = method == http::verb::head ? http::verb::get : method;
    bool all_public = true;
    for (const auto& r : routes_) {
        if (r.pattern != pattern) continue;
        all_public = all_public && r.access == server::Access::kPublic;
        if (r.method == wanted) out.route = &r;
    }
    out.path_access = all_public ? server::Access::kPublic : server::Access::kWrite;
    return out;
}

std::set<std::pair<std::string, std::string>> RouteTable::endpoints() const {
    std::set<std::pair<std::string, std::string>> out;
    for (const auto& r : routes_) {
        std::string method(http::to_string(r.method));
        std::transform(method.begin(), method.end(), method.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        out.emplace(method, r.pattern);
    }
    return out;
}

}  // namespace rackprof::web::api
