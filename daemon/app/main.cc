// rackprof: gprof for a rack of microcontrollers. One binary, one subcommand per job
// (daemon/app/cli.h declares them).
#include <iostream>
#include <string>
#include <vector>

#include "daemon/app/cli.h"

int main(int argc, char** argv) {
    return rackprof::daemon::app::run_cli(std::vector<std::string>(argv + 1, argv + argc),
                                          std::cout, std::cerr);
}
