// The owners a lock object made holds for (src/lock/hold_steps.hpp): owners
// whose holds have ended are forgotten as the set grows, so a long-lived
// lock object used by many asynchronous acquisitions (each its own owner)
// keeps only the live ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "hold/hold.hpp"
#include "lock/hold_steps.hpp"

using dlock::detail::Contributions;
using dlock::detail::Grant;
using dlock::detail::Hold;
using dlock::detail::LockIdentity;

namespace {

std::vector<std::string> names_of(const Contributions::Taken& taken) {
    std::vector<std::string> names;
    taken.each([&](const Contributions::Noted& noted) { names.push_back(*noted.owner); });
    return names;
}

}  // namespace

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
    const auto owners = names_of(contributions.take());
    EXPECT_LT(owners.size(), 200u);  // the live ones, and what came since the last walk
    for (const auto& hold : live) EXPECT_EQ(std::count(owners.begin(), owners.end(), hold->owner), 1) << hold->owner;
}

// Many live owners through one object (thousands of shared holds): every
// owner is kept once, and finding one does not grow with their number. The
// bound is a liveness bound, far from the indexed cost (a fraction of a
// second here) and far below a search in place (20,000 owners took 21 s,
// and the cost grows with the square: 100,000 would take minutes).
TEST(Contributions, ManyLiveOwnersAreEachKeptOnceWithoutASearchThatGrowsWithThem) {
    auto identity = std::make_shared<const LockIdentity>("name", dlock::LockOptions{});
    Contributions contributions;
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<Hold>> live;
    constexpr int n = 100'000;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
        auto hold = std::make_shared<Hold>(identity, "owner" + std::to_string(i), Grant{1, 1, now, now});
        contributions.add(&contributions, hold);
        contributions.note(hold);  // noted again: one entry still
        live.push_back(hold);
    }
    // Half of them leave for an AsyncHold's keeping: the rest are still found.
    for (int i = 0; i < n; i += 2) contributions.hand_over(&contributions, live[static_cast<std::size_t>(i)]);
    for (int i = 1; i < n; i += 2) contributions.note(live[static_cast<std::size_t>(i)]);
    const auto took = std::chrono::steady_clock::now() - start;
    std::fprintf(stderr, "%d live owners noted twice each, half handed over: %lld ms\n", n,
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
    EXPECT_LT(took, std::chrono::seconds(60));
    auto owners = names_of(contributions.take());
    EXPECT_EQ(owners.size(), std::size_t(n / 2));
    std::sort(owners.begin(), owners.end());
    EXPECT_EQ(std::unique(owners.begin(), owners.end()), owners.end());
    for (const auto& owner : owners) EXPECT_EQ((std::stoi(owner.substr(5)) % 2), 1) << owner;
}

// The first owner is kept apart from the others (no allocation for a lock
// object used by one owner): it is found, replaced, handed over and taken
// as any other, and its place goes to the next new owner.
TEST(Contributions, TheFirstOwnerIsFoundHandedOverAndTakenAsTheOthers) {
    auto identity = std::make_shared<const LockIdentity>("name", dlock::LockOptions{});
    const auto now = std::chrono::steady_clock::now();
    auto hold = [&](const char* owner) { return std::make_shared<Hold>(identity, owner, Grant{1, 1, now, now}); };
    Contributions contributions;
    auto a1 = hold("a"), b = hold("b"), a2 = hold("a"), c = hold("c");
    contributions.add(&contributions, a1);
    contributions.add(&contributions, b);
    contributions.add(&contributions, a2);  // a's latest: one entry for a
    contributions.hand_over(&contributions, a1);  // not a's latest: a stays
    auto names = names_of(contributions.take());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
    EXPECT_TRUE(names_of(contributions.take()).empty());  // taken: forgotten

    contributions.add(&contributions, a2);
    contributions.add(&contributions, b);
    contributions.hand_over(&contributions, a2);  // the first leaves
    contributions.add(&contributions, c);         // and c takes its place
    contributions.note(b);
    names = names_of(contributions.take());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"b", "c"}));
    EXPECT_EQ(a2->contribution_of(&contributions), 0u);  // handed over: its share withdrawn
    EXPECT_EQ(c->contribution_of(&contributions), 1u);
}

// Random notes and hand-overs over up to 200 owners (the first inline, the
// others in a vector, indexed from 32 entries and back below), every hold
// live (nothing pruned), against a plain map: take() names each owner
// whose latest hold was not handed over, once.
TEST(Contributions, RandomNotesAndHandOversAgreeWithAMap) {
    auto identity = std::make_shared<const LockIdentity>("name", dlock::LockOptions{});
    const auto now = std::chrono::steady_clock::now();
    std::mt19937 random(34);
    for (int round = 0; round < 40; ++round) {
        Contributions contributions;
        std::map<std::string, std::shared_ptr<Hold>> model;
        std::vector<std::shared_ptr<Hold>> all;
        const int owners = 1 + static_cast<int>(random() % 200);
        for (int step = 0; step < 3'000; ++step) {
            const auto owner = "o" + std::to_string(random() % owners);
            if (random() % 3 != 0 || !model.count(owner)) {
                std::shared_ptr<Hold> hold;
                if (random() % 2 && model.count(owner)) hold = model[owner];
                else hold = std::make_shared<Hold>(identity, owner, Grant{1, 1, now, now});
                all.push_back(hold);
                contributions.add(&contributions, hold);
                model[owner] = hold;
            } else {
                // Hand over either the latest hold of that owner or an older one.
                std::shared_ptr<Hold> hold = model[owner];
                if (random() % 4 == 0) {
                    for (auto& h : all)
                        if (h->owner == owner) { hold = h; break; }
                }
                contributions.hand_over(&contributions, hold);
                if (model[owner] == hold) model.erase(owner);
            }
        }
        auto names = names_of(contributions.take());
        std::sort(names.begin(), names.end());
        std::vector<std::string> expected;
        for (const auto& [owner, hold] : model) expected.push_back(owner);
        ASSERT_EQ(names, expected) << "round " << round << ", " << owners << " owners";
    }
}
