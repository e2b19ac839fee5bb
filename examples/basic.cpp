// The README example: sell one item of stock under a lock shared by every
// process that uses the same lock directory, with the fencing token passed
// to the store so a stale holder's write can be refused.
#include <dlock/dlock.h>

#include <cstdio>
#include <mutex>

int main(int argc, char** argv) {
  const char* url = argc > 1 ? argv[1] : "file:///tmp/dlock-example";
  auto client = dlock::connect(url);
  auto stock_lock = client->mutex("stock:1001");
  {
    std::unique_lock hold(stock_lock);        // blocks; the lease is renewed while we hold it
    auto token = stock_lock.token();          // strictly increasing per lock name
    std::printf("holding %s with fencing token %llu\n", stock_lock.name().c_str(),
                static_cast<unsigned long long>(token));
  }                                           // released; the next waiter wakes
  return 0;
}
