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
    return {&rw_read_renew_script(), {keys.readers(), keys.reader_state(), keys.fence()}, {owner, lease_ms, retention_ms}};
}

HoldCall ReadIdentity::final_release(const std::string& owner, const std::string& operation) const {
    return {&rw_read_release_script(),
            {keys.readers(), keys.reader_state(), keys.fence(), keys.channel(), keys.read_tombstone(owner), keys.lock},
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
                {keys.lock, keys.fence(), keys.tombstone(owner), keys.readers(), keys.reader_state(),
                 keys.waiting_writers(), keys.semaphore_permits(), keys.semaphore_waiters()},
                {owner, id.lease_ms, operation, std::string(mode), id.retention_ms, OwnerIds::holder_label()}};
    return {&rw_read_acquire_script(),
            {keys.lock, keys.fence(), keys.readers(), keys.reader_state(), keys.waiting_writers(),
             keys.read_tombstone(owner), keys.semaphore_permits(), keys.semaphore_waiters(), keys.places()},
            {owner, id.lease_ms, operation, std::string(mode), id.retention_ms, prefer_readers_ ? "1" : "0"}};
}

HoldCall RwLockCore::release_call(RwSide side, const std::string& owner, const std::string& operation,
                                    std::string how_many, const std::string& undoing) const {
    const auto& id = identity(side);
    if (side == RwSide::write) return id.release(owner, operation, std::move(how_many), undoing);
    auto call = id.final_release(owner, operation);  // the read side's script, keys and arguments
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
                       std::move(undo_late), migration);
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
                     {keys.waiting_writers(), keys.tombstone(owner), keys.channel()},
                     {owner, last_attempt, write_->retention_ms}});
}

RwLockCore::Answer RwLockCore::send_acquire(RwSide side, const std::string& owner, std::string_view mode,
                                            GateTicket& ticket, std::optional<LockClock::time_point> wait_until,
                                            std::stop_token stop) {
    const auto operation = service->next_operation_id();
    // Granted after the caller gave up, or its outcome never learnt: nobody
    // will use it. The handler may run after the RwLock is gone.
    auto undo_unused = [self = shared_from_this(), side, owner, operation](std::error_code ec, const Reply& reply) {
        if (outcome_unknown(ec) || (!ec && is_grant(reply))) self->undo(side, owner, operation);
    };
    auto answer = run(acquire_call(side, owner, mode, operation), wait_until, stop, ticket, undo_unused,
                      RetriedCall::Migration::while_awaited);
    answer.operation = operation;
    if (answer.known && outcome_unknown(answer.ec)) undo(side, owner, operation);
    return answer;
}

bool RwLockCore::record_grant(RwSide side, const std::string& owner, OwnerSlot& slot, const Grant& grant,
                              const std::string& operation) {
    auto hold = adopt_grant(*service, identity_ptr(side), owner, slot, grant);
    if (!hold) {
        undo(side, owner, operation);  // its lease may be over already: give it back
        return false;
    }
    contributions_.add(this, hold);
    return true;
}

AcquisitionProtocol::Reentry RwLockCore::reenter(RwSide side, const std::shared_ptr<Hold>& hold,
                                                 const std::string& owner, GateTicket& ticket,
                                                 std::optional<LockClock::time_point> wait_until, std::stop_token stop,
                                                 std::error_code& ec) {
    const auto answer = send_acquire(side, owner, "reenter", ticket, wait_until, stop);
    bool give_back = false;
    const auto verdict = apply_reentry(*service, hold, answer, stop, identity(side).options.lease, give_back, ec);
    if (verdict == AcquisitionProtocol::Reentry::reentered) contributions_.add(this, hold);
    if (give_back) undo(side, owner, answer.operation);
    return verdict;
}

AttemptResult RwLockCore::attempt(RwSide side, std::string_view mode, const std::string& owner, OwnerSlot& slot,
                                  GateTicket& ticket, std::optional<LockClock::time_point> wait_until,
                                  std::stop_token stop, std::error_code& ec, std::string& operation) {
    auto answer = send_acquire(side, owner, mode, ticket, wait_until, stop);
    operation = answer.operation;
    if (!answer.known) return AttemptResult::walked_away();
    if (answer.ec == errc::wrong_type)
        throw Error(answer.ec, "a key of read-write lock " + write_->keys.lock + " holds data that is not a dlock lock");
    FreshAcquire fresh;
    return read_attempt(answer, ec, fresh, [&](const Grant& grant) {
        return record_grant(side, owner, slot, grant, answer.operation);
    });
}

// One acquisition of one side, as the engine (hold/acquisition_engine.hpp) drives it.
class RwAcquisition final : public AcquisitionProtocol {
public:
    RwAcquisition(RwLockCore& core, RwSide side) : core_(core), side_(side) {}

    const MetricsTag& metrics() const override { return core_.identity(side_).metrics; }
    std::error_code usable() const override { return core_.client->usable(); }
    ClosingGate& closing() override { return core_.service->closing(); }
    const ClientOptions& client_options() const override { return core_.client->options(); }
    std::chrono::milliseconds answer_time() const override { return core_.client->options().command_timeout; }
    bool prepare(AcquisitionCall& call, std::error_code& ec) override {
        owner_ = &call.owner;
        const bool own_write = hold_is_held(core_.hold_of(RwSide::write, call.owner));
        if (side_ == RwSide::write && !own_write && hold_is_held(core_.hold_of(RwSide::read, call.owner))) {
            // An upgrade: two readers waiting to upgrade would wait for each
            // other for ever, so it is one attempt that fails fast (waiting
            // for its answer never past the caller's deadline).
            if (!call.deadline) {
                ec = std::make_error_code(std::errc::resource_deadlock_would_occur);
                return false;
            }
            call.single_attempt = true;
            call.meter.single_attempt();
        }
        // The writer taking the read side (a downgrade) never waits for anyone.
        downgrade_ = side_ == RwSide::read && own_write;
        // A writer marks itself waiting only from the head of this process's
        // queue: marked behind a local reader, it would hold back the very
        // reader it waits for. A single attempt never marks.
        marks_ = side_ == RwSide::write && !call.single_attempt;
        return true;
    }
    HoldRegistry* holds() override { return &core_.registry(side_); }
    const std::string& name() const override { return core_.write_->name; }
    std::string owner() const override { return core_.current_owner(); }
    Reentry reenter(AcquisitionCall& call, const std::shared_ptr<Hold>& hold, std::error_code& ec) override {
        // Re-entry never queues (also not behind a waiting writer: that
        // writer waits for us).
        return core_.reenter(side_, hold, call.owner, *call.ticket, call.wait_until(), call.stop, ec);
    }
    QueueRegistry* queues() override { return core_.service.get(); }
    // Readers first: this process's readers queue apart from its writers,
    // so that a waiting writer of ours does not hold them back either.
    const std::string& queue_name() const override {
        return side_ == RwSide::read && core_.prefer_readers_ ? core_.reader_queue_name_ : core_.queue_name_;
    }
    bool jump_queue(const AcquisitionCall&) const override { return downgrade_; }

    AttemptResult attempt(AcquisitionCall& call, bool in_line, std::optional<LockClock::time_point> wait_until,
                          std::error_code& ec) override {
        const std::string_view mode = side_ == RwSide::read ? "fresh" : in_line ? "wait" : "try";
        auto result = core_.attempt(side_, mode, call.owner, *call.slot, *call.ticket, wait_until, call.stop, ec,
                                    last_operation_);
        // A waiting writer's mark lasts a lease: it tries again (which
        // refreshes the mark) at least every lease/3.
        if (result.kind == AttemptResult::Kind::busy && side_ == RwSide::write)
            result.sleep = std::min<std::chrono::milliseconds>(result.sleep, renew_interval(core_.write_->options.lease));
        return result;
    }
    Listening listen(AcquisitionCall& call, LockClock::time_point until) override {
        return {signal_->ensure_subscribed({&core_.client, 1}, 1, core_.write_->keys.channel(), until, call.stop),
                true};
    }
    // Not granted: the mark (if any attempt made one) goes, so that the
    // readers behind it go now, not when it runs out.
    void give_up() noexcept override {
        if (!marks_ || last_operation_.empty()) return;
        try {
            core_.withdraw(*owner_, last_operation_);
        } catch (...) {
            // Unsent (out of memory): the mark runs out within a lease.
        }
    }

private:
    RwLockCore& core_;
    const RwSide side_;
    const std::string* owner_ = nullptr;
    bool downgrade_ = false;
    bool marks_ = false;
    std::string last_operation_;
};

bool RwLockCore::acquire(RwSide side, std::optional<LockClock::time_point> deadline, std::stop_token stop,
                         std::error_code& ec) {
    RwAcquisition acquisition(*this, side);
    return acquire_with(acquisition, deadline, std::move(stop), ec);
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

detail::RwLockCore& checked(const std::shared_ptr<detail::RwLockCore>& core) {
    if (!core) throw Error(errc::invalid_argument, "use of a moved-from dlock::RwLock");
    return *core;
}

std::shared_ptr<detail::Hold> own_hold(const std::shared_ptr<detail::RwLockCore>& core, RwSide side) {
    return core ? core->hold_of(side, core->current_owner()) : nullptr;
}

bool acquire_throwing(detail::RwLockCore& core, RwSide side, std::optional<std::chrono::steady_clock::time_point> deadline,
                      std::stop_token stop, const char* what) {
    std::error_code ec;
    bool acquired = core.acquire(side, deadline, stop, ec);
    throw_if(ec, std::string(what) + " " + core.identity(side).name);
    return acquired;
}

bool acquire_noexcept(const std::shared_ptr<detail::RwLockCore>& core, RwSide side,
                      std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept {
    if (!core) {
        ec = errc::invalid_argument;
        return false;
    }
    try {
        return core->acquire(side, deadline, {}, ec);
    } catch (const Error& e) {
        ec = e.code();
    } catch (...) {
        ec = std::make_error_code(std::errc::not_enough_memory);
    }
    return false;
}

void release_noexcept(const std::shared_ptr<detail::RwLockCore>& core, RwSide side, std::error_code& ec) noexcept {
    if (!core) {
        ec = errc::invalid_argument;
        return;
    }
    try {
        core->release(side, ec);
    } catch (...) {
        ec = std::make_error_code(std::errc::not_enough_memory);
    }
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

void RwLock::lock() { (void)acquire_throwing(checked(core_), RwSide::write, std::nullopt, {}, "lock"); }

bool RwLock::lock(std::stop_token stop) {
    return acquire_throwing(checked(core_), RwSide::write, std::nullopt, stop, "lock");
}

bool RwLock::try_lock() {
    std::error_code ec;
    bool acquired = try_lock(ec);
    throw_if(ec, "try_lock " + name());
    return acquired;
}

bool RwLock::try_lock(std::error_code& ec) noexcept {
    return acquire_noexcept(core_, RwSide::write, std::chrono::steady_clock::time_point::min(), ec);
}

bool RwLock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
    return acquire_throwing(checked(core_), RwSide::write, deadline, stop, "try_lock");
}

void RwLock::unlock() noexcept {
    std::error_code ec;
    unlock(ec);
    if (core_) detail::report_unlock_error(core_->identity(RwSide::write), ec);
}

void RwLock::unlock(std::error_code& ec) noexcept { release_noexcept(core_, RwSide::write, ec); }

void RwLock::lock_shared() { (void)acquire_throwing(checked(core_), RwSide::read, std::nullopt, {}, "lock_shared"); }

bool RwLock::lock_shared(std::stop_token stop) {
    return acquire_throwing(checked(core_), RwSide::read, std::nullopt, stop, "lock_shared");
}

bool RwLock::try_lock_shared() {
    std::error_code ec;
    bool acquired = try_lock_shared(ec);
    throw_if(ec, "try_lock_shared " + name());
    return acquired;
}

bool RwLock::try_lock_shared(std::error_code& ec) noexcept {
    return acquire_noexcept(core_, RwSide::read, std::chrono::steady_clock::time_point::min(), ec);
}

bool RwLock::try_lock_shared_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
    return acquire_throwing(checked(core_), RwSide::read, deadline, stop, "try_lock_shared");
}

void RwLock::unlock_shared() noexcept {
    std::error_code ec;
    unlock_shared(ec);
    if (core_) detail::report_unlock_error(core_->identity(RwSide::read), ec);
}

void RwLock::unlock_shared(std::error_code& ec) noexcept { release_noexcept(core_, RwSide::read, ec); }

bool RwLock::acquire_until(bool shared, std::chrono::steady_clock::time_point deadline) {
    return acquire_throwing(checked(core_), shared ? RwSide::read : RwSide::write, deadline, {},
                            shared ? "try_lock_shared" : "try_lock");
}

bool RwLock::is_held() const { return detail::hold_is_held(own_hold(core_, RwSide::write)); }
unsigned RwLock::hold_count() const { return detail::hold_count_of(own_hold(core_, RwSide::write)); }
std::uint64_t RwLock::fencing_token() const { return detail::fencing_token_of(own_hold(core_, RwSide::write)); }
std::stop_token RwLock::lost_token() const { return detail::lost_token_of(own_hold(core_, RwSide::write)); }
std::chrono::steady_clock::time_point RwLock::valid_until() const {
    return detail::valid_until_of(own_hold(core_, RwSide::write));
}

bool RwLock::is_held_shared() const { return detail::hold_is_held(own_hold(core_, RwSide::read)); }
unsigned RwLock::shared_hold_count() const { return detail::hold_count_of(own_hold(core_, RwSide::read)); }
std::uint64_t RwLock::shared_fencing_token() const { return detail::fencing_token_of(own_hold(core_, RwSide::read)); }
std::stop_token RwLock::shared_lost_token() const { return detail::lost_token_of(own_hold(core_, RwSide::read)); }

std::optional<LostReason> RwLock::lost_reason() const { return detail::loss_of(own_hold(core_, RwSide::write)); }

std::optional<LostReason> RwLock::shared_lost_reason() const {
    return detail::loss_of(own_hold(core_, RwSide::read));
}
std::chrono::steady_clock::time_point RwLock::shared_valid_until() const {
    return detail::valid_until_of(own_hold(core_, RwSide::read));
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
    void release(std::error_code& ec) noexcept override { ::dlock::release_noexcept(core_, side_, ec); }
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
