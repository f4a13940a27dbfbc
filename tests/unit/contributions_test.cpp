// The owners a lock object made holds for (src/lock/hold_steps.hpp): owners
// whose holds have ended are forgotten as the set grows, so a long-lived
// lock object used by many asynchronous acquisitions (each its own owner)
// keeps only the live ones.
#include <gtest/gtest.h>

#include <algorithm>

#include "hold/hold.hpp"
#include "lock/hold_steps.hpp"

using dlock::detail::Contributions;
using dlock::detail::Grant;
using dlock::detail::Hold;
using dlock::detail::LockIdentity;

TEST(Contributions, OwnersWhoseHoldsEndedAreForgottenAsTheSetGrows) {
    auto identity = std::make_shared<const LockIdentity>("name", dlock::LockOptions{});
    Contributions contributions;
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<Hold>> live;
    for (int i = 0; i < 10'000; ++i) {
        auto hold = std::make_shared<Hold>(identity, "owner" + std::to_string(i), Grant{1, 1, now, now});
        contributions.add(&contributions, hold);
        if (i % 1000 == 0) live.push_back(hold);  // still held
        else hold->lose(dlock::LostReason::taken_over);  // ended (or simply let go)
    }
    const auto owners = contributions.take();
    EXPECT_LT(owners.size(), 200u);  // the live ones, and what came since the last walk
    for (const auto& hold : live) EXPECT_EQ(std::count(owners.begin(), owners.end(), hold->owner), 1) << hold->owner;
}
