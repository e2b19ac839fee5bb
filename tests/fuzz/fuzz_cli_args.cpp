// Fuzzes the dlock tool's command line (tools/dlock/parse.h): the input,
// cut at each NUL, is argv after the program's name. The parsed command is
// never run. Beyond not crashing (an exception escaping the parser is a
// crash too):
//   - parsing does no I/O: socket(), connect(), fork() and exec while it
//     runs abort the fuzzer (they are wrapped here, for the calls the
//     tool's code and the client libraries make through the PLT);
//   - the outcome is one of: a subcommand to run (one was named), --help
//     or --version text (exit 0), or a usage error (exit 64) whose message
//     names the argument at fault: an option or subcommand of the tool, or
//     a word of the command line.
#include "parse.h"

#include <dlfcn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

bool parsing = false;

void check(bool ok) {
  if (!ok) std::abort();
}

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

// Names a usage error may point at (the tool's subcommands, positionals,
// and "--" for any option).
constexpr std::array<std::string_view, 9> known = {"--",   "run",    "status",  "demo",      "bench",
                                                   "name", "prefix", "command", "subcommand"};

bool names_an_argument(const std::string& message, const std::vector<std::string>& words) {
  for (std::string_view k : known)
    if (message.find(k) != std::string::npos) return true;
  for (const auto& w : words)
    if (!w.empty() && message.find(w) != std::string::npos) return true;
  return false;
}

}  // namespace

// The calls that would mean the parser connected or started something.
extern "C" int socket(int domain, int type, int protocol) {
  check(!parsing);
  return next<int (*)(int, int, int)>("socket")(domain, type, protocol);
}
extern "C" int connect(int fd, const sockaddr* addr, socklen_t len) {
  check(!parsing);
  return next<int (*)(int, const sockaddr*, socklen_t)>("connect")(fd, addr, len);
}
extern "C" pid_t fork() {
  check(!parsing);
  return next<pid_t (*)()>("fork")();
}
extern "C" int execve(const char* path, char* const argv[], char* const envp[]) {
  check(!parsing);
  return next<int (*)(const char*, char* const[], char* const[])>("execve")(path, argv, envp);
}
extern "C" int execvp(const char* file, char* const argv[]) {
  check(!parsing);
  return next<int (*)(const char*, char* const[])>("execvp")(file, argv);
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The default --backend comes from here: a fixed one, so runs repeat.
  ::setenv("DLOCK_BACKEND", "file:///nonexistent/dlock-fuzz", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> words;
  while (!input.empty() && words.size() < 24) {
    const auto cut = input.find('\0');
    words.emplace_back(input.substr(0, cut));
    if (cut == std::string_view::npos) break;
    input.remove_prefix(cut + 1);
  }
  std::vector<const char*> argv = {"dlock"};
  for (const auto& w : words) argv.push_back(w.c_str());
  argv.push_back(nullptr);

  parsing = true;
  const auto line = dlock::cli::parse_command_line(static_cast<int>(argv.size() - 1), argv.data());
  parsing = false;

  if (line.run) {
    bool named = false;
    for (const auto& w : words) named = named || w == "run" || w == "status" || w == "demo" || w == "bench";
    check(named && line.out.empty() && line.err.empty());
  } else if (line.exit == 0) {
    check(!line.out.empty());  // --help or --version
  } else {
    check(line.exit == dlock::cli::exit_usage && !line.err.empty() && names_an_argument(line.err, words));
  }
  return 0;
}
