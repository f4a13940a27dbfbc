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
#include "hold_table.hpp"
#include "masters_core.hpp"

namespace dlock::detail {

class RedlockCore {
public:
    RedlockCore(std::shared_ptr<MastersCore> masters, std::string name, RedlockOptions options);

    std::string current_owner() const;
    std::shared_ptr<Hold> hold_of(const std::string& owner) const { return holds_.find(owner); }
    std::vector<std::shared_ptr<Hold>> all_holds() const { return holds_.all(); }
    std::vector<MasterOutcome> last_outcomes() const;

    // Blocks until held, deadline, stop, or failure (ec set; *failure gets
    // the per-master outcomes of a no_quorum failure).
    bool acquire(std::optional<LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec);
    void release(std::error_code& ec);
    // Drops the owner's grant on every master, without waiting (destructor,
    // lost-hold cleanup).
    void release_everywhere(const std::string& owner, bool wait);

    const std::shared_ptr<MastersCore> masters;
    const std::shared_ptr<const RedlockIdentity> identity;
    const std::chrono::milliseconds retry_delay;

private:
    enum class Outcome { acquired, busy, split, no_quorum };
    struct Attempt {
        Outcome outcome;
        std::chrono::milliseconds pttl{0};  // busy: the shortest lease left among other owners' grants
    };

    Attempt attempt(const std::string& owner, std::error_code& ec);
    // Raises lagging granters' fencing counters to token until a majority
    // stands at it. False when too few confirmed in time.
    bool settle_token(const std::vector<Ballot>& ballots, const std::vector<std::uint64_t>& tokens,
                      std::uint64_t token, LockClock::time_point deadline);
    void record_outcomes(const std::vector<Ballot>& ballots);
    void record_acquired(const std::string& owner, std::uint64_t token, LockClock::time_point sent);
    std::chrono::milliseconds random_retry_delay();

    const std::string object_owner_;  // this object's owner base (see redlock.hpp on reentrancy)
    HoldTable holds_;

    mutable std::mutex outcomes_mutex_;
    std::vector<MasterOutcome> last_outcomes_;
};

}  // namespace dlock::detail
