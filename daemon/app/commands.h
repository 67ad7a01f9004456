// The `rackprof` commands. Each declares its options on a subcommand of the root (help is
// generated from the declarations) and returns what runs it once they are parsed; usage errors
// are thrown as UsageError (exit 2), failures as other exceptions (exit 1).
#pragma once

#include "daemon/app/cli.h"

namespace rackprof::daemon::app {

CommandRun add_serve_command(CLI::App& root);
CommandRun add_convert_command(CLI::App& root);
CommandRun add_diff_command(CLI::App& root);
CommandRun add_check_sync_command(CLI::App& root);
CommandRun add_simulate_command(CLI::App& root);
CommandRun add_demo_command(CLI::App& root);
CommandRun add_fleet_command(CLI::App& root);
CommandRun add_campaign_command(CLI::App& root);
CommandRun add_check_command(CLI::App& root);
CommandRun add_annotate_command(CLI::App& root);

}  // namespace rackprof::daemon::app
