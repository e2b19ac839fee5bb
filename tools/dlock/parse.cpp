#include "parse.h"

#include "version.h"

#include <algorithm>
#include <sstream>
#include <string_view>
#include <vector>

namespace dlock::cli {
namespace {

// A usage error found before CLI11 reads the line: the words not understood,
// and the subcommand they were given to ("" for none).
class NotUnderstood : public CLI::ParseError {
 public:
  NotUnderstood(std::string message, std::string subcommand)
      : CLI::ParseError("NotUnderstood", std::move(message), CLI::ExitCodes::ExtrasError),
        subcommand_(std::move(subcommand)) {}
  const std::string& subcommand() const { return subcommand_; }

 private:
  std::string subcommand_;
};

// What a usage error ends with: where help is, for the subcommand it was in.
std::string see_help(const CLI::App* app, const CLI::Error& e) {
  std::string command = "dlock";
  if (const auto* early = dynamic_cast<const NotUnderstood*>(&e)) {
    if (!early->subcommand().empty()) command += " " + early->subcommand();
  } else if (const auto chosen = app->get_subcommands(); !chosen.empty()) {
    command += " " + chosen.front()->get_name();
  }
  return "(see '" + command + " --help')";
}

// The command line's arguments after argv[0], with a "--" after `dlock run`'s
// NAME where none is: as with flock(1), env(1) and timeout(1), everything
// after NAME is the command and its arguments, options included
// (`dlock run job ls -l`). A "--" right after NAME stays accepted. An
// option `run` does not have, before NAME, is refused here: without knowing
// whether it takes a value, where NAME is can't be told.
std::vector<std::string> with_command_separated(CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  std::size_t at = 0;
  while (at < args.size() && args[at].starts_with("-") && args[at] != "--") ++at;  // --help, --version
  if (at == args.size() || args[at] != "run") return args;
  CLI::App* run = app.get_subcommand("run");
  for (++at; at < args.size(); ++at) {
    const std::string& arg = args[at];
    if (arg == "--") return args;  // `run [OPTIONS] -- NAME CMD...`: CLI11 reads the rest as positionals
    if (arg.size() < 2 || arg[0] != '-') {
      if (at + 1 == args.size() || args[at + 1] != "--") args.insert(args.begin() + static_cast<long>(at) + 1, "--");
      return args;
    }
    const std::string flag = arg.substr(0, arg.find('='));
    const CLI::Option* option = run->get_option_no_throw(flag);
    if (!option) throw NotUnderstood("unknown option: " + arg, "run");
    if (arg.size() == flag.size() + 1) {
      // "--backend=": an empty value (which CLI11 would take from the next argument).
      args[at] = flag;
      args.insert(args.begin() + static_cast<long>(at) + 1, "");
      ++at;
      continue;
    }
    if (option->get_items_expected_min() > 0 && flag.size() == arg.size()) ++at;  // its value is the next argument
  }
  return args;
}

// CLI11's messages, in a Unix tool's words: what was not understood, and
// where help is.
std::string usage_error(const CLI::App* app, const CLI::Error& e) {
  std::string what = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    const std::string_view prefix = what.find("arguments were") != std::string::npos
                                        ? "The following arguments were not expected: "
                                        : "The following argument was not expected: ";
    std::string rest = what.starts_with(prefix) ? what.substr(prefix.size()) : what;
    what = (rest.starts_with("-") ? "unknown option: " : "unexpected argument: ") + rest;
  } else if (e.get_name() == "RequiredError" && what.find("subcommand") != std::string::npos) {
    what = "a command is required: run, status, demo or bench";
  }
  return "dlock: " + what + " " + see_help(app, e) + "\n";
}

}  // namespace

void add_commands(CLI::App& app, Chosen& chosen) {
  app.description("dlock: distributed locks for C++ — command-line tool");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("dlock ") + version);
  app.failure_message(usage_error);
  add_run(app, chosen);
  add_status(app, chosen);
  add_demo(app, chosen);
  add_bench(app, chosen);
}

CommandLine parse_command_line(int argc, const char* const* argv) {
  CLI::App app;
  CommandLine line;
  add_commands(app, line.run);
  try {
    std::vector<std::string> args = with_command_separated(app, argc, argv);
    // A word where a subcommand belongs that is none of them.
    for (const std::string& arg : args) {
      if (arg.starts_with("-")) continue;
      const auto commands = app.get_subcommands({});
      if (std::none_of(commands.begin(), commands.end(), [&](const CLI::App* c) { return c->check_name(arg); }))
        throw NotUnderstood("unknown command: '" + arg + "' (commands: run, status, demo, bench)", "");
      break;
    }
    std::vector<const char*> words{argc > 0 ? argv[0] : "dlock"};
    for (const std::string& arg : args) words.push_back(arg.c_str());
    app.parse(static_cast<int>(words.size()), words.data());
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
