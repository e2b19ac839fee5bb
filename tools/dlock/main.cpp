// dlock — run commands under a distributed lock, inspect locks, demo and bench.
#include "commands.h"

#include <dlock/dlock.h>

#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"dlock: distributed locks for C++ — command-line tool"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dlock 0.1.0");
  int status = 0;
  dlock::cli::add_run(app, status);
  dlock::cli::add_status(app, status);
  dlock::cli::add_demo(app, status);
  dlock::cli::add_bench(app, status);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : dlock::cli::exit_usage;
  } catch (const dlock::Error& e) {
    std::cerr << "dlock: " << e.what() << "\n";
    switch (e.kind()) {
      case dlock::errc::invalid_argument: return dlock::cli::exit_usage;
      case dlock::errc::unsupported: return dlock::cli::exit_usage;  // e.g. --elect on a backend without elections
      case dlock::errc::unavailable: return dlock::cli::exit_unavailable;
      default: return dlock::cli::exit_internal;
    }
  } catch (const std::exception& e) {
    std::cerr << "dlock: " << e.what() << "\n";
    return dlock::cli::exit_internal;
  }
  return status;
}
