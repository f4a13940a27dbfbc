// dlock/client.hpp — a thread-safe connection to one Redis server.
//
// One Client per process is the normal case. It owns one I/O thread. Commands
// from all threads are pipelined over a single connection: each caller's
// bytes are appended to one buffer, written together, and replies are matched
// to callers in order. No lock is held across a round trip, and many threads
// do not cost many sockets. Pub/sub uses one more, dedicated connection, made
// on the first subscribe(), however many channels are in use.
//
// Time: every timeout is measured on std::chrono::steady_clock. A blocking
// call never waits longer than ClientOptions::command_timeout, counted from
// the call, including any wait for a connection attempt under way.
//
// Failure: a command in flight when the connection drops fails with
// errc::connection_lost and is never resent — lock scripts are not
// idempotent, so the caller decides. The client then reconnects by itself
// with capped exponential backoff; while the last attempt has failed, new
// commands fail at once with that attempt's error (connection_refused,
// auth_failed, tls_error, connect_timeout, ...).
//
// fork(): a Client must not be used in a child process; every call there fails
// with errc::forked_child and the parent's connections are left untouched.
// The child may destroy what it inherited (the Client, Subscriptions, Locks)
// and exit normally: nothing is written to or closed on the parent's sockets,
// the parent's channels stay subscribed, and nothing waits for the parent's
// I/O thread.
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/error.hpp"  // every throwing call throws dlock::Error
#include "dlock/client_options.hpp"
#include "dlock/lock.hpp"
#include "dlock/metrics.hpp"
#include "dlock/reply.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/script.hpp"
#include "dlock/server_address.hpp"
#include "dlock/subscription.hpp"

namespace dlock {

namespace detail {
class ClientCore;
class IoLoop;
class MastersCore;
}  // namespace detail

class Client {
public:
    using Args = std::span<const std::string_view>;
    // Runs on the I/O thread: it must not block and must not make blocking
    // calls on this Client. ec is set for transport failures and for error
    // replies (then reply holds Redis's text). It should not throw; if it
    // does, the exception is caught and discarded on the I/O thread, and the
    // other callbacks and the connection go on as if it had returned.
    using Callback = std::function<void(std::error_code ec, Reply&& reply)>;

    // Starts connecting in the background; does not wait. Throws Error with
    // errc::invalid_uri for a malformed URI (or an address no socket can
    // reach, such as a unix socket path over ServerAddress::max_socket_path)
    // and errc::invalid_argument for non-positive timeouts. An unreachable server is reported by the first
    // command (or wait_connected), not here.
    explicit Client(std::string_view uri = default_server_uri, ClientOptions options = {});
    explicit Client(ServerAddress address, ClientOptions options = {});
    // Wakes every thread waiting to acquire through this client (every
    // kind: Lock, FairLock, both RwLock sides, Semaphore, MultiLock): each
    // returns errc::client_closed (false or an empty Permit from the
    // error_code twins) having taken back what its wait left on the server
    // (a waiting writer's mark, a place in line). Then releases every lock
    // still held through this client, lets the lock
    // calls nobody waits for (a release of unlock_nowait, a place in line
    // given back, a grant undone, an acquisition whose caller walked away)
    // finish, fails whatever else is still in flight with
    // errc::client_closed, closes the connections and joins the I/O thread.
    // Waits for the server's answers at most max_close_wait (or
    // command_timeout, if shorter) in all: a server that answers settles
    // them within a round trip or two; what a server that does not answer
    // left unsettled ends with its lease (a hold, a grant nobody uses, a
    // place in line), as after a crash. Must not be called from a Callback.
    ~Client();
    // The longest a closing Client waits for the server's answers.
    static constexpr std::chrono::milliseconds max_close_wait{500};

    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // Sends one command and waits for its reply. Throws Error on transport
    // failure and on error replies (what() carries Redis's text).
    Reply command(std::initializer_list<std::string_view> args);
    Reply command(Args args);
    // Never throws. On failure sets ec; for an error reply the returned Reply
    // is that error (kind error, text from Redis).
    Reply command(Args args, std::error_code& ec) noexcept;

    // Queues one command; done runs on the I/O thread exactly once.
    void submit(Args args, Callback done);

    // EVALSHA with EVAL fallback on NOSCRIPT (see script.hpp).
    Reply eval(const Script& script, Args keys, Args argv);
    Reply eval(const Script& script, Args keys, Args argv, std::error_code& ec) noexcept;
    void eval_async(const Script& script, Args keys, Args argv, Callback done);

    // Adds a listener to channel. The first listener of a channel subscribes
    // it on the shared subscriber connection; the last one to leave
    // unsubscribes. The server's first confirmation of the channel comes to
    // the listener as Event::subscribed (what it published before may have
    // been missed). After every reconnect the channel is subscribed again and
    // the listener receives Event::resubscribed: messages may have been missed.
    // The Subscription may outlive the Client: it then no longer listens,
    // active() is false and wait_active() returns false at once. Throws
    // Error(client_closed) once the client is closing (also from a callback
    // running while another thread destroys the Client).
    Subscription subscribe(std::string channel, Subscription::Listener listener);

    // A lock on name through this client (see lock.hpp). The Lock may outlive
    // the Client; its calls then fail with errc::client_closed.
    Lock lock(std::string name, LockOptions options = {}) { return Lock(*this, std::move(name), std::move(options)); }
    // A read-write lock on name through this client (see rw_lock.hpp).
    RwLock rw_lock(std::string name, RwLockOptions options = {}) {
        return RwLock(*this, std::move(name), std::move(options));
    }

    // Waits until the command connection is ready or its attempt failed.
    // For start-up checks; the other calls do not need it.
    void wait_connected();
    void wait_connected(std::error_code& ec) noexcept;
    // The same, waiting at most until `deadline` (steady clock): when the
    // attempt goes on past it, ec is errc::connect_timeout and the attempt
    // continues (the next call may find the connection ready). For a caller
    // whose own wait is shorter than the connect timeout.
    void wait_connected(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept;

    const ServerAddress& address() const noexcept;
    const ClientOptions& options() const noexcept;
    // What this client's locks did (metrics.hpp): ClientOptions::metrics, or
    // the client's own.
    Metrics& metrics() const noexcept;

    // For dlock's own layers (locks, watchdog): the shared internals.
    const std::shared_ptr<detail::ClientCore>& core() const noexcept { return core_; }

private:
    friend class detail::MastersCore;
    // A client whose I/O runs on `loop`, the one thread it shares with the
    // other masters of a Redlock (masters.cpp); the loop's owner runs it.
    // Made only inside the library, so not exported from it.
    [[gnu::visibility("hidden")]] Client(ServerAddress address, ClientOptions options,
                                         std::shared_ptr<detail::IoLoop> loop);

    std::shared_ptr<detail::ClientCore> core_;
};

}  // namespace dlock
