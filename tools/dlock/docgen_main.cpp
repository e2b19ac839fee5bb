// dlock_docgen MAN_PAGE COMPLETION — writes dlock(1) and the bash completion
// (docs.h) at build time; not installed.
#include "docs.h"

#include <fstream>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: dlock_docgen MAN_PAGE COMPLETION\n";
    return 64;
  }
  std::ofstream(argv[1]) << dlock::cli::manual_page();
  std::ofstream(argv[2]) << dlock::cli::bash_completion();
  return std::ofstream(argv[1], std::ios::app) && std::ofstream(argv[2], std::ios::app) ? 0 : 1;
}
