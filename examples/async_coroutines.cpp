// The async API with C++20 coroutines (Asio): several buyers on one
// thread, each waiting for the stock lock without blocking the others, and
// a buyer that gives up through a std::stop_token. Needs standalone Asio
// (Debian libasio-dev) for dlock/asio.h; dlock itself does not.
#include <dlock/asio.h>
#include <dlock/dlock.h>

#include <asio.hpp>

#include <chrono>
#include <cstdio>
#include <stop_token>

using namespace std::chrono_literals;

// Waits up to 5 ms for the lock, then gives up through its stop_token.
asio::awaitable<void> impatient(dlock::Mutex& stock) {
  std::stop_source give_up;
  asio::steady_timer patience(co_await asio::this_coro::executor, 5ms);
  patience.async_wait([&](const asio::error_code&) { give_up.request_stop(); });
  try {
    dlock::Hold hold = co_await stock.async_lock(asio::use_awaitable, give_up.get_token());
    std::printf("the impatient buyer got it in time\n");
  } catch (const dlock::Error& e) {
    std::printf("the impatient buyer gave up: %s\n", dlock::to_string(e.kind()));  // cancelled
  }
  patience.cancel();
}

asio::awaitable<void> buy(dlock::Mutex& stock, int buyer) {
  asio::steady_timer work(co_await asio::this_coro::executor);
  dlock::Hold hold = co_await stock.async_lock(asio::use_awaitable);  // the other buyers run meanwhile
  std::printf("buyer %d holds %s, fencing token %llu\n", buyer, hold.name().c_str(),
              static_cast<unsigned long long>(hold.token()));
  // Buyer 1, once in, lets an impatient buyer try while it works.
  if (buyer == 1) asio::co_spawn(co_await asio::this_coro::executor, impatient(stock), asio::detached);
  work.expires_after(20ms);
  co_await work.async_wait(asio::use_awaitable);  // the work, still holding the lock
}  // released here, when `hold` goes

int main(int argc, char** argv) {
  const char* url = argc > 1 ? argv[1] : "file:///tmp/dlock-example";
  auto client = dlock::connect(url);
  auto stock = client->mutex("stock:1001");
  asio::io_context io;
  for (int buyer = 1; buyer <= 3; ++buyer) asio::co_spawn(io, buy(stock, buyer), asio::detached);
  io.run();  // returns when every buyer is done
  return 0;
}
