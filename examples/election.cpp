// Leader election: run this on several hosts (or in several terminals);
// one of them leads at a time, does the leader's work while it leads, and
// the others take over in turn when it stops or dies. zk:// only.
#include <dlock/dlock.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  const char* url = argc > 1 ? argv[1] : "zk://127.0.0.1:2181/dlock-example";
  const std::string id = "pid-" + std::to_string(::getpid());
  auto client = dlock::connect(url);
  auto election = client->election("scheduler");
  std::printf("%s: leader now is %s\n", id.c_str(), election.leader().value_or("nobody").c_str());

  election.campaign(id);  // blocks until this thread leads
  std::printf("%s: leading with fencing token %llu\n", id.c_str(),
              static_cast<unsigned long long>(election.token()));
  auto lost = election.stop_token();  // fires if the session or our node is lost
  for (int round = 0; round < 5 && !lost.stop_requested(); ++round) {
    std::printf("%s: leader's work, round %d\n", id.c_str(), round);  // pass token() with each write
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (lost.stop_requested()) std::printf("%s: lost leadership\n", id.c_str());
  election.resign();  // the next candidate leads
  return 0;
}
