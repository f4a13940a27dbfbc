// The holds made through one lock object, by owner. Thread-safe.
//
// Usually one holder at a time: a vector searched by owner is smaller than a
// map and keeps the owner string only once, in the Hold.
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hold.hpp"

namespace dlock::detail {

class HoldTable {
public:
    std::shared_ptr<Hold> find(const std::string& owner) const {
        std::lock_guard lock(mutex_);
        auto it = find_locked(owner);
        return it == holds_.end() ? nullptr : *it;
    }

    std::vector<std::shared_ptr<Hold>> all() const {
        std::lock_guard lock(mutex_);
        return holds_;
    }

    void erase(const std::shared_ptr<Hold>& hold) {
        std::lock_guard lock(mutex_);
        std::erase(holds_, hold);
    }

    // The owner's hold: the existing one when `reuse` and there is one,
    // otherwise a fresh one that replaces it (the replaced hold, if any, is
    // put in `stale`: the caller marks it lost).
    std::shared_ptr<Hold> obtain(const std::shared_ptr<const LockIdentity>& identity, const std::string& owner,
                                 bool reuse, std::shared_ptr<Hold>& stale) {
        std::lock_guard lock(mutex_);
        auto it = find_locked(owner);
        if (it != holds_.end() && reuse) return *it;
        auto hold = std::make_shared<Hold>(identity, owner);
        if (it != holds_.end()) {
            stale = *it;
            holds_[static_cast<std::size_t>(it - holds_.begin())] = hold;
        } else {
            holds_.push_back(hold);
        }
        return hold;
    }

private:
    std::vector<std::shared_ptr<Hold>>::const_iterator find_locked(const std::string& owner) const {
        return std::find_if(holds_.begin(), holds_.end(), [&](const auto& hold) { return hold->owner == owner; });
    }

    mutable std::mutex mutex_;
    std::vector<std::shared_ptr<Hold>> holds_;
};

}  // namespace dlock::detail
