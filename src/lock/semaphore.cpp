// The semaphore: permits as holds (hold/hold.hpp) renewed by the client's
// lease keeper, a line of waiters on the server (semaphore_acquire.lua), and
// a ChannelWatch per process that wakes the waiting threads.
#include "dlock/semaphore.hpp"

#include <atomic>

#include "hold/async_hold_state.hpp"

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "hold/hold.hpp"
#include "hold/hold_queries.hpp"
#include "hold/retried_call.hpp"
#include "redis/server_error_text.hpp"
#include "semaphore_core.hpp"
#include "semaphore_replies.hpp"

namespace dlock {
namespace detail {

void SemaphoreCore::release(const std::shared_ptr<Hold>& hold, std::error_code& ec) {
    ec.clear();
    clear_server_error();
    if (!hold || hold->lock != identity) {
        ec = errc::not_owner;
        return;
    }
    if (!hold->begin_final_release()) {
        // Released already (or being released by another thread): not_owner.
        // Lost: reported once as lease_lost, then as not_owner.
        const bool lost_unreported = hold->state() == HoldState::lost && hold->view().count > 0;
        if (lost_unreported) hold->forget_lost_holds(hold->view().count);
        ec = lost_unreported ? hold->lost_reason() : make_error_code(errc::not_owner);
        return;
    }
    std::string_view argv[] = {hold->owner, identity->retention_ms, "release"};
    // This thread reads the release's reply itself when it can (the read
    // baton, redis/connection.hpp): no wake-up of the I/O thread.
    DriveScope driving(client->may_drive());
    auto call = RetriedCall::start(client, semaphore_release_script(), identity->keys_args(), argv,
                                   retry_window_end());
    Reply reply;
    (void)call->wait(std::nullopt, {}, ec, reply, {});
    service->keeper().forget(hold);
    const auto released = ec ? SemaphoreRelease::malformed : read_semaphore_release(reply);
    if (ec || released == SemaphoreRelease::malformed) {
        if (!ec) ec = errc::protocol_error;
        note_server_error(ec, reply);
        hold->release_unanswered();  // not renewed any more; its lease ends it
        return;
    }
    if (released == SemaphoreRelease::not_held) {
        mark_lost(hold, LostReason::taken_over, service->io());
        hold->forget_lost_holds(hold->view().count);
        ec = hold->lost_reason();
        return;
    }
    hold->release_answered(0, call->first_sent());
}

unsigned SemaphoreCore::set_limit(unsigned limit) {
    validate_limit(limit);
    const auto limit_text = std::to_string(limit);
    const auto keep_ms = std::to_string(std::max(identity->options.lease, identity->waiter_lease).count() +
                                        identity->options.retention.count());
    std::string_view argv[] = {limit_text, keep_ms};
    std::error_code ec;
    auto reply = client->eval(semaphore_set_limit_script(), identity->keys_args(), argv, ec);
    throw_if(ec, "set_limit " + identity->name + (reply.is_error() ? ": " + reply.text : std::string()));
    const auto previous = read_semaphore_set_limit(reply);
    limit_.store(limit, std::memory_order_relaxed);
    return previous;
}

}  // namespace detail

namespace {

detail::SemaphoreCore& checked(const std::shared_ptr<detail::SemaphoreCore>& core) {
    if (!core) throw Error(errc::invalid_argument, "use of a moved-from dlock::Semaphore");
    return *core;
}

}  // namespace

// Permit

Permit::Permit() noexcept = default;
Permit::Permit(std::shared_ptr<detail::SemaphoreCore> core, std::shared_ptr<detail::Hold> hold) noexcept
    : core_(std::move(core)), hold_(std::move(hold)) {}
Permit::Permit(Permit&& other) noexcept = default;

Permit& Permit::operator=(Permit&& other) noexcept {
    if (this != &other) {
        release_if_held();
        core_ = std::move(other.core_);
        hold_ = std::move(other.hold_);
    }
    return *this;
}

Permit::~Permit() { release_if_held(); }

void Permit::release_if_held() noexcept {
    if (!hold_ || !core_ || hold_->final()) return;
    std::error_code ec;
    release(ec);
    detail::report_unlock_error(*core_->identity, ec);
}

void Permit::release() {
    std::error_code ec;
    release(ec);
    throw_if(ec, "release of a permit of " + (core_ ? core_->identity->name : std::string("no semaphore")));
}

void Permit::release(std::error_code& ec) noexcept {
    if (!core_) {
        ec = errc::not_owner;
        return;
    }
    try {
        core_->release(hold_, ec);
    } catch (...) {
        ec = std::make_error_code(std::errc::not_enough_memory);
    }
}

Permit::operator bool() const noexcept {
    if (!hold_) return false;
    const auto state = hold_->state();
    return state == detail::HoldState::held || (state == detail::HoldState::lost && hold_->view().count > 0);
}

bool Permit::is_held() const { return detail::hold_is_held(hold_); }
unsigned Permit::count() const noexcept { return hold_ ? static_cast<unsigned>(hold_->view().count) : 0; }
const std::string& Permit::id() const noexcept {
    static const std::string none;
    return hold_ ? hold_->owner : none;
}
std::stop_token Permit::lost_token() const { return detail::lost_token_of(hold_); }

std::optional<LostReason> Permit::lost_reason() const { return detail::loss_of(hold_); }
std::chrono::steady_clock::time_point Permit::valid_until() const { return detail::valid_until_of(hold_); }

// Semaphore

Semaphore::Semaphore(Client& client, std::string name, SemaphoreOptions options)
    : core_(std::make_shared<detail::SemaphoreCore>(client.core(), std::move(name), std::move(options))) {}
Semaphore::Semaphore(Semaphore&&) noexcept = default;
Semaphore& Semaphore::operator=(Semaphore&&) noexcept = default;
Semaphore::~Semaphore() = default;

Permit Semaphore::acquire(unsigned k) { return acquire(k, std::stop_token{}); }

Permit Semaphore::acquire(unsigned k, std::stop_token stop) {
    std::error_code ec;
    auto hold = checked(core_).acquire(k, std::nullopt, stop, ec);
    throw_if(ec, "acquire " + name());
    return Permit(core_, std::move(hold));
}

Permit Semaphore::try_acquire(unsigned k) {
    return acquire_until(std::chrono::steady_clock::time_point::min(), k, {});
}

Permit Semaphore::try_acquire(unsigned k, std::error_code& ec) noexcept {
    return try_acquire_until(std::chrono::steady_clock::time_point::min(), k, ec);
}

Permit Semaphore::try_acquire_until(std::chrono::steady_clock::time_point deadline, unsigned k, std::stop_token stop) {
    return acquire_until(deadline, k, std::move(stop));
}

Permit Semaphore::try_acquire_until(std::chrono::steady_clock::time_point deadline, unsigned k,
                                    std::error_code& ec) noexcept {
    try {
        auto hold = checked(core_).acquire(k, deadline, {}, ec);
        return Permit(core_, std::move(hold));
    } catch (const Error& e) {
        ec = e.code();
    } catch (...) {
        ec = std::make_error_code(std::errc::not_enough_memory);
    }
    return {};
}

Permit Semaphore::acquire_until(std::chrono::steady_clock::time_point deadline, unsigned k, std::stop_token stop) {
    std::error_code ec;
    auto hold = checked(core_).acquire(k, deadline, std::move(stop), ec);
    throw_if(ec, "try_acquire " + name());
    return Permit(core_, std::move(hold));
}

void Semaphore::release(Permit& permit) { permit.release(); }
void Semaphore::release(Permit& permit, std::error_code& ec) noexcept { permit.release(ec); }

unsigned Semaphore::set_limit(unsigned limit) { return checked(core_).set_limit(limit); }

const std::string& Semaphore::name() const noexcept {
    static const std::string moved_from;
    return core_ ? core_->identity->name : moved_from;
}

SemaphoreInfo inspect_semaphore(Client& client, std::string_view name) {
    detail::validate_lock_request(std::string(name), min_lease);
    const detail::SemaphoreKeys keys(name);
    std::string_view k[] = {keys.all[0], keys.all[1], keys.all[2], keys.all[3], keys.all[4], keys.all[5]};
    return detail::read_semaphore_inspect(client.eval(detail::semaphore_inspect_script(), k, {}));
}

}  // namespace dlock

namespace dlock::detail {
namespace {

// An asynchronous acquisition's permits (dlock/async.hpp): released as
// Permit::release does.
class SemaphoreAsyncState final : public SingleHoldState {
public:
    SemaphoreAsyncState(std::shared_ptr<SemaphoreCore> core, std::shared_ptr<Hold> hold, std::uint64_t owner_number)
        : SingleHoldState(core->client, owner_number, core->identity->name), core_(std::move(core)), hold_(std::move(hold)) {}
    void release(std::error_code& ec) noexcept override {
        try {
            core_->release(hold_, ec);
        } catch (...) {
            ec = std::make_error_code(std::errc::not_enough_memory);
        }
    }
    std::shared_ptr<Hold> hold() const override { return hold_; }
    // Permits have no fencing token.
    std::vector<std::pair<std::string, std::uint64_t>> fencing_tokens() const override { return {}; }
    void report_release_error(std::error_code ec) noexcept override { report_unlock_error(*core_->identity, ec); }

private:
    const std::shared_ptr<SemaphoreCore> core_;
    const std::shared_ptr<Hold> hold_;
};

}  // namespace

}  // namespace dlock::detail

namespace dlock::async_entry {

using namespace dlock::detail;

void start_acquire(Semaphore& semaphore, unsigned permits,
                   std::optional<std::chrono::steady_clock::time_point> deadline, std::stop_source stop,
                   AcquireCompletion done) {
    auto core = AsyncAccess::core(semaphore);
    if (!core) return done(errc::invalid_argument, AsyncHold());
    run_acquisition(
        core->client, deadline, std::move(stop),
        [core, permits](std::uint64_t owner_number, std::optional<LockClock::time_point> until, std::stop_token stop,
                        std::error_code& ec) -> std::shared_ptr<AsyncHoldState> {
            auto hold = core->acquire(permits, until, stop, ec);
            if (!hold) return nullptr;
            return std::make_shared<SemaphoreAsyncState>(core, std::move(hold), owner_number);
        },
        std::move(done));
}

}  // namespace dlock::async_entry
