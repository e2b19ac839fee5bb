// parse.h — the dlock tool's command line read without running anything:
// what main() runs, or what it prints and exits with. Parsing connects to
// no store, starts no process and touches no file (only the environment
// is read, for the default --backend); tests/fuzz/fuzz_cli_args.cpp holds
// it to that.
#pragma once

#include "commands.h"

#include <string>

namespace dlock::cli {

struct CommandLine {
  // The subcommand with its arguments checked, not started yet: returns
  // the exit status. Empty when there is nothing to run.
  Chosen run;
  // With nothing to run: the exit status (0 after --help or --version,
  // exit_usage for bad arguments) and what to print. A usage error names
  // the argument at fault.
  int exit = 0;
  std::string out;  // for stdout: --help, --version
  std::string err;  // for stderr: the usage error
};

// Reads argv (argv[0] is the program's name).
CommandLine parse_command_line(int argc, const char* const* argv);

// The whole command line on `app`: the subcommands with their options,
// --help, --version. What --help prints, the man page and the bash
// completion (docs.h) are all read off this one description.
void add_commands(CLI::App& app, Chosen& chosen);

}  // namespace dlock::cli
