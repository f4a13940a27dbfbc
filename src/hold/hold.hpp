// One owner's hold on one lock: the one state machine that every lock kind
// (Lock, Redlock, and the kinds built on them), the lease keeper and the
// synchronous API drive. Local state changes only on a confirmed server
// answer or on a deadline, and the server's answer wins.
//
// States:
//   held       the server granted it and it has not been given up; count >= 1.
//              Trusted only while now < valid_until.
//   releasing  the final release is on its way: no renewal may follow it.
//   released   final: released by its owner, handed to the next owner, or
//              dropped as the client stopped (and released in bulk).
//   lost       final: the server answered that it is not ours (a renewal,
//              re-entry or release refused; a force-release on the inbox),
//              refused a renewal with an error for good, or valid_until
//              passed before a renewal was confirmed. The LostReason it
//              was lost for stays with it (the holder's on_lost, unlock's
//              error and lost_reason() report it).
// "Acquiring" has no Hold: the acquisition holds its owner's gate
// (hold_registry.hpp) while it is in flight, and a Hold is made only from a
// confirmed grant. A final hold is never revived; the next acquisition makes
// a new one.
//
// Transitions (each under the hold's mutex; there are no others):
//   Hold(grant)                    -> held
//   reentered(count, sent, lease)  held -> held        count from the server
//   renewed(sent)                  held -> held
//   partly_released(count, sent, lease)  held -> held  count from the server
//   recount(count)                 held -> held        re-entry counted locally (Redlock)
//   begin_final_release()          held -> releasing
//   release_answered(left, sent)   releasing -> released (left == 0)
//                                  releasing -> held     (left > 0: the server wins)
//   release_unanswered()           releasing -> released (its lease ends it)
//   lose(LostReason)               held | releasing -> lost
//   drop()                         held -> released
//
// Validity: every confirmed answer that set the lease moves valid_until to
// (send time of that request — the first send, if it was retried) + lease −
// drift, and never back: the scripts only ever lengthen a lease (PEXPIRE GT).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "runtime/decimal_text.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock/script.hpp"
#include "lock_keys.hpp"
#include "metrics/metrics_tag.hpp"
#include "redis/asio.hpp"
#include "validity.hpp"

namespace dlock::detail {

using LockClock = std::chrono::steady_clock;

// A script call that the client's lock service makes for a hold, whatever
// its kind: the keys and arguments are the hold's own.
struct HoldCall {
    const Script* script = nullptr;
    std::vector<std::string> keys;
    std::vector<std::string> argv;
};

// A HoldCall's strings as the views the transport takes; views into the call.
struct HoldCallViews {
    explicit HoldCallViews(const HoldCall& call)
        : keys(call.keys.begin(), call.keys.end()), argv(call.argv.begin(), call.argv.end()) {}
    std::vector<std::string_view> keys, argv;
};

// What every hold made through one lock object shares; immutable. A lock
// kind whose holds the client's lease keeper renews (Lock, both sides of an
// RwLock, Semaphore's permits) says here how its holds are renewed and
// given up; the defaults are the exclusive lock's (lock_service.cpp).
struct LockIdentity {
    LockIdentity(std::string name_, LockOptions options_, MetricsTag metrics_ = {})
        : metrics(std::move(metrics_)),
          name(std::move(name_)),
          keys(name),
          options(std::move(options_)),
          lease_ms(std::to_string(options.lease.count())),
          retention_ms(std::to_string(options.retention.count())),
          waiter_lease_ms(std::to_string(options.waiter_lease.count())) {}
    virtual ~LockIdentity() = default;

    // A renewal of owner's hold: its answer is 1 when extended, 0 when the
    // hold is not owner's any more.
    virtual HoldCall renewal(const std::string& owner) const;
    // A release of all of owner's hold as the client stops (operation: a
    // fresh operation id; grant_arrival: Hold::grant_arrival). Its answer is
    // not read.
    virtual HoldCall final_release(const std::string& owner, const std::string& operation,
                                   std::string_view grant_arrival) const;

    // release.lua's keys and arguments: release `how_many` holds (or "all")
    // of owner as operation; undoing: only if that operation was the last;
    // grant_arrival: Hold::grant_arrival of the hold released. A final
    // release grants the lock to the first waiter in line.
    HoldCall release(const std::string& owner, const std::string& operation, std::string how_many,
                     const std::string& undoing = {}, std::string_view grant_arrival = {}) const;

    MetricsTag metrics;  // where its holds record their end
    std::string name;
    LockKeys keys;
    LockOptions options;
    std::string lease_ms;
    std::string retention_ms;
    std::string waiter_lease_ms;  // a waiter's place in line, and a direct grant's lease
};

// release.lua's keys and arguments for one release (what
// LockIdentity::release makes), as views into the identity and into the
// strings passed in, which must outlive it: the hot path's, without copies.
struct ReleaseViews {
    // owner_tombstone: the owner's tombstone key when the caller keeps it
    // (empty: made here).
    ReleaseViews(const LockIdentity& id, std::string_view owner, std::string_view operation,
                 std::string_view how_many, std::string_view undoing = {}, std::string_view owner_tombstone = {},
                 std::string_view grant_arrival = {})
        : tombstone(owner_tombstone.empty() ? id.keys.tombstone(owner) : std::string()),
          keys{id.keys.lock,
               id.keys.fence(),
               id.keys.channel(),
               owner_tombstone.empty() ? std::string_view(tombstone) : owner_tombstone,
               id.keys.line(),
               id.keys.places()},
          argv{owner, id.lease_ms, operation, how_many, id.retention_ms, undoing, id.waiter_lease_ms, grant_arrival} {}
    ReleaseViews(const ReleaseViews&) = delete;
    ReleaseViews& operator=(const ReleaseViews&) = delete;

    const std::string tombstone;
    const std::array<std::string_view, 6> keys;
    const std::array<std::string_view, 8> argv;
};

// A Redlock's identity: every hold in a Masters' lease keeper has one.
struct RedlockIdentity : LockIdentity {
    RedlockIdentity(std::string name_, LockOptions options_, std::chrono::milliseconds node_timeout_,
                    MetricsTag metrics_ = {})
        : LockIdentity(std::move(name_), std::move(options_), std::move(metrics_)), node_timeout(node_timeout_) {}

    std::chrono::milliseconds node_timeout;  // how long one master may take to answer
};

enum class HoldState { held, releasing, released, lost };

// A confirmed grant: what the server answered, and when the request left.
struct Grant {
    std::uint64_t token = 0;
    unsigned count = 1;
    LockClock::time_point sent{};
    LockClock::time_point slice_start{};  // when this process took the lock from the server (hand-offs)
    // The lease its validity counts from `sent`: zero for the lock's own. A
    // direct grant taken from its notice counts the waiter's waiter_lease
    // from the last request that kept its place.
    std::chrono::milliseconds lease{0};
    // A Lock's direct grant: the arrival number of the wait it was for, which
    // the hold's releases, hand-off and re-entries name (release.lua); 0 for
    // every other grant.
    std::uint64_t arrival = 0;
    std::chrono::milliseconds lease_or(std::chrono::milliseconds own) const { return lease.count() ? lease : own; }
};

class Hold {
public:
    Hold(std::shared_ptr<const LockIdentity> lock_, std::shared_ptr<const std::string> owner_, const Grant& grant);
    Hold(std::shared_ptr<const LockIdentity> lock_, std::string owner_, const Grant& grant)
        : Hold(std::move(lock_), std::make_shared<const std::string>(std::move(owner_)), grant) {}

    const std::shared_ptr<const LockIdentity> lock;
    // The owner's name, shared with whoever else keeps it (the lock
    // object's CallOwner, Contributions): not copied per hold.
    const std::shared_ptr<const std::string> owner_name;
    const std::string& owner;
    // Grant::arrival: what the hold's calls name while the server has its
    // grant from the line unwritten by any of them (the text; empty for 0).
    const DecimalText grant_arrival;

    // A consistent picture, for the queries of the lock objects.
    struct View {
        HoldState state;
        unsigned count;
        std::uint64_t token;
        LockClock::time_point valid_until;
        LockClock::time_point slice_start;
        // The lease valid_until counts from: the lock's own, or a direct
        // grant's waiter_lease until its first renewal (lease_keeper.cpp
        // scales the loss notice's margin to it).
        std::chrono::milliseconds validity_lease;
    };
    View view() const;
    HoldState state() const;
    // held and now < valid_until.
    bool trusted(LockClock::time_point now) const;
    bool final() const;  // released or lost

    // The transitions above. Each returns whether it applied (false: the
    // hold was not in a state it leaves from, e.g. already lost).
    // `lease` is the one the request asked for (another lock object for the
    // same name may ask for another lease than this hold's own).
    bool reentered(unsigned count, LockClock::time_point sent, std::chrono::milliseconds lease);
    bool renewed(LockClock::time_point sent);
    bool partly_released(unsigned count, LockClock::time_point sent, std::chrono::milliseconds lease);
    bool recount(unsigned count);
    bool begin_final_release();
    void release_answered(unsigned left, LockClock::time_point sent);
    void release_unanswered();
    // True when this call made it lost: the caller then tells the holder
    // (notify_lost). A final hold stays as it is.
    bool lose(LostReason reason);
    bool drop();
    // Bookkeeping of a lost hold, not a transition: the caller's unlocks
    // after a loss each take one of its holds away (each reports lease_lost).
    // Returns how many are left.
    unsigned forget_lost_holds(unsigned holds);

    // Which lock objects made how many of this hold's count, so that each
    // object's destructor gives back exactly its own (bookkeeping, not a
    // transition). They live and die with this hold: a hold that ends, or
    // is replaced by a new grant, takes every object's share with it.
    void contribute(const void* object);
    // One hold given back through `object`: its own share first, or, when
    // it has none (one owner's holds are one: another object of the same
    // owner unlocked it), another object's.
    void withdraw(const void* object);
    unsigned contribution_of(const void* object) const;

    // A token that is stop-requested once this hold is lost (at once if it
    // already is; never for a released hold).
    std::stop_token lost_token();
    // Stop-requests the token of a lost hold (notify_lost does it).
    void request_lost_stop();
    // Why it was lost (nothing unless lost), and that as the error code
    // (lease_expired, lock_revoked, ...) unlock and on_lost report; an empty
    // code unless lost.
    std::optional<LostReason> loss() const;
    std::error_code lost_reason() const;

    // The lease keeper's bookkeeping; guarded by the keeper's mutex, not by
    // this hold's.
    struct KeeperEntry {
        std::multimap<LockClock::time_point, std::shared_ptr<Hold>>::iterator at;
        bool scheduled = false;
        bool renewal_in_flight = false;
        LockClock::time_point renewal_sent{};
        std::string renew_command;  // formatted once: it never changes
        // The holder's label its renewals bring (a Lock's direct grant, which
        // the server wrote without it); empty for every other hold.
        std::string renewal_label;
    } keeper;

private:
    void extend_validity_locked(LockClock::time_point sent, std::chrono::milliseconds lease);
    // Released or lost: the hold's time and the live count go to the metrics.
    void ended_locked();

    mutable std::mutex mutex_;
    HoldState state_ = HoldState::held;
    unsigned count_;
    std::uint64_t token_;
    LockClock::time_point valid_until_;
    std::chrono::milliseconds validity_lease_;
    LockClock::time_point slice_start_;
    LockClock::time_point granted_at_{};  // for the metrics; zero when they are off
    std::optional<LostReason> loss_;
    // Object -> holds made through it; a handful of entries at most, and
    // mostly one (a lock object per name): that one kept inline.
    using Contribution = std::pair<const void*, unsigned>;
    Contribution first_contribution_{};  // none while its count is 0
    std::vector<Contribution> more_contributions_;
    // object's share, or null; under mutex_. Self: Hold or const Hold.
    template <typename Self>
    static auto share_of_locked(Self& self, const void* object) -> decltype(&self.first_contribution_);
    // Made on the first lost_token(): most holders never ask, and its state
    // is an allocation per hold.
    std::optional<std::stop_source> lost_source_;
};

// Tells the holder that hold was lost: its lost_token is stop-requested and
// LockOptions::on_lost runs, both on `io`'s thread (the client's I/O thread),
// whichever thread noticed the loss. Call once, after lose() returned true.
void notify_lost(const std::shared_ptr<Hold>& hold, asio::io_context& io);

// lose() and, when that made it lost, notify_lost(): the one way to mark a
// hold lost. The metrics count it by reason too (LossReason: taken_over and
// renewal_refused are both "refused").
void mark_lost(const std::shared_ptr<Hold>& hold, LostReason reason, asio::io_context& io);

}  // namespace dlock::detail
