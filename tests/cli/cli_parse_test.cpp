// The dlock tool's command line read without running anything
// (tools/dlock/parse.h): bad arguments are refused with exit status 64 and
// a message naming the argument; good ones give a command to run, and
// reading them connects to nothing (a store that is down is not noticed).
#include "parse.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace dlock::cli {
namespace {

CommandLine parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv = {"dlock"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(nullptr);
  return parse_command_line(static_cast<int>(argv.size() - 1), argv.data());
}

// The usage error of `args`: asserts there is one.
std::string refused(std::initializer_list<const char*> args) {
  const CommandLine line = parse(args);
  EXPECT_FALSE(line.run);
  EXPECT_EQ(line.exit, exit_usage);
  return line.err;
}

TEST(CliParse, RefusesBadArgumentsNamingThem) {
  EXPECT_NE(refused({"run", "--elect", "--permits", "2", "job", "true"}).find("--elect and --permits"),
            std::string::npos);
  EXPECT_NE(refused({"run", "--permits", "-3", "job", "true"}).find("--permits: must be >= 1"), std::string::npos);
  EXPECT_NE(refused({"run", "--lease", "forever", "job", "true"}).find("--lease"), std::string::npos);
  EXPECT_NE(refused({"run", "--max-run", "0s", "job", "true"}).find("--max-run: must be > 0"), std::string::npos);
  EXPECT_NE(refused({"run", "--bogus", "job", "true"}).find("--bogus"), std::string::npos);
  EXPECT_NE(refused({"run", "job"}).find("command"), std::string::npos);
  EXPECT_NE(refused({"bench", "-w", "contended", "--seconds", "0"}).find("--seconds: must be > 0"), std::string::npos);
  EXPECT_NE(refused({"bench", "-w", "uncontended", "-p", "2"}).find("--workload uncontended"), std::string::npos);
  EXPECT_NE(refused({"bench", "-w", "sideways"}).find("--workload"), std::string::npos);
  EXPECT_NE(refused({"demo", "--modes", "none,bogus"}).find("--modes: unknown mode 'bogus'"), std::string::npos);
  EXPECT_NE(refused({"demo", "--time-limit", "0s"}).find("--time-limit"), std::string::npos);
  EXPECT_NE(refused({"status", "--json", "--metrics"}).find("--metrics"), std::string::npos);
  EXPECT_NE(refused({}).find("a command is required"), std::string::npos);
  EXPECT_NE(refused({"run", "--permits", "0", "job", "true"}).find("--permits: must be >= 1"), std::string::npos);
  EXPECT_NE(refused({"run", "--lease", "5ms", "job", "true"}).find("--lease: 5ms is too short"), std::string::npos);
  // dlock status shows the id: a newline in it would forge a line there.
  EXPECT_NE(refused({"run", "--elect", "--id", "a\nb", "job", "true"}).find("--id: must not contain control"),
            std::string::npos);
  EXPECT_NE(refused({"run", "--elect", "--id", "a\x1b[2Jb", "job", "true"}).find("--id"), std::string::npos);
  EXPECT_NE(refused({"run", "--id", "me", "job", "true"}).find("--id: goes with --elect"), std::string::npos);
}

TEST(CliParse, HelpAndVersionArePrintedNotRun) {
  const CommandLine help = parse({"--help"});
  EXPECT_FALSE(help.run);
  EXPECT_EQ(help.exit, 0);
  EXPECT_NE(help.out.find("run"), std::string::npos);
  const CommandLine version = parse({"--version"});
  EXPECT_EQ(version.exit, 0);
  // project(dlock VERSION ...)'s, not a number of the tool's own.
  EXPECT_EQ(version.out, "dlock " DLOCK_PROJECT_VERSION "\n");
}

// Text from a store shown on a terminal: control characters can't act on
// it, and the columns are counted as a terminal shows them.
TEST(CliText, ControlCharactersAreEscapedAndWidthIsCountedInColumns) {
  EXPECT_EQ(terminal_text("jobs/nightly"), "jobs/nightly");
  EXPECT_EQ(terminal_text("a\x1b[31mred\nx"), "a\\x1b[31mred\\x0ax");
  EXPECT_EQ(terminal_text("del\x7f c1\xc2\x9b"), "del\\x7f c1\\xc2\\x9b");
  EXPECT_EQ(terminal_text("bad\xff"), "bad\\xff");
  EXPECT_EQ(terminal_text("back\\x41"), "back\\\\x41") << "a backslash in a name must not pass for an escape";
  EXPECT_EQ(terminal_text("a…b"), "a…b");
  EXPECT_EQ(display_width("a…b"), 3u);
  EXPECT_EQ(display_width("锁"), 2u);
  EXPECT_EQ(display_width("e\xcc\x81"), 1u);  // e + combining acute
}

// Port 1 on loopback refuses every connection: had parsing connected, the
// URL's store being down would have shown.
TEST(CliParse, GoodArgumentsGiveACommandWithoutConnecting) {
  for (auto args : {std::initializer_list<const char*>{"run", "--backend", "redis://127.0.0.1:1", "--wait", "1s",
                                                       "job", "--", "true"},
                    std::initializer_list<const char*>{"status", "--backend", "redis://127.0.0.1:1", "--json"},
                    // Options after NAME are the command's (as with flock(1) and env(1)).
                    std::initializer_list<const char*>{"run", "--backend", "redis://127.0.0.1:1", "job", "ls", "-l",
                                                       "--wait", "0"},
                    // A flag takes no value: NAME is the word after it, and the rest is the command.
                    std::initializer_list<const char*>{"run", "--elect", "-q", "job", "--wait", "0"},
                    std::initializer_list<const char*>{"bench", "-w", "contended", "--backend", "redis://127.0.0.1:1",
                                                       "--seconds", "1"}}) {
    const CommandLine line = parse(args);
    EXPECT_TRUE(line.run) << line.err;
    EXPECT_EQ(line.err, "");
    EXPECT_EQ(line.out, "");
  }
}

}  // namespace
}  // namespace dlock::cli
