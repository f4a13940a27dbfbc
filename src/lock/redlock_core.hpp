// The state behind one dlock::Redlock: identity, owner naming, and the holds
// made through it. Re-entry and all but the last release are counted here,
// without a round trip; the masters see one grant per owner.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/redlock.hpp"
#include "fan_out.hpp"
#include <unordered_set>

#include "hold/acquisition_engine.hpp"
#include "hold_steps.hpp"
#include "masters_core.hpp"

namespace dlock::detail {

class RedlockCore {
public:
    RedlockCore(std::shared_ptr<MastersCore> masters, std::string name, RedlockOptions options);

    std::string current_owner() const;
    std::shared_ptr<Hold> hold_of(const std::string& owner) const {
        return masters->runtime.holds().current(identity->name, owner);
    }
    std::vector<MasterOutcome> last_outcomes() const;

    // Blocks until held, deadline, stop, or failure (ec set; *failure gets
    // the per-master outcomes of a no_quorum failure).
    bool acquire(std::optional<LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec);
    void release(std::error_code& ec);
    // Drops the owner's grant on every master (destructor, lost-hold
    // cleanup, a failed attempt).
    void release_everywhere(const std::string& owner, bool wait);
    // Releases the holds this object made (destructor, move-assignment).
    void release_outstanding() noexcept;
    // An asynchronous acquisition's hold leaves this object's keeping for
    // its AsyncHold's (Contributions::hand_over).
    void hand_over(const std::shared_ptr<Hold>& hold) { owners_.hand_over(this, hold); }

    const std::shared_ptr<MastersCore> masters;
    const std::shared_ptr<const RedlockIdentity> identity;
    const std::chrono::milliseconds retry_delay;

private:
    friend class RedlockAcquisition;  // how it acquires (redlock_vote.cpp), driven by the engine

    // One vote of every master: granted; busy (held by another: the
    // shortest lease left among its grants; a split vote: a random pause);
    // failed (no_quorum, transient; or ec).
    AttemptResult attempt(const std::string& owner, OwnerSlot& slot, std::optional<LockClock::time_point> deadline,
                    std::error_code& ec);
    // Raises every granter's fencing counter that is below token to it, and
    // waits until a majority stands at it. False when too few confirmed in time.
    bool settle_token(const std::vector<Ballot>& ballots, const std::vector<std::uint64_t>& tokens,
                      std::uint64_t token, LockClock::time_point deadline);
    void record_outcomes(const std::vector<Ballot>& ballots);
    void raise_late_granters(const std::shared_ptr<FanOut>& fan, std::uint64_t token,
                             const std::vector<Ballot>& counted);
    void record_acquired(const std::string& owner, OwnerSlot& slot, std::uint64_t token, LockClock::time_point sent);
    void release_final(const std::shared_ptr<Hold>& hold, OwnerSlot& slot, std::error_code& ec);
    std::chrono::milliseconds random_retry_delay();

    const std::string object_owner_;  // this object's owner base (see redlock.hpp on reentrancy)
    // Every owner this object acquired for: one per thread that locked it
    // (Ownership::thread), so that the destructor, on whichever thread,
    // releases them all. The owner names the object: no other object's
    // holds are among them.
    Contributions owners_;  // noted only: its holds are all this object's

    mutable std::mutex outcomes_mutex_;
    std::vector<MasterOutcome> last_outcomes_;
};

}  // namespace dlock::detail
