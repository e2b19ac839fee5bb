// commands.h — the dlock tool's subcommands and what they share.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace dlock::cli {

// Exit statuses (documented in docs/cli.md).
inline constexpr int exit_usage = 64;        // bad arguments
inline constexpr int exit_unavailable = 69;  // the store could not be reached
inline constexpr int exit_internal = 70;     // unexpected error
inline constexpr int exit_not_acquired = 75; // lock not acquired within --wait
inline constexpr int exit_lock_lost = 76;    // lock lost while the command ran; it was terminated
inline constexpr int exit_max_run = 124;     // the command ran past --max-run; it was terminated (as timeout(1))

// What runs a parsed subcommand, its arguments checked; returns the exit status.
using Chosen = std::function<int()>;

// Each registers its subcommand on `app`. Its callback, run by
// CLI::App::parse, only checks the arguments (throwing CLI::ValidationError
// that names the bad one) and stores in `chosen` what runs the subcommand:
// parsing connects to nothing and starts nothing (parse.h).
void add_run(CLI::App& app, Chosen& chosen);
void add_status(CLI::App& app, Chosen& chosen);
void add_demo(CLI::App& app, Chosen& chosen);
void add_bench(CLI::App& app, Chosen& chosen);

// DLOCK_BACKEND if set, else the file backend in a per-user directory
// ($XDG_RUNTIME_DIR/dlock, or /tmp/dlock-<uid>). Reads only the environment.
std::string default_backend();

// The store URL a subcommand uses: `backend` if --backend was given
// (`given`), else default_backend(); checked without connecting (it parses,
// and this build has its scheme; the default store's directory, if it
// exists, is this user's). Throws CLI::ValidationError naming --backend (or
// DLOCK_BACKEND, or the default store) if not: an empty --backend is
// refused, not taken for the default.
std::string store_url(const std::string& backend, bool given);

// A store URL fit to print: its password replaced by "***", whether it
// parses or not (detail::printable_url).
std::string printable_url(const std::string& url);

// Parses "500ms", "10s", "2m"; throws CLI::ValidationError naming `option`.
std::chrono::milliseconds duration_arg(const std::string& text, std::string_view option);

// JSON string literal with escapes.
std::string json_string(std::string_view s);

// `s` (text read from a store) fit for a terminal: control characters and
// bytes that are not UTF-8 as \xNN, a backslash doubled; a name in the
// store can't move the cursor, recolour the screen or break a line.
std::string terminal_text(std::string_view s);

// The columns `s` (UTF-8) takes on a terminal: one per character, two for
// East Asian wide ones, none for combining marks; a byte that is not UTF-8
// counts one (terminal_text escapes it anyway).
std::size_t display_width(std::string_view s);

// A Prometheus label value, quoted: backslash, double quote and newline escaped.
std::string prometheus_label(std::string_view s);

}  // namespace dlock::cli
