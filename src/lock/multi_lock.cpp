// MultiLock: one dlock::Lock per distinct name, taken in canonical order.
// Everything about a single name (acquire, renew, release, waiting, loss,
// retries) is the Lock's own machinery; this file only orders, rolls back
// and combines.
#include "dlock/multi_lock.hpp"

#include "hold/async_hold_state.hpp"

#include <algorithm>
#include <utility>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "lock_core.hpp"
#include "public_surface.hpp"
#include "hold/acquisition_engine.hpp"
#include "redis/client_core.hpp"
#include "redis/server_error_text.hpp"

namespace dlock {
namespace detail {
namespace {

std::vector<std::string> canonical(std::vector<std::string> names) {
    if (names.empty()) throw Error(errc::invalid_argument, "multi-lock: no names");
    for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i].empty())
            throw Error(errc::invalid_argument, "multi-lock: name " + std::to_string(i + 1) + " of " +
                                                    std::to_string(names.size()) + " is empty");
    // Bytewise, as std::string compares: the same order in every process.
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

// How one name is asked for.
struct Request {
    std::optional<std::chrono::steady_clock::time_point> deadline;  // none: no limit
    bool single_attempt = false;
    std::stop_token stop;
};

}  // namespace

class MultiLockCore {
public:
    MultiLockCore(Client& client, std::vector<std::string> names, const LockOptions& options)
        : client_(client.core()),
          service_(LockService::of(*client_)),
          names_(canonical(std::move(names))),
          options_(options) {
        locks_.reserve(names_.size());
        for (const auto& name : names_) locks_.emplace_back(client, name, options);
        // After the names passed the checks (each Lock's).
        if (!names_.empty()) metrics_ = MetricsTag::of(client.core()->metrics(), LockKind::multi_lock, names_.front());
    }

    const std::shared_ptr<ClientCore>& client_core() const noexcept { return client_; }

    ~MultiLockCore() {
        // Reverse order, as unlock() does; each Lock gives back what it made.
        while (!locks_.empty()) locks_.pop_back();
        watchers_.clear();
    }

    // What went wrong with one name; the Lock's own exception when it threw.
    struct Failure {
        std::error_code ec;
        std::size_t index = 0;
        std::exception_ptr thrown;
    };

    // The multi-lock's own acquisition, as one (its names' calls are counted
    // as theirs too, kind lock), driven by the engine (MultiAcquisition).
    bool acquire(const Request& request, Failure& failure);

    void release(std::error_code& ec) noexcept {
        ec.clear();
        std::error_code first, lost;
        for (std::size_t i = locks_.size(); i-- > 0;) {
            std::error_code one;
            locks_[i].unlock(one);
            if (!one) continue;
            report_unlock_error(names_[i], one);
            if (one == errc::lease_lost) lost = one;
            else first = one;  // walking backwards: ends on the first in canonical order
        }
        ec = lost ? lost : first;
        forget_watcher_if_free();
    }

    void release_reporting() noexcept {
        std::error_code ignored;
        release(ignored);
    }

    bool is_held() const {
        // Only a multi-hold made through this object, and not lost.
        const auto lost = lost_token();
        if (!lost.stop_possible() || lost.stop_requested()) return false;
        return std::all_of(locks_.begin(), locks_.end(), [](const Lock& lock) { return lock.is_held(); });
    }

    unsigned hold_count() const {
        unsigned count = ~0u;
        for (const auto& lock : locks_) count = std::min(count, lock.hold_count());
        return count;
    }

    std::vector<std::pair<std::string, std::uint64_t>> fencing_tokens() const {
        std::vector<std::pair<std::string, std::uint64_t>> tokens;
        tokens.reserve(locks_.size());
        for (std::size_t i = 0; i < locks_.size(); ++i) tokens.emplace_back(names_[i], locks_[i].fencing_token());
        return tokens;
    }

    std::uint64_t fencing_token(std::string_view name) const {
        auto at = std::lower_bound(names_.begin(), names_.end(), name);
        if (at == names_.end() || *at != name) return 0;
        return locks_[static_cast<std::size_t>(at - names_.begin())].fencing_token();
    }

    std::stop_token lost_token() const {
        std::lock_guard guard(mutex_);
        auto it = watchers_.find(owner_key());
        return it == watchers_.end() ? std::stop_token{} : it->second->source.get_token();
    }

    std::optional<LostReason> lost_reason() const {
        for (const auto& lock : locks_)
            if (auto reason = lock.lost_reason()) return reason;
        return std::nullopt;
    }

    std::chrono::steady_clock::time_point valid_until() const {
        if (!is_held()) return {};
        auto earliest = std::chrono::steady_clock::time_point::max();
        for (const auto& lock : locks_) earliest = std::min(earliest, lock.valid_until());
        return earliest;
    }

    const std::vector<std::string>& names() const noexcept { return names_; }

private:
    friend class MultiAcquisition;

    // Tells the multi-hold's token when any name's own lost token is
    // requested. Made per owner, for the name holds of one acquisition.
    struct Watcher {
        struct Relay {
            std::stop_source source;
            void operator()() const noexcept { source.request_stop(); }
        };
        std::stop_source source;
        std::vector<std::stop_token> watched;  // each name's lost token, canonical order
        std::vector<std::unique_ptr<std::stop_callback<Relay>>> relays;
    };

    std::string owner_key() const {
        // Under Ownership::handle this object is the one owner; an
        // asynchronous operation (OwnerScope) is always its own.
        if (options_.ownership == Ownership::handle && !OwnerScope::active()) return {};
        return OwnerIds::with_thread({});
    }

    static bool out_of_time(const Request& request) {
        return (request.deadline && std::chrono::steady_clock::now() >= *request.deadline) ||
               request.stop.stop_requested();
    }

    // Gives back the first `taken` names, newest first. A call with a
    // deadline waits for the answers only until then (or a moment after,
    // when it has passed already: a healthy server answers well within it);
    // a release not answered by then goes on without the caller, who holds
    // nothing of it from then on; if it never lands, the lease ends it.
    // Other failures go to on_unlock_error.
    void roll_back(std::size_t taken, const Request& request) noexcept {
        constexpr auto grace = std::chrono::milliseconds(20);
        std::optional<std::chrono::steady_clock::time_point> until;
        if (request.deadline || request.single_attempt || request.stop.stop_requested())
            until = std::max(request.deadline.value_or(std::chrono::steady_clock::time_point::min()),
                             std::chrono::steady_clock::now() + grace);
        while (taken > 0) {
            --taken;
            std::error_code ec;
            try {
                if (locks_[taken].core_) locks_[taken].core_->release(ec, until);
            } catch (...) {
                ec = std::make_error_code(std::errc::not_enough_memory);
            }
            if (ec && ec != errc::command_timeout && ec != errc::lease_lost) report_unlock_error(names_[taken], ec);
        }
    }

    bool acquire_one(Lock& lock, const Request& request, Failure& failure) noexcept {
        try {
            if (request.single_attempt) return lock.try_lock(failure.ec);
            if (request.deadline && !request.stop.stop_possible())
                return lock.try_lock_until(*request.deadline, failure.ec);
            return request.deadline ? lock.try_lock_until(*request.deadline, request.stop) : lock.lock(request.stop);
        } catch (const Error& e) {
            failure.ec = e.code();
            failure.thrown = std::current_exception();
        } catch (...) {
            failure.ec = std::make_error_code(std::errc::not_enough_memory);
        }
        return false;
    }

    // After every name is held: the multi-hold's lost token watches the
    // name holds as they are now. A re-entry keeps the watcher; a new hold
    // of any name (a first acquisition, or one after a loss) gets a new one.
    void watch_losses() {
        std::vector<std::stop_token> now;
        now.reserve(locks_.size());
        for (const auto& lock : locks_) now.push_back(lock.lost_token());
        std::unique_ptr<Watcher> replaced;
        std::lock_guard guard(mutex_);
        auto& slot = watchers_[owner_key()];
        if (slot && !slot->source.stop_requested() && slot->watched == now) return;
        auto watcher = std::make_unique<Watcher>();
        watcher->watched = std::move(now);
        for (const auto& token : watcher->watched)
            // Runs at once when that name is already lost.
            watcher->relays.push_back(
                std::make_unique<std::stop_callback<Watcher::Relay>>(token, Watcher::Relay{watcher->source}));
        replaced = std::exchange(slot, std::move(watcher));
        // `replaced` dies after the guard: a relay running on the I/O thread
        // is waited for by its destructor, and must not wait for our mutex.
    }

    void forget_watcher_if_free() {
        const bool free = std::all_of(locks_.begin(), locks_.end(),
                                      [](const Lock& lock) { return lock.hold_count() == 0; });
        if (!free) return;
        std::unique_ptr<Watcher> gone;
        std::lock_guard guard(mutex_);
        if (auto it = watchers_.find(owner_key()); it != watchers_.end()) {
            gone = std::move(it->second);
            watchers_.erase(it);
        }
    }

    void report_unlock_error(const std::string& name, std::error_code ec) const noexcept {
        if (!options_.on_unlock_error) return;
        try {
            options_.on_unlock_error(name, ec);
        } catch (...) {
            // unlock() never throws, whatever the callback does.
        }
    }

    const std::shared_ptr<ClientCore> client_;
    const std::shared_ptr<LockService> service_;
    const std::vector<std::string> names_;
    const LockOptions options_;
    MetricsTag metrics_;  // labelled by the first name
    std::vector<Lock> locks_;  // one per name, canonical order
    mutable std::mutex mutex_;
    std::map<std::string, std::unique_ptr<Watcher>> watchers_;  // by owner_key()
};

// One acquisition of every name, as the engine (hold/acquisition_engine.hpp)
// drives it: the attempt takes each name's Lock in canonical order (each
// waits, rides outages and gives up by its own protocol), all or nothing.
class MultiAcquisition final : public AcquisitionProtocol {
public:
    MultiAcquisition(MultiLockCore& core, const Request& request, MultiLockCore::Failure& failure)
        : core_(core), request_(request), failure_(failure) {}

    const MetricsTag& metrics() const override { return core_.metrics_; }
    std::error_code usable() const override { return core_.client_->usable(); }
    ClosingGate& closing() override { return core_.service_->closing(); }
    const ClientOptions& client_options() const override { return core_.client_->options(); }
    std::chrono::milliseconds answer_time() const override { return core_.client_->options().command_timeout; }
    const std::string& name() const override { return core_.names_.front(); }

    AttemptResult attempt(AcquisitionCall&, bool, std::optional<LockClock::time_point>, std::error_code&) override {
        auto& locks = core_.locks_;
        failure_ = {};
        std::size_t taken = 0;
        for (; taken < locks.size(); ++taken) {
            // The one deadline: once it passed between two names, the call is over.
            if (taken > 0 && !request_.single_attempt && MultiLockCore::out_of_time(request_)) break;
            failure_.index = taken;
            if (!core_.acquire_one(locks[taken], request_, failure_)) break;
        }
        if (taken < locks.size()) {
            // All or nothing: give back what this call took, newest first.
            // Its releases must not wipe the failing name's server text.
            const auto server_text = last_server_error();
            core_.roll_back(taken, request_);
            restore_server_error(server_text);
            return AttemptResult::failed();
        }
        // A name lost while the call waited for a later one is not held:
        // give everything back and, time permitting, start over.
        const auto lost = std::find_if(locks.begin(), locks.end(), [](const Lock& l) { return !l.is_held(); });
        if (lost != locks.end()) {
            failure_.index = static_cast<std::size_t>(lost - locks.begin());
            core_.roll_back(taken, request_);
            return AttemptResult::again();
        }
        try {
            core_.watch_losses();
            return AttemptResult::granted();
        } catch (...) {
            // Out of memory: the call fails, so it must not keep the names.
            core_.roll_back(taken, request_);
            throw;
        }
    }

private:
    MultiLockCore& core_;
    const Request& request_;
    MultiLockCore::Failure& failure_;
};

bool MultiLockCore::acquire(const Request& request, Failure& failure) {
    MultiAcquisition acquisition(*this, request, failure);
    // try_lock() has no deadline: one attempt.
    const auto deadline = request.single_attempt ? std::optional(LockClock::time_point::min()) : request.deadline;
    return acquire_with(acquisition, deadline, request.stop, failure.ec);
}

}  // namespace detail

namespace {

struct MultiLockAccess {
    using Core = detail::MultiLockCore;
    static constexpr const char* kind = "dlock::MultiLock";
    detail::MultiLockCore::Failure failure;
    bool acquire(Core& core, std::optional<detail::LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec) {
        // A deadline already passed at the call: one attempt at each name.
        const bool single = deadline && *deadline <= detail::LockClock::now();
        const bool acquired = core.acquire({.deadline = deadline, .single_attempt = single, .stop = std::move(stop)}, failure);
        ec = failure.ec;
        return acquired;
    }
    // The failing name's own exception, else its code.
    [[noreturn]] void fail(Core& core, std::error_code ec, std::string_view call) {
        if (failure.thrown) std::rethrow_exception(failure.thrown);
        throw_if(ec, std::string(call) + " " + core.names()[failure.index] + " (multi-lock)");
        throw Error(ec);
    }
    void release(Core& core, std::error_code& ec) { core.release(ec); }
    // Each name's own on_unlock_error has been told (MultiLockCore::release).
    void report(Core&, std::error_code) noexcept {}
};
using MultiLockSurface = detail::PublicSurface<MultiLockAccess>;

}  // namespace

MultiLock::MultiLock(Client& client, std::vector<std::string> names, LockOptions options)
    : core_(std::make_shared<detail::MultiLockCore>(client, std::move(names), options)) {}

MultiLock::MultiLock(MultiLock&&) noexcept = default;
MultiLock& MultiLock::operator=(MultiLock&&) noexcept = default;
MultiLock::~MultiLock() = default;

void MultiLock::lock() { (void)MultiLockSurface::acquire(core_, {}, std::nullopt, {}, "lock"); }

bool MultiLock::lock(std::stop_token stop) {
    return MultiLockSurface::acquire(core_, {}, std::nullopt, std::move(stop), "lock");
}

bool MultiLock::try_lock() { return acquire_until(std::chrono::steady_clock::time_point::min()); }

bool MultiLock::try_lock(std::error_code& ec) noexcept {
    return try_lock_until(std::chrono::steady_clock::time_point::min(), ec);
}

bool MultiLock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept {
    return MultiLockSurface::acquire(core_, {}, deadline, ec);
}

bool MultiLock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
    return MultiLockSurface::acquire(core_, {}, deadline, std::move(stop), "try_lock");
}

bool MultiLock::acquire_until(std::chrono::steady_clock::time_point deadline) {
    return MultiLockSurface::acquire(core_, {}, deadline, {}, "try_lock");
}

void MultiLock::unlock() noexcept { MultiLockSurface::release_reported(core_, {}); }

void MultiLock::unlock(std::error_code& ec) noexcept { MultiLockSurface::release(core_, {}, ec); }

bool MultiLock::is_held() const { return core_ && core_->is_held(); }

unsigned MultiLock::hold_count() const { return core_ ? core_->hold_count() : 0; }

std::vector<std::pair<std::string, std::uint64_t>> MultiLock::fencing_tokens() const {
    return core_ ? core_->fencing_tokens() : std::vector<std::pair<std::string, std::uint64_t>>{};
}

std::uint64_t MultiLock::fencing_token(std::string_view name) const {
    return core_ ? core_->fencing_token(name) : 0;
}

std::stop_token MultiLock::lost_token() const { return core_ ? core_->lost_token() : std::stop_token{}; }

std::optional<LostReason> MultiLock::lost_reason() const { return core_ ? core_->lost_reason() : std::nullopt; }

std::chrono::steady_clock::time_point MultiLock::valid_until() const {
    return core_ ? core_->valid_until() : std::chrono::steady_clock::time_point{};
}

const std::vector<std::string>& MultiLock::names() const noexcept {
    static const std::vector<std::string> moved_from;
    return core_ ? core_->names() : moved_from;
}

}  // namespace dlock

namespace dlock::detail {
namespace {

// An asynchronous acquisition's multi-lock hold (dlock/async.hpp). Its
// queries run as its owner (AsyncHold sets the OwnerScope).
class MultiLockAsyncState final : public AsyncHoldState {
public:
    MultiLockAsyncState(std::shared_ptr<MultiLockCore> core, std::shared_ptr<ClientCore> client, std::uint64_t owner_number)
        : AsyncHoldState(std::move(client), owner_number, core->names().front()), core_(std::move(core)) {}
    void release(std::error_code& ec) noexcept override { core_->release(ec); }
    bool is_held() const override { return core_->is_held(); }
    std::vector<std::pair<std::string, std::uint64_t>> fencing_tokens() const override { return core_->fencing_tokens(); }
    std::chrono::steady_clock::time_point valid_until() const override { return core_->valid_until(); }
    std::stop_token lost_token() const override { return core_->lost_token(); }
    std::optional<LostReason> lost_reason() const override { return core_->lost_reason(); }
    void report_release_error(std::error_code) noexcept override {}  // each name's own on_unlock_error heard it

private:
    const std::shared_ptr<MultiLockCore> core_;
};

}  // namespace

}  // namespace dlock::detail

namespace dlock::async_entry {

using namespace dlock::detail;

void start_acquire(MultiLock& lock, std::optional<std::chrono::steady_clock::time_point> deadline,
                   std::stop_source stop, AcquireCompletion done) {
    auto core = AsyncAccess::core(lock);
    if (!core) return done(errc::invalid_argument, AsyncHold());
    auto client = core->client_core();
    run_acquisition(
        client, deadline, std::move(stop),
        [core, client](std::uint64_t owner_number, std::optional<LockClock::time_point> until, std::stop_token stop,
                       std::error_code& ec) -> std::shared_ptr<AsyncHoldState> {
            MultiLockCore::Failure failure;
            const bool single = until && *until <= LockClock::now();
            if (!core->acquire(Request{.deadline = until, .single_attempt = single, .stop = stop}, failure)) {
                if (failure.thrown) std::rethrow_exception(failure.thrown);
                ec = failure.ec;
                return nullptr;
            }
            return std::make_shared<MultiLockAsyncState>(core, client, owner_number);
        },
        std::move(done));
}

}  // namespace dlock::async_entry
