#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <random>

#include "command_format.hpp"
#include "connection_internal.hpp"

namespace dlock::detail {
namespace {

double random_fraction() {
    thread_local std::minstd_rand engine{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.5, 1.0)(engine);
}

}  // namespace

// Connecting, the handshake, dropping and reconnecting (I/O thread).

void Connection::begin_attempt() {
    const auto attempt = ++attempt_;
    {
        std::lock_guard lock(mutex_);
        if (state_ == State::closed) return;
        state_ = State::connecting;
        close_noticed_ = false;  // this is the reconnect a submitter asked for
    }
    attempt_located_ = false;
    if (!tls_setup_error_.empty()) return fail_attempt(errc::tls_error, tls_setup_error_);
    target_->locate([self = shared_from_this(), attempt](std::error_code ec, const ServerAddress& server,
                                                         const std::string& detail) {
        if (attempt != self->attempt_) return;
        self->guarded([&] {
            if (ec) return self->fail_attempt(ec, detail);
            // The server's place, with the URI's transport and credentials.
            self->address_ = server;
            self->attempt_located_ = true;
            self->connect(attempt);
        });
    });
}

void Connection::connect(std::uint64_t attempt) {
    auto reader = std::make_shared<ReplyReader>(options_.max_string_bytes, options_.max_array_elements,
                                                options_.max_reply_overhead);
    {
        // A caller still driving the session that ended keeps its own reader.
        std::lock_guard lock(mutex_);
        reader_ = std::move(reader);
        delivered_ = 0;
    }
    stream_ = std::make_shared<Stream>(io_, address_, tls_context_ ? &*tls_context_ : nullptr);
    connect_timer_.expires_after(options_.connect_timeout);
    connect_timer_.async_wait([self = shared_from_this(), attempt](std::error_code ec) {
        if (ec || attempt != self->attempt_) return;
        self->guarded([&] {
            const auto within = " within " + std::to_string(self->options_.connect_timeout.count()) + " ms";
            if (self->stream_ && self->stream_->in_tls_handshake())
                return self->fail_attempt(errc::tls_error, "no answer to the TLS handshake with " +
                                                               self->address_.to_string() + within +
                                                               ": the server does not speak TLS (use redis:// for a "
                                                               "plain port), or it is overloaded");
            self->fail_attempt(errc::connect_timeout, "no connection to " + self->address_.to_string() + within);
        });
    });
    stream_->async_connect([self = shared_from_this(), attempt](std::error_code ec, std::string detail) {
        if (attempt != self->attempt_) return;
        self->guarded([&] {
            if (ec) {
                // The error's own words follow the detail in what(): "Connection
                // refused" is said once, after the address.
                const auto mapped = map_connect_error(ec);
                const bool same = detail.size() == mapped.message().size() &&
                                  std::equal(detail.begin(), detail.end(), mapped.message().begin(),
                                             [](char a, char b) { return std::tolower(a) == std::tolower(b); });
                return self->fail_attempt(ec, self->address_.to_string() + (same ? "" : ": " + detail));
            }
            self->start_handshake(attempt);
        });
    });
}

void Connection::start_handshake(std::uint64_t attempt) {
    auto bytes = std::make_shared<std::string>();
    handshake_.clear();
    handshake_done_ = 0;
    if (!address_.password.empty()) {
        if (address_.username.empty()) append_command(*bytes, std::vector<std::string_view>{"AUTH", address_.password});
        else append_command(*bytes, std::vector<std::string_view>{"AUTH", address_.username, address_.password});
        handshake_.push_back({HandshakeStep::Kind::auth});
    }
    std::string db = std::to_string(address_.database);
    if (address_.database != 0) {
        append_command(*bytes, std::vector<std::string_view>{"SELECT", db});
        handshake_.push_back({HandshakeStep::Kind::select});
    }
    if (!options_.client_name.empty()) {
        append_command(*bytes, std::vector<std::string_view>{"CLIENT", "SETNAME", options_.client_name});
        handshake_.push_back({HandshakeStep::Kind::set_name});
    }
    // Something must answer before the connection counts as ready: a paused
    // server still completes TCP handshakes from its listen backlog.
    if (const auto admission = target_->admission_command(); !admission.empty()) {
        append_command(*bytes, std::vector<std::string_view>{admission});
        handshake_.push_back({HandshakeStep::Kind::admission});
    } else if (handshake_.empty() || handshake_.back().kind == HandshakeStep::Kind::set_name) {
        append_command(*bytes, std::vector<std::string_view>{"PING"});
        handshake_.push_back({HandshakeStep::Kind::ping});
    }
    // The session's reader asks the limit of each reply by its index in
    // this session: it knows how many the handshake has, so that it never
    // reads handshake_, which the next session's handshake rewrites while a
    // caller may still read what this one left in its socket. Set before
    // the session is ready (under mutex_), so a caller that takes the baton
    // sees it.
    if (mode_ == Mode::request_reply)
        reader_->limit_replies([this, session = reader_.get(), handshake_replies = handshake_.size()](
                                   std::size_t index) { return limit_of_reply(*session, handshake_replies, index); });
    stream_->async_write(bytes, [self = shared_from_this(), attempt](std::error_code ec, std::size_t) {
        if (ec && attempt == self->attempt_)
            self->guarded([&] { self->fail_attempt(map_connect_error(ec), "handshake write failed: " + ec.message()); });
    });
    read_loop(attempt);
}

void Connection::handle_handshake_reply(Reply& reply) {
    auto step = handshake_[handshake_done_++].kind;
    if (reply.is_error()) {
        auto ec = reply.error_code();
        switch (step) {
            case HandshakeStep::Kind::auth:
                return fail_attempt(ec == errc::permission_denied ? ec : make_error_code(errc::auth_failed),
                                    address_.to_string() + ": wrong password or unknown user (AUTH: " + reply.text +
                                        ")");
            case HandshakeStep::Kind::select: return fail_attempt(errc::server_error, "SELECT: " + reply.text);
            case HandshakeStep::Kind::set_name: break;  // an ACL user may lack CLIENT; the name is only a courtesy
            case HandshakeStep::Kind::ping:
            case HandshakeStep::Kind::admission:
                // An ACL user without +ping (+role) gets NOPERM: that still
                // proves the server answers. Without ROLE, a demoted master
                // is found by its READONLY answers instead.
                if (ec == errc::permission_denied) break;
                // NOAUTH here: no AUTH was sent, so no password was wrong.
                if (ec == errc::auth_failed && address_.password.empty())
                    return fail_attempt(ec, address_.to_string() + ": the server requires a password and none was "
                                                                   "given (" + reply.text + ")");
                return fail_attempt(ec == errc::auth_failed ? ec : make_error_code(errc::server_error), reply.text);
        }
    } else if (step == HandshakeStep::Kind::admission && !admit(reply)) {
        return;
    }
    if (handshake_done_ == handshake_.size()) become_ready();
}

bool Connection::admit(const Reply& reply) {
    auto admission = target_->admit(address_, reply, ++refusals_);
    switch (admission.verdict) {
        case ConnectTarget::Admission::Verdict::accept: return true;
        case ConnectTarget::Admission::Verdict::ask_again:
            // Not a failure of this attempt: what waits for the connection
            // keeps waiting (up to its deadline) while the target looks again.
            ++attempt_;
            connect_timer_.cancel();
            close_stream();
            attempt_located_ = false;
            begin_attempt();
            return false;
        case ConnectTarget::Admission::Verdict::refuse: break;
    }
    fail_attempt(errc::not_master, admission.detail);
    return false;
}

void Connection::master_changed(const ServerAddress& master) {
    State state;
    {
        std::lock_guard lock(mutex_);
        state = state_;
    }
    if (state == State::closed || state == State::idle) return;
    if (state == State::backoff) {
        // Waiting to retry a master that failed: try the new one now.
        reconnect_timer_.cancel();
        return begin_attempt();
    }
    if (address_.host == master.host && address_.port == master.port) return;
    if (state == State::connecting) {
        // Abandon this attempt without failing what waits for it: the next
        // one asks the target, which names the new server.
        ++attempt_;
        connect_timer_.cancel();
        close_stream();
        return begin_attempt();
    }
    drop(errc::connection_lost);
}

void Connection::become_ready() {
    connect_timer_.cancel();
    failed_attempts_ = 0;
    refusals_ = 0;
    const int fd = stream_->direct_write_handle();
    std::unique_lock lock(mutex_);
    if (state_ != State::connecting) return;
    ++generation_;
    {
        std::lock_guard write_lock(write_mutex_);
        write_fd_ = fd;
        write_generation_ = generation_;
    }
    direct_writes_ = fd >= 0;
    state_ = State::ready;
    peer_ = address_.transport == ServerAddress::Transport::unix_socket
                ? address_.socket_path
                : (address_.host.find(':') != std::string::npos ? "[" + address_.host + "]" : address_.host) + ":" +
                      std::to_string(address_.port);
    sessions_.fetch_add(1, std::memory_order_acq_rel);
    last_error_.clear();
    writer_active_ = false;
    for (auto& item : waiting_) {
        out_.append(item.bytes);
        item.bytes = std::string();
        pending_.push_back(std::move(item));
    }
    waiting_.clear();
    state_changed_.notify_all();
    const auto generation = generation_;
    flush(lock);
    if (lock.owns_lock()) lock.unlock();
    if (fd >= 0 && mode_ == Mode::request_reply) watch_hangup(fd, generation);
    if (hooks_.on_ready) hooks_.on_ready();
}

void Connection::fail_attempt(std::error_code ec, const std::string& detail) {
    std::deque<Pending> failed;
    {
        std::lock_guard lock(mutex_);
        if (state_ != State::connecting) return;
        state_ = State::backoff;
        last_error_ = ec;
        last_error_detail_ = detail;
        failed.swap(waiting_);
        state_changed_.notify_all();
    }
    ++attempt_;
    refusals_ = 0;
    connect_timer_.cancel();
    close_stream();
    // The server the target named could not be used (refused, silent, not
    // a master, wrong credentials): the target looks elsewhere first next
    // time (a Sentinel deployment asks another sentinel), so that one stale
    // answer cannot pin us.
    if (attempt_located_) target_->unusable(address_);
    attempt_located_ = false;
    fail_all(failed, ec, Clock::now(), detail);
    schedule_reconnect();
}

void Connection::schedule_reconnect() {
    auto delay = options_.reconnect_backoff_min;
    for (unsigned i = 0; i < failed_attempts_ && delay < options_.reconnect_backoff_max; ++i) delay *= 2;
    delay = std::min(delay, options_.reconnect_backoff_max);
    ++failed_attempts_;
    auto jittered = std::chrono::microseconds(
        static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(delay).count() * random_fraction()));
    reconnect_timer_.expires_after(jittered);
    reconnect_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
        if (!ec) self->guarded([&] { self->begin_attempt(); });
    });
}

void Connection::drop(std::error_code reason, FunctionRef<void()> first) {
    std::deque<Pending> failed;
    int loose_fd;
    {
        std::lock_guard lock(mutex_);
        if (state_ != State::ready) return;
        loose_fd = end_session_locked(failed);
    }
    ++attempt_;
    close_stream(loose_fd);
    if (first) first();
    fail_all(failed, reason, Clock::now());
    // Reconnect at once; backoff applies only after a failed attempt.
    begin_attempt();
}

int Connection::end_session_locked(std::deque<Pending>& failed) {
    ++generation_;
    sessions_.fetch_add(1, std::memory_order_acq_rel);  // the session ended: nothing it knew holds now
    state_ = State::connecting;
    writer_active_ = false;
    out_.clear();
    release_if_large(out_);
    failed.swap(pending_);
    return release_baton_locked();
}

int Connection::release_baton_locked() {
    stop_watching_hangup_locked();
    {
        // No writer may send on the descriptor once it may be closed.
        std::lock_guard write_lock(write_mutex_);
        write_fd_ = -1;
        write_generation_ = 0;
    }
    int loose_fd = -1;
    // A caller reading it is woken (its read ends) and closes it itself,
    // seeing the generation changed; it is never closed under its feet.
    if (baton_ == Baton::caller) ::shutdown(caller_fd_, SHUT_RDWR);
    else if (baton_ == Baton::parked || baton_ == Baton::returning) loose_fd = loose_fd_;
    baton_ = Baton::io;
    loose_fd_ = caller_fd_ = -1;
    io_write_waits_ = false;
    io_wants_baton_.store(false, std::memory_order_relaxed);
    return loose_fd;
}

void Connection::close_stream(int loose_fd) noexcept {
    {
        std::lock_guard lock(write_mutex_);
        write_fd_ = -1;
        write_generation_ = 0;
    }
    if (loose_fd >= 0) ::close(loose_fd);
    if (stream_) stream_->close();
}

std::string Connection::closed_in_handshake(const std::error_code& ec) const {
    std::string detail = "connection closed during handshake: " + ec.message();
    // A TLS port hangs up on the plain-text AUTH, SELECT or PING at once.
    if (address_.transport == ServerAddress::Transport::tcp)
        detail += "; if the server speaks TLS, use rediss://" + address_.host + ":" + std::to_string(address_.port);
    return detail;
}

}  // namespace dlock::detail
