#include "dlock/rw_lock.hpp"

#include "hold/async_hold_state.hpp"

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "hold/hold_queries.hpp"
#include "hold/acquisition_engine.hpp"
#include "hold/outage.hpp"
#include "metrics/acquisition_meter.hpp"
#include "lock_scripts.hpp"
#include "lock_validation.hpp"
#include "redis/server_error_text.hpp"
#include "public_surface.hpp"
#include "rw_lock_core.hpp"
#include "script_replies.hpp"

namespace dlock {
namespace detail {
namespace {

LockOptions side_options(const std::string& name, const RwLockOptions& options);

// One side's identity; its name label is taken once the options passed the checks.
template <typename Identity>
std::shared_ptr<const Identity> side_identity(const std::string& name, const RwLockOptions& options,
                                              const ClientCore& client, LockKind kind) {
    auto side = side_options(name, options);
    return std::make_shared<const Identity>(name, std::move(side), MetricsTag::of(client.metrics(), kind, name));
}

LockOptions side_options(const std::string& name, const RwLockOptions& options) {
    validate_lock_request(name, options.lease);
    validate_retention(options.retention);
    return {.lease = options.lease,
            .renew = options.renew,
            .ownership = options.ownership,
            .on_lost = options.on_lost,
            .on_unlock_error = options.on_unlock_error,
            .handoff_slice = std::chrono::microseconds::zero(),
            .retention = options.retention};
}

}  // namespace

HoldCall ReadIdentity::renewal(const std::string& owner) const {
    return {&rw_read_renew_script(), {std::string(keys.readers()), keys.reader_state(), std::string(keys.fence())}, {owner, lease_ms, retention_ms}};
}

HoldCall ReadIdentity::final_release(const std::string& owner, const std::string& operation, std::string_view) const {
    return {&rw_read_release_script(),
            {std::string(keys.readers()), keys.reader_state(), std::string(keys.fence()), std::string(keys.channel()),
             keys.read_tombstone(owner), keys.lock, keys.waiting_writers()},
            {owner, lease_ms, std::move(operation), "all", retention_ms}};
}

RwLockCore::RwLockCore(std::shared_ptr<ClientCore> client_, std::string name, const RwLockOptions& options)
    : client(std::move(client_)),
      service(LockService::of(*client)),
      write_(side_identity<LockIdentity>(name, options, *client, LockKind::write)),
      read_(side_identity<ReadIdentity>(name, options, *client, LockKind::read)),
      prefer_readers_(options.prefer_readers),
      // Its own queue, apart from a Lock's of the same name (whose hand-offs
      // claim sleeping heads).
      queue_name_("rw\n" + name),
      reader_queue_name_("rw-read\n" + name),
      handle_owner_(options.ownership == Ownership::handle ? service->new_handle_owner() : std::string()),
      name_inbox_(service->name_inbox(write_->keys.lock)) {}

std::string RwLockCore::current_owner() const {
    return write_->options.ownership == Ownership::handle && !OwnerScope::active() ? handle_owner_
                                                                              : service->thread_owner();
}

LockClock::time_point RwLockCore::retry_window_end() const {
    const auto& options = client->options();
    return LockClock::now() + options.connect_timeout + options.command_timeout;
}

HoldCall RwLockCore::acquire_call(RwSide side, const std::string& owner, std::string_view mode,
                                    const std::string& operation) const {
    const auto& keys = write_->keys;
    const auto& id = identity(side);
    if (side == RwSide::write)
        return {&rw_write_acquire_script(),
                {keys.lock, std::string(keys.fence()), keys.tombstone(owner), std::string(keys.readers()),
                 keys.reader_state(), keys.waiting_writers(), std::string(keys.semaphore_permits()),
                 std::string(keys.semaphore_waiters())},
                {owner, id.lease_ms, operation, std::string(mode), id.retention_ms, std::string(OwnerIds::holder_label())}};
    return {&rw_read_acquire_script(),
            {keys.lock, std::string(keys.fence()), std::string(keys.readers()), keys.reader_state(),
             keys.waiting_writers(), keys.read_tombstone(owner), std::string(keys.semaphore_permits()),
             std::string(keys.semaphore_waiters()), std::string(keys.places())},
            {owner, id.lease_ms, operation, std::string(mode), id.retention_ms, prefer_readers_ ? "1" : "0"}};
}

HoldCall RwLockCore::release_call(RwSide side, const std::string& owner, const std::string& operation,
                                    std::string how_many, const std::string& undoing) const {
    const auto& id = identity(side);
    if (side == RwSide::write) return id.release(owner, operation, std::move(how_many), undoing);
    auto call = id.final_release(owner, operation, {});  // the read side's script, keys and arguments
    call.argv[3] = std::move(how_many);
    if (!undoing.empty()) call.argv.push_back(undoing);
    return call;
}

RwLockCore::Answer RwLockCore::run(const HoldCall& call, std::optional<LockClock::time_point> wait_until,
                                   std::stop_token stop, GateTicket& ticket,
                                   std::function<void(std::error_code, const Reply&)> undo_late,
                                   RetriedCall::Migration migration) {
    const HoldCallViews views(call);
    return run_retried(*service, client, *call.script, views.keys, views.argv, retry_window_end(), wait_until, stop, ticket,
                       [&] { return std::move(undo_late); }, migration);
}

void RwLockCore::fire_and_forget(const HoldCall& call) {
    const HoldCallViews views(call);
    service->unattended().send(client, *call.script, views.keys, views.argv, retry_window_end());
}

void RwLockCore::undo(RwSide side, const std::string& owner, const std::string& operation) {
    fire_and_forget(release_call(side, owner, service->next_operation_id(), "1", operation));
}

void RwLockCore::withdraw(const std::string& owner, const std::string& last_attempt) {
    const auto& keys = write_->keys;
    fire_and_forget({&rw_write_withdraw_script(),
                     {keys.waiting_writers(), keys.tombstone(owner), std::string(keys.channel())},
                     {owner, last_attempt, write_->retention_ms}});
}

void RwLockCore::release_holds(RwSide side, const std::string& owner, OwnerSlot& slot, GateTicket& ticket,
                               unsigned holds, std::error_code& ec) {
    auto hold = slot.current();
    if (refuse_release_of_final(slot, hold, holds, ec)) return;
    const bool final_release = holds >= hold->view().count;
    if (final_release && !hold->begin_final_release()) return release_holds(side, owner, slot, ticket, holds, ec);
    // The number of holds, also for the final release: if the server counts
    // more of ours than we do, it keeps them, says so, and its answer wins.
    auto answer = run(release_call(side, owner, service->next_operation_id(), std::to_string(holds)), std::nullopt,
                      {}, ticket, {});
    apply_release(*service, slot, hold, holds, final_release, identity(side).options.lease, answer, ec);
}

void RwLockCore::release(RwSide side, std::error_code& ec) {
    ec.clear();
    clear_server_error();
    const auto owner = current_owner();
    OwnerOperation operation(registry(side), write_->name, owner);
    (void)operation.enter(std::nullopt, {});
    if (const auto hold = operation.slot().current()) hold->withdraw(this);
    release_holds(side, owner, operation.slot(), operation.ticket, 1, ec);
}

void RwLockCore::release_outstanding() noexcept {
    try {
        if (client->usable()) return;  // a closed client released everything already
        const auto owners = contributions_.take();
        // The read side first: a downgraded writer's read hold goes with it.
        for (const auto side : {RwSide::read, RwSide::write})
            release_contributed(this, owners, registry(side), write_->name,
                                [this, side](const std::string& owner, OwnerSlot& slot, GateTicket& ticket,
                                             unsigned holds) {
                                    std::error_code ignored;
                                    release_holds(side, owner, slot, ticket, holds, ignored);
                                });
    } catch (...) {
        // Best effort: the lease ends what is left.
    }
}

}  // namespace detail

namespace {

using detail::RwSide;

struct RwAccess {
    using Core = detail::RwLockCore;
    static constexpr const char* kind = "dlock::RwLock";
    RwSide side;
    bool acquire(Core& core, std::optional<detail::LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec) {
        return core.acquire(side, deadline, std::move(stop), ec);
    }
    [[noreturn]] void fail(Core& core, std::error_code ec, std::string_view call) {
        throw_if(ec, std::string(call) + " " + core.identity(side).name);
        throw Error(ec);
    }
    void release(Core& core, std::error_code& ec) { core.release(side, ec); }
    void report(Core& core, std::error_code ec) noexcept { detail::report_unlock_error(core.identity(side), ec); }
    std::shared_ptr<detail::Hold> own_hold(const Core& core) const { return core.hold_of(side, core.current_owner()); }
};
using RwLockSurface = detail::PublicSurface<RwAccess>;
constexpr RwAccess write_side{RwSide::write}, read_side{RwSide::read};

std::shared_ptr<detail::Hold> callers_side_hold(const std::shared_ptr<detail::RwLockCore>& core, RwSide side) {
    return RwLockSurface::own_hold(core, {side});
}

}  // namespace

RwLock::RwLock(Client& client, std::string name, RwLockOptions options)
    : core_(std::make_shared<detail::RwLockCore>(client.core(), std::move(name), options)) {}

RwLock::RwLock(RwLock&&) noexcept = default;

RwLock& RwLock::operator=(RwLock&& other) noexcept {
    if (this != &other) {
        if (core_) core_->release_outstanding();
        core_ = std::move(other.core_);
    }
    return *this;
}

RwLock::~RwLock() {
    if (core_) core_->release_outstanding();
}

void RwLock::lock() { (void)RwLockSurface::acquire(core_, write_side, std::nullopt, {}, "lock"); }

bool RwLock::lock(std::stop_token stop) {
    return RwLockSurface::acquire(core_, write_side, std::nullopt, std::move(stop), "lock");
}

bool RwLock::try_lock() { return acquire_until(false, std::chrono::steady_clock::time_point::min()); }

bool RwLock::try_lock(std::error_code& ec) noexcept {
    return try_lock_until(std::chrono::steady_clock::time_point::min(), ec);
}

bool RwLock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept {
    return RwLockSurface::acquire(core_, write_side, deadline, ec);
}

bool RwLock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
    return RwLockSurface::acquire(core_, write_side, deadline, std::move(stop), "try_lock");
}

void RwLock::unlock() noexcept { RwLockSurface::release_reported(core_, write_side); }

void RwLock::unlock(std::error_code& ec) noexcept { RwLockSurface::release(core_, write_side, ec); }

void RwLock::lock_shared() { (void)RwLockSurface::acquire(core_, read_side, std::nullopt, {}, "lock_shared"); }

bool RwLock::lock_shared(std::stop_token stop) {
    return RwLockSurface::acquire(core_, read_side, std::nullopt, std::move(stop), "lock_shared");
}

bool RwLock::try_lock_shared() { return acquire_until(true, std::chrono::steady_clock::time_point::min()); }

bool RwLock::try_lock_shared(std::error_code& ec) noexcept {
    return try_lock_shared_until(std::chrono::steady_clock::time_point::min(), ec);
}

bool RwLock::try_lock_shared_until(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept {
    return RwLockSurface::acquire(core_, read_side, deadline, ec);
}

bool RwLock::try_lock_shared_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
    return RwLockSurface::acquire(core_, read_side, deadline, std::move(stop), "try_lock_shared");
}

void RwLock::unlock_shared() noexcept { RwLockSurface::release_reported(core_, read_side); }

void RwLock::unlock_shared(std::error_code& ec) noexcept { RwLockSurface::release(core_, read_side, ec); }

bool RwLock::acquire_until(bool shared, std::chrono::steady_clock::time_point deadline) {
    return RwLockSurface::acquire(core_, shared ? read_side : write_side, deadline, {}, shared ? "try_lock_shared" : "try_lock");
}

bool RwLock::is_held() const { return detail::hold_is_held(callers_side_hold(core_, RwSide::write)); }
unsigned RwLock::hold_count() const { return detail::hold_count_of(callers_side_hold(core_, RwSide::write)); }
std::uint64_t RwLock::fencing_token() const { return detail::fencing_token_of(callers_side_hold(core_, RwSide::write)); }
std::stop_token RwLock::lost_token() const { return detail::lost_token_of(callers_side_hold(core_, RwSide::write)); }
std::chrono::steady_clock::time_point RwLock::valid_until() const {
    return detail::valid_until_of(callers_side_hold(core_, RwSide::write));
}

bool RwLock::is_held_shared() const { return detail::hold_is_held(callers_side_hold(core_, RwSide::read)); }
unsigned RwLock::shared_hold_count() const { return detail::hold_count_of(callers_side_hold(core_, RwSide::read)); }
std::uint64_t RwLock::shared_fencing_token() const { return detail::fencing_token_of(callers_side_hold(core_, RwSide::read)); }
std::stop_token RwLock::shared_lost_token() const { return detail::lost_token_of(callers_side_hold(core_, RwSide::read)); }

std::optional<LostReason> RwLock::lost_reason() const { return detail::loss_of(callers_side_hold(core_, RwSide::write)); }

std::optional<LostReason> RwLock::shared_lost_reason() const {
    return detail::loss_of(callers_side_hold(core_, RwSide::read));
}
std::chrono::steady_clock::time_point RwLock::shared_valid_until() const {
    return detail::valid_until_of(callers_side_hold(core_, RwSide::read));
}

const std::string& RwLock::name() const noexcept {
    static const std::string moved_from;
    return core_ ? core_->identity(RwSide::write).name : moved_from;
}

}  // namespace dlock

namespace dlock::detail {
namespace {

// An asynchronous acquisition's hold of one side of an RwLock (dlock/async.hpp).
class RwLockAsyncState final : public SingleHoldState {
public:
    RwLockAsyncState(std::shared_ptr<RwLockCore> core, RwSide side, std::uint64_t owner_number)
        : SingleHoldState(core->client, owner_number, core->identity(side).name),
          core_(std::move(core)),
          side_(side),
          owner_(core_->current_owner()) {
        // The AsyncHold owns it from here (as OwnedHoldState's).
        if (auto made = hold()) core_->hand_over(made);
    }
    void release(std::error_code& ec) noexcept override { ::dlock::RwLockSurface::release(core_, {side_}, ec); }
    std::shared_ptr<Hold> hold() const override { return core_->hold_of(side_, owner_); }
    void report_release_error(std::error_code ec) noexcept override {
        report_unlock_error(core_->identity(side_), ec);
    }

private:
    const std::shared_ptr<RwLockCore> core_;
    const RwSide side_;
    const std::string owner_;
};

}  // namespace

}  // namespace dlock::detail

namespace dlock::async_entry {

using namespace dlock::detail;

void start_acquire(RwLock& lock, bool shared, std::optional<std::chrono::steady_clock::time_point> deadline,
                   std::stop_source stop, AcquireCompletion done) {
    auto core = AsyncAccess::core(lock);
    if (!core) return done(errc::invalid_argument, AsyncHold());
    const auto side = shared ? RwSide::read : RwSide::write;
    run_acquisition(
        core->client, deadline, std::move(stop),
        [core, side](std::uint64_t owner_number, std::optional<LockClock::time_point> until, std::stop_token stop,
                     std::error_code& ec) -> std::shared_ptr<AsyncHoldState> {
            if (!core->acquire(side, until, stop, ec)) return nullptr;
            return std::make_shared<RwLockAsyncState>(core, side, owner_number);
        },
        std::move(done));
}

}  // namespace dlock::async_entry
