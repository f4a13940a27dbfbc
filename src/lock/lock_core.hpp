// The state behind one dlock::Lock: its identity, and the holds made through
// it, by owner.
#pragma once

#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hold.hpp"
#include "hold_table.hpp"
#include "lock_service.hpp"

namespace dlock::detail {

class LockCore {
public:
    LockCore(std::shared_ptr<ClientCore> client, std::string name, LockOptions options);

    std::string current_owner() const;
    std::shared_ptr<Hold> hold_of(const std::string& owner) const { return holds_.find(owner); }
    std::vector<std::shared_ptr<Hold>> all_holds() const { return holds_.all(); }

    // Blocks until held, deadline, stop, or failure (ec set).
    bool acquire(std::optional<LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec);
    void release(std::error_code& ec);
    // Drops every hold of hold->owner at once (destructor, lost-hold cleanup).
    void release_all_of(const std::shared_ptr<Hold>& hold) noexcept;

    const std::shared_ptr<ClientCore> client;
    const std::shared_ptr<LockService> service;
    const std::shared_ptr<const LockIdentity> identity;

private:
    enum class Outcome { acquired, busy, failed };
    struct Attempt {
        Outcome outcome;
        std::chrono::milliseconds pttl{0};
    };

    Attempt attempt(const std::string& owner, std::error_code& ec);
    void record_acquired(const std::string& owner, std::uint64_t token, unsigned count, LockClock::time_point sent,
                         LockClock::time_point slice_start);
    void forget(const std::shared_ptr<Hold>& hold) { holds_.erase(hold); }
    // At the final release: hands the lock to this process's sleeping queue
    // head instead of releasing it (name_queue.hpp). False when there is no
    // one to hand it to, or it is not ours any more; true when handled (ec
    // set if the hand-off's outcome stayed unknown).
    bool hand_off(const std::shared_ptr<Hold>& hold, const std::string& owner, std::error_code& ec);
    // EVAL with the same operation id until the answer is known: a dropped
    // connection may have eaten a reply of a call that did run. A call that
    // was never sent fails at once.
    Reply eval_retrying(const Script& script, std::initializer_list<std::string_view> keys,
                        std::initializer_list<std::string_view> argv, std::error_code& ec);
    // Releases one hold of owner, or every hold (a fresh operation id, errors
    // ignored: the lease ends it anyway). Waits for the answer when asked.
    void release_owner(const std::string& owner, bool every_hold, bool wait) noexcept;

    const std::string handle_owner_;  // Ownership::handle only
    HoldTable holds_;
};

}  // namespace dlock::detail
