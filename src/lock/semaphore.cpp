// The semaphore: permits as holds (hold/hold.hpp) renewed by the client's
// lease keeper, a line of waiters on the server (semaphore_acquire.lua), and
// a ChannelWatch per process that wakes the waiting threads.
#include "dlock/semaphore.hpp"

#include <atomic>

#include "hold/async_hold_state.hpp"

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "hold/acquisition_engine.hpp"
#include "hold/channel_watch.hpp"
#include "hold/hold.hpp"
#include "hold/hold_queries.hpp"
#include "hold/outage.hpp"
#include "hold/retried_call.hpp"
#include "lock_service.hpp"
#include "lock_validation.hpp"
#include "redis/server_error_text.hpp"
#include "semaphore_keys.hpp"
#include "semaphore_replies.hpp"
#include "semaphore_scripts.hpp"

namespace dlock {
namespace detail {
namespace {

LockOptions lease_options(const SemaphoreOptions& options) {
    LockOptions lock;
    lock.lease = options.lease;
    lock.renew = options.renew;
    lock.ownership = Ownership::handle;
    lock.on_lost = options.on_lost;
    lock.on_unlock_error = options.on_release_error;
    lock.retention = options.retention;
    return lock;
}

void validate_limit(unsigned limit) {
    if (limit == 0 || limit > max_semaphore_limit)
        throw Error(errc::invalid_argument,
                    "semaphore limit must be 1 .. " + std::to_string(max_semaphore_limit));
}

}  // namespace

// What every permit of one Semaphore object shares; immutable.
struct SemaphoreIdentity : LockIdentity {
    SemaphoreIdentity(std::string name_, SemaphoreOptions options_, MetricsTag metrics_)
        : LockIdentity(std::move(name_), lease_options(options_), std::move(metrics_)),
          semaphore_keys(name),
          limit(options_.limit),
          set_limit(options_.set_limit),
          waiter_lease(options_.waiter_lease),
          waiter_lease_ms(std::to_string(options_.waiter_lease.count())) {}

    HoldCall renewal(const std::string& permit) const override {
        return {&semaphore_renew_script(), keys_vector(), {permit, lease_ms, retention_ms}};
    }
    HoldCall final_release(const std::string& permit, const std::string&) const override {
        return {&semaphore_release_script(), keys_vector(), {permit, retention_ms, "release"}};
    }
    std::vector<std::string> keys_vector() const {
        return {semaphore_keys.all.begin(), semaphore_keys.all.end()};
    }
    ClientCore::Args keys_args() const { return {views.data(), 6}; }
    ClientCore::Args acquire_keys_args() const { return {views.data(), views.size()}; }

    SemaphoreKeys semaphore_keys;
    std::array<std::string_view, 9> views{semaphore_keys.all[0],         semaphore_keys.all[1],
                                          semaphore_keys.all[2],         semaphore_keys.all[3],
                                          semaphore_keys.all[4],         semaphore_keys.all[5],
                                          semaphore_keys.other_kinds[0], semaphore_keys.other_kinds[1],
                                          semaphore_keys.other_kinds[2]};
    unsigned limit;   // SemaphoreOptions::limit
    bool set_limit;   // SemaphoreOptions::set_limit
    std::chrono::milliseconds waiter_lease;
    std::string waiter_lease_ms;
};

class SemaphoreCore : public std::enable_shared_from_this<SemaphoreCore> {
public:
    SemaphoreCore(std::shared_ptr<ClientCore> client_, std::string name, SemaphoreOptions options)
        : client(std::move(client_)),
          service(LockService::of(*client)),
          identity(make_identity(std::move(name), options, *client)),
          limit_(identity->limit) {}

    static std::shared_ptr<const SemaphoreIdentity> make_identity(std::string name, SemaphoreOptions& options,
                                                                  const ClientCore& client) {
        validate_lock_request(name, options.lease);
        validate_limit(options.limit);
        validate_retention(options.retention);
        if (options.waiter_lease < std::chrono::milliseconds(30) || options.waiter_lease > std::chrono::hours(1))
            throw Error(errc::invalid_argument, "waiter_lease must be 30 ms .. 1 h");
        auto metrics = MetricsTag::of(client.metrics(), LockKind::semaphore, name);
        return std::make_shared<const SemaphoreIdentity>(std::move(name), std::move(options), std::move(metrics));
    }

    // Blocks until k permits are held (the hold), deadline, stop, or failure
    // (ec set). A deadline already past means one attempt, not in line.
    std::shared_ptr<Hold> acquire(unsigned k, std::optional<LockClock::time_point> deadline, std::stop_token stop,
                                  std::error_code& ec);
    void release(const std::shared_ptr<Hold>& hold, std::error_code& ec);
    unsigned set_limit(unsigned limit);

    const std::shared_ptr<ClientCore> client;
    const std::shared_ptr<LockService> service;
    const std::shared_ptr<const SemaphoreIdentity> identity;

private:
    friend class SemaphoreAcquisition;  // how it acquires, driven by the engine
    // The limit this object's requests ask for: SemaphoreOptions::limit,
    // then what its set_limit set (a request with another limit than the
    // server's is refused, errc::limit_mismatch).
    std::atomic<unsigned> limit_;
    // One acquire request for `permit`, waited for until wait_until (none:
    // until known) or stop. Walking away leaves the request to be given up
    // when its outcome comes.
    struct Asked {
        bool known = false;  // false: walked away
        Reply reply;
        LockClock::time_point sent{};
    };
    Asked ask(const std::string& permit, std::string_view k_text, std::string_view mode,
              std::optional<LockClock::time_point> wait_until, std::stop_token stop, std::error_code& ec);
    // A grant confirmed by a request sent at `sent`: a tracked hold, or null
    // (given back) when its lease may be over already.
    std::shared_ptr<Hold> take(const std::string& permit, unsigned k, LockClock::time_point sent);

    std::string new_permit_id(unsigned k) const {
        return service->id() + ":s" + service->next_operation_id() + "#" + std::to_string(k);
    }
    LockClock::time_point retry_window_end() const {
        const auto& options = client->options();
        return LockClock::now() + options.connect_timeout + options.command_timeout;
    }
    // Gives up request `permit` on the server without waiting: a grant goes
    // back, a place in line is left, and a late copy never grants.
    void undo(const std::string& permit) {
        std::string_view argv[] = {permit, identity->retention_ms, "undo"};
        service->unattended().send(client, semaphore_release_script(), identity->keys_args(), argv,
                                   retry_window_end());
    }
};

SemaphoreCore::Asked SemaphoreCore::ask(const std::string& permit, std::string_view k_text, std::string_view mode,
                                        std::optional<LockClock::time_point> wait_until, std::stop_token stop,
                                        std::error_code& ec) {
    // The limit this object last set (set_limit), else its option's.
    const auto limit_text = std::to_string(limit_.load(std::memory_order_relaxed));
    std::string_view argv[] = {permit,
                               k_text,
                               identity->lease_ms,
                               limit_text,
                               mode,
                               identity->waiter_lease_ms,
                               identity->retention_ms,
                               identity->set_limit ? "set" : ""};
    auto call = RetriedCall::start(client, semaphore_acquire_script(), identity->acquire_keys_args(), argv,
                                   retry_window_end(),
                                   RetriedCall::Send::evalsha, RetriedCall::Migration::while_awaited);
    Asked asked;
    asked.sent = call->first_sent();
    // The handler may outlive the Semaphore object: it keeps this core.
    asked.known = call->wait(wait_until, stop, ec, asked.reply,
                             [self = shared_from_this(), permit](std::error_code, Reply&&) { self->undo(permit); });
    return asked;
}

std::shared_ptr<Hold> SemaphoreCore::take(const std::string& permit, unsigned k, LockClock::time_point sent) {
    if (LockClock::now() >= valid_until(sent, identity->options.lease)) {
        // Granted after so long (a paused server, a slow network) that its
        // lease may be over: not a permit anyone may trust. Give it back.
        undo(permit);
        return nullptr;
    }
    auto hold = std::make_shared<Hold>(identity, permit, Grant{0, k, sent, sent});
    service->keeper().track(hold, sent);
    return hold;
}

// One acquisition of k permits, as the engine (hold/acquisition_engine.hpp)
// drives it: every waiting thread asks the server itself, under a permit id
// of its own, and a ChannelWatch wakes it.
class SemaphoreAcquisition final : public AcquisitionProtocol {
public:
    SemaphoreAcquisition(SemaphoreCore& core, unsigned k) : core_(core), k_(k), k_text_(std::to_string(k)) {}

    const MetricsTag& metrics() const override { return core_.identity->metrics; }
    std::error_code usable() const override { return core_.client->usable(); }
    ClosingGate& closing() override { return core_.service->closing(); }
    const ClientOptions& client_options() const override { return core_.client->options(); }
    std::chrono::milliseconds answer_time() const override { return core_.client->options().command_timeout; }
    const std::string& name() const override { return core_.identity->name; }
    bool prepare(AcquisitionCall&, std::error_code&) override {
        if (k_ == 0) throw Error(errc::invalid_argument, "acquire of 0 permits");
        // Over the limit is the server's to say (its limit wins over this
        // object's, and set_limit may have raised it); over any limit is ours.
        if (k_ > max_semaphore_limit)
            throw Error(errc::invalid_argument, "acquire of " + k_text_ + " permits, over any limit (" +
                                                    std::to_string(max_semaphore_limit) + ")");
        permit_ = core_.new_permit_id(k_);
        return true;
    }

    AttemptResult attempt(AcquisitionCall& call, bool, std::optional<LockClock::time_point> wait_until,
                          std::error_code& ec) override {
        const auto asked = core_.ask(permit_, k_text_, call.single_attempt ? "try" : "wait", wait_until, call.stop, ec);
        if (!asked.known) return AttemptResult::walked_away();
        if (ec) {
            // It may be in line already: the same request again after an
            // outage, or given up when the call ends.
            if (outcome_unknown(ec)) armed_ = true;
            if (ec == errc::wrong_type)
                throw Error(ec, "a key of semaphore " + core_.identity->name + " (" +
                                    core_.identity->semaphore_keys.permits + "*) holds data that is not a dlock semaphore");
            note_server_error(ec, asked.reply);
            return AttemptResult::failed(transient_failure(ec, asked.reply));
        }
        const auto answer = read_semaphore_acquire(asked.reply);
        switch (answer.kind) {
            case SemaphoreAcquire::Kind::malformed:
                armed_ = true;
                ec = errc::protocol_error;
                return AttemptResult::failed();
            case SemaphoreAcquire::Kind::over_limit:
                throw Error(errc::invalid_argument, "acquire of " + k_text_ + " permits, over semaphore " +
                                                        core_.identity->name + "'s limit of " +
                                                        std::to_string(answer.limit));
            case SemaphoreAcquire::Kind::stale:
                // This id was given up or expired without our knowing (an
                // answer lost in transit): ask again under a new one.
                permit_ = core_.new_permit_id(k_);
                armed_ = false;
                return AttemptResult::again();
            case SemaphoreAcquire::Kind::granted:
                armed_ = false;
                if ((hold_ = core_.take(permit_, k_, asked.sent))) return AttemptResult::granted();
                permit_ = core_.new_permit_id(k_);  // given back: ask again under a new id
                return AttemptResult::again();
            case SemaphoreAcquire::Kind::not_granted: break;
        }
        if (!call.single_attempt) armed_ = true;  // in line on the server from here
        // Sleep until called (our permits are free and we are first in line),
        // until the limit changes, until the next lease or place on the
        // server runs out, or until our place is due for its refresh.
        const auto refresh = std::max(core_.identity->waiter_lease / 3, std::chrono::milliseconds(1));
        return AttemptResult::busy(std::min<std::chrono::milliseconds>(answer.wake + std::chrono::milliseconds(1), refresh));
    }

    std::uint64_t generation() override { return watch_ ? watch_->generation() : 0; }
    void wait_change(std::uint64_t seen, LockClock::time_point wake_at, const std::stop_token& stop) override {
        if (watch_) watch_->wait_change(permit_, seen, wake_at, stop);
        else pause_until(wake_at, stop);
    }
    Listening listen(AcquisitionCall& call, LockClock::time_point until) override {
        const auto& channel = core_.identity->semaphore_keys.channel();
        watch_ = core_.service->watches().watch(channel, core_.service->id() + ":");
        (void)watch_->ensure_subscribed(*core_.client, channel, until, call.stop);
        return {true, true};
    }
    // Leaving the line (deadline, stop, failure) gives the request up on the server.
    void give_up() noexcept override {
        if (!armed_) return;
        try {
            core_.undo(permit_);
        } catch (...) {
            // Unsent (out of memory): the place ends waiter_lease after its last refresh.
        }
    }

    const std::shared_ptr<Hold>& hold() const { return hold_; }

private:
    SemaphoreCore& core_;
    const unsigned k_;
    const std::string k_text_;
    std::string permit_;
    bool armed_ = false;  // the request may stand on the server: give it up when the call ends without it
    std::shared_ptr<ChannelWatch> watch_;
    std::shared_ptr<Hold> hold_;
};

std::shared_ptr<Hold> SemaphoreCore::acquire(unsigned k, std::optional<LockClock::time_point> deadline,
                                             std::stop_token stop, std::error_code& ec) {
    SemaphoreAcquisition acquisition(*this, k);
    return acquire_with(acquisition, deadline, std::move(stop), ec) ? acquisition.hold() : nullptr;
}

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
