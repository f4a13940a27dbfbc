// One pipelined, self-reconnecting connection to a Redis server.
//
// Any thread may submit a formatted command; its bytes are appended to a
// shared buffer and the first thread to find no write in progress becomes
// the writer: it send()s everything queued, including what other threads
// appended meanwhile, so many threads' commands leave in few syscalls. Over
// TLS, or when the socket is full, the I/O thread writes instead. Replies are
// read on the I/O thread and matched to submissions in order.
//
// States: connecting -> ready -> (drop) connecting ... ; a failed attempt
// goes to backoff, where new commands fail at once with the attempt's error
// until the next attempt starts. Commands submitted while connecting wait
// (up to their deadline) and are sent once the handshake is done.
//
// fork(): every call from a thread other than the I/O thread comes in
// through enter(), which in a forked child refuses with errc::forked_child
// before touching anything (see fork_guard.hpp). The other methods run on
// the I/O thread, which a child does not have.
//
// Exceptions: none leaves a handler of this connection. One thrown by the
// connection's own work (bad_alloc while reading a reply) fails the
// connection with an error code, std::errc::not_enough_memory for bad_alloc,
// errc::connection_lost otherwise; one thrown by a caller's completion or a
// listener is caught and the other completions of that read still run; a
// subscriber connection is then dropped, a request/reply one goes on (see
// deliver()).
#pragma once

#include <atomic>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "runtime/condition.hpp"
#include "runtime/function_ref.hpp"
#include "asio.hpp"
#include "dlock/client_options.hpp"
#include "dlock/reply.hpp"
#include "dlock/server_address.hpp"
#include "fork_guard.hpp"
#include "reply_reader.hpp"
#include "connect_target.hpp"
#include "stream.hpp"

namespace dlock::detail {

using Clock = std::chrono::steady_clock;
using Completion = std::function<void(std::error_code, Reply&&)>;

// What an output buffer keeps once drained: a burst (a reconnect's
// renewals, a user's huge value) is freed once written, not kept for the
// life of the connection or the thread. Steady-state commands stay far
// below it, so they never allocate for it.
inline constexpr std::size_t kept_buffer_capacity = std::size_t{64} << 10;
inline void release_if_large(std::string& buffer) noexcept {
    if (buffer.capacity() > kept_buffer_capacity) std::string().swap(buffer);
}

class Connection : public std::enable_shared_from_this<Connection> {
public:
    enum class Mode {
        request_reply,  // every reply answers the oldest submission
        subscriber,     // replies are pushed to Hooks::on_push
    };
    struct Hooks {
        std::function<void()> on_ready;              // I/O thread, after every (re)connect
        std::function<void(Reply&&)> on_push;        // I/O thread, subscriber mode
    };

    // Every connect attempt goes where target names (connect_target.hpp;
    // none: address itself), admitted as target says; address then only
    // gives the transport and credentials. A reply that tells the target
    // moved ends the connection (see deliver()).
    Connection(asio::io_context& io, ServerAddress address, ClientOptions options, Mode mode, Hooks hooks = {},
               std::shared_ptr<ConnectTarget> target = {});
    ~Connection();

    // Begins the first connect attempt. Any thread, once; nothing in a forked child.
    void start();
    // Fails everything with client_closed and stops reconnecting. I/O thread.
    void shutdown();

    // Queues one formatted command. Any thread. Takes done (moves from it)
    // only on success; on an immediate failure (backoff, closed) returns the
    // error and leaves done to the caller.
    std::error_code submit(std::string_view formatted, Completion& done, Clock::time_point deadline);
    // Queues several formatted commands to leave in one write (the lease
    // keeper's renewals). Same contract as submit(), for all of them at once.
    std::error_code submit_many(std::span<const std::string_view> formatted, std::vector<Completion>& dones,
                                Clock::time_point deadline);
    // Subscriber mode: sends when ready and returns true; drops otherwise
    // (on_ready resends, never in a forked child).
    bool send_if_ready(std::string_view formatted);

    // Blocks until ready or the current attempt failed, or deadline. Any thread.
    std::error_code wait_connected(Clock::time_point deadline);

    // No command waits for a reply or for the connection. Any thread.
    bool idle() const;

    // What the last failed attempt said, for error messages.
    std::string last_error_detail() const;
    // "host:port" (or the socket path) of the server of the last session
    // that became ready; empty before. Any thread.
    std::string peer() const;

    // Changes when the connection becomes ready and when it drops: the
    // same number twice means one unbroken session with one server process;
    // while it reconnects, the number is one no session was ever ready
    // under. Any thread.
    std::uint64_t sessions() const noexcept { return sessions_.load(std::memory_order_acquire); }

private:
    enum class State { idle, connecting, ready, backoff, closed };
    struct Pending {
        Completion done;
        Clock::time_point deadline;
        std::string bytes;  // only while waiting for a connection
        ReplyLimit limit;   // what its reply may hold (reply_limits.hpp)
    };
    struct HandshakeStep {
        enum class Kind { auth, select, set_name, ping, admission } kind;
    };

    // The mutex, for a thread coming in from outside; forked_child in a child.
    std::unique_lock<std::mutex> enter(std::error_code& ec);
    void begin_attempt();
    void connect(std::uint64_t attempt);
    // The target moved to another server: leave this one (I/O thread).
    void master_changed(const ServerAddress& master);
    // The answer to the target's admission command: true when admitted.
    bool admit(const Reply& reply);
    void start_handshake(std::uint64_t attempt);
    void fail_attempt(std::error_code ec, const std::string& detail);
    // Why the server hung up before the handshake ended, as far as it can be told.
    std::string closed_in_handshake(const std::error_code& ec) const;
    void become_ready();
    // Ends the session: fails everything in flight with reason and starts
    // reconnecting. first, if given, runs once the session has ended and
    // before the others are failed (a command failed for its own reply).
    void drop(std::error_code reason, FunctionRef<void()> first = {});
    void schedule_reconnect();
    void read_loop(std::uint64_t attempt);
    void process_replies();
    void handle_handshake_reply(Reply& reply);
    void deliver(std::vector<Reply>& replies);
    // The limit of the reply with this index since the reader was made.
    ReplyLimit limit_of_reply(std::size_t index);
    // The reader failed with ec. A reply past its own limit or its memory
    // budget fails its command with the reader's detail, those behind it as
    // a lost connection; anything else fails them all with ec.
    void drop_over_limit(std::error_code ec);
    void flush(std::unique_lock<std::mutex>& lock);
    void write_from_io_thread();
    void on_write_error(std::uint64_t generation);
    void tick();
    void expire_overdue();
    template <typename Body>
    void guarded(Body&& body);
    // Fails the connection in whatever state it is: drop when ready, a failed
    // attempt while connecting.
    void lose(std::error_code ec, const std::string& detail);
    void close_stream() noexcept;
    static void fail_all(std::deque<Pending>& items, std::error_code ec, Clock::time_point now,
                         const std::string& detail = {});

    // Sends bytes on the socket of the given generation from any thread.
    // Returns how many were written and the error that stopped it, if any.
    std::pair<std::size_t, std::error_code> write_direct(const std::string& bytes, std::uint64_t generation);

    asio::io_context& io_;
    const ForkGuard fork_guard_;
    ServerAddress address_;  // I/O thread, once started: the server the target named for this attempt
    const ClientOptions options_;
    const Mode mode_;
    Hooks hooks_;
    const std::shared_ptr<ConnectTarget> target_;  // never null

    // I/O-thread state.
    std::optional<asio::ssl::context> tls_context_;
    std::string tls_setup_error_;
    std::shared_ptr<Stream> stream_;
    std::unique_ptr<ReplyReader> reader_;
    std::vector<char> read_buffer_;
    std::vector<Reply> replies_;
    std::vector<Completion> completions_;
    std::vector<HandshakeStep> handshake_;
    std::size_t handshake_done_ = 0;
    std::size_t delivered_ = 0;  // replies handed to pending_'s completions since the reader was made
    std::uint64_t attempt_ = 0;
    unsigned failed_attempts_ = 0;
    std::size_t refusals_ = 0;  // servers the target named and then refused, this attempt
    asio::steady_timer connect_timer_;
    asio::steady_timer reconnect_timer_;
    asio::steady_timer tick_timer_;

    // Shared state, guarded by mutex_.
    mutable std::mutex mutex_;
    Condition state_changed_;
    State state_ = State::idle;
    bool attempt_located_ = false;  // I/O thread: this attempt goes where the target named
    std::error_code last_error_;
    std::string last_error_detail_;
    std::string peer_;
    std::uint64_t generation_ = 0;  // changes at every ready and every drop
    std::atomic<std::uint64_t> sessions_{0};
    std::string out_;               // bytes not yet handed to a writer
    bool writer_active_ = false;
    bool direct_writes_ = false;
    std::deque<Pending> pending_;   // sent or queued on the ready connection, in order
    std::deque<Pending> waiting_;   // submitted while connecting

    // Held while any thread writes to the socket; close takes it too, so a
    // descriptor is never written after it was closed (and maybe reused).
    std::mutex write_mutex_;
    int write_fd_ = -1;
    std::uint64_t write_generation_ = 0;
};

}  // namespace dlock::detail
