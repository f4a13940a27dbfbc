#include "connection.hpp"

#include <unistd.h>

#include <algorithm>

#include "connection_internal.hpp"

namespace dlock::detail {
namespace {

constexpr std::size_t read_chunk = 64 * 1024;

// How often the I/O thread looks for commands past their deadline: often
// enough that an asynchronous caller hears of a timeout promptly, rarely
// enough to cost nothing. Blocking callers wait on their own deadline.
std::chrono::milliseconds tick_period(const ClientOptions& options) {
    return std::clamp(options.command_timeout / 8, std::chrono::milliseconds(1), std::chrono::milliseconds(50));
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

Connection::~Connection() {
    if (hangup_watch_) hangup_watch_.reset();  // closes hangup_epoll_
    else if (hangup_epoll_ >= 0) ::close(hangup_epoll_);
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
    int loose_fd;
    {
        std::lock_guard lock(mutex_);
        loose_fd = release_baton_locked();
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
    if (hangup_watch_) {
        std::error_code ignored;
        hangup_watch_->cancel(ignored);
    }
    close_stream(loose_fd);
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

std::string Connection::peer() const {
    std::lock_guard lock(mutex_);
    return peer_;
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
    guarded([&] {
        // Left replies may sit unread in the socket past their deadline,
        // answered in time: they are read first, and deadlines looked at
        // from the next tick on, once the I/O thread has read what came.
        if (!take_back_left_replies()) expire_overdue();
    });
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
