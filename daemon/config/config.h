// The daemon's configuration: TOML from a file, or the embedded default (a small simulated
// rack and a database under ./var) so `rackprof serve` runs with no setup at all.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/config/link_policy.h"

namespace rackprof::daemon::config {

// "FILE:LINE: KEY: what is wrong" — the daemon exits with code 2 and starts nothing.
class ConfigError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct BoardConfig {
    std::string name;
    std::string link;  // serial:///dev/ttyUSB0?baud=1500000, tcp://host:port, file:///x?pace=fast,
                       // sim://blinky
    std::string protocol = "legacy";  // legacy | framed | itm
    std::string format = "bin";       // bin | hex (framed, itm: bin)
    int addr_bytes = 3;  // 3 | 4; framed (also on itm's framed_port): the width until the
                         // target's HELLO (default 4)
    // itm only (SWO): TPIU formatter frames on the wire and the ITM's stream ID in them; the
    // stimulus ports carrying framed records, orbstat enter/exit words and console text.
    bool tpiu = false;
    int tpiu_stream = 1;
    std::optional<int> framed_port;
    std::optional<int> orbstat_port;
    std::optional<int> console_port;
    std::string elf;  // optional
    bool autostart = true;
    std::vector<std::string> tags;
    friend bool operator==(const BoardConfig&, const BoardConfig&) = default;
};

// A board setting that is wrong: which key, and why.
class BoardFieldError : public std::invalid_argument {
  public:
    BoardFieldError(std::string key, const std::string& what)
        : std::invalid_argument(what), key_(std::move(key)) {}
    const std::string& key() const { return key_; }

  private:
    std::string key_;
};

// The protocol a board speaks when its config names none: framed for a gdb:// link (rackprof
// makes its samples), else the thesis' legacy protocol.
std::string default_protocol(const std::string& link);
// The address width a board has when its config names none: the thesis' 3 bytes for the
// legacy protocol, 4 for framed and itm (until the target's HELLO says).
int default_addr_bytes(const std::string& protocol);

// The rules every board must follow, wherever it comes from (file or API). Throws BoardFieldError.
void validate_board(const BoardConfig& board);
// The rule for board names alone (1 to 64 of letters, digits and . _ - : + @), for places that
// take a name without a whole board (an import's ?board=). Throws BoardFieldError.
void validate_board_name(const std::string& name);
// `text` with control and non-ASCII bytes as \xNN: for log lines naming a value that was not
// validated (a board stored by an older rackprof), so it cannot forge lines.
std::string printable(std::string_view text);
// "127.0.0.1:8080", "[::1]:8080": an IP address (no host names) and a port. Throws
// std::invalid_argument.
void check_listen_address(const std::string& listen);
// trace | debug | info | warn | error. Throws ConfigError naming them: a typo must not turn
// logging off (spdlog reads any unknown word as "off").
void check_log_level(const std::string& level);

// Boards as JSON (the API's and the database's form). board_from_json validates.
nlohmann::json board_to_json(const BoardConfig& board);
BoardConfig board_from_json(const nlohmann::json& json);

// [fleet]: the shared fleet store on PostgreSQL (storage/fleet/). Completed sessions are pushed
// to it in the background; selections are served from it. No url: no fleet.
struct FleetConfig {
    std::string url;                      // postgresql://user@host:port/db (never a password)
    std::string bench;                    // this bench's name in the fleet; "": the host name
    std::filesystem::path password_file;  // the password (first line); "": libpq's own ways
    std::string sslmode;                  // passed through to libpq
    std::string sslrootcert;
    std::string sslcert;
    std::string sslkey;
    std::chrono::milliseconds push_interval{2000};  // how often completed sessions are looked for
    std::chrono::milliseconds retry_max{300000};    // backoff after a failure doubles up to this
    // One reply from PostgreSQL may hold this much and take this long; beyond, it is refused
    // and the connection closed (a hostile or broken server costs no more).
    std::int64_t max_reply_mib = 256;
    std::chrono::seconds reply_timeout{120};
    // Fleet retention (`rackprof fleet prune`): sessions that ended more than this many days
    // ago are removed from the fleet store with their aggregates (0: kept forever).
    std::int64_t keep_sessions_days = 0;
    friend bool operator==(const FleetConfig&, const FleetConfig&) = default;
};

// Throws std::invalid_argument when the URL is not postgresql://… or holds a password.
void check_fleet_url_text(const std::string& url);

// The longest retention rule, in days (100 years); 0 keeps forever.
inline constexpr std::int64_t kMaxRetentionDays = 36'500;

struct DaemonConfig {
    std::string listen = "127.0.0.1:8080";  // the HTTP API; port 0: any free port
    // What boards created over HTTP may link to (link_policy.h); the file's boards are free.
    std::vector<std::string> api_links = default_api_links();
    std::filesystem::path token_file;  // the API token (or RACKPROF_API_TOKEN); never logged
    bool token_for_reads = false;      // also every GET needs the token
    std::filesystem::path web_root;    // the built dashboard; "": found (see serve)
    std::filesystem::path storage_path = "var/rackprof.db";
    // Retention (storage/retention.h), in days after a session ended; 0: forever. Raw data
    // (wire bytes, decoded records) of finished sessions, and finished sessions whole.
    std::int64_t keep_raw_days = 0;
    std::int64_t keep_sessions_days = 0;
    std::string log_level = "info";  // trace | debug | info | warn | error
    std::chrono::milliseconds reconnect_min{100};
    std::chrono::milliseconds reconnect_max{5000};
    std::vector<BoardConfig> boards;
    FleetConfig fleet;
    // [sources] roots: the folders annotated source may be read from (gmon/annotate.h); none:
    // each ELF's compilation directories that exist.
    std::vector<std::filesystem::path> source_roots;
    std::string source = "embedded default";
};

DaemonConfig load_config(const std::filesystem::path& path);
DaemonConfig parse_config(const std::string& text, const std::string& source_name);
DaemonConfig embedded_default_config();
// The storage path, the token file, the web root and every board's ELF made absolute against
// the working directory: sessions record the ELF path, and `convert --db` run from another
// folder must still find it.
void make_paths_absolute(DaemonConfig& config);

}  // namespace rackprof::daemon::config
