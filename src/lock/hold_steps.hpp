// The steps a single-server lock kind (Lock, both sides of RwLock) takes
// around one script call and on its confirmed answer: one definition for
// all of them, so that a hold's truth changes the same way whatever kind it
// belongs to.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hold/acquisition_engine.hpp"
#include "hold/hold.hpp"
#include "hold/hold_registry.hpp"
#include "hold/retried_call.hpp"
#include "lock_service.hpp"
#include "script_replies.hpp"

namespace dlock::detail {

// One operation's outcome.
struct ScriptAnswer {
    bool known = false;  // false: the caller walked away (deadline, stop)
    std::error_code ec;
    Reply reply;
    LockClock::time_point sent{};
    std::string operation;  // its operation id, when the caller set one
};

// What a call's caller leaves behind if it walks away: called with the
// outcome when it comes. Made only when the caller walks away (MakeLate).
using Late = std::function<void(std::error_code, const Reply&)>;
using MakeLate = FunctionRef<Late()>;

// Runs script(keys, argv) through RetriedCall until give_up_by; the caller
// waits until wait_until (none: until known) or stop. Walking away hands the
// gate and `late` (called with the outcome when it comes) to the call, which
// the client's close then waits for (service.unattended()).
ScriptAnswer run_retried(LockService& service, const std::shared_ptr<ClientCore>& client, const Script& script, ClientCore::Args keys,
                         ClientCore::Args argv, LockClock::time_point give_up_by,
                         std::optional<LockClock::time_point> wait_until, std::stop_token stop, GateTicket& ticket,
                         MakeLate make_late, RetriedCall::Migration migration = RetriedCall::Migration::within_window);

// A grant confirmed by the server as the owner's new hold, tracked by the
// lease keeper (whatever the owner had before is marked lost). Null when its
// validity was over before the answer came (a paused server): the caller
// gives the grant back.
// `renewal_label`: the holder's label the hold's renewals bring (a Lock's
// direct grant, written by the server without it).
std::shared_ptr<Hold> adopt_grant(LockService& service, std::shared_ptr<const LockIdentity> identity,
                                  std::shared_ptr<const std::string> owner, OwnerSlot& slot, const Grant& grant,
                                  std::string_view renewal_label = {});
inline std::shared_ptr<Hold> adopt_grant(LockService& service, std::shared_ptr<const LockIdentity> identity,
                                         const std::string& owner, OwnerSlot& slot, const Grant& grant) {
    return adopt_grant(service, std::move(identity), std::make_shared<const std::string>(owner), slot, grant);
}

// A fresh acquisition's answer (acquire.lua, rw_*_acquire.lua; known,
// and past the kind's own checks) as the attempt's result: failed (ec, the
// server's text noted; transient or not, outage.hpp), malformed
// (protocol_error), busy until what keeps the caller out may have ended,
// a stale operation (a resent copy: a new attempt may), or granted as
// record(grant) keeps it (false: given back, tried again shortly). `fresh`
// gets what was read (busy: the caller's place in line).
AttemptResult read_attempt(const ScriptAnswer& answer, std::error_code& ec, FreshAcquire& fresh,
                           FunctionRef<bool(const Grant&)> record);

// A re-entry's answer (acquire.lua in mode "reenter") applied to hold:
// reentered; not_held when the server says the hold is not ours any more
// (the hold is lost; the caller acquires afresh) — give_back when the
// server granted but the hold ran out locally meanwhile (undo that
// operation); failed (ec set) when unanswered, refused or malformed.
AcquisitionProtocol::Reentry apply_reentry(LockService& service, const std::shared_ptr<Hold>& hold,
                                           const ScriptAnswer& answer, const std::stop_token& stop,
                                           std::chrono::milliseconds lease, bool& give_back, std::error_code& ec);

// A hold that is final (or missing) when the caller releases: not_owner, or
// lease_lost with one of the lost hold's counts forgotten. False when there
// is a live hold to release.
bool refuse_release_of_final(OwnerSlot& slot, const std::shared_ptr<Hold>& hold, unsigned holds,
                             std::error_code& ec);

// A release's answer applied to hold (`holds` released, final_release when
// that was all of the local count, and begin_final_release() done; `lease`
// the one the request asked for).
void apply_release(LockService& service, OwnerSlot& slot, const std::shared_ptr<Hold>& hold, unsigned holds,
                   bool final_release, std::chrono::milliseconds lease, const ScriptAnswer& answer,
                   std::error_code& ec);

// The owners a lock object made holds for, so that its destructor releases
// exactly what it made (Hold::contribute counts it on each hold).
//
// Owners whose latest hold here has ended are forgotten as the set grows:
// every asynchronous acquisition is an owner of its own, and a long-lived
// lock object must not keep one entry per acquisition it ever made.
class Contributions {
public:
    // Counts one hold of `hold` as made through object.
    void add(const void* object, const std::shared_ptr<Hold>& hold);
    // Notes hold's owner only (a kind that counts no contributions: Redlock).
    void note(const std::shared_ptr<Hold>& hold);
    // The hold leaves object's keeping for an AsyncHold's, which releases it
    // (or drops it) by itself: the object's destructor neither counts nor
    // releases it, so a hold outlives the object it was made through.
    void hand_over(const void* object, const std::shared_ptr<Hold>& hold);
    // An owner, and its latest hold made here (ended or not).
    struct Noted {
        std::shared_ptr<const std::string> owner;  // the hold's own (Hold::owner_name)
        std::weak_ptr<Hold> latest;
    };
    // The owners noted, forgotten here.
    struct Taken {
        Noted first;  // none while its owner is null
        std::vector<Noted> more;
        template <typename Visit>
        void each(Visit&& visit) const {
            if (first.owner) visit(first);
            for (const auto& noted : more) visit(noted);
        }
    };
    Taken take();

private:
    std::mutex mutex_;
    using Entry = Noted;
    // owner -> its latest hold made here. Mostly one owner per object (a
    // lock object per name, used by one thread): kept inline, no
    // allocation. Then a few (one per thread or handle using it): a
    // vector, searched in place, costs one allocation where a hash map
    // costs three. Past
    // indexed_from entries (thousands of shared holds live through one
    // object) an index finds an owner: no search grows with their number.
    static constexpr std::size_t indexed_from = 32;
    Entry first_;  // none while its owner is null
    std::vector<Entry> owners_;  // the others
    std::unordered_map<std::string_view, std::size_t> index_;  // owner (an entry's) -> its position, once indexed
    std::size_t prune_at_ = 64;
    // owners_'s entry for owner, or its end. Under mutex_.
    std::vector<Entry>::iterator find(const std::string& owner);
    // Removes the entry at it, the last one taking its place. Under mutex_.
    void remove(std::vector<Entry>::iterator it);
    // Builds the index when owners_ is long enough for one, drops it when
    // not. Under mutex_.
    void reindex();
};

// For each owner: the holds `object` made and still has on the owner's
// current hold in registry, withdrawn, handed to release(owner, slot, ticket,
// holds) with the owner's gate entered.
void release_contributed(const void* object, const Contributions::Taken& owners, HoldRegistry& registry,
                         const std::string& name,
                         const std::function<void(const std::string&, OwnerSlot&, GateTicket&, unsigned)>& release);

}  // namespace dlock::detail
