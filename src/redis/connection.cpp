#include "connection.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <random>

#include "command_format.hpp"
#include "dlock/error.hpp"
#include "reply_limits.hpp"

namespace dlock::detail {
namespace {

constexpr std::size_t read_chunk = 64 * 1024;

// How often the I/O thread looks for commands past their deadline: often
// enough that an asynchronous caller hears of a timeout promptly, rarely
// enough to cost nothing. Blocking callers wait on their own deadline.
std::chrono::milliseconds tick_period(const ClientOptions& options) {
    return std::clamp(options.command_timeout / 8, std::chrono::milliseconds(1), std::chrono::milliseconds(50));
}

double random_fraction() {
    thread_local std::minstd_rand engine{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.5, 1.0)(engine);
}

// Runs code of a caller (a completion, a listener); false when it threw.
template <typename Call>
bool ran_cleanly(Call&& call) noexcept {
    try {
        call();
        return true;
    } catch (...) {
        return false;
    }
}

}  // namespace

Connection::Connection(asio::io_context& io, ServerAddress address, ClientOptions options, Mode mode, Hooks hooks,
                       std::shared_ptr<ConnectTarget> target)
    : io_(io),
      address_(std::move(address)),
      options_(std::move(options)),
      mode_(mode),
      hooks_(std::move(hooks)),
      target_(target ? std::move(target) : std::make_shared<FixedTarget>(address_)),
      read_buffer_(read_chunk),
      connect_timer_(io),
      reconnect_timer_(io),
      tick_timer_(io) {
    if (address_.transport == ServerAddress::Transport::tls) {
        try {
            tls_context_.emplace(asio::ssl::context::tls_client);
            auto& ctx = *tls_context_;
            if (options_.tls.ca_file.empty()) ctx.set_default_verify_paths();
            else ctx.load_verify_file(options_.tls.ca_file);
            if (!options_.tls.cert_file.empty()) {
                ctx.use_certificate_chain_file(options_.tls.cert_file);
                ctx.use_private_key_file(options_.tls.key_file.empty() ? options_.tls.cert_file : options_.tls.key_file,
                                         asio::ssl::context::pem);
            }
            ctx.set_verify_mode(options_.tls.verify_peer ? asio::ssl::verify_peer : asio::ssl::verify_none);
        } catch (const std::system_error& e) {
            tls_setup_error_ = std::string("cannot load TLS files: ") + e.what();
        }
    }
}

Connection::~Connection() = default;

// Every handler this connection runs on the I/O thread goes through here: an
// exception (bad_alloc while reading or building a reply, anything from a
// handshake step) fails the connection with an error code, as a read error
// would, instead of escaping the I/O thread.
template <typename Body>
void Connection::guarded(Body&& body) {
    try {
        body();
    } catch (const std::bad_alloc&) {
        lose(std::make_error_code(std::errc::not_enough_memory), "out of memory");
    } catch (const std::exception& e) {
        lose(errc::connection_lost, e.what());
    } catch (...) {
        lose(errc::connection_lost, "unknown exception");
    }
}

void Connection::lose(std::error_code ec, const std::string& detail) {
    State state;
    {
        std::lock_guard lock(mutex_);
        state = state_;
    }
    if (state == State::ready) drop(ec);
    else if (state == State::connecting) fail_attempt(ec, detail);
}

std::unique_lock<std::mutex> Connection::enter(std::error_code& ec) {
    if (fork_guard_.forked()) {
        ec = errc::forked_child;
        return {};
    }
    ec.clear();
    return std::unique_lock(mutex_);
}

void Connection::start() {
    {
        std::error_code ec;
        auto lock = enter(ec);
        if (ec) return;
        state_ = State::connecting;
    }
    asio::post(io_, [self = shared_from_this()] {
        self->target_->on_change([weak = self->weak_from_this()](const ServerAddress& master) {
            auto connection = weak.lock();
            if (connection) connection->guarded([&] { connection->master_changed(master); });
            return connection != nullptr;
        });
        self->tick();
        self->guarded([&] { self->begin_attempt(); });
    });
}

void Connection::shutdown() {
    std::deque<Pending> failed;
    {
        std::lock_guard lock(mutex_);
        state_ = State::closed;
        ++generation_;
        failed.swap(pending_);
        for (auto& p : waiting_) failed.push_back(std::move(p));
        waiting_.clear();
        out_.clear();
        state_changed_.notify_all();
    }
    ++attempt_;
    connect_timer_.cancel();
    reconnect_timer_.cancel();
    tick_timer_.cancel();
    close_stream();
    fail_all(failed, errc::client_closed, Clock::now());
}

bool Connection::idle() const {
    std::lock_guard lock(mutex_);
    return pending_.empty() && waiting_.empty();
}

std::string Connection::last_error_detail() const {
    std::lock_guard lock(mutex_);
    return last_error_detail_;
}

std::error_code Connection::wait_connected(Clock::time_point deadline) {
    std::error_code ec;
    auto lock = enter(ec);
    if (ec) return ec;
    state_changed_.wait_until(lock, deadline, [&] {
        return state_ == State::ready || state_ == State::backoff || state_ == State::closed;
    });
    switch (state_) {
        case State::ready: return {};
        case State::backoff: return last_error_;
        case State::closed: return errc::client_closed;
        default: return errc::connect_timeout;
    }
}

// ---- submitting and writing (any thread) ----

std::error_code Connection::submit(std::string_view formatted, Completion& done, Clock::time_point deadline) {
    const ReplyLimit limit = reply_limit_of(formatted);
    std::error_code ec;
    auto lock = enter(ec);
    if (ec) return ec;
    switch (state_) {
        case State::ready:
            out_.append(formatted);
            pending_.push_back(Pending{std::move(done), deadline, {}, limit});
            flush(lock);
            return {};
        case State::idle:
        case State::connecting:
            waiting_.push_back(Pending{std::move(done), deadline, std::string(formatted), limit});
            return {};
        case State::backoff: return last_error_ ? last_error_ : make_error_code(errc::not_connected);
        case State::closed: return errc::client_closed;
    }
    return errc::client_closed;
}

std::error_code Connection::submit_many(std::span<const std::string_view> formatted, std::vector<Completion>& dones,
                                        Clock::time_point deadline) {
    std::error_code ec;
    auto lock = enter(ec);
    if (ec) return ec;
    switch (state_) {
        case State::ready:
            for (std::size_t i = 0; i < formatted.size(); ++i) {
                out_.append(formatted[i]);
                pending_.push_back(Pending{std::move(dones[i]), deadline, {}, reply_limit_of(formatted[i])});
            }
            flush(lock);
            return {};
        case State::idle:
        case State::connecting:
            for (std::size_t i = 0; i < formatted.size(); ++i)
                waiting_.push_back(
                    Pending{std::move(dones[i]), deadline, std::string(formatted[i]), reply_limit_of(formatted[i])});
            return {};
        case State::backoff: return last_error_ ? last_error_ : make_error_code(errc::not_connected);
        case State::closed: return errc::client_closed;
    }
    return errc::client_closed;
}

bool Connection::send_if_ready(std::string_view formatted) {
    std::error_code ec;
    auto lock = enter(ec);
    if (ec || state_ != State::ready) return false;
    out_.append(formatted);
    flush(lock);
    return true;
}

void Connection::flush(std::unique_lock<std::mutex>& lock) {
    if (writer_active_ || state_ != State::ready || out_.empty()) return;
    writer_active_ = true;
    if (!direct_writes_) {
        lock.unlock();
        asio::post(io_, [self = shared_from_this()] { self->guarded([&] { self->write_from_io_thread(); }); });
        return;
    }
    // This thread is the writer until out_ stays empty. The buffers swap so
    // that neither side allocates in the steady state.
    thread_local std::string sending;
    const auto generation = generation_;
    for (;;) {
        sending.clear();
        sending.swap(out_);
        lock.unlock();
        auto [written, error] = write_direct(sending, generation);
        lock.lock();
        if (error == std::errc::operation_would_block && generation_ == generation)
            out_.insert(0, sending, written, std::string::npos);
        sending.clear();
        release_if_large(sending);
        if (generation_ != generation) return;  // dropped meanwhile; the drop owns the state now
        if (error == std::errc::operation_would_block) {
            lock.unlock();
            asio::post(io_, [self = shared_from_this()] { self->guarded([&] { self->write_from_io_thread(); }); });
            return;
        }
        if (error) {
            lock.unlock();
            asio::post(io_, [self = shared_from_this(), generation] {
                self->guarded([&] { self->on_write_error(generation); });
            });
            return;
        }
        if (out_.empty()) {
            writer_active_ = false;
            return;
        }
    }
}

std::pair<std::size_t, std::error_code> Connection::write_direct(const std::string& bytes, std::uint64_t generation) {
    std::lock_guard lock(write_mutex_);
    if (write_generation_ != generation || write_fd_ < 0) return {0, errc::connection_lost};
    std::size_t written = 0;
    while (written < bytes.size()) {
        ssize_t n = ::send(write_fd_, bytes.data() + written, bytes.size() - written, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            written += static_cast<std::size_t>(n);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return {written, std::make_error_code(std::errc::operation_would_block)};
        } else {
            return {written, std::error_code(errno, std::system_category())};
        }
    }
    return {written, {}};
}

void Connection::write_from_io_thread() {
    std::uint64_t generation;
    auto bytes = std::make_shared<std::string>();
    {
        std::lock_guard lock(mutex_);
        if (state_ != State::ready || !writer_active_) return;
        if (out_.empty()) {
            writer_active_ = false;
            return;
        }
        bytes->swap(out_);
        generation = generation_;
    }
    stream_->async_write(bytes, [self = shared_from_this(), generation](std::error_code ec, std::size_t) {
        self->guarded([&] {
            if (ec) return self->on_write_error(generation);
            {
                std::lock_guard lock(self->mutex_);
                if (self->generation_ != generation) return;
            }
            self->write_from_io_thread();
        });
    });
}

void Connection::on_write_error(std::uint64_t generation) {
    {
        std::lock_guard lock(mutex_);
        if (generation_ != generation || state_ != State::ready) return;
    }
    drop(errc::connection_lost);
}

// ---- connecting (I/O thread) ----

void Connection::begin_attempt() {
    const auto attempt = ++attempt_;
    {
        std::lock_guard lock(mutex_);
        if (state_ == State::closed) return;
        state_ = State::connecting;
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
    reader_ = std::make_unique<ReplyReader>(options_.max_string_bytes, options_.max_array_elements,
                                            options_.max_reply_overhead);
    delivered_ = 0;
    if (mode_ == Mode::request_reply)
        reader_->limit_replies([this](std::size_t index) { return limit_of_reply(index); });
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
    flush(lock);
    if (lock.owns_lock()) lock.unlock();
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

void Connection::drop(std::error_code reason) {
    std::deque<Pending> failed;
    {
        std::lock_guard lock(mutex_);
        if (state_ != State::ready) return;
        ++generation_;
        sessions_.fetch_add(1, std::memory_order_acq_rel);  // the session ended: nothing it knew holds now
        state_ = State::connecting;
        writer_active_ = false;
        out_.clear();
        release_if_large(out_);
        failed.swap(pending_);
    }
    ++attempt_;
    close_stream();
    fail_all(failed, reason, Clock::now());
    // Reconnect at once; backoff applies only after a failed attempt.
    begin_attempt();
}

void Connection::close_stream() noexcept {
    {
        std::lock_guard lock(write_mutex_);
        write_fd_ = -1;
        write_generation_ = 0;
    }
    if (stream_) stream_->close();
}

// ---- reading (I/O thread) ----

std::string Connection::peer() const {
    std::lock_guard lock(mutex_);
    return peer_;
}

std::string Connection::closed_in_handshake(const std::error_code& ec) const {
    std::string detail = "connection closed during handshake: " + ec.message();
    // A TLS port hangs up on the plain-text AUTH, SELECT or PING at once.
    if (address_.transport == ServerAddress::Transport::tcp)
        detail += "; if the server speaks TLS, use rediss://" + address_.host + ":" + std::to_string(address_.port);
    return detail;
}

void Connection::read_loop(std::uint64_t attempt) {
    stream_->async_read_some(asio::buffer(read_buffer_), [self = shared_from_this(), attempt](std::error_code ec, std::size_t n) {
        if (attempt != self->attempt_) return;
        self->guarded([&] {
            if (ec) {
                bool ready;
                {
                    std::lock_guard lock(self->mutex_);
                    ready = self->state_ == State::ready;
                }
                if (ready) self->drop(errc::connection_lost);
                else self->fail_attempt(map_connect_error(ec), self->closed_in_handshake(ec));
                return;
            }
            self->reader_->feed(self->read_buffer_.data(), n);
            self->process_replies();
            if (attempt == self->attempt_) self->read_loop(attempt);
        });
    });
}

void Connection::process_replies() {
    const auto attempt = attempt_;
    std::error_code ec;
    Reply reply;
    while (attempt == attempt_ && handshake_done_ < handshake_.size()) {
        if (!reader_->next(reply, ec)) break;
        handle_handshake_reply(reply);
    }
    if (attempt != attempt_ || handshake_done_ < handshake_.size()) {
        if (ec) fail_attempt(ec, "bad reply during handshake");
        return;
    }
    replies_.clear();
    while (reader_->next(reply, ec)) replies_.push_back(std::move(reply));
    if (!replies_.empty()) deliver(replies_);
    if (!ec || attempt != attempt_) return;
    drop_over_limit(ec);
}

ReplyLimit Connection::limit_of_reply(std::size_t index) {
    // Replies come in the order of what was sent: the handshake's, then
    // pending_'s, of which delivered_ were handed out already.
    if (index < handshake_.size()) return {};
    const auto at = index - handshake_.size();
    std::lock_guard lock(mutex_);
    if (at < delivered_ || at - delivered_ >= pending_.size()) return {};
    return pending_[at - delivered_].limit;
}

// The reply at the front failed: over a limit of its own (frame_check.hpp)
// or over its memory budget (reply_reader.hpp), its caller is told which,
// the others in flight that the connection was lost. Anything else the
// reader reported fails them all with it.
void Connection::drop_over_limit(std::error_code ec) {
    auto detail = reader_->limit_detail();
    const auto memory = reader_->memory_detail();
    Completion offender;
    {
        std::lock_guard lock(mutex_);
        if (detail.empty() && memory.empty()) {
        } else if (mode_ == Mode::subscriber || state_ != State::ready || pending_.empty()) {
            detail.clear();  // a push, or nobody waits for it
        } else {
            if (!memory.empty()) {
                const auto& limit = pending_.front().limit;
                const auto what = limit.what.empty() ? "'" + std::string(limit.command.data()) + "'" : std::string(limit.what);
                detail = "the reply to " + what + " from " + address_.to_string() + " " + memory +
                         ": the server is hostile or broken, or the reply needs a larger max_reply_overhead; the "
                         "connection was reset";
            }
            offender = std::move(pending_.front().done);
            pending_.pop_front();
        }
    }
    if (!offender) return drop(ec);
    ran_cleanly([&] { offender(ec, Reply::make_error(std::move(detail))); });
    drop(errc::connection_lost);
}

// A completion or listener that throws does not stop the others of this
// read: each caller still gets its reply. A reply's completion had its reply
// in full, so what it threw is its caller's own affair: the exception is
// dropped and the connection goes on (a reset would fail every other command
// in flight on it, and a lock command failed that way has an unknown
// outcome). A listener that threw may have missed a push it was told, so a
// subscriber connection is dropped: it resubscribes and announces the gap.
void Connection::deliver(std::vector<Reply>& replies) {
    if (mode_ == Mode::subscriber) {
        bool clean = true;
        for (auto& r : replies) clean &= ran_cleanly([&] { hooks_.on_push(std::move(r)); });
        if (!clean) drop(errc::connection_lost);
        return;
    }
    auto& completions = completions_;
    completions.clear();
    bool unexpected = false;
    {
        std::lock_guard lock(mutex_);
        for (std::size_t i = 0; i < replies.size(); ++i) {
            if (pending_.empty()) {
                unexpected = true;
                replies.resize(i);
                break;
            }
            completions.push_back(std::move(pending_.front().done));
            pending_.pop_front();
            ++delivered_;
        }
    }
    // Completions run outside the lock: they may submit again (the EVAL
    // fallback does). They cannot reenter deliver(): only a read calls it.
    bool demoted = false;
    for (std::size_t i = 0; i < completions.size(); ++i) {
        std::error_code ec = replies[i].error_code();
        if (target_->demoted_by(replies[i])) {
            // The master became a replica under us (a failover): the command
            // did not run here, and what follows it will not either. It fails
            // as a lost connection would, so that the lock layer's retry
            // carries it to the new master; READONLY never reaches the caller.
            ec = errc::connection_lost;
            demoted = true;
        }
        ran_cleanly([&] { completions[i](ec, std::move(replies[i])); });
    }
    completions.clear();
    if (demoted) {
        target_->unusable(address_);
        drop(errc::connection_lost);
        return;
    }
    if (unexpected) drop(errc::protocol_error);
}

// ---- deadlines (I/O thread) ----

void Connection::tick() {
    {
        std::lock_guard lock(mutex_);
        if (state_ == State::closed) return;
    }
    // Rearmed first, so a tick that throws does not end the ticking.
    tick_timer_.expires_after(tick_period(options_));
    tick_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
        if (!ec) self->tick();
    });
    guarded([&] { expire_overdue(); });
}

void Connection::expire_overdue() {
    const auto now = Clock::now();
    bool front_expired = false;
    std::deque<Pending> expired;
    {
        std::lock_guard lock(mutex_);
        if (state_ == State::closed) return;
        if (state_ == State::ready && !pending_.empty() && pending_.front().deadline <= now) front_expired = true;
        for (auto it = waiting_.begin(); it != waiting_.end();) {
            if (it->deadline <= now) {
                expired.push_back(std::move(*it));
                it = waiting_.erase(it);
            } else {
                ++it;
            }
        }
    }
    fail_all(expired, errc::command_timeout, now);
    // Replies come back in order: if the oldest is overdue, everything behind
    // it is stuck too. Resetting the connection is the only way to stop
    // waiting without mismatching replies later.
    if (front_expired) drop(errc::connection_lost);
}

void Connection::fail_all(std::deque<Pending>& items, std::error_code ec, Clock::time_point now,
                          const std::string& detail) {
    for (auto& item : items) {
        auto reason = (ec == errc::connection_lost && item.deadline <= now) ? make_error_code(errc::command_timeout) : ec;
        // The detail travels as an error reply, so a throwing call can say
        // what went wrong ("AUTH: WRONGPASS ...") and not just the code. The
        // connection is failing already: a completion that throws is ignored.
        ran_cleanly([&] { item.done(reason, detail.empty() ? Reply{} : Reply::make_error(detail)); });
    }
    items.clear();
}

}  // namespace dlock::detail
