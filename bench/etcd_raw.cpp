// dlock_bench_etcd_raw — what etcd itself allows, for the lock figures to be read against: the
// two writes a lock needs (a put on a lease, then a delete), over gRPC with no lock logic at all.
//
//   dlock_bench_etcd_raw [--seconds S] [--max-ops N] [--in-flight K] ENDPOINT
//
// ENDPOINT is host:port or etcd://host:port[/...] (the first member; a path or query is ignored).
// Two measurements on one channel, keys under a prefix unique to the run, on one lease revoked at
// the end:
//   sync-pairs   Put(key, lease) + DeleteRange(key), one after the other: one lock + unlock at
//                best (2 writes, each a round trip through raft and the WAL's fsync)
//   pairs        the same pairs from K (default 8) threads at once on the channel: what many
//                independent locks of one client could reach
// Each prints one JSON line: {"raw_limit": NAME, "ops": pairs done, "ops_per_s",
// "requests_per_op": 2, "in_flight", "p50_us"/"p99_us" (per pair), "server"}. Each stops after S
// seconds (default 3) or N pairs (default 1,000,000).
//
// Exit status: 0; 70 if a call failed; 64 on bad usage.
#include "raw_limit.h"

#include <etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h>
#include <grpcpp/grpcpp.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace pb = etcdserverpb;
using dlock_bench::percentile_us;

struct Config : dlock_bench::RawArgs {  // target: the endpoint
  int in_flight = 8;
};

void check(const grpc::Status& s, const char* what) {
  if (!s.ok()) throw std::runtime_error(std::string(what) + ": " + s.error_message());
}

// One pair on `kv`: a put with the lease, then its delete.
void pair(pb::KV::Stub& kv, const std::string& key, std::int64_t lease) {
  pb::PutRequest put;
  put.set_key(key);
  put.set_lease(lease);
  pb::PutResponse put_reply;
  grpc::ClientContext put_context;
  check(kv.Put(&put_context, put, &put_reply), "put");
  pb::DeleteRangeRequest del;
  del.set_key(key);
  pb::DeleteRangeResponse del_reply;
  grpc::ClientContext del_context;
  check(kv.DeleteRange(&del_context, del, &del_reply), "delete");
}

void print(const Config& cfg, const char* name, long ops, double seconds, int in_flight,
           std::vector<double>& latencies) {
  std::printf("{\"raw_limit\": \"%s\", \"tool\": \"dlock_bench_etcd_raw (gRPC %s)\", \"ops\": %ld, "
              "\"seconds\": %.3f, \"ops_per_s\": %.1f, \"requests_per_op\": 2, \"in_flight\": %d",
              name, grpc::Version().c_str(), ops, seconds, seconds > 0 ? static_cast<double>(ops) / seconds : 0.0,
              in_flight);
  std::printf(", \"p50_us\": %.1f, \"p99_us\": %.1f", percentile_us(latencies, 0.5), percentile_us(latencies, 0.99));
  std::printf(", \"server\": \"%s\"}\n", cfg.target.c_str());
  std::fflush(stdout);
}

int run(const Config& cfg) {
  std::string endpoint = cfg.target;
  if (endpoint.starts_with("etcd://")) endpoint = endpoint.substr(7);
  endpoint = endpoint.substr(0, endpoint.find_first_of("/?,"));
  auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  auto kv = pb::KV::NewStub(channel);
  auto leases = pb::Lease::NewStub(channel);
  pb::LeaseGrantRequest grant;
  grant.set_ttl(60);
  pb::LeaseGrantResponse granted;
  {
    grpc::ClientContext context;
    check(leases->LeaseGrant(&context, grant, &granted), "lease grant");
  }
  const std::string prefix = "dlock-bench-raw/" + std::to_string(::getpid()) + "/";

  auto sync = dlock_bench::timed_loop(cfg.seconds, cfg.max_ops, [&] { pair(*kv, prefix + "sync", granted.id()); });
  print(cfg, "sync-pairs", sync.ops, sync.seconds, 1, sync.latencies);

  std::vector<std::vector<double>> per_thread(static_cast<std::size_t>(cfg.in_flight));
  std::atomic<long> ops{0};
  std::atomic<bool> failed{false};
  const auto start = dlock_bench::clock_type::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < cfg.in_flight; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto r = dlock_bench::timed_loop(cfg.seconds, cfg.max_ops / cfg.in_flight + 1,
                                         [&] { pair(*kv, prefix + "k" + std::to_string(t), granted.id()); });
        ops += r.ops;
        per_thread[static_cast<std::size_t>(t)] = std::move(r.latencies);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dlock_bench_etcd_raw: %s\n", e.what());
        failed = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(dlock_bench::clock_type::now() - start).count();
  std::vector<double> all;
  for (auto& l : per_thread) all.insert(all.end(), l.begin(), l.end());
  print(cfg, "pairs", ops.load(), seconds, cfg.in_flight, all);

  pb::LeaseRevokeRequest revoke;
  revoke.set_id(granted.id());
  pb::LeaseRevokeResponse revoked;
  grpc::ClientContext context;
  (void)leases->LeaseRevoke(&context, revoke, &revoked);
  return failed ? 70 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  std::string problem = dlock_bench::parse_raw_args(argc, argv, cfg, [&](const std::string& name, const char* value) {
    if (name != "--in-flight") return false;
    cfg.in_flight = std::stoi(value);
    return true;
  });
  if (problem.empty() && cfg.target.empty()) problem = "no ENDPOINT";
  if (problem.empty() && (cfg.in_flight < 1 || cfg.in_flight > 256)) problem = "--in-flight must be in [1, 256]";
  if (!problem.empty()) {
    std::fprintf(stderr, "dlock_bench_etcd_raw: %s\nusage: dlock_bench_etcd_raw [--seconds S] [--max-ops N] "
                         "[--in-flight K] ENDPOINT\n", problem.c_str());
    return 64;
  }
  try {
    return run(cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_etcd_raw: %s\n", e.what());
    return 70;
  }
}
