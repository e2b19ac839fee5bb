#include "commands.h"
namespace dlock::cli {
void add_bench(CLI::App& app, int& status) { app.add_subcommand("bench", "flash sale (in progress)")->callback([&status] { status = 1; }); }
}  // namespace dlock::cli
