#include "commands.h"
namespace dlock::cli {
void add_demo(CLI::App& app, int& status) { app.add_subcommand("demo", "flash sale (in progress)")->callback([&status] { status = 1; }); }
}  // namespace dlock::cli
