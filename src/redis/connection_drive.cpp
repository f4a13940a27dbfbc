// The read baton (connection.hpp): a blocking caller reads its own replies
// on its own thread while the connection is out of the I/O thread's reactor.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "connection_internal.hpp"

namespace dlock::detail {
namespace {

thread_local DriveScope* current_scope = nullptr;
std::atomic<std::uint64_t> next_scope_id{1};

// How long a driving caller sleeps in poll() before it looks again at what
// no reply wakes it for: a write the I/O thread waits to do, a stop request.
constexpr auto recheck_period = std::chrono::milliseconds(10);
constexpr std::size_t drive_chunk = 16 * 1024;

}  // namespace

DriveScope::DriveScope(bool active) noexcept {
    if (!active || current_scope) return;  // nested: the outer scope drives
    active_ = true;
    id_ = next_scope_id.fetch_add(1, std::memory_order_relaxed);
    outer_ = current_scope;
    current_scope = this;
}

DriveScope::~DriveScope() {
    if (!active_) return;
    current_scope = outer_;
    if (claimed_) claimed_->unclaim();
}

DriveScope* DriveScope::current() noexcept { return current_scope; }

std::uint64_t Connection::driver_id() noexcept { return current_scope ? current_scope->id_ : 0; }

bool Connection::claim_locked(DriveScope* scope) {
    if (!scope || !scope->active_) return false;
    if (!scope->claimed_) scope->claimed_ = shared_from_this();
    return scope->claimed_.get() == this;
}

void Connection::return_to_io_locked() {
    baton_ = Baton::returning;
    asio::post(io_, [self = shared_from_this(), generation = generation_] {
        self->guarded([&] { self->resume_io(generation); });
    });
}

void Connection::unclaim() {
    std::lock_guard lock(mutex_);
    if (state_ == State::ready && baton_ == Baton::parked && !pending_.empty()) return_to_io_locked();
}

bool Connection::parked_connection_closed_locked() const {
    // Nothing is in flight, so nothing may be readable: anything is the
    // server's close (or bytes nobody asked for, which a read would drop).
    pollfd p{loose_fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) != 0;
}

bool Connection::accept_on_ready_locked() {
    last_driven_ = driver_id() != 0;
    if (baton_ != Baton::parked) return true;
    if (pending_.empty() && parked_connection_closed_locked()) {
        notice_close_locked();
        return false;
    }
    if (!claim_locked(DriveScope::current())) return_to_io_locked();
    return true;
}

void Connection::notice_close_locked() {
    std::deque<Pending> failed;  // nothing was in flight
    const int loose_fd = end_session_locked(failed);
    if (loose_fd >= 0) ::close(loose_fd);  // out of the reactor, and nobody reads it
    close_noticed_ = true;
    asio::post(io_, [self = shared_from_this()] {
        self->guarded([&] {
            {
                std::lock_guard lock(self->mutex_);
                // Unless an attempt began meanwhile (a Sentinel's new master).
                if (!std::exchange(self->close_noticed_, false) || self->state_ != State::connecting) return;
            }
            ++self->attempt_;
            self->close_stream();
            self->begin_attempt();
        });
    });
}

void Connection::resume_io(std::uint64_t generation) {
    bool write = false;
    bool refused = false;
    {
        std::lock_guard lock(mutex_);
        if (generation_ != generation || baton_ != Baton::returning) return;
        // Asio refused it: the session cannot go on (the drop closes it).
        refused = static_cast<bool>(stream_->give_back(loose_fd_));
        if (!refused) {
            // Only a write that waited for the baton: a thread writing
            // directly now is the writer, and one writer keeps the order.
            write = std::exchange(io_write_waits_, false);
            loose_fd_ = -1;
            baton_ = Baton::io;
            io_wants_baton_.store(false, std::memory_order_relaxed);
        }
    }
    if (refused) return drop(errc::connection_lost);
    const auto attempt = attempt_;
    // What the caller read but left (a reply to someone else's command).
    process_replies();
    if (attempt != attempt_) return;
    if (write) write_from_io_thread();
    if (!maybe_park()) read_loop(attempt);
}

void Connection::watch_hangup(int fd, std::uint64_t generation) {
    if (hangup_epoll_ < 0) {
        hangup_epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (hangup_epoll_ < 0) return;  // no watch: a close is seen at the next submission
        hangup_watch_.emplace(io_, hangup_epoll_);
    }
    {
        std::lock_guard lock(mutex_);
        if (generation_ != generation || state_ != State::ready) return;
        epoll_event event{};
        event.events = EPOLLRDHUP;  // EPOLLHUP and EPOLLERR come unasked; EPOLLIN is not asked
        if (::epoll_ctl(hangup_epoll_, EPOLL_CTL_ADD, fd, &event) != 0) return;
        hangup_fd_ = fd;
    }
    // One wait serves every session: a session that ends another way (the
    // client's own drop) leaves it waiting, and the next session's socket
    // is what it then watches. A wait per session piled up one per such
    // end until the next hang-up.
    if (!hangup_wait_armed_) arm_hangup_wait();
}

void Connection::arm_hangup_wait() {
    hangup_wait_armed_ = true;
    // Weak: a watch never keeps a connection (nor its loop) alive.
    hangup_watch_->async_wait(asio::posix::descriptor_base::wait_read, [weak = weak_from_this()](std::error_code ec) {
        auto self = weak.lock();
        if (!self) return;
        self->hangup_wait_armed_ = false;
        if (ec) return;  // cancelled: the connection shuts down
        self->guarded([&] { self->on_hangup_seen(); });
    });
}

void Connection::on_hangup_seen() {
    bool parked;
    {
        std::lock_guard lock(mutex_);
        if (hangup_fd_ < 0) return;  // no session watched: the next one arms the wait again
        // The readiness may be an ended session's, seen before its socket
        // left the watch: only the socket in it now counts.
        epoll_event event{};
        if (::epoll_wait(hangup_epoll_, &event, 1, 0) <= 0) {
            arm_hangup_wait();
            return;
        }
        stop_watching_hangup_locked();  // once per session
        if (state_ != State::ready) return;
        // A reader (the I/O thread, a caller) sees the close itself.
        parked = baton_ == Baton::parked;
        if (parked && !pending_.empty()) {
            // Claimed by a caller that has not read yet: the server may have
            // answered before it closed. The I/O thread reads what came,
            // then the close.
            return_to_io_locked();
            return;
        }
    }
    if (parked) drop(errc::connection_lost);
}

void Connection::stop_watching_hangup_locked() noexcept {
    if (hangup_fd_ < 0) return;
    epoll_event event{};
    (void)::epoll_ctl(hangup_epoll_, EPOLL_CTL_DEL, hangup_fd_, &event);
    hangup_fd_ = -1;
}

bool Connection::maybe_park() {
    if (mode_ != Mode::request_reply) return false;
    std::lock_guard lock(mutex_);
    if (state_ != State::ready || baton_ != Baton::io || !direct_writes_ || writer_active_ || !pending_.empty() ||
        !last_driven_)
        return false;
    const int fd = stream_->take_out();
    if (fd < 0) return false;
    loose_fd_ = fd;
    baton_ = Baton::parked;
    return true;
}

Connection::Hangup Connection::deliver_own(Reply& reply, std::uint64_t generation, bool& stale) {
    Completion done;
    {
        std::lock_guard lock(mutex_);
        if (generation_ != generation) {
            stale = true;  // the session ended; its commands were failed
            return Hangup::none;
        }
        if (pending_.empty()) return Hangup::unexpected;
        done = std::move(pending_.front().done);
        pending_.pop_front();
        ++delivered_;
    }
    std::error_code ec = reply.error_code();
    // As deliver(): a demoted master fails the command as a lost connection.
    const bool demoted = target_->demoted_by(reply);
    if (demoted) ec = errc::connection_lost;
    ran_cleanly([&] { done(ec, std::move(reply)); });
    return demoted ? Hangup::demoted : Hangup::none;
}

void Connection::hang_up(std::uint64_t generation, Hangup why, std::error_code ec) {
    {
        std::lock_guard lock(mutex_);
        if (generation_ != generation || baton_ != Baton::returning) return;
    }
    switch (why) {
        case Hangup::none: return;
        case Hangup::lost: return drop(errc::connection_lost);
        case Hangup::unexpected: return drop(errc::protocol_error);
        case Hangup::demoted:
            target_->unusable(address_);
            return drop(errc::connection_lost);
        case Hangup::over_limit: return drop_over_limit(ec);
    }
}

bool Connection::drive(const std::function<bool()>& done, Clock::time_point deadline) {
    std::error_code ec;
    auto lock = enter(ec);
    if (ec) return false;
    DriveScope* scope = current_scope;
    if (!scope || scope->claimed_.get() != this || state_ != State::ready || baton_ != Baton::parked) return false;
    baton_ = Baton::caller;
    caller_fd_ = std::exchange(loose_fd_, -1);
    const int fd = caller_fd_;
    const auto generation = generation_;
    const auto reader = reader_;
    lock.unlock();

    thread_local std::vector<char> buffer(drive_chunk);
    bool finished = false;
    bool stale = false;
    bool foreign = false;  // the next reply is someone else's: the I/O thread delivers it
    Hangup why = Hangup::none;
    std::error_code reader_error;
    Reply reply;
    try {
        for (;;) {
            // Deliver every reply of ours already read.
            while (!stale && !foreign && why == Hangup::none) {
                {
                    std::lock_guard guard(mutex_);
                    if (generation_ != generation) stale = true;
                    else if (!pending_.empty() && pending_.front().driver != scope->id_) foreign = true;
                }
                if (stale || foreign) break;
                if (!reader->next(reply, reader_error)) {
                    if (reader_error) why = Hangup::over_limit;
                    break;
                }
                why = deliver_own(reply, generation, stale);
            }
            if (done()) {
                finished = true;
                break;
            }
            if (stale || foreign || why != Hangup::none) break;
            if (io_wants_baton_.load(std::memory_order_acquire)) break;
            const auto now = Clock::now();
            if (now >= deadline) break;
            const auto wait = std::min<Clock::duration>(deadline - now, recheck_period);
            const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
            timespec timeout{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
            pollfd p{fd, POLLIN, 0};
            const int ready = ::ppoll(&p, 1, &timeout, nullptr);
            if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
            if (ready < 0) {
                why = Hangup::lost;
                continue;
            }
            const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
            if (n > 0) reader->feed(buffer.data(), static_cast<std::size_t>(n));
            else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
            else why = Hangup::lost;  // the server closed it, or the socket failed
        }
    } catch (const std::bad_alloc&) {
        why = Hangup::over_limit;
        reader_error = std::make_error_code(std::errc::not_enough_memory);
    } catch (...) {
        why = Hangup::lost;
    }

    lock.lock();
    if (generation_ != generation) {
        // The session ended while this thread read it: the end shut the
        // descriptor down and left closing it to this thread.
        ::close(fd);
        return finished;
    }
    caller_fd_ = -1;
    loose_fd_ = fd;
    if (why != Hangup::none) {
        baton_ = Baton::returning;
        asio::post(io_, [self = shared_from_this(), generation, why, reader_error] {
            self->guarded([&] { self->hang_up(generation, why, reader_error); });
        });
    } else if (pending_.empty() && !io_wants_baton_.load(std::memory_order_acquire)) {
        baton_ = Baton::parked;
    } else {
        return_to_io_locked();
    }
    return finished;
}

}  // namespace dlock::detail
