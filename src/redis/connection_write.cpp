#include <sys/socket.h>

#include <cerrno>

#include "connection_internal.hpp"
#include "reply_limits.hpp"
#include "runtime/thread_kept.hpp"

namespace dlock::detail {
namespace {
struct SendingBufferTag;
}  // namespace

// Submitting and writing (any thread).

std::error_code Connection::submit(std::string_view formatted, Completion& done, Clock::time_point deadline) {
    const ReplyLimit limit = reply_limit_of(formatted);
    std::error_code ec;
    auto lock = enter(ec);
    if (ec) return ec;
    switch (state_) {
        case State::ready:
            if (!accept_on_ready_locked()) {
                waiting_.push_back(Pending{std::move(done), deadline, std::string(formatted), limit});
                return {};
            }
            out_.append(formatted);
            pending_.push_back(Pending{std::move(done), deadline, {}, limit, driver_id()});
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
            if (accept_on_ready_locked()) {
                for (std::size_t i = 0; i < formatted.size(); ++i) {
                    out_.append(formatted[i]);
                    pending_.push_back(
                        Pending{std::move(dones[i]), deadline, {}, reply_limit_of(formatted[i]), driver_id()});
                }
                flush(lock);
                return {};
            }
            [[fallthrough]];  // the server closed it: the commands wait for the reconnect
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
    std::string fallback;  // a write made while the thread ends (runtime/thread_kept.hpp)
    auto& sending = thread_kept_or<SendingBufferTag>(fallback);
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
        std::unique_lock lock(mutex_);
        if (state_ != State::ready || !writer_active_) return;
        // The socket is out of the reactor: the write waits until it is back.
        if (baton_ == Baton::caller) {
            io_write_waits_ = true;
            io_wants_baton_.store(true, std::memory_order_release);  // the caller hands it back
            return;
        }
        if (baton_ == Baton::returning) {
            io_write_waits_ = true;  // resume_io() writes
            return;
        }
        if (baton_ == Baton::parked) {
            io_write_waits_ = true;
            baton_ = Baton::returning;
            const auto generation_now = generation_;
            lock.unlock();
            return resume_io(generation_now);
        }
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

}  // namespace dlock::detail
