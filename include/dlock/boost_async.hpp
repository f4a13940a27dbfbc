// dlock/boost_async.hpp — the asynchronous API for programs written with
// Boost.Asio (Debian's Boost, 1.74 and later): the same initiating
// functions as dlock/async.hpp, with the same arguments and the same
// contract (read it there), in namespace dlock::boost_asio, taking Boost's
// completion tokens (callbacks, boost::asio::use_future,
// boost::asio::use_awaitable):
//
//   dlock::Lock lock(client, "orders:42");
//   dlock::AsyncHold hold = co_await dlock::boost_asio::async_lock(lock, boost::asio::use_awaitable);
//   write(hold.fencing_token());
//   co_await dlock::boost_asio::async_unlock(hold, boost::asio::use_awaitable);
//
// What differs is the error's type: Boost.Asio's handlers take
// boost::system::error_code, which a std::error_code (dlock's codes) does
// not convert to, so a failure comes as a std::exception_ptr to a
// dlock::Error (a std::system_error whose code() is the std::error_code the
// standalone API gives), null on success:
//   acquisitions: void(std::exception_ptr, AsyncHold); use_awaitable and
//     use_future throw the dlock::Error.
//   releases and lost waits: void(std::exception_ptr). A lost wait
//     completes with a null one when the loss happens.
// Cancellation slots arrived in Boost 1.77: with an older Boost an
// operation is not cancellable (release the hold, or close the client).
// The AsyncHold is the one of dlock/async.hpp. Boost.Asio and standalone
// Asio cannot be included in one translation unit (their headers clash), so
// a program may use both headers, but each in files of its own.
#pragma once

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/version.hpp>
#if BOOST_ASIO_VERSION >= 102000
#include <boost/asio/associated_cancellation_slot.hpp>
#endif

#include <concepts>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>

#include "dlock/async_hold.hpp"
#include "dlock/deadline.hpp"
#include "dlock/error.hpp"  // every throwing call throws dlock::Error

namespace dlock::boost_asio {
namespace asio = ::boost::asio;
namespace detail {
using completion_error = std::exception_ptr;
inline std::exception_ptr to_completion_error(std::error_code ec) {
    return ec ? std::make_exception_ptr(Error(ec)) : std::exception_ptr();
}
}  // namespace detail

#define DLOCK_ASYNC_CANCELLATION (BOOST_ASIO_VERSION >= 102000)
#include "dlock/async_functions.hpp"
#undef DLOCK_ASYNC_CANCELLATION

}  // namespace dlock::boost_asio
