#include "parse.h"

#include <sstream>

namespace dlock::cli {

CommandLine parse_command_line(int argc, const char* const* argv) {
  CLI::App app{"dlock: distributed locks for C++ — command-line tool"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dlock 0.1.0");
  CommandLine line;
  add_run(app, line.run);
  add_status(app, line.run);
  add_demo(app, line.run);
  add_bench(app, line.run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    line.run = nullptr;
    line.exit = app.exit(e, out, err) == 0 ? 0 : exit_usage;
    line.out = out.str();
    line.err = err.str();
  }
  return line;
}

}  // namespace dlock::cli
