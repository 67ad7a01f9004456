// A rack service for the API's unit tests: canned views, recorded calls, chosen failures.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "daemon/service/rack_service.h"

namespace rackprof::web::api::testing {

using daemon::service::Failure;
using daemon::service::ServiceError;
using nlohmann::json;

class FakeRack : public daemon::service::RackService {
  public:
    std::vector<std::string> calls;  // "method arg", in order
    json board_view = {{"name", "det"}, {"state", "connected"}};
    json session_view = {{"id", 7}, {"board", "det"}, {"state", "completed"}};

    json readiness() override {
        calls.push_back("readiness");
        if (!ready) throw ServiceError(Failure::kNotReady, "storage is not available");
        return {{"status", "ready"}, {"boards", 1}};
    }
    daemon::service::RackMetrics metrics() override {
        calls.push_back("metrics");
        daemon::service::RackMetrics m;
        m.boards.push_back({"det", daemon::service::LinkState::kConnected, true, 2, {}});
        m.boards.back().counters.bytes_in = 1234;
        m.boards.back().counters.records_lost = 5;
        m.writer.queued_ops = 3;
        return m;
    }
    json boards() override {
        calls.push_back("boards");
        return json::array({board_view});
    }
    json board(const std::string& name) override {
        calls.push_back("board " + name);
        if (name != "det") throw ServiceError(Failure::kNotFound, "no board named '" + name + "'");
        return board_view;
    }
    json add_board(const json& body) override {
        calls.push_back("add_board " + body.dump());
        if (body.value("name", "") == "det")
            throw ServiceError(Failure::kConflict, "a board named 'det' exists");
        return body;
    }
    json update_board(const std::string& name, const json& body) override {
        calls.push_back("update_board " + name + " " + body.dump());
        return board_view;
    }
    void remove_board(const std::string& name) override { calls.push_back("remove_board " + name); }
    json start_session(const std::string& board) override {
        calls.push_back("start_session " + board);
        return session_view;
    }
    json stop_session(std::int64_t id) override {
        calls.push_back("stop_session " + std::to_string(id));
        if (id != 7) throw ServiceError(Failure::kConflict, "not capturing");
        return session_view;
    }
    void delete_session(std::int64_t id) override {
        calls.push_back("delete_session " + std::to_string(id));
    }
    json sessions(const daemon::service::SessionFilter& filter) override {
        calls.push_back("sessions " + filter.board.value_or("*") + " " + filter.tag.value_or("*") +
                        " " + filter.state.value_or("*") + " " +
                        std::to_string(filter.started_from_ns) + " " +
                        std::to_string(filter.started_to_ns));
        return json::array({session_view});
    }
    json session(std::int64_t id) override {
        calls.push_back("session " + std::to_string(id));
        if (id != 7) throw ServiceError(Failure::kNotFound, "no session " + std::to_string(id));
        return session_view;
    }
    std::string console(std::int64_t id, int tail) override {
        calls.push_back("console " + std::to_string(id) + " " + std::to_string(tail));
        return "hello\n";
    }
    // What a profile call said of its call graph, when it said anything.
    static std::string graph_options(const daemon::service::ProfileOptions& options) {
        std::string out;
        if (options.graph_top) out += " graph_top=" + std::to_string(*options.graph_top);
        if (!options.graph_function.empty()) out += " graph_function=" + options.graph_function;
        return out;
    }
    daemon::service::Export profile(std::int64_t id, const daemon::service::TimeWindow& window,
                                    const daemon::service::ProfileOptions& options) override {
        calls.push_back("profile " + std::to_string(id) + " " +
                        std::to_string(window.from_ns.value_or(-1)) + " " +
                        std::to_string(window.to_ns.value_or(-1)) + " " +
                        std::to_string(options.top) + graph_options(options));
        if (id == 8) throw ServiceError(Failure::kNoElf, "session 8 has no usable ELF");
        // As LocalRack: a whole call graph in pieces, streamed; a cut one whole.
        const bool whole = options.top || options.graph_top || !options.graph_function.empty();
        return {"application/json", "", whole, pieces({R"({"flat":)", "[]}"})};
    }
    daemon::service::Export selection_profile(
        const daemon::service::Selection& selection,
        const daemon::service::ProfileOptions& options) override {
        calls.push_back("selection_profile " + join(selection) + " " + std::to_string(options.top) +
                        graph_options(options));
        return {"application/json", "", true, pieces({R"({"flat":[],"selection":{}})"})};
    }
    daemon::service::Export open_selection_export(const daemon::service::Selection& selection,
                                                  const std::string& format) override {
        calls.push_back("open_selection_export " + join(selection) + " " + format);
        return {"application/octet-stream", "selection-3f2a.gmon.out", true, pieces({"gmon"})};
    }
    nlohmann::json time_view(std::int64_t id, const std::string& view,
                             const daemon::service::TimeWindow& window) override {
        calls.push_back("time_view " + std::to_string(id) + " " + view + " " +
                        std::to_string(window.from_ns.value_or(-1)) + " " +
                        std::to_string(window.to_ns.value_or(-1)));
        return {{"view", view}};
    }
    nlohmann::json annotate(std::int64_t id, const daemon::service::AnnotateRequest& request,
                            const daemon::service::TimeWindow&) override {
        calls.push_back("annotate " + std::to_string(id) + " " + request.function +
                        (request.instructions ? " disasm" : ""));
        return {{"functions", nlohmann::json::array()}};
    }
    nlohmann::json selection_annotate(const daemon::service::Selection& selection,
                                      const daemon::service::AnnotateRequest& request) override {
        calls.push_back("selection_annotate " + join(selection) + " " + request.function +
                        (request.instructions ? " disasm" : ""));
        return {{"functions", nlohmann::json::array()}};
    }
    daemon::service::DiffResult diff(const daemon::service::Selection& a,
                                     const daemon::service::Selection& b,
                                     const daemon::service::DiffRequest& request) override {
        std::string rules;
        for (const auto& r : request.fail_on) rules += " " + r;
        calls.push_back("diff " + join(a) + " | " + join(b) +
                        " alpha=" + std::to_string(request.alpha).substr(0, 4) + rules);
        const bool failed = !request.fail_on.empty() && request.fail_on.front() == "self>+5%";
        return {{{"schema", "rackprof.diff/1"}, {"failed", failed}}, "diff text\n", failed};
    }
    // "sessions=1,2 boards=a tags=x build_ids=ab from=0 to=0"
    static std::string join(const daemon::service::Selection& s) {
        const auto list = [](const auto& values) {
            std::string out;
            for (const auto& v : values) {
                if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) {
                    out += (out.empty() ? "" : ",") + v;
                } else {
                    out += (out.empty() ? "" : ",") + std::to_string(v);
                }
            }
            return out;
        };
        return "sessions=" + list(s.sessions) + " boards=" + list(s.boards) +
               " tags=" + list(s.tags) + " build_ids=" + list(s.build_ids) +
               " from=" + std::to_string(s.from_ns) + " to=" + std::to_string(s.to_ns);
    }
    daemon::service::Export open_export(std::int64_t id, const std::string& format,
                                        const daemon::service::TimeWindow&) override {
        calls.push_back("open_export " + std::to_string(id) + " " + format);
        // Named as LocalRack names them: the stored session's board and its id.
        const std::string name =
            session_view["board"].get<std::string>() + "-" + std::to_string(id);
        if (format == "gmon")
            return {"application/octet-stream", name + ".gmon.out", true, pieces({"gmon"})};
        if (format == "csv" || format == "raw" || format == "ndjson")
            return {"text/csv", name + ".csv", false, pieces({"a,b\n", "1,2\n"})};
        throw ServiceError(Failure::kUnknownFormat, "unknown format '" + format + "'");
    }
    // Uploads are files: the calls record their contents' sizes.
    nlohmann::json firmware() override {
        calls.push_back("firmware");
        return nlohmann::json::array();
    }
    daemon::service::Stored put_firmware(const std::filesystem::path& file) override {
        const std::string elf = contents(file);
        calls.push_back("put_firmware " + std::to_string(elf.size()));
        if (elf == "junk") throw ServiceError(Failure::kNotAnElf, "not an ELF");
        return {{{"id", "ab"}}, elf == "new"};
    }
    json attach_firmware(std::int64_t session, const std::string& id) override {
        calls.push_back("attach_firmware " + std::to_string(session) + " " + id);
        if (id.empty()) throw ServiceError(Failure::kBadFirmwareId, "\"id\" must be a firmware id");
        return session_view;
    }
    json import_session(const std::filesystem::path& file,
                        const daemon::service::ImportParameters& query) override {
        calls.push_back("import_session " + std::to_string(contents(file).size()) + " " +
                        (query.count("format") ? query.at("format") : "-"));
        return session_view;
    }
    std::optional<daemon::service::LiveView> live(std::int64_t) override { return std::nullopt; }

    bool ready = true;

  private:
    static std::string contents(const std::filesystem::path& file) {
        std::ifstream in(file, std::ios::binary);
        return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    }
    static std::function<std::optional<std::string>()> pieces(std::vector<std::string> parts) {
        return
            [parts = std::move(parts), i = std::size_t{0}]() mutable -> std::optional<std::string> {
                if (i == parts.size()) return std::nullopt;
                return parts[i++];
            };
    }
};

}  // namespace rackprof::web::api::testing
