// dlock from a Boost.Asio program: coroutines take a lock with
// co_await dlock::boost_asio::async_lock(...), and a coroutine hears of its
// hold's loss through async_wait_lost, which completes without error when
// the loss happens.
//
//   boost_async REDIS_URL
//
// Four coroutines each add one to a counter in Redis-free memory after a
// pause (the window in which an unlocked read-modify-write loses updates),
// under one lock; then a hold is force-released by an operator (a second
// client) and its waiting coroutine is told, with the reason. Exits 0 when
// no update was lost and the loss was heard.
#include <utility>  // first: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <dlock/boost_async.hpp>
#include <dlock/client.hpp>

#include <chrono>
#include <exception>
#include <iostream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

int counter = 0;

// A coroutine's exception comes out of io.run() (detached would drop it).
void rethrow(std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
}

asio::awaitable<void> add_one(dlock::Lock& lock) {
    auto hold = co_await dlock::boost_asio::async_lock(lock, asio::use_awaitable);
    const int seen = counter;
    asio::steady_timer pause(co_await asio::this_coro::executor, 20ms);
    co_await pause.async_wait(asio::use_awaitable);
    counter = seen + 1;
    co_await dlock::boost_asio::async_unlock(hold, asio::use_awaitable);
}

asio::awaitable<void> hear_the_loss(dlock::Client& client, dlock::Lock& lock, dlock::Client& operator_client,
                                    bool& heard) {
    auto hold = co_await dlock::boost_asio::async_lock(lock, asio::use_awaitable);
    // A busy lock is no error: one attempt yields an empty hold.
    dlock::Lock other(client, lock.name());
    auto none = co_await dlock::boost_asio::async_try_lock(other, asio::use_awaitable);
    if (none) co_return;
    dlock::force_release(operator_client, lock.name());
    co_await dlock::boost_asio::async_wait_lost(hold, asio::use_awaitable);  // no exception: the loss happened
    heard = hold.lost_reason() == dlock::LostReason::revoked;
    std::cout << "boost_async: the hold was lost (" << (heard ? "revoked" : "another reason") << ")\n";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: boost_async REDIS_URL\n";
        return 64;
    }
    try {
        dlock::Client client(argv[1]), operator_client(argv[1]);
        dlock::Lock lock(client, "boost_async:counter");
        asio::io_context io;
        for (int i = 0; i < 4; ++i) asio::co_spawn(io, add_one(lock), rethrow);
        io.run();
        std::cout << "boost_async: counter " << counter << " after 4 locked increments\n";
        bool heard = false;
        dlock::Lock watched(client, "boost_async:watched");
        io.restart();
        asio::co_spawn(io, hear_the_loss(client, watched, operator_client, heard), rethrow);
        io.run();
        return counter == 4 && heard ? 0 : 1;
    } catch (const dlock::Error& e) {  // dlock/client.hpp is enough to catch it
        std::cerr << "boost_async: " << e.what() << "\n";
        return 69;
    }
}
