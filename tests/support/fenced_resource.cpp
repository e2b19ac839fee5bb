#include "fenced_resource.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <stdexcept>

namespace dlock::test {

struct FencedResource::State {
  pthread_mutex_t mu;
  std::uint64_t max_token;
  std::int64_t max_token_holder;
  std::int64_t inside;  // holder inside, 0 if none
  std::int64_t occupancy;  // holders in between occupy() and vacate()
  ResourceCounts counts;
  std::atomic<std::int64_t> counter;
  std::uint64_t writes;  // write_ordered() calls
};

namespace {

class Locked {
 public:
  explicit Locked(pthread_mutex_t* mu) : mu_(mu) {
    if (pthread_mutex_lock(mu_) == EOWNERDEAD) pthread_mutex_consistent(mu_);  // a killed test process
  }
  ~Locked() { pthread_mutex_unlock(mu_); }

 private:
  pthread_mutex_t* mu_;
};

}  // namespace

FencedResource::FencedResource(const std::string& path, bool create) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0), 0600);
  if (fd < 0) throw std::runtime_error("fenced resource: cannot open " + path);
  if (create && ::ftruncate(fd, sizeof(State)) != 0) {
    ::close(fd);
    throw std::runtime_error("fenced resource: cannot size " + path);
  }
  void* p = ::mmap(nullptr, sizeof(State), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw std::runtime_error("fenced resource: cannot map " + path);
  state_ = static_cast<State*>(p);
  if (create) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&state_->mu, &attr);
    pthread_mutexattr_destroy(&attr);
  }
}

FencedResource::~FencedResource() { ::munmap(state_, sizeof(State)); }

namespace {

// enter() with the state's mutex held.
template <class State>
bool enter_locked(State& s, std::uint64_t token, std::int64_t holder) {
  if (token != 0) {
    if (token < s.max_token) {
      ++s.counts.stale_rejected;
      return false;
    }
    if (token == s.max_token && s.max_token_holder != holder) {
      ++s.counts.duplicate_tokens;
      return false;
    }
    s.max_token = token;
    s.max_token_holder = holder;
  }
  if (s.inside != 0 && s.inside != holder) ++s.counts.overlaps;
  s.inside = holder;
  ++s.counts.accepted;
  return true;
}

}  // namespace

bool FencedResource::enter(std::uint64_t token, std::int64_t holder) {
  Locked lk(&state_->mu);
  return enter_locked(*state_, token, holder);
}

FencedResource::Ordered FencedResource::write_ordered(std::uint64_t token, std::int64_t holder) {
  Locked lk(&state_->mu);
  const bool ok = enter_locked(*state_, token, holder);
  if (ok && state_->inside == holder) state_->inside = 0;
  return {ok, ++state_->writes};
}

void FencedResource::leave(std::int64_t holder) {
  Locked lk(&state_->mu);
  if (state_->inside == holder) state_->inside = 0;
}

bool FencedResource::write(std::uint64_t token, std::int64_t holder) {
  bool ok = enter(token, holder);
  if (ok) leave(holder);
  return ok;
}

void FencedResource::occupy() {
  Locked lk(&state_->mu);
  auto& s = *state_;
  ++s.counts.occupied;
  if (++s.occupancy > s.counts.max_occupancy) s.counts.max_occupancy = s.occupancy;
}

void FencedResource::vacate() {
  Locked lk(&state_->mu);
  --state_->occupancy;
}

void FencedResource::waited(std::chrono::steady_clock::duration wait) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(wait).count();
  Locked lk(&state_->mu);
  if (us > state_->counts.max_wait_us) state_->counts.max_wait_us = us;
}

std::int64_t FencedResource::read_counter() const { return state_->counter.load(); }
void FencedResource::write_counter(std::int64_t value) { state_->counter.store(value); }

ResourceCounts FencedResource::counts() const {
  Locked lk(&state_->mu);
  ResourceCounts c = state_->counts;
  c.counter = state_->counter.load();
  return c;
}

}  // namespace dlock::test
