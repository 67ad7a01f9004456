// The `rackprof` subcommands. Each returns the process exit code; usage errors are thrown as
// UsageError (exit 2), failures as other exceptions (exit 1).
#pragma once

#include <string>
#include <vector>

namespace rackprof::daemon {

int run_convert(const std::vector<std::string>& args);
int run_diff(const std::vector<std::string>& args);
int run_check_sync(const std::vector<std::string>& args);
int run_simulate(const std::vector<std::string>& args);
int run_demo(const std::vector<std::string>& args);
int run_serve(const std::vector<std::string>& args);
int run_check(const std::vector<std::string>& args);
int run_fleet(const std::vector<std::string>& args);
int run_campaign(const std::vector<std::string>& args);

}  // namespace rackprof::daemon
