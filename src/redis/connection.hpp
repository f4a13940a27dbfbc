// One pipelined, self-reconnecting connection to a Redis server.
//
// Any thread may submit a formatted command; its bytes are appended to a
// shared buffer and the first thread to find no write in progress becomes
// the writer: it send()s everything queued, including what other threads
// appended meanwhile, so many threads' commands leave in few syscalls. Over
// TLS, or when the socket is full, the I/O thread writes instead. Replies are
// matched to submissions in order.
//
// Who reads replies (the read baton, docs/design/caller-driven-reads.md):
// exactly one of the I/O thread or one blocking caller reads the socket at a
// time. A plain (TCP or unix socket) request/reply connection with nothing
// in flight is parked: its descriptor is out of the I/O thread's reactor,
// nobody reads it. A blocking caller that submits inside a DriveScope
// leaves it parked and then, in drive(), takes the baton, reads with
// poll()/recv() on its own thread up to its deadline and runs the
// completions of its own commands there (no thread hop, no wake-up of the
// I/O thread). It stops at the first reply of someone else's command, at its
// deadline, or when its own outcome is in, and hands the baton back: parked
// when nothing is in flight, else to the I/O thread, which puts the
// descriptor back under its reactor and reads as before. A caller that sent
// one call to several servers (a Redlock vote) drives all their
// connections at once and may leave the replies it no longer needs to
// whoever reads next (DriveScope). Any other
// submission (the I/O thread's own, an asynchronous caller's, a fiber's)
// hands a parked connection to the I/O thread. TLS, subscriber connections,
// the handshake and reconnects are always the I/O thread's. A server that
// closed a parked connection is noticed at the next submission (a
// zero-timeout poll before writing): the command then waits for the
// reconnect, as it would have if the I/O thread had seen the close.
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

#include <array>
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

class Connection;

// Marks a blocking caller's thread (not a fiber, not the I/O thread) that
// waits for the replies of what it submits within the scope: a parked
// connection it submits to stays parked for it to drive() (claimed). A
// scope of Reach::one claims its first such connection (any other goes to
// the I/O thread); one of Reach::fan_out claims up to max_fan_out (a call
// sent to several servers at once: a Redlock vote) and drives them
// together. On leaving the scope, a connection it claimed and did not
// drive to the end goes to the I/O thread, so no reply is ever left unread,
// with one exception: a fan-out scope whose drive() finished leaves the
// replies still owed to it (the masters that answer after the majority)
// for whoever reads the connection next: the next scope to drive it, or
// the I/O thread at its next tick (connection.cpp, at most 50 ms). What it
// sends must therefore complete on any thread, and nobody may wait for
// those replies sooner. Scopes nest: an inner one adds nothing.
class DriveScope {
public:
    enum class Reach { one, fan_out };
    static constexpr std::size_t max_fan_out = 8;

    explicit DriveScope(bool active = true, Reach reach = Reach::one) noexcept;
    ~DriveScope();
    DriveScope(const DriveScope&) = delete;
    DriveScope& operator=(const DriveScope&) = delete;

    // The innermost active scope of this thread, or null.
    static DriveScope* current() noexcept;
    // The caller's side of the read baton: reads and delivers, on this
    // thread, the replies to this scope's commands on every connection it
    // claimed, until done() returns true or deadline passes; then hands
    // every baton back. False when done() did not return true by then, or
    // when a connection could not be driven (its baton was with the I/O
    // thread, a reply to someone else's command came first, the session
    // ended): the I/O thread then reads what is owed, and the caller waits
    // for its completion as it would have without the scope.
    bool drive(const std::function<bool()>& done, Clock::time_point deadline);
    // Ends every claim now (as leaving the scope does): a claimed
    // connection with a reply still owed to this scope goes to the I/O thread.
    void release_claims() noexcept;
    // Claims made so far, a connection claimed again counted again: a
    // submission was claimed when this grew across it.
    std::uint64_t claims_made() const noexcept { return claims_made_; }

private:
    friend class Connection;
    DriveScope* outer_ = nullptr;
    bool active_ = false;
    Reach reach_ = Reach::one;
    std::uint64_t id_ = 0;  // never 0 when active, never reused
    std::uint64_t claims_made_ = 0;
    std::size_t claimed_count_ = 0;
    std::array<std::shared_ptr<Connection>, max_fan_out> claimed_;
};

class Connection : public std::enable_shared_from_this<Connection> {
    friend class DriveScope;

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

    // The scope that claimed this connection ends: if it never drove it, a
    // reply still owed goes to the I/O thread. Any thread.
    void unclaim();

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
    // Who reads the socket (the read baton). io: the I/O thread (the
    // descriptor under its reactor); parked: nobody (out of the reactor,
    // in loose_fd_); caller: a blocking caller in drive() (caller_fd_);
    // returning: on its way back to the I/O thread (in loose_fd_).
    enum class Baton { io, parked, caller, returning };
    struct Pending {
        Completion done;
        Clock::time_point deadline;
        std::string bytes;  // only while waiting for a connection
        ReplyLimit limit;   // what its reply may hold (reply_limits.hpp)
        // The DriveScope that reads its reply itself (its id), any_reader
        // once a fan-out scope left it for whoever reads next, or 0.
        std::uint64_t driver = 0;
    };
    static constexpr std::uint64_t any_reader = ~std::uint64_t{0};
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
    // The ready session ends (mutex_ held): what was in flight moves to
    // failed; returns a descriptor out of the reactor to close, or -1.
    int end_session_locked(std::deque<Pending>& failed);
    // The baton back to the I/O thread for a session that ends or closes
    // (mutex_ held): returns a descriptor out of the reactor to close, or -1.
    int release_baton_locked();
    // A submission found the parked connection closed by the server (mutex_
    // held, this thread): the session ends as a drop would, the command
    // waits for the reconnect, which the I/O thread starts.
    void notice_close_locked();
    bool parked_connection_closed_locked() const;
    // A submission on the ready connection (mutex_ held): true to send it
    // now; false when the parked connection was found closed by the server
    // (the command then waits for the reconnect). Settles who reads its reply.
    bool accept_on_ready_locked();
    // The id of this thread's active DriveScope, or 0.
    static std::uint64_t driver_id() noexcept;
    // The submitter's claim on a parked connection: true to leave it parked
    // for the submitting thread to drive (mutex_ held).
    bool claim_locked(DriveScope* scope);
    // Hands the baton to the I/O thread (mutex_ held, baton parked).
    void return_to_io_locked();
    // I/O thread: the descriptor back under the reactor, reading as before.
    void resume_io(std::uint64_t generation);
    // I/O thread, after a read: parks the connection when nothing is in flight.
    bool maybe_park();
    // I/O thread, once ready: watches the session's socket for the server's
    // close alone (EPOLLRDHUP in an epoll of this connection's, which is
    // under the reactor; a reply does not wake it), so that a parked
    // connection's close is seen at once, as a read would see it.
    void watch_hangup(int fd, std::uint64_t generation);
    void arm_hangup_wait();
    // The watch saw a hang-up: of the session it watches now, or stale.
    void on_hangup_seen();
    void stop_watching_hangup_locked() noexcept;
    // One reply of this thread's own command, read in drive(): delivers it
    // and says whether the connection must be dropped (and why).
    enum class Hangup { none, lost, unexpected, demoted, over_limit };
    // One connection's baton while a driving caller holds it.
    struct Reading {
        Connection* connection = nullptr;
        int fd = -1;
        std::uint64_t generation = 0;
        std::shared_ptr<ReplyReader> reader;
        bool stale = false;    // the session ended meanwhile; its commands were failed
        bool foreign = false;  // the next reply is someone else's: the I/O thread delivers it
        Hangup why = Hangup::none;
        std::error_code reader_error;
        bool stopped() const noexcept { return stale || foreign || why != Hangup::none; }
    };
    // DriveScope::drive(): every claimed baton taken, read until done.
    static bool drive_claimed(DriveScope& scope, const std::function<bool()>& done, Clock::time_point deadline);
    static bool read_until(std::uint64_t scope_id, std::span<Reading> readings, const std::function<bool()>& done,
                           Clock::time_point deadline);
    // Takes the baton when parked (the caller's scope claimed it; any thread).
    bool take_baton(Reading& reading);
    // Delivers every reply of the scope's already read (and left ones).
    void deliver_read(Reading& reading, std::uint64_t scope_id, Reply& reply);
    // The socket is readable: feeds what it holds to the reader.
    void read_socket(Reading& reading, std::span<char> buffer);
    // The baton back: parked when nothing is owed (or, leave_rest, only
    // replies to this scope's own commands, then left for any reader), to
    // the I/O thread otherwise.
    void give_baton_back(Reading& reading, std::uint64_t scope_id, bool leave_rest);
    // Every command in flight was left for any reader (mutex_ held).
    bool left_for_any_reader_locked() const;
    // I/O thread, at each tick: replies a fan-out scope left go to the I/O
    // thread to be read (true), before any deadline is looked at.
    bool take_back_left_replies();
    Hangup deliver_own(Reply& reply, std::uint64_t generation, bool& stale);
    // I/O thread: what a caller's read found wrong, acted on as the I/O
    // thread's own read would have.
    void hang_up(std::uint64_t generation, Hangup why, std::error_code ec);
    void schedule_reconnect();
    void read_loop(std::uint64_t attempt);
    void process_replies();
    void handle_handshake_reply(Reply& reply);
    void deliver(std::vector<Reply>& replies);
    // The limit of the reply with this index in the session of `session`
    // (its reader), whose handshake has handshake_replies; none once that
    // session has ended. Any thread (it takes mutex_).
    ReplyLimit limit_of_reply(const ReplyReader& session, std::size_t handshake_replies, std::size_t index);
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
    void close_stream(int loose_fd = -1) noexcept;
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
    std::shared_ptr<ReplyReader> reader_;  // the baton holder's; replaced under mutex_, so read under it elsewhere
    std::vector<char> read_buffer_;
    std::vector<Reply> replies_;
    std::vector<Completion> completions_;
    std::vector<HandshakeStep> handshake_;  // I/O thread only: a session's reader carries its count
    std::size_t handshake_done_ = 0;
    std::size_t delivered_ = 0;  // replies handed to pending_'s completions since the reader was made
    std::uint64_t attempt_ = 0;
    unsigned failed_attempts_ = 0;
    std::size_t refusals_ = 0;  // servers the target named and then refused, this attempt
    asio::steady_timer connect_timer_;
    asio::steady_timer reconnect_timer_;
    asio::steady_timer tick_timer_;
    int hangup_epoll_ = -1;  // the hang-up watch (watch_hangup), made at the first ready
    int hangup_fd_ = -1;     // mutex_: the descriptor in hangup_epoll_, or -1
    std::optional<asio::posix::stream_descriptor> hangup_watch_;
    bool hangup_wait_armed_ = false;  // I/O thread: the one wait on hangup_watch_ is outstanding

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
    Baton baton_ = Baton::io;
    // The last command accepted on the ready session came from a caller
    // that reads its own reply (in a DriveScope). Only then is the
    // connection parked when nothing is in flight: for commands of callers
    // that do not read (the I/O thread's renewals, asynchronous callers),
    // parking costs a post back to the I/O thread and two epoll_ctl calls
    // per command (Redlock over 5 masters, before its votes were read by
    // their callers: 8.2 context switches per lock+unlock without parking,
    // 17.4 with it).
    bool last_driven_ = false;
    int loose_fd_ = -1;             // parked, returning: the descriptor out of the reactor
    int caller_fd_ = -1;            // caller: the descriptor it reads
    bool close_noticed_ = false;    // a submitter saw the server's close; the I/O thread reconnects
    bool hangup_seen_ = false;      // the watch saw this session's close while someone read: never park it
    bool io_write_waits_ = false;   // a write the I/O thread must do waits for the baton
    std::atomic<bool> io_wants_baton_{false};  // ... from a caller, who hands it back

    // Held while any thread writes to the socket; close takes it too, so a
    // descriptor is never written after it was closed (and maybe reused).
    std::mutex write_mutex_;
    int write_fd_ = -1;
    std::uint64_t write_generation_ = 0;
};

}  // namespace dlock::detail
