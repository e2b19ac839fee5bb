// The dlock tool, run as a user runs it: exit codes, the environment CMD
// gets, mutual exclusion between concurrent `dlock run`, and what happens
// when the lock is lost or dlock itself dies.
#include "child_process.h"
#include "servers.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

// Alive and not a zombie waiting to be reaped by init.
bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, comm, state;
  stat >> pid_field >> comm >> state;
  return state != "Z" && state != "X";
}

class Cli : public ::testing::Test {
 protected:
  std::string url() const { return "file://" + dir_.path() + "/locks"; }

  // Runs dlock with args; returns {exit status, stdout}.
  std::pair<int, std::string> dlock(std::vector<std::string> args, std::chrono::milliseconds timeout = 30s) {
    args.insert(args.begin(), DLOCK_TOOL);
    ChildProcess p(args);
    std::string out;
    const auto until = std::chrono::steady_clock::now() + scaled(timeout);
    while (auto line = p.read_line(std::chrono::duration_cast<std::chrono::milliseconds>(
               until - std::chrono::steady_clock::now())))
      out += *line + "\n";
    auto status = p.wait(scaled(5s));
    EXPECT_TRUE(status) << "dlock did not exit";
    return {status.value_or(-1), out};
  }

  struct Ran {
    int status = -1;
    std::string out, err;
  };
  // Runs dlock with args, its stdout and stderr apart, in an environment
  // changed by `env`: "NAME=value" sets, "-NAME" unsets.
  Ran dlock_apart(std::vector<std::string> args, std::vector<std::string> env = {}) {
    const std::string err_file = dir_.path() + "/stderr";
    std::vector<std::string> argv{"/usr/bin/env"};
    for (const auto& e : env) {
      if (e.starts_with("-")) argv.insert(argv.end(), {"-u", e.substr(1)});
      else argv.push_back(e);
    }
    argv.insert(argv.end(), {"DLOCK_TEST_STDERR=" + err_file, "/bin/sh", "-c",
                             "exec \"$0\" \"$@\" 2>\"$DLOCK_TEST_STDERR\"", DLOCK_TOOL});
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess p(argv);
    Ran ran;
    const auto until = std::chrono::steady_clock::now() + scaled(30s);
    while (auto line = p.read_line(std::chrono::duration_cast<std::chrono::milliseconds>(
               until - std::chrono::steady_clock::now())))
      ran.out += *line + "\n";
    auto status = p.wait(scaled(5s));
    EXPECT_TRUE(status) << "dlock did not exit";
    ran.status = status.value_or(-1);
    std::ifstream in(err_file);
    ran.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return ran;
  }

  std::vector<std::string> run_args(const std::string& name, std::vector<std::string> extra,
                                    std::vector<std::string> command) {
    std::vector<std::string> args{"run", "--backend", url()};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(name);
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return args;
  }

  TempDir dir_;
};

TEST_F(Cli, RunPassesTheCommandsExitStatusAndEnvironment) {
  auto [status, out] = dlock(run_args("job", {}, {"/bin/sh", "-c", "echo \"$DLOCK_NAME $DLOCK_TOKEN\"; exit 3"}));
  EXPECT_EQ(status, 3);
  EXPECT_EQ(out, "job 1\n");
  auto second = dlock(run_args("job", {}, {"/bin/sh", "-c", "echo $DLOCK_TOKEN"}));
  EXPECT_EQ(second.first, 0);
  EXPECT_EQ(second.second, "2\n") << "tokens must increase per name";
}

// As with flock(1), env(1) and timeout(1), option parsing stops at NAME:
// what follows is the command's, options included; "--" stays accepted.
TEST_F(Cli, OptionsAfterTheNameBelongToTheCommand) {
  auto echoed = dlock_apart({"run", "--backend", url(), "job", "echo", "hi", "--wait", "0"});
  EXPECT_EQ(echoed.status, 0) << echoed.err;
  EXPECT_EQ(echoed.out, "hi --wait 0\n");
  auto listed = dlock_apart({"run", "--backend", url(), "job", "ls", "-d", "-l", dir_.path()});
  EXPECT_EQ(listed.status, 0) << listed.err;
  EXPECT_TRUE(listed.out.starts_with("d")) << listed.out;
  auto separated = dlock_apart({"run", "--backend=" + url(), "--wait=0", "job", "--", "echo", "--", "-x"});
  EXPECT_EQ(separated.status, 0) << separated.err;
  EXPECT_EQ(separated.out, "-- -x\n");
}

// Every argument is checked before any connection (port 1 refuses, so a
// check made after connecting would exit 69), refused with 64 and a message
// naming the tool's flag, not a C++ name.
TEST_F(Cli, BadArgumentsAreRefusedBeforeConnectingNamingTheFlag) {
  const std::string down = "redis://127.0.0.1:1";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--permits", "0"}, "--permits"},
      {{"--permits", "-1"}, "--permits"},
      {{"--elect", "--permits", "2"}, "--permits"},
      {{"--elect", "--permits", "0"}, "--permits"},
      {{"--permits", "99999999999999999999"}, "--permits"},
      {{"--permits", "2147483648"}, "--permits"},
      {{"--lease", "0"}, "--lease"},
      {{"--lease", "3ms"}, "--lease"},
      {{"--lease", "5ms"}, "--lease"},
      {{"--lease", "25h"}, "--lease"},
      {{"--backend", ""}, "--backend"},
      {{"--backend="}, "--backend"},
      {{"--backend", "redis://127.0.0.1:x"}, "--backend"},
  };
  for (const auto& [flags, named] : cases) {
    std::vector<std::string> args{"run", "--backend", down};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"job", "true"});
    auto ran = dlock_apart(args);
    const std::string what = ::testing::PrintToString(flags);
    EXPECT_EQ(ran.status, 64) << what << ": " << ran.err;
    EXPECT_NE(ran.err.find(named), std::string::npos) << what << ": " << ran.err;
    EXPECT_EQ(ran.err.find("::"), std::string::npos) << what << " names a C++ name: " << ran.err;
  }
  // A lease too short to renew says the shortest, and why.
  auto short_lease = dlock_apart({"run", "--backend", down, "--lease", "5ms", "job", "true"});
  EXPECT_NE(short_lease.err.find("100ms"), std::string::npos) << short_lease.err;
  EXPECT_NE(short_lease.err.find("renew"), std::string::npos) << short_lease.err;
}

// What was not understood, and where help is.
TEST_F(Cli, UnknownOptionsAndCommandsSayWhatAndWhereHelpIs) {
  auto option = dlock_apart({"run", "--frobnicate", "job", "true"});
  EXPECT_EQ(option.status, 64);
  EXPECT_NE(option.err.find("unknown option: --frobnicate"), std::string::npos) << option.err;
  EXPECT_NE(option.err.find("dlock run --help"), std::string::npos) << option.err;
  auto status_option = dlock_apart({"status", "--frobnicate"});
  EXPECT_EQ(status_option.status, 64);
  EXPECT_NE(status_option.err.find("unknown option: --frobnicate"), std::string::npos) << status_option.err;
  EXPECT_NE(status_option.err.find("dlock status --help"), std::string::npos) << status_option.err;
  auto command = dlock_apart({"frobnicate"});
  EXPECT_EQ(command.status, 64);
  EXPECT_NE(command.err.find("unknown command: 'frobnicate'"), std::string::npos) << command.err;
  EXPECT_NE(command.err.find("dlock --help"), std::string::npos) << command.err;
  auto none = dlock_apart({});
  EXPECT_EQ(none.status, 64);
  EXPECT_NE(none.err.find("dlock --help"), std::string::npos) << none.err;
}

// A sqlite:// URL naming a file that is something else is a bad argument
// (64), said so, and the file is left as it was.
TEST_F(Cli, SqliteUrlOfAFileThatIsNotADatabaseIsABadArgument) {
  const std::string file = dir_.path() + "/passwd";
  const std::string text = "root:x:0:0:root:/root:/bin/bash\n";
  std::ofstream(file) << text;
  auto ran = dlock_apart({"run", "--backend", "sqlite://" + file, "job", "true"});
  EXPECT_EQ(ran.status, 64) << ran.err;
  EXPECT_NE(ran.err.find("not a SQLite database"), std::string::npos) << ran.err;
  std::ifstream in(file);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), text);
}

// A password on the command line is readable by every user of the host
// (/proc/<pid>/cmdline): dlock says so, without repeating it, and says
// where else to put it; in DLOCK_BACKEND it says nothing.
#ifdef DLOCK_WITH_REDIS
TEST_F(Cli, APasswordOnTheCommandLineIsWarnedAbout) {
  auto ran = dlock_apart({"status", "--backend", "redis://:Zq9Secret77@127.0.0.1:1"});
  EXPECT_NE(ran.err.find("warning: the password in --backend"), std::string::npos) << ran.err;
  EXPECT_NE(ran.err.find("password_file="), std::string::npos) << ran.err;
  EXPECT_EQ(ran.err.find("Zq9Secret77"), std::string::npos) << ran.err;
  ran = dlock_apart({"status"}, {"DLOCK_BACKEND=redis://:Zq9Secret77@127.0.0.1:1"});
  EXPECT_EQ(ran.err.find("warning"), std::string::npos) << ran.err;
  EXPECT_EQ(ran.err.find("Zq9Secret77"), std::string::npos) << ran.err;
}
#endif

// The default store in $XDG_RUNTIME_DIR, however the path is spelt.
TEST_F(Cli, DefaultStoreTakesXdgRuntimeDirWithATrailingSlash) {
  for (const std::string& runtime : {dir_.path() + "/", dir_.path() + "//", dir_.path() + "/./"}) {
    auto ran = dlock_apart({"run", "job", "--", "/bin/sh", "-c", "echo ok"},
                           {"-DLOCK_BACKEND", "XDG_RUNTIME_DIR=" + runtime});
    EXPECT_EQ(ran.status, 0) << runtime << ": " << ran.err;
    EXPECT_EQ(ran.out, "ok\n") << runtime;
    struct stat st {};
    EXPECT_EQ(::stat((dir_.path() + "/dlock").c_str(), &st), 0) << runtime << ": not the store's directory";
  }
  // "/" is nobody's runtime directory: the per-user fallback is used.
  auto root = dlock_apart({"run", "job", "--", "/bin/sh", "-c", "echo ok"}, {"-DLOCK_BACKEND", "XDG_RUNTIME_DIR=/"});
  EXPECT_EQ(root.status, 0) << root.err;
  EXPECT_EQ(root.out, "ok\n");
}

// As env(1) and timeout(1): 127 / 126, and a message naming the command.
TEST_F(Cli, CommandNotFoundOrNotExecutableIsNamed) {
  auto missing = dlock_apart(run_args("x", {}, {"/nonexistent/command"}));
  EXPECT_EQ(missing.status, 127);
  EXPECT_NE(missing.err.find("/nonexistent/command"), std::string::npos) << missing.err;
  const std::string script = dir_.path() + "/not-executable";
  std::ofstream(script) << "#!/bin/sh\necho ran\n";
  ::chmod(script.c_str(), 0600);
  auto denied = dlock_apart(run_args("x", {}, {script}));
  EXPECT_EQ(denied.status, 126);
  EXPECT_NE(denied.err.find(script), std::string::npos) << denied.err;
  EXPECT_EQ(denied.out, "");
}

// Cron mails whatever a job writes: with -q a skipped run is silent (the
// exit status still says 75).
TEST_F(Cli, QuietSaysNothingWhenTheLockIsTaken) {
  auto holder = dlock::connect(url())->mutex("busy");
  holder.lock();
  auto loud = dlock_apart(run_args("busy", {"--wait", "0"}, {"/bin/true"}));
  EXPECT_EQ(loud.status, 75);
  EXPECT_NE(loud.err, "");
  for (const char* quiet : {"-q", "--quiet"}) {
    auto ran = dlock_apart(run_args("busy", {quiet, "--wait", "0"}, {"/bin/true"}));
    EXPECT_EQ(ran.status, 75) << quiet;
    EXPECT_EQ(ran.err, "") << quiet;
    EXPECT_EQ(ran.out, "") << quiet;
  }
  holder.unlock();
}

// dlock(1) is generated from the options --help prints: every option of
// every subcommand's --help is in it, and groff reads it without a warning.
TEST_F(Cli, ManPageHasEveryOptionHelpShows) {
  const std::string page = DLOCK_MAN_PAGE;
  ASSERT_TRUE(std::ifstream(page).good()) << page;
  EXPECT_EQ(shell_output("groff -man -ww -z -k " + page + " 2>&1"), "");
  const std::string text = shell_output("groff -man -Tutf8 -P-cbou -k " + page + " 2>/dev/null");
  for (const char* command : {"run", "status", "demo", "bench"}) {
    EXPECT_NE(text.find(std::string("dlock ") + command), std::string::npos) << command;
    std::istringstream help(dlock({command, "--help"}).second);
    int options = 0;
    for (std::string word; help >> word;) {
      if (!word.starts_with("--") || word == "--") continue;
      word = word.substr(0, word.find_first_of(",=)"));  // "-h,--help" is read as "--help"
      if (word.size() < 3 || word.find('.') != std::string::npos) continue;
      ++options;
      EXPECT_NE(text.find(word), std::string::npos) << command << ": " << word << " is not in the man page";
    }
    EXPECT_GT(options, 1) << command;
  }
  for (const char* section : {"EXIT STATUS", "ENVIRONMENT", "EXAMPLES", "DLOCK_BACKEND", "XDG_RUNTIME_DIR", "127"})
    EXPECT_NE(text.find(section), std::string::npos) << section;
}

// The bash completion: subcommands, each one's options, the store URL
// schemes after --backend, and after run's NAME the command's own words.
TEST_F(Cli, BashCompletionCompletesCommandsOptionsAndSchemes) {
  ASSERT_FALSE(shell_output("command -v bash").empty()) << "bash is needed to load the completion";
  auto complete = [](const std::string& words, int at) {
    return shell_output("bash -c 'source " + std::string(DLOCK_COMPLETION) + "; COMP_WORDS=(" + words +
                        "); COMP_CWORD=" + std::to_string(at) + "; _dlock; echo \"${COMPREPLY[*]}\"'");
  };
  EXPECT_EQ(complete("dlock r", 1), "run\n");
  EXPECT_EQ(complete("dlock run --ba", 2), "--backend\n");
  EXPECT_EQ(complete("dlock status --me", 2), "--metrics\n");
  EXPECT_NE(complete("dlock run --backend \"\"", 3).find("file://"), std::string::npos);
  EXPECT_EQ(complete("dlock run --backend fi", 3), "file://\n");
  EXPECT_EQ(complete("dlock run --wait --", 3), "\n") << "a value is not an option";
  EXPECT_NE(complete("dlock run job l", 3).find("ls"), std::string::npos) << "the command after NAME";
  EXPECT_EQ(complete("dlock run job ls --", 4), "\n") << "the command's options are not dlock's";
}

TEST_F(Cli, RunExitCodes) {
  EXPECT_EQ(dlock(run_args("x", {}, {"/nonexistent/command"})).first, 127);
  EXPECT_EQ(dlock(run_args("x", {"--wait", "ten"}, {"/bin/true"})).first, 64);
  EXPECT_EQ(dlock(run_args("x", {"--lease", "0"}, {"/bin/true"})).first, 64);
  EXPECT_EQ(dlock({"run", "--backend", "nosuch://x", "x", "--", "/bin/true"}).first, 64);
  EXPECT_EQ(dlock(run_args("", {}, {"/bin/true"})).first, 64);

  auto holder = dlock::connect(url())->mutex("busy");
  holder.lock();
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(dlock(run_args("busy", {"--wait", "0"}, {"/bin/true"})).first, 75);
  EXPECT_EQ(dlock(run_args("busy", {"--wait", "300ms"}, {"/bin/true"})).first, 75);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
  holder.unlock();
  EXPECT_EQ(dlock(run_args("busy", {"--wait", "0"}, {"/bin/true"})).first, 0);
}

// The descriptor numbers in `ls -l /proc/<pid>/fd` output, but not the one
// ls reads that directory with.
std::set<int> descriptors(const std::string& listing) {
  std::set<int> fds;
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    auto arrow = line.find(" -> ");
    if (arrow == std::string::npos || line.find("/proc/", arrow) != std::string::npos) continue;
    fds.insert(std::stoi(line.substr(line.rfind(' ', arrow - 1) + 1)));
  }
  return fds;
}

TEST_F(Cli, NoLockDescriptorLeaksIntoTheCommand) {
  std::vector<std::string> backends{url(), "sqlite://" + dir_.path() + "/leak.db"};
#ifdef DLOCK_WITH_REDIS
  backends.push_back(server_url("redis") + "/0?prefix=" + unique_prefix(dir_.path()));
#endif
#ifdef DLOCK_WITH_ZOOKEEPER
  backends.push_back(server_url("zookeeper") + "/" + unique_name(dir_.path()));
#endif
  // What the command gets when run without dlock.
  ChildProcess direct({"/bin/sh", "-c", "ls -l /proc/$$/fd"});
  std::string baseline;
  while (auto line = direct.read_line(scaled(10s))) baseline += *line + "\n";
  ASSERT_TRUE(direct.wait(scaled(5s)));
  // A lock on every backend; a permit and leadership where the store has them.
  std::vector<std::pair<std::string, std::vector<std::string>>> runs;
  for (const auto& backend : backends) runs.push_back({backend, {}});
  runs.push_back({url(), {"--permits", "2"}});
  runs.push_back({url(), {"--elect"}});
  for (const auto& [backend, how] : runs) {
    std::vector<std::string> args{"run", "--backend", backend};
    args.insert(args.end(), how.begin(), how.end());
    args.insert(args.end(), {"leak", "--", "/bin/sh", "-c", "ls -l /proc/$$/fd"});
    auto [status, out] = dlock(args);
    const std::string what = backend + (how.empty() ? "" : " " + how.front());
    EXPECT_EQ(status, 0) << what;
    // Only the shell's own stdin, stdout and stderr (and the fd ls reads).
    for (const char* leak : {".lock", ".permits", ".elect", ".db", "inotify", "socket:", "eventfd", "anon_inode"})
      EXPECT_EQ(out.find(leak), std::string::npos) << what << " leaked " << leak << ":\n" << out;
    // No descriptor beyond those the command would get without dlock (what
    // this test process itself passes on), e.g. a client library's pipes.
    EXPECT_EQ(descriptors(out), descriptors(baseline)) << what << " leaked:\n" << out << "without dlock:\n" << baseline;
  }
}

TEST_F(Cli, ConcurrentRunsIncrementACounterExactly) {
  const std::string counter = dir_.path() + "/counter";
  std::ofstream(counter) << 0;
  const std::string script = "n=$(cat " + counter + "); sleep 0.01; echo $((n + 1)) > " + counter;
  std::vector<std::unique_ptr<ChildProcess>> runs;
  for (int i = 0; i < 20; ++i) {
    auto args = run_args("counter", {}, {"/bin/sh", "-c", script});
    args.insert(args.begin(), DLOCK_TOOL);
    runs.push_back(std::make_unique<ChildProcess>(args));
  }
  for (auto& r : runs) EXPECT_EQ(r->wait(scaled(60s)), std::optional<int>(0));
  std::ifstream in(counter);
  int value = -1;
  in >> value;
  EXPECT_EQ(value, 20) << "concurrent dlock run lost updates";
}

// The documents' scheduled job: cron fires a 10 ms job on 5 "hosts" within
// 200 ms of each other, the first one's job already done when the others
// fire. With --wait 0 alone they run it again; with --hold-at-least the
// first keeps the lock past the window, so it runs exactly once and the
// rest skip (exit 75).
TEST_F(Cli, HoldAtLeastRunsAJobFiredOnFiveHostsOnce) {
  auto fire = [&](const std::string& name, std::vector<std::string> extra) {
    const std::string runs = dir_.path() + "/" + name + ".runs";
    auto lines = [&] {
      std::ifstream in(runs);
      return static_cast<int>(
          std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
    };
    auto host = [&] {
      auto args = run_args(name, extra, {"/bin/sh", "-c", "echo run >> " + runs + "; sleep 0.01"});
      args.insert(args.begin(), DLOCK_TOOL);
      return std::make_unique<ChildProcess>(args);
    };
    std::vector<std::unique_ptr<ChildProcess>> hosts;
    hosts.push_back(host());
    EXPECT_TRUE(eventually([&] { return lines() == 1; }, 10s)) << name << ": the first host never ran the job";
    std::this_thread::sleep_for(50ms);  // its 10 ms job is over
    for (int i = 1; i < 5; ++i) {
      hosts.push_back(host());
      std::this_thread::sleep_for(50ms);  // fired 50 ms apart
    }
    int ran = 0, skipped = 0;
    for (auto& h : hosts) {
      auto status = h->wait(scaled(30s));
      ran += status == std::optional<int>(0);
      skipped += status == std::optional<int>(75);
    }
    EXPECT_EQ(ran + skipped, 5) << name << ": a host exited with something else";
    return lines();
  };
  EXPECT_EQ(fire("nightly-held", {"--wait", "0", "--hold-at-least", "3s"}), 1)
      << "with --hold-at-least the job must run exactly once in the window";
  // The same without it: the race the flag closes is real.
  EXPECT_GT(fire("nightly-bare", {"--wait", "0"}), 1) << "without --hold-at-least later hosts should run it again";
  // The hold ends: after the window the lock is free again.
  auto c = dlock::connect(url());
  auto m = c->mutex("nightly-held");
  EXPECT_TRUE(m.try_lock_for(scaled(3s)));
  m.unlock();
}

// --seconds takes a plain number of seconds, and a duration with a unit.
TEST_F(Cli, BenchSecondsTakesAPlainNumber) {
  for (const char* seconds : {"1", "0.3", "300ms"}) {
    auto [status, out] = dlock({"bench", "--backend", url(), "--workload", "uncontended", "--seconds", seconds,
                                "--max-ops", "200", "--json"});
    EXPECT_EQ(status, 0) << seconds << ": " << out;
    EXPECT_NE(out.find("\"workload\":\"uncontended\""), std::string::npos) << seconds << ": " << out;
  }
  EXPECT_EQ(dlock({"bench", "--backend", url(), "--workload", "uncontended", "--seconds", "5x"}).first, 64);
  EXPECT_EQ(dlock({"bench", "--backend", url(), "--workload", "uncontended", "--seconds", "0"}).first, 64);
}

// On a terminal (script(1) gives it one) bench says first how long the
// whole run may take, then a line per phase as it starts; with --json, or
// without a terminal, only the results.
TEST_F(Cli, BenchStatesItsLengthAndEachPhaseOnATerminal) {
  ASSERT_FALSE(shell_output("command -v script").empty()) << "script(1) (util-linux) is needed to give dlock a terminal";
  const std::string bench = std::string(DLOCK_TOOL) + " bench --backend " + url() +
                            " --workload uncontended --seconds 0.2 --max-ops 50";
  const std::string watched = shell_output("script -qec '" + bench + "' /dev/null");
  const auto plan = watched.find("at most 0.4 s in all");
  ASSERT_NE(plan, std::string::npos) << watched;
  EXPECT_LT(plan, watched.find("[1/2] lock+unlock")) << watched;
  EXPECT_LT(watched.find("[1/2] lock+unlock"), watched.find("[2/2] raw round trips")) << watched;
  EXPECT_LT(watched.find("[2/2] raw round trips"), watched.find("lock+unlock/s")) << "progress after the results:\n"
                                                                                    << watched;
  const std::string json = shell_output("script -qec '" + bench + " --json' /dev/null");
  EXPECT_TRUE(json.starts_with("{\"workload\"")) << json;
  EXPECT_EQ(json.find("[1/2]"), std::string::npos) << json;
  const std::string piped = shell_output(bench + " 2>&1");
  EXPECT_EQ(piped.find("[1/2]"), std::string::npos) << piped;
}

// The flash sale sells with the lock options given (--fair,
// --max-barging-wait) and says which it used; a bad bound changes nothing.
TEST_F(Cli, FlashSaleBenchTakesTheLockOptions) {
  const std::vector<std::string> sale{"bench", "--backend", url(), "--workload", "flash-sale", "--stock", "40",
                                      "--processes", "2", "--threads", "1", "--json"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = sale;
    args.insert(args.end(), extra.begin(), extra.end());
    return dlock(args, 120s);
  };
  auto [fair_status, fair] = with({"--fair"});
  ASSERT_EQ(fair_status, 0) << fair;
  EXPECT_NE(fair.find("\"fair\":true"), std::string::npos) << fair;
  EXPECT_NE(fair.find("\"max_barging_wait_ms\":0"), std::string::npos) << fair;
  auto [bound_status, bound] = with({"--max-barging-wait", "7ms"});
  ASSERT_EQ(bound_status, 0) << bound;
  EXPECT_NE(bound.find("\"fair\":false"), std::string::npos) << bound;
  EXPECT_NE(bound.find("\"max_barging_wait_ms\":7"), std::string::npos) << bound;
  EXPECT_EQ(with({"--max-barging-wait", "soon"}).first, 64);
}

TEST_F(Cli, MaxRunTerminatesAnOverrunningJobAndReleases) {
  const auto start = std::chrono::steady_clock::now();
  auto [status, out] = dlock(run_args("overrun", {"--max-run", "300ms", "--kill-after", "300ms"},
                                      {"/bin/sh", "-c", "trap '' TERM; sleep 30"}));
  EXPECT_EQ(status, 124) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, scaled(5s)) << "the job was not stopped near --max-run";
  auto c = dlock::connect(url());
  auto m = c->mutex("overrun");
  EXPECT_TRUE(m.try_lock()) << "the lock was not released after the overrun";
  m.unlock();
  // A job within its limit is not touched; bad values are refused.
  EXPECT_EQ(dlock(run_args("overrun", {"--max-run", "10s"}, {"/bin/true"})).first, 0);
  EXPECT_EQ(dlock(run_args("overrun", {"--max-run", "0s"}, {"/bin/true"})).first, 64);
  EXPECT_EQ(dlock(run_args("overrun", {"--hold-at-least", "soon"}, {"/bin/true"})).first, 64);
}

TEST_F(Cli, LostLockTerminatesTheCommand) {
  auto args = run_args("lost", {"--lease", "600ms", "--kill-after", "1s"}, {"/bin/sleep", "30"});
  args.insert(args.begin(), DLOCK_TOOL);
  ChildProcess run(args);
  auto admin = dlock::connect(url());
  auto m = admin->mutex("lost");
  // Wait until dlock holds it, then take it away.
  const auto until = std::chrono::steady_clock::now() + scaled(5s);
  while (admin->list_locks("lost").empty() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(20ms);
  ASSERT_FALSE(admin->list_locks("lost").empty());
  m.force_unlock();
  ASSERT_TRUE(m.try_lock());
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(run.wait(scaled(10s)), std::optional<int>(76));
  EXPECT_LT(std::chrono::steady_clock::now() - start, scaled(3s));
  m.unlock();
}

TEST_F(Cli, LostLockStopsWhatTheCommandStartedToo) {
  auto args = run_args("grand", {"--lease", "600ms", "--kill-after", "300ms"},
                       {"/bin/sh", "-c", "sleep 30 & echo $!; wait"});
  args.insert(args.begin(), DLOCK_TOOL);
  ChildProcess run(args);
  auto line = run.read_line(scaled(5s));
  ASSERT_TRUE(line);
  const pid_t grandchild = std::stoi(*line);
  dlock::connect(url())->mutex("grand").force_unlock();
  EXPECT_EQ(run.wait(scaled(10s)), std::optional<int>(76));
  const auto until = std::chrono::steady_clock::now() + scaled(2s);
  while (process_alive(grandchild) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(process_alive(grandchild)) << "a process the command started outlived the lost lock";
}

// On file:// the kernel drops a dead holder's lock at once, but a holder
// that is stopped (SIGSTOP, a frozen VM) keeps its descriptors: there the
// lease is what frees the lock, as on every leased store. Another run gets
// it after --lease while the first command still runs; when the first
// dlock resumes it finds its lock lost and terminates its command (76).
// docs/cli.md says so.
TEST_F(Cli, StoppedHolderOnFileLosesTheLockAfterItsLease) {
  auto args = run_args("stopped", {"--lease", "1s", "--kill-after", "300ms"},
                       {"/bin/sh", "-c", "echo started; exec sleep 30"});
  args.insert(args.begin(), DLOCK_TOOL);
  ChildProcess first(args);
  ASSERT_EQ(first.read_line(scaled(10s)), "started");
  ASSERT_TRUE(stop_process(first.pid()));
  const auto stopped = std::chrono::steady_clock::now();
  auto second = dlock(run_args("stopped", {"--wait", "20s"}, {"/bin/sh", "-c", "echo second"}));
  EXPECT_EQ(second.first, 0);
  EXPECT_EQ(second.second, "second\n");
  EXPECT_GE(std::chrono::steady_clock::now() - stopped, 900ms) << "the lock was free before the lease ran out";
  first.signal(SIGCONT);
  EXPECT_EQ(first.wait(scaled(10s)), std::optional<int>(76)) << "the resumed holder did not see its lock lost";
}

TEST_F(Cli, KilledDlockTakesTheCommandWithItAndFreesTheLock) {
  auto args = run_args("orphan", {}, {"/bin/sh", "-c", "echo $$; exec sleep 30"});
  args.insert(args.begin(), DLOCK_TOOL);
  ChildProcess run(args);
  auto line = run.read_line(scaled(5s));
  ASSERT_TRUE(line);
  const pid_t command = std::stoi(*line);
  run.signal(SIGKILL);
  ASSERT_TRUE(run.wait(5s));
  const auto until = std::chrono::steady_clock::now() + scaled(2s);
  while (process_alive(command) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(process_alive(command)) << "the command outlived dlock";
  auto m = dlock::connect(url())->mutex("orphan");
  EXPECT_TRUE(m.try_lock_for(scaled(500ms))) << "the lock stayed held after dlock died";
  m.unlock();
}

TEST_F(Cli, StatusShowsHeldLocks) {
  auto c = dlock::connect(url());
  auto m = c->mutex("status/one");
  m.lock();
  auto [status, out] = dlock({"status", "--backend", url(), "--json", "status/"});
  EXPECT_EQ(status, 0);
  EXPECT_NE(out.find("\"name\":\"status/one\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"token\":" + std::to_string(m.token())), std::string::npos) << out;
  m.unlock();
  EXPECT_EQ(dlock({"status", "--backend", url(), "--json", "status/"}).second, "[]\n");
}

// The columns line up on a terminal whatever the names hold: padded by the
// columns text takes ("…" is three bytes, one column), not by its bytes.
TEST_F(Cli, StatusAlignsColumnsByDisplayWidth) {
  auto c = dlock::connect(url());
  auto wide = c->mutex("status/a…b…c");
  auto plain = c->mutex("status/plain");
  wide.lock();
  plain.lock();
  auto [status, out] = dlock({"status", "--backend", url(), "status/"});
  EXPECT_EQ(status, 0) << out;
  // The column (in characters, all of width 1 here) where each line's second field starts.
  auto kind_column = [](const std::string& line) {
    std::size_t at = line.find(' ');
    at = line.find_first_not_of(' ', at);
    return static_cast<std::size_t>(std::count_if(line.begin(), line.begin() + static_cast<long>(at),
                                                  [](char ch) { return (static_cast<unsigned char>(ch) & 0xc0) != 0x80; }));
  };
  std::istringstream lines(out);
  std::vector<std::size_t> columns;
  for (std::string line; std::getline(lines, line);) columns.push_back(kind_column(line));
  ASSERT_EQ(columns.size(), 3u) << out;
  EXPECT_EQ(columns[1], columns[0]) << out;
  EXPECT_EQ(columns[2], columns[0]) << out;
  wide.unlock();
  plain.unlock();
}

// A lock directory the store can't write to is unusable, and `run`,
// `status` and `status --metrics` all say so and why (69), none "no locks
// held". A read-only bind mount in a mount namespace of its own (root may
// write where the permission bits forbid it); skipped where that can't be made.
TEST_F(Cli, ReadOnlyLockDirectoryIsUnusableToEveryCommand) {
  const std::string locks = dir_.path() + "/ro";
  ASSERT_EQ(::mkdir(locks.c_str(), 0700), 0);
  // Root ignores permission bits: only a read-only mount makes the directory
  // unwritable to it. The suite runs as root (scripts/test.sh installs as root).
  ASSERT_EQ(shell_output("unshare -m sh -c 'mount --bind " + locks + " " + locks + " && echo ok' 2>/dev/null"), "ok\n")
      << "a mount namespace of its own is needed (root and unshare)";
  const std::string tool = DLOCK_TOOL, store = "file://" + locks;
  const std::string script = "mount --bind " + locks + " " + locks + " && mount -o remount,bind,ro " + locks + " && " +
                             tool + " run --backend " + store + " job true 2>&1; echo \"exit $?\"; " + tool +
                             " status --backend " + store + " 2>&1; echo \"exit $?\"; " + tool + " status --backend " +
                             store + " --metrics 2>&1 | grep -v \"^#\"; echo \"exit ${PIPESTATUS:-$?}\"";
  const std::string out = shell_output("unshare -m bash -c '" + script + "'");
  std::istringstream lines(out);
  std::vector<std::string> said;
  std::string text;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("exit ")) {
      said.push_back(text + line);
      text.clear();
    } else {
      text += line + "\n";
    }
  }
  ASSERT_EQ(said.size(), 3u) << out;
  for (const std::string& answer : said) {
    EXPECT_NE(answer.find("Read-only file system"), std::string::npos) << answer;
    EXPECT_NE(answer.find("exit 69"), std::string::npos) << answer;
    EXPECT_EQ(answer.find("no locks held"), std::string::npos) << answer;
  }
}

TEST_F(Cli, StatusMetricsCountsHeldLocksAndReportsADeadStoreAsDown) {
  auto c = dlock::connect(url());
  auto a = c->mutex("metrics/a");
  auto b = c->mutex("metrics/b");
  a.lock();
  b.lock();
  auto [status, out] = dlock({"status", "--backend", url(), "--metrics", "metrics/"});
  EXPECT_EQ(status, 0);
  EXPECT_NE(out.find("dlock_store_up{backend=\"file\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("dlock_held{backend=\"file\",kind=\"mutex\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("# TYPE dlock_lease_remaining_min_seconds gauge\n"), std::string::npos) << out;
  a.unlock();
  b.unlock();
  EXPECT_NE(dlock({"status", "--backend", url(), "--metrics", "metrics/"}).second.find(
                "dlock_held{backend=\"file\",kind=\"mutex\"} 0\n"),
            std::string::npos);
  // Nothing listens on port 1: down, with the store-unreachable status.
  auto [down, text] = dlock({"status", "--backend", "redis://127.0.0.1:1", "--metrics"});
  if (text.find("unknown scheme") == std::string::npos) {
    EXPECT_EQ(down, 69) << text;
    EXPECT_NE(text.find("dlock_store_up{backend=\"redis\"} 0\n"), std::string::npos) << text;
  }
  // A malformed URL is a usage error, not a store that is down.
  EXPECT_EQ(dlock({"status", "--backend", "redis://127.0.0.1:x", "--metrics"}).first, 64);
}

TEST_F(Cli, DatabaseModesAreRefusedWhereTheStockIsNotInADatabase) {
  // The message goes to stderr: run through a shell that folds it into stdout.
  std::string out;
  FILE* p = ::popen((std::string(DLOCK_TOOL) + " demo --backend " + url() + " --modes dlock,pessimistic 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 64) << out;
  EXPECT_NE(out.find("'pessimistic' needs the stock in a database"), std::string::npos) << out;
}

// The demo's lock names are fresh per run: it removes the files it made
// for them, leaving the lock directory as it found it.
TEST_F(Cli, DemoLeavesNoLockFilesBehind) {
  const std::string locks = dir_.path() + "/locks";
  auto keep = dlock::connect(url())->mutex("not-the-demos");  // a lock of someone else's, kept
  keep.lock();
  keep.unlock();
  auto [status, out] = dlock({"demo", "--backend", url(), "--stock", "100", "--processes", "2", "--json"}, 120s);
  ASSERT_EQ(status, 0) << out;
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(locks)) left.push_back(entry.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{"not-the-demos.lock"}) << ::testing::PrintToString(left);
}

// The main job: with the lock (and segmented, and atomic, and on a database
// its row lock and version check) the sale is exact; without it — or with a
// per-process mutex — it oversells.
TEST_F(Cli, DemoJsonNeverOversellsWithALock) {
  std::vector<std::string> backends{url(), "sqlite://" + dir_.path() + "/demo.db"};
#ifdef DLOCK_WITH_REDIS
  backends.push_back(server_url("redis") + "/0?prefix=" + unique_prefix(dir_.path()));  // stock in Redis too
#endif
#ifdef DLOCK_WITH_ZOOKEEPER
  backends.push_back(server_url("zookeeper") + "/" + unique_name(dir_.path()));
#endif
#ifdef DLOCK_WITH_POSTGRES
  // Stock in a table, and the database's own protections next to the lock's.
  backends.push_back(server_url("postgres") + "?schema=" + sql_identifier(dir_.path()));
#endif
#ifdef DLOCK_WITH_MYSQL
  backends.push_back(server_url("mysql"));  // the demo's product name is fresh: its rows are its own
#endif
  for (const std::string& backend : backends) {
    // MySQL's table mode has no wake-up yet (its waiters poll with backoff):
    // about 25 orders/s with the lock here, so a smaller sale keeps the
    // lock mode well inside the demo's 60 s limit on a loaded machine.
    const std::string stock = backend.starts_with("mysql:") ? "300" : "1000";
    auto [status, out] = dlock({"demo", "--backend", backend, "--stock", stock, "--json"}, 120s);
    ASSERT_EQ(status, 0) << out;
    auto report = nlohmann::json::parse(out);
    const std::string scheme = backend.substr(0, backend.find(':'));
    const bool database = scheme == "postgres" || scheme == "mysql";
    ASSERT_EQ(report["modes"].size(), database ? 7u : 5u) << out;
    EXPECT_EQ(out.find(":dlock@"), std::string::npos) << "the demo printed the database password";
    EXPECT_EQ(report["stock_in"], scheme == "redis" || database ? scheme : "memory");
    for (const auto& mode : report["modes"]) {
      const std::string name = mode["mode"];
      SCOPED_TRACE(backend + " " + name);
      EXPECT_FALSE(mode["time_limit_hit"].get<bool>());
      if (name == "optimistic") {
        EXPECT_GT(mode["retries"].get<std::int64_t>(), 0) << "no race was ever lost";
      }
      if (name == "dlock" || name == "segmented" || name == "atomic" || name == "pessimistic" ||
          name == "optimistic") {
        EXPECT_EQ(mode["oversold"].get<std::int64_t>(), 0);
        EXPECT_EQ(mode["orders"].get<std::int64_t>(), std::stoll(stock));
        EXPECT_EQ(mode["stock_left"].get<std::int64_t>(), 0);
      } else {
        EXPECT_GT(mode["oversold"].get<std::int64_t>(), 0) << "the demo's race did not happen";
      }
    }
  }
}

// The stores that have elections and semaphores, for `dlock run --elect`
// and `--permits`: the embedded default (no server at all), and redis://
// and zk:// where they are built.
class CliCoordination : public Cli, public ::testing::WithParamInterface<std::string> {
 protected:
  // A fresh namespace on the store; a lease-based store's leases are short,
  // so a killed run's place is free within the tests' bounds.
  std::string backend() const {
    if (GetParam() == "file") return url();
    if (GetParam() == "sqlite") return "sqlite://" + dir_.path() + "/locks.db";
    if (GetParam() == "postgres") return server_url("postgres") + "?schema=" + sql_identifier(dir_.path());
    if (GetParam() == "redis") return server_url("redis") + "/0?prefix=" + unique_prefix(dir_.path());
    return server_url("zookeeper") + "/" + unique_name(dir_.path()) + "?session_timeout=2s";
  }
  // How long a dead run's place may stay taken: the session, or the lease
  // given with --lease 2s (on file://, none: the kernel frees it).
  static constexpr std::chrono::milliseconds place_lifetime{2'000};
};

std::vector<std::string> coordination_stores() {
  std::vector<std::string> out{"file"};
#ifdef DLOCK_WITH_SQLITE
  out.push_back("sqlite");
#endif
#ifdef DLOCK_WITH_POSTGRES
  out.push_back("postgres");
#endif
#ifdef DLOCK_WITH_REDIS
  out.push_back("redis");
#endif
#ifdef DLOCK_WITH_ZOOKEEPER
  out.push_back("zookeeper");
#endif
  return out;
}

// Candidates that run CMD only while they lead: never two CMDs at once, and
// every one runs (each resigns when its CMD ends).
TEST_P(CliCoordination, ElectedRunsNeverOverlap) {
  const std::string backend = this->backend();
  const std::string counter = dir_.path() + "/counter", busy = dir_.path() + "/busy",
                    overlaps = dir_.path() + "/overlaps";
  std::ofstream(counter) << 0;
  const std::string script = "if [ -e " + busy + " ]; then echo x >> " + overlaps + "; fi; touch " + busy +
                             "; n=$(cat " + counter + "); sleep 0.05; echo $((n + 1)) > " + counter + "; rm -f " +
                             busy;
  std::vector<std::unique_ptr<ChildProcess>> runs;
  for (int i = 0; i < 6; ++i)
    runs.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
        DLOCK_TOOL, "run", "--backend", backend, "--lease", "2s", "--elect", "--id", "run-" + std::to_string(i), "jobs/leader", "--",
        "/bin/sh", "-c", script}));
  for (auto& r : runs) EXPECT_EQ(r->wait(scaled(60s)), std::optional<int>(0));
  std::ifstream in(counter);
  int value = -1;
  in >> value;
  EXPECT_EQ(value, 6) << "elected runs lost updates";
  EXPECT_FALSE(std::ifstream(overlaps).good()) << "two elected commands ran at once";
}

// --permits 2: never more than two commands at once, and two do run at
// once; every one runs.
TEST_P(CliCoordination, PermittedRunsNeverExceedTheirPermits) {
  const std::string backend = this->backend();
  const std::string inside = dir_.path() + "/inside", seen = dir_.path() + "/seen";
  ASSERT_EQ(::mkdir(inside.c_str(), 0700), 0);
  // Each run marks itself inside, counts who is, stays a while, leaves.
  const std::string script = "touch " + inside + "/$$; ls " + inside + " | wc -l >> " + seen + "; sleep 0.3; rm " +
                             inside + "/$$";
  std::vector<std::unique_ptr<ChildProcess>> runs;
  for (int i = 0; i < 6; ++i)
    runs.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
        DLOCK_TOOL, "run", "--backend", backend, "--lease", "2s", "--permits", "2", "jobs/crawl", "--", "/bin/sh", "-c", script}));
  for (auto& r : runs) EXPECT_EQ(r->wait(scaled(60s)), std::optional<int>(0));
  std::ifstream in(seen);
  std::vector<int> counts;
  for (int n; in >> n;) counts.push_back(n);
  ASSERT_EQ(counts.size(), 6u) << "not every run ran";
  EXPECT_EQ(*std::max_element(counts.begin(), counts.end()), 2) << "more than 2 at once, or never 2";
}

// Observers see the running leader's --id; a killed leader's place is free
// within the session timeout (zk) or the lease (redis); on file://, at once
// (the kernel drops its locks, and the command it ran holds none of its
// descriptors).
TEST_P(CliCoordination, ElectedRunIsSeenAsLeaderUntilItDies) {
  const std::string backend = this->backend();
  ChildProcess run({DLOCK_TOOL, "run", "--backend", backend, "--lease", "2s", "--elect", "--id", "worker-1", "jobs/leader", "--",
                    "/bin/sh", "-c", "echo \"$DLOCK_TOKEN\"; exec sleep 30"});
  auto line = run.read_line(scaled(10s));
  ASSERT_TRUE(line);
  EXPECT_GT(std::stoull(*line), 0u) << "no fencing token for the leader";
  auto observer = dlock::connect(backend);
  auto election = observer->election("jobs/leader");
  EXPECT_EQ(election.leader(), "worker-1");
  run.signal(SIGKILL);
  ASSERT_TRUE(run.wait(scaled(5s)));
  const auto killed = std::chrono::steady_clock::now();
  const auto gone = election.wait_leader_change_for("worker-1", place_lifetime + scaled(10s));
  EXPECT_EQ(gone, std::nullopt) << "a killed leader still leads";
  if (GetParam() == "file") {
    EXPECT_LT(std::chrono::steady_clock::now() - killed, scaled(300ms)) << "a killed leader was not replaced at once";
  }
}

// A killed `dlock run --permits`'s permit is free at once on file:// (its
// command, still running, holds nothing that keeps it); within the session
// timeout (zk) or the lease (redis) elsewhere.
TEST_P(CliCoordination, KilledPermitHolderFreesItsPermit) {
  const std::string backend = this->backend();
  ChildProcess run({DLOCK_TOOL, "run", "--backend", backend, "--lease", "2s", "--permits", "1", "jobs/one", "--",
                    "/bin/sh", "-c", "echo started; exec sleep 30"});
  ASSERT_EQ(run.read_line(scaled(10s)), "started");
  auto observer = dlock::connect(backend);
  auto semaphore = observer->semaphore("jobs/one", 1);
  EXPECT_EQ(semaphore.in_use(), 1);
  EXPECT_FALSE(semaphore.try_acquire()) << "the running command's permit was free";
  run.signal(SIGKILL);
  ASSERT_TRUE(run.wait(scaled(5s)));
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(semaphore.try_acquire_for(place_lifetime + scaled(10s)))
      << "a killed holder's permit never came back";
  if (GetParam() == "file") {
    EXPECT_LT(std::chrono::steady_clock::now() - killed, scaled(300ms)) << "a killed holder's permit was not free at once";
  }
  semaphore.release();
}
INSTANTIATE_TEST_SUITE_P(Stores, CliCoordination, ::testing::ValuesIn(coordination_stores()),
                         [](const ::testing::TestParamInfo<std::string>& store) { return store.param; });

}  // namespace
}  // namespace dlock::test
