// Elections, on every backend that claims them (and refused on the others).
// Each test states a guarantee of election.h and checks it against the
// real store.
#include "conformance_fixture.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

class ElectionConformance : public ConformanceFixture {
 protected:
  static std::string election_name() { return name_in("elections"); }
  // How long a candidate may take to notice that the one before it is gone.
  static std::chrono::milliseconds handoff() { return scaled(10s); }
};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ElectionConformance);

// Campaigns from a thread of its own, so that a test can queue candidates
// in a known order; leadership stays with that thread until resign().
class Candidate {
 public:
  Candidate(std::shared_ptr<Client> client, const std::string& name, std::string id)
      : client_(std::move(client)), election_(client_->election(name)), id_(std::move(id)) {
    thread_ = std::thread([this] {
      election_.campaign(id_);
      leading_ = true;
      while (!resign_) std::this_thread::sleep_for(5ms);
      leading_ = false;
      election_.resign();
    });
  }
  ~Candidate() {
    resign_ = true;
    thread_.join();
  }
  bool leading() const { return leading_; }
  void resign() { resign_ = true; }

 private:
  std::shared_ptr<Client> client_;
  Election election_;
  std::string id_;
  std::atomic<bool> leading_{false}, resign_{false};
  std::thread thread_;
};

TEST_P(ElectionConformance, OneLeaderAtATimeAmongThreeClients) {
  std::atomic<int> leaders{0}, violations{0}, terms{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      auto c = client();
      auto election = c->election(election_name());
      std::uint64_t last_token = 0;
      for (int n = 0; n < 10; ++n) {
        election.campaign("candidate-" + std::to_string(i));
        if (leaders++ != 0) ++violations;
        if (!election.is_leader() || election.token() <= last_token) ++violations;
        if (election.leader() != "candidate-" + std::to_string(i)) ++violations;
        last_token = election.token();
        std::this_thread::sleep_for(2ms);
        --leaders;
        ++terms;
        election.resign();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(terms.load(), 30);
}

TEST_P(ElectionConformance, StatusListsTheLeaderById) {
  auto c = client();
  auto election = c->election(election_name());
  election.campaign("listed-leader");
  auto listed = c->list_locks(election_name());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].kind, "leader");
  EXPECT_EQ(listed[0].name, election_name());
  EXPECT_EQ(listed[0].token, election.token());
  EXPECT_NE(listed[0].holder.find("listed-leader"), std::string::npos) << listed[0].holder;
  election.resign();
  EXPECT_TRUE(c->list_locks(election_name()).empty());
}

TEST_P(ElectionConformance, ResignHandsLeadershipToTheNextInLine) {
  auto observer = client();
  auto watch = observer->election(election_name());
  EXPECT_EQ(watch.leader(), std::nullopt);
  Candidate a(client(), election_name(), "a");
  ASSERT_EQ(watch.wait_leader_change_for(std::nullopt, handoff()), "a");
  Candidate b(client(), election_name(), "b");
  std::this_thread::sleep_for(scaled(300ms));  // b queues before c
  Candidate c(client(), election_name(), "c");
  std::this_thread::sleep_for(scaled(300ms));
  EXPECT_EQ(watch.leader(), "a");
  EXPECT_FALSE(b.leading());
  EXPECT_FALSE(c.leading());
  a.resign();
  EXPECT_EQ(watch.wait_leader_change_for("a", handoff()), "b");
  EXPECT_FALSE(c.leading()) << "c overtook b";
  b.resign();
  EXPECT_EQ(watch.wait_leader_change_for("b", handoff()), "c");
  c.resign();
  EXPECT_EQ(watch.wait_leader_change_for("c", handoff()), std::nullopt);
}

TEST_P(ElectionConformance, ALeaderWhoseClientIsGoneIsSucceeded) {
  auto observer = client();
  auto watch = observer->election(election_name());
  auto first = client();
  std::atomic<bool> led{false};
  std::thread leader([&, c = std::move(first)]() mutable {
    auto election = c->election(election_name());
    election.campaign("first");
    led = true;
    // Goes without resigning: the client (and its session) ends with the thread.
  });
  leader.join();
  ASSERT_TRUE(led);
  auto second = client();
  auto next = second->election(election_name());
  const auto timeout = second->session_timeout().value_or(0ms) + handoff();
  ASSERT_TRUE(next.campaign_for(timeout, "second"));
  EXPECT_EQ(watch.leader(), "second");
  next.resign();
}

TEST_P(ElectionConformance, ObserversSeeTheLeadersIdWithoutCampaigning) {
  auto observer = client(), candidate = client();
  auto watch = observer->election(election_name());
  auto election = candidate->election(election_name());
  EXPECT_EQ(watch.leader(), std::nullopt);
  EXPECT_EQ(watch.wait_leader_change_for(std::nullopt, 200ms), std::nullopt) << "a leader appeared from nowhere";
  election.campaign("alpha");
  EXPECT_EQ(watch.leader(), "alpha");
  EXPECT_FALSE(watch.is_leader());
  std::optional<std::string> seen;
  std::thread t([&] { seen = watch.wait_leader_change_for("alpha", handoff()); });
  std::this_thread::sleep_for(scaled(200ms));
  election.resign();
  t.join();
  EXPECT_EQ(seen, std::nullopt);
}

TEST_P(ElectionConformance, CampaignForTimesOutWithoutLeavingANode) {
  auto a = client(), b = client(), c = client();
  auto leader = a->election(election_name()), late = b->election(election_name()),
       later = c->election(election_name());
  leader.campaign("a");
  EXPECT_FALSE(late.campaign_for(300ms, "b"));
  EXPECT_FALSE(late.is_leader());
  EXPECT_THROW((void)late.stop_token(), Error);
  leader.resign();
  // Had b left its node, it would lead now (and later would queue behind it).
  EXPECT_EQ(leader.leader(), std::nullopt);
  ASSERT_TRUE(later.campaign_for(handoff(), "c"));
  EXPECT_EQ(leader.leader(), "c");
  later.resign();
}

TEST_P(ElectionConformance, CampaigningAgainWhileLeadingChangesNothing) {
  auto a = client(), b = client();
  auto election = a->election(election_name());
  election.campaign("a");
  const auto token = election.token();
  EXPECT_FALSE(election.stop_token().stop_requested());
  election.campaign("other id");  // already leads: no second node, the id stays
  EXPECT_EQ(election.token(), token);
  EXPECT_EQ(election.leader(), "a");
  election.resign();  // one resign ends it
  EXPECT_FALSE(election.is_leader());
  EXPECT_EQ(election.resign_checked().code(), errc::not_owner);
  auto other = b->election(election_name());
  EXPECT_TRUE(other.campaign_for(handoff()));
  EXPECT_GT(other.token(), token);
  other.resign();
}

INSTANTIATE_TEST_SUITE_P(Backends, ElectionConformance, ::testing::ValuesIn(backends_claiming(&BackendUnderTest::election)),
                         [](const auto& param_info) { return param_info.param.name; });

// Every backend: an election where claimed, errc::unsupported (and no remote
// call) where not, and bad names refused.
class ElectionSupport : public ElectionConformance {};

TEST_P(ElectionSupport, ElectionIsOfferedExactlyWhereClaimed) {
  auto c = client();
  try {
    auto election = c->election("elections/support");
    EXPECT_TRUE(GetParam().election) << "election() worked on a backend that does not claim it";
  } catch (const Error& e) {
    EXPECT_FALSE(GetParam().election) << e.what();
    EXPECT_EQ(e.kind(), errc::unsupported) << e.what();
  }
  if (GetParam().election) {
    try {
      (void)c->election("");
      ADD_FAILURE() << "an empty election name was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), errc::invalid_argument) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ElectionSupport, ::testing::ValuesIn(backends_under_test()),
                         [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace dlock::test
