// The read baton (connection.hpp): a blocking caller reads its own replies
// on its own thread while the connection is out of the I/O thread's reactor.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "connection_internal.hpp"
#include "runtime/thread_kept.hpp"

namespace dlock::detail {
namespace {

thread_local DriveScope* current_scope = nullptr;
std::atomic<std::uint64_t> next_scope_id{1};

// How long a driving caller sleeps in poll() before it looks again at what
// no reply wakes it for: a write the I/O thread waits to do, a stop request.
constexpr auto recheck_period = std::chrono::milliseconds(10);
constexpr std::size_t drive_chunk = 16 * 1024;
struct ReadBufferTag;

}  // namespace

DriveScope::DriveScope(bool active, Reach reach) noexcept {
    if (!active || current_scope) return;  // nested: the outer scope drives
    active_ = true;
    reach_ = reach;
    id_ = next_scope_id.fetch_add(1, std::memory_order_relaxed);
    outer_ = current_scope;
    current_scope = this;
}

DriveScope::~DriveScope() {
    if (!active_) return;
    current_scope = outer_;
    release_claims();
}

DriveScope* DriveScope::current() noexcept { return current_scope; }

void DriveScope::release_claims() noexcept {
    for (std::size_t i = 0; i < claimed_count_; ++i) {
        try {
            claimed_[i]->unclaim();
        } catch (...) {
            // unclaim() only takes a mutex and posts; should the post fail,
            // the tick still finds an overdue command.
        }
        claimed_[i].reset();
    }
    claimed_count_ = 0;
}

bool DriveScope::drive(const std::function<bool()>& done, Clock::time_point deadline) {
    if (!active_ || claimed_count_ == 0) return false;
    return Connection::drive_claimed(*this, done, deadline);
}

std::uint64_t Connection::driver_id() noexcept { return current_scope ? current_scope->id_ : 0; }

bool Connection::claim_locked(DriveScope* scope) {
    if (!scope || !scope->active_) return false;
    for (std::size_t i = 0; i < scope->claimed_count_; ++i) {
        if (scope->claimed_[i].get() != this) continue;
        ++scope->claims_made_;
        return true;
    }
    const std::size_t reach = scope->reach_ == DriveScope::Reach::one ? 1 : DriveScope::max_fan_out;
    if (scope->claimed_count_ >= reach) return false;
    scope->claimed_[scope->claimed_count_++] = shared_from_this();
    ++scope->claims_made_;
    return true;
}

void Connection::return_to_io_locked() {
    baton_ = Baton::returning;
    asio::post(io_, [self = shared_from_this(), generation = generation_] {
        self->guarded([&] { self->resume_io(generation); });
    });
}

bool Connection::left_for_any_reader_locked() const {
    for (const auto& pending : pending_)
        if (pending.driver != any_reader) return false;
    return true;
}

void Connection::unclaim() {
    std::lock_guard lock(mutex_);
    if (state_ == State::ready && baton_ == Baton::parked && !pending_.empty() && !left_for_any_reader_locked())
        return_to_io_locked();
}

bool Connection::take_back_left_replies() {
    std::lock_guard lock(mutex_);
    if (state_ != State::ready || baton_ != Baton::parked || pending_.empty() ||
        pending_.front().driver != any_reader)
        return false;
    return_to_io_locked();
    return true;
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
        hangup_seen_ = false;  // a new session
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
        // A reader (the I/O thread, a caller) sees the close itself, if it
        // reads on: one that stops at its own reply and would park the
        // connection hands it to the I/O thread instead, which reads on to
        // the close (a parked connection's close would otherwise be seen
        // only at the next submission).
        hangup_seen_ = true;
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
        !last_driven_ || hangup_seen_)
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

bool Connection::take_baton(Reading& reading) {
    std::error_code ec;
    auto lock = enter(ec);
    if (ec || state_ != State::ready || baton_ != Baton::parked) return false;
    baton_ = Baton::caller;
    caller_fd_ = std::exchange(loose_fd_, -1);
    reading = Reading{this, caller_fd_, generation_, reader_};
    return true;
}

void Connection::deliver_read(Reading& reading, std::uint64_t scope_id, Reply& reply) {
    try {
        while (!reading.stopped()) {
            {
                std::lock_guard guard(mutex_);
                if (generation_ != reading.generation) reading.stale = true;
                else if (!pending_.empty() && pending_.front().driver != scope_id &&
                         pending_.front().driver != any_reader)
                    reading.foreign = true;
            }
            if (reading.stopped()) break;
            if (!reading.reader->next(reply, reading.reader_error)) {
                if (reading.reader_error) reading.why = Hangup::over_limit;
                break;
            }
            reading.why = deliver_own(reply, reading.generation, reading.stale);
        }
    } catch (const std::bad_alloc&) {
        reading.why = Hangup::over_limit;
        reading.reader_error = std::make_error_code(std::errc::not_enough_memory);
    } catch (...) {
        reading.why = Hangup::lost;
    }
}

void Connection::read_socket(Reading& reading, std::span<char> buffer) {
    const ssize_t n = ::recv(reading.fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) {
        reading.why = Hangup::lost;  // the server closed it, or the socket failed
        return;
    }
    try {
        reading.reader->feed(buffer.data(), static_cast<std::size_t>(n));
    } catch (const std::bad_alloc&) {
        reading.why = Hangup::over_limit;
        reading.reader_error = std::make_error_code(std::errc::not_enough_memory);
    }
}

void Connection::give_baton_back(Reading& reading, std::uint64_t scope_id, bool leave_rest) {
    std::lock_guard lock(mutex_);
    if (generation_ != reading.generation) {
        // The session ended while this thread read it: the end shut the
        // descriptor down and left closing it to this thread.
        ::close(reading.fd);
        return;
    }
    caller_fd_ = -1;
    loose_fd_ = reading.fd;
    // The server's close, seen by the watch while this thread read: the I/O
    // thread reads on to it.
    const bool io_wants = io_wants_baton_.load(std::memory_order_acquire) || hangup_seen_;
    if (reading.why != Hangup::none) {
        baton_ = Baton::returning;
        asio::post(io_, [self = shared_from_this(), generation = reading.generation, why = reading.why,
                         reader_error = reading.reader_error] {
            self->guarded([&] { self->hang_up(generation, why, reader_error); });
        });
        return;
    }
    if (pending_.empty() && !io_wants) {
        baton_ = Baton::parked;
        return;
    }
    if (leave_rest && !io_wants && !reading.foreign) {
        // Only replies to this scope's commands are owed (a reply to anyone
        // else's would have stopped the reading): they wait for whoever
        // reads next, which costs no wake-up of the I/O thread now.
        bool only_ours = true;
        for (const auto& pending : pending_) only_ours &= pending.driver == scope_id || pending.driver == any_reader;
        if (only_ours) {
            for (auto& pending : pending_) pending.driver = any_reader;
            baton_ = Baton::parked;
            return;
        }
    }
    return_to_io_locked();
}

bool Connection::read_until(std::uint64_t scope_id, std::span<Reading> readings, const std::function<bool()>& done,
                            Clock::time_point deadline) {
    std::vector<char> fallback;  // a read made while the thread ends (runtime/thread_kept.hpp)
    auto& buffer = thread_kept_or<ReadBufferTag>(fallback);
    if (buffer.size() < drive_chunk) buffer.resize(drive_chunk);
    std::array<pollfd, DriveScope::max_fan_out> polled{};
    Reply reply;
    for (;;) {
        bool stopped = false;
        bool io_wants = false;
        for (auto& reading : readings) {
            reading.connection->deliver_read(reading, scope_id, reply);
            stopped |= reading.stopped();
            io_wants |= reading.connection->io_wants_baton_.load(std::memory_order_acquire);
        }
        if (done()) return true;
        // What is still owed on a connection this thread stopped reading
        // comes through the I/O thread, which the caller then waits for.
        if (stopped || io_wants) return false;
        const auto now = Clock::now();
        if (now >= deadline) return false;
        const auto wait = std::min<Clock::duration>(deadline - now, recheck_period);
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
        timespec timeout{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
        for (std::size_t i = 0; i < readings.size(); ++i) polled[i] = pollfd{readings[i].fd, POLLIN, 0};
        const int ready = ::ppoll(polled.data(), readings.size(), &timeout, nullptr);
        if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
        if (ready < 0) {
            for (auto& reading : readings) reading.why = Hangup::lost;
            continue;
        }
        for (std::size_t i = 0; i < readings.size(); ++i)
            if (polled[i].revents != 0) readings[i].connection->read_socket(readings[i], buffer);
    }
}

bool Connection::drive_claimed(DriveScope& scope, const std::function<bool()>& done, Clock::time_point deadline) {
    std::array<Reading, DriveScope::max_fan_out> readings;
    std::size_t taken = 0;
    bool every_one = true;
    for (std::size_t i = 0; i < scope.claimed_count_; ++i) {
        if (scope.claimed_[i]->take_baton(readings[taken])) ++taken;
        else every_one = false;
    }
    // A claimed connection the I/O thread reads (it took the baton back:
    // the tick, a hang-up, another thread's submission) would answer
    // without waking this thread: then nobody drives, and the caller waits.
    bool finished = false;
    try {
        if (every_one) finished = read_until(scope.id_, std::span(readings.data(), taken), done, deadline);
    } catch (...) {
        // done() threw: the batons go back below; the caller waits.
    }
    const bool leave_rest = finished && scope.reach_ == DriveScope::Reach::fan_out;
    for (std::size_t i = 0; i < taken; ++i) readings[i].connection->give_baton_back(readings[i], scope.id_, leave_rest);
    return finished;
}

}  // namespace dlock::detail
