// docs.h — the man page dlock(1) and the bash completion, generated from
// the command line's one description (add_commands in parse.h): every
// subcommand, option and help text in them is the one --help prints, so
// they can't drift apart. tools/dlock/CMakeLists.txt runs dlock_docgen at
// build time to write them; what is not an option (exit statuses,
// environment, files, examples) is written here once, the exit statuses
// from commands.h's constants.
#pragma once

#include <string>

namespace dlock::cli {

// dlock(1) in roff (man(7) macros).
std::string manual_page();

// A bash completion script for dlock: subcommands, each one's options, and
// the store URL schemes this build has after --backend.
std::string bash_completion();

}  // namespace dlock::cli
