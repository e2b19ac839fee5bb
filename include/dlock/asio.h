// dlock/asio.h — the async API with Asio's completion tokens: include it
// (it needs standalone Asio, header-only; Debian: libasio-dev) and the
// async_ calls of Mutex, Semaphore and Election take any Asio token —
// asio::use_awaitable, asio::use_future, asio::deferred, a handler. The
// rest of dlock does not need Asio.
//
// The completion signature is void(std::exception_ptr, dlock::Hold): an
// error arrives as a dlock::Error (with its errc and message), which
// co_await and use_future throw. The handler runs on its associated
// executor (the coroutine's, for use_awaitable), never on dlock's thread,
// and the acquisition counts as work on that executor, so io_context::run()
// does not return while it is pending. Cancellation is dlock's: pass a
// std::stop_token (Asio's cancellation slots are not connected).
//
// Example:
//   asio::awaitable<void> sell(dlock::Mutex& stock) {
//     dlock::Hold hold = co_await stock.async_lock(asio::use_awaitable);
//     co_await write_stock(hold.token());
//   }  // released here
#pragma once

#include <dlock/hold.h>

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>

#include <exception>
#include <memory>
#include <stop_token>
#include <type_traits>
#include <utility>

namespace dlock::detail {

// Tokens whose completion takes (exception_ptr, Hold); a callable that
// takes (Status, Hold) is an AsyncCallback instead, and a stop_token is a
// stop_token.
template <class Token>
  requires asio::completion_token_for<Token, void(std::exception_ptr, dlock::Hold)> &&
           (!std::is_invocable_v<Token&, Status, dlock::Hold>) && (!std::is_same_v<Token, std::stop_token>)
struct async_adapter<Token, void> {
  static constexpr bool enabled = true;

  template <class T>
  static auto initiate(T&& token, AsyncStart start) {
    return asio::async_initiate<T, void(std::exception_ptr, dlock::Hold)>(
        [](auto handler, AsyncStart begin) {
          using Handler = decltype(handler);
          using Work = decltype(asio::make_work_guard(asio::get_associated_executor(handler)));
          struct Pending {
            Handler handler;
            Work work;
          };
          Work guard = asio::make_work_guard(asio::get_associated_executor(handler));
          auto pending = std::make_shared<Pending>(Pending{std::move(handler), std::move(guard)});
          begin([pending](Status s, dlock::Hold hold) {
            // The work is let go of here, once post() has returned: were the
            // handler to let it go, run() could return and the io_context
            // go while post() still signals it.
            Work work = std::move(pending->work);
            asio::post(work.get_executor(), [pending, s = std::move(s), hold = std::move(hold)]() mutable {
              std::exception_ptr error;
              if (!s.ok()) error = std::make_exception_ptr(Error(s.code(), s.message()));
              auto h = std::move(pending->handler);
              std::move(h)(error, std::move(hold));
            });
          });
        },
        token, std::move(start));
  }
};

}  // namespace dlock::detail
