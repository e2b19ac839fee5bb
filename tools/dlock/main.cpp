// dlock — run commands under a distributed lock, inspect locks, demo and bench.
#include "parse.h"

#include <dlock/dlock.h>

#include <iostream>

int main(int argc, char** argv) {
  const dlock::cli::CommandLine line = dlock::cli::parse_command_line(argc, argv);
  std::cout << line.out;
  std::cerr << line.err;
  if (!line.run) return line.exit;
  try {
    return line.run();
  } catch (const CLI::Error& e) {  // an argument only a running subcommand can judge
    std::cerr << "dlock: " << e.what() << "\n";
    return dlock::cli::exit_usage;
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
}
