#include "hold/async_hold_state.hpp"

#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>

#include "dlock/error.hpp"
#include "runtime/fiber.hpp"
#include "redis/client_core.hpp"

namespace dlock {
namespace detail {

void AsyncHoldState::add_lost_wait(std::weak_ptr<LostWait> wait) {
    {
        std::lock_guard lock(mutex_);
        if (!lost_waits_ended_) {
            std::erase_if(lost_waits_, [](const std::weak_ptr<LostWait>& w) { return w.expired(); });
            lost_waits_.push_back(std::move(wait));
            return;
        }
    }
    if (auto live = wait.lock()) live->abort();
}

void AsyncHoldState::end_lost_waits() {
    std::vector<std::weak_ptr<LostWait>> waits;
    {
        std::lock_guard lock(mutex_);
        lost_waits_ended_ = true;
        waits.swap(lost_waits_);
    }
    for (auto& wait : waits)
        if (auto live = wait.lock()) live->abort();
}

namespace {

// Runs fn on the client's fiber thread, outside any fiber.
void post_to_fibers(FiberRunner& runner, std::function<void()> fn) { asio::post(runner.io(), std::move(fn)); }

// The runner of the fiber this runs in. A fiber's body reaches its runner
// through it, never owns it: the runner owns the fiber until it ends.
FiberRunner& own_runner() { return Fiber::current()->runner(); }

// Releases state as its owner, in a fiber (inline once the client's fiber
// thread is gone: the release then fails at once, client_closed), then
// done(ec) outside the fiber.
void release_state(const std::shared_ptr<AsyncHoldState>& state, async_entry::PlainCompletion done) {
    auto finish = [state](std::error_code& ec) {
        state->release(ec);
        state->end_lost_waits();
    };
    auto runner = state->client->fiber_runner();
    try {
        if (runner && runner->spawn(
                          [state, finish, done](std::stop_token) {
                              std::error_code ec;
                              finish(ec);
                              post_to_fibers(own_runner(), [done, ec] { done(ec); });
                          },
                          state->owner_number, std::stop_source(std::nostopstate)))
            return;
    } catch (const std::system_error&) {
        // No fiber to be had: released here, on the caller's thread.
    }
    std::error_code ec;
    {
        OwnerScope scope(state->owner_number);
        finish(ec);
    }
    done(ec);
}

// One async_wait_lost. The first of lost, released, cancelled and the
// client's close ends it; the fiber thread then completes it and lets its
// callbacks go (each holds the watch: letting them go breaks that cycle).
// That is posted only once every callback is in place (arm()): an end heard
// while they are being put in place (a hold already lost calls back at once,
// on the starting thread) waits for it. Posted at once, it could let the
// callbacks go on the fiber thread before the last of them were in place,
// and those would then keep the watch, the hold and the fiber thread alive
// for good.
class LostWatch : public AsyncHoldState::LostWait, public std::enable_shared_from_this<LostWatch> {
public:
    LostWatch(std::shared_ptr<FiberRunner> runner, async_entry::PlainCompletion done)
        : runner_(std::move(runner)), done_(std::move(done)), work_(asio::make_work_guard(runner_->io())) {}

    FiberRunner& runner() noexcept { return *runner_; }

    // The hold was released: the wait ends, aborted.
    void abort() override { end(make_error_code(asio::error::operation_aborted)); }

    // Any thread: the first call ends the wait with ec.
    void end(std::error_code ec) {
        {
            std::lock_guard lock(mutex_);
            if (outcome_) return;
            outcome_ = ec;
            if (!armed_) return;  // arm() completes it
        }
        post_completion();
    }

    // The starting thread, once every callback is in place.
    void arm() {
        {
            std::lock_guard lock(mutex_);
            armed_ = true;
            if (!outcome_) return;
        }
        post_completion();
    }

    // The starting thread, before any callback: completes with ec at once.
    void refuse(std::error_code ec) {
        work_.reset();
        done_(ec);
    }

    std::optional<std::stop_callback<std::function<void()>>> lost, cancelled;
    std::uint64_t abort_id = 0;

private:
    // Once, after end() and arm(). The work guard keeps the fiber thread
    // running until this has run, so it is never left in a queue nobody runs.
    void post_completion() {
        post_to_fibers(*runner_, [self = shared_from_this()] {
            self->lost.reset();
            self->cancelled.reset();
            self->runner_->forget_abort(self->abort_id);
            self->done_(*self->outcome_);
            self->work_.reset();
        });
    }

    const std::shared_ptr<FiberRunner> runner_;
    const async_entry::PlainCompletion done_;
    // Keeps the fiber thread running until the wait has completed.
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
    std::mutex mutex_;
    bool armed_ = false;                      // every callback in place
    std::optional<std::error_code> outcome_;  // the first end heard
};

}  // namespace

void run_acquisition(const std::shared_ptr<ClientCore>& client,
                     std::optional<std::chrono::steady_clock::time_point> deadline, std::stop_source stop,
                     AsyncAcquisition acquire, async_entry::AcquireCompletion done) {
    auto runner = client->fiber_runner();
    const auto owner = new_owner_number();
    auto body = [client, deadline, acquire = std::move(acquire), done, owner](std::stop_token token) {
        std::error_code ec;
        std::shared_ptr<AsyncHoldState> state;
        try {
            state = acquire(owner, deadline, token, ec);
        } catch (const Error& e) {
            ec = e.code();
        } catch (...) {
            ec = std::make_error_code(std::errc::not_enough_memory);
        }
        if (state) ec.clear();
        else if (!ec && token.stop_requested())  // the caller's cancellation, or the client's close
            ec = own_runner().shut_down() || client->usable() ? make_error_code(errc::client_closed)
                                                          : make_error_code(asio::error::operation_aborted);
        auto result = std::make_shared<std::pair<std::error_code, AsyncHold>>(ec, AsyncAccess::make(std::move(state)));
        post_to_fibers(own_runner(), [done, result] { done(result->first, std::move(result->second)); });
    };
    std::error_code refused = errc::client_closed;
    try {
        if (runner && runner->spawn(std::move(body), owner, std::move(stop))) return;
    } catch (const std::system_error& e) {
        refused = e.code();  // too many operations at once
    }
    done(refused, AsyncHold());
}

}  // namespace detail

namespace async_entry {

using namespace detail;

void start_release(AsyncHold hold, PlainCompletion done) {
    auto state = AsyncAccess::take(hold);
    if (!state || !state->claim_release()) return done(errc::not_owner);
    release_state(state, std::move(done));
}

void start_wait_lost(const AsyncHold& hold, std::stop_source stop, PlainCompletion done) {
    const auto& state = AsyncAccess::state(hold);
    if (!state || state->released()) return done(make_error_code(asio::error::operation_aborted));
    auto runner = state->client->fiber_runner();
    if (!runner) return done(errc::client_closed);
    auto watch = std::make_shared<LostWatch>(std::move(runner), std::move(done));
    // The runner's list of aborts owns the watch until it completes; the
    // hold's list of lost waits needs not.
    if (!watch->runner().add_abort(watch->abort_id, [watch] { watch->end(errc::client_closed); }))
        return watch->refuse(errc::client_closed);
    state->add_lost_wait(watch);
    std::stop_token lost;
    {
        OwnerScope scope(state->owner_number);  // a multi-lock finds its owner's watcher by it
        lost = state->lost_token();
    }
    // The reason is read on the thread that requested the stop, which set it first.
    watch->lost.emplace(lost, std::function<void()>([watch, state] {
                            std::optional<LostReason> reason;
                            {
                                OwnerScope scope(state->owner_number);
                                reason = state->lost_reason();
                            }
                            watch->end(reason ? make_error_code(*reason) : make_error_code(errc::lease_lost));
                        }));
    watch->cancelled.emplace(stop.get_token(), std::function<void()>([watch] {
                                 watch->end(make_error_code(asio::error::operation_aborted));
                             }));
    watch->arm();
}

}  // namespace async_entry

AsyncHold::AsyncHold() noexcept = default;
AsyncHold::AsyncHold(AsyncHold&&) noexcept = default;

AsyncHold& AsyncHold::operator=(AsyncHold&& other) noexcept {
    if (this != &other) {
        AsyncHold old(std::move(*this));  // released in the background by its destructor
        state_ = std::move(other.state_);
    }
    return *this;
}

AsyncHold::~AsyncHold() {
    if (!state_ || !state_->claim_release()) return;
    try {
        detail::release_state(state_, [state = state_](std::error_code ec) { state->report_release_error(ec); });
    } catch (...) {
        // Out of memory: the lease ends by itself.
    }
}

AsyncHold::operator bool() const noexcept { return state_ && !state_->released(); }

bool AsyncHold::is_held() const {
    if (!*this) return false;
    detail::OwnerScope scope(state_->owner_number);
    return state_->is_held();
}

std::vector<std::pair<std::string, std::uint64_t>> AsyncHold::fencing_tokens() const {
    if (!*this) return {};
    detail::OwnerScope scope(state_->owner_number);
    return state_->fencing_tokens();
}

std::uint64_t AsyncHold::fencing_token() const {
    auto tokens = fencing_tokens();
    return tokens.empty() ? 0 : tokens.front().second;
}

std::chrono::steady_clock::time_point AsyncHold::valid_until() const {
    if (!*this) return {};
    detail::OwnerScope scope(state_->owner_number);
    return state_->valid_until();
}

std::stop_token AsyncHold::lost_token() const {
    if (!*this) return {};
    detail::OwnerScope scope(state_->owner_number);
    return state_->lost_token();
}

std::optional<LostReason> AsyncHold::lost_reason() const {
    if (!*this) return std::nullopt;
    detail::OwnerScope scope(state_->owner_number);
    return state_->lost_reason();
}

const std::string& AsyncHold::name() const noexcept {
    static const std::string none;
    return state_ ? state_->name : none;
}

}  // namespace dlock
