// The hold registry's slot table (src/hold/slot_table.hpp): every key maps
// to its own slot through any mix of inserts and erases, also where probe
// runs collide and wrap around the end of the table, and as it grows and
// shrinks. Checked against std::map over random operations.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>

#include "hold/slot_table.hpp"

namespace {

struct TestSlot {
    TestSlot(std::string owner_, std::string name_) : owner(std::move(owner_)), name(std::move(name_)) {}
    std::string owner, name;
    std::string_view key_owner{owner}, key_name{name};
};

using Table = dlock::detail::SlotTable<TestSlot>;

void expect_same(const Table& table, const std::map<std::pair<std::string, std::string>, TestSlot*>& expected,
                 int names, int owners) {
    ASSERT_EQ(table.size(), expected.size());
    for (int o = 0; o < owners; ++o) {
        for (int n = 0; n < names; ++n) {
            const std::string owner = "owner" + std::to_string(o), name = "name" + std::to_string(n);
            auto* found = table.find({owner, name});
            auto it = expected.find({owner, name});
            if (it == expected.end()) {
                EXPECT_EQ(found, nullptr) << owner << " " << name << " found after its erase";
            } else {
                ASSERT_NE(found, nullptr) << owner << " " << name << " lost";
                EXPECT_EQ(found->get(), it->second) << owner << " " << name << " maps to another slot";
            }
        }
    }
}

}  // namespace

TEST(SlotTable, EveryKeyFindsItsOwnSlotThroughRandomInsertsAndErases) {
    std::mt19937 random(7);
    constexpr int names = 60, owners = 5;
    Table table;
    std::map<std::pair<std::string, std::string>, TestSlot*> expected;
    for (int step = 0; step < 20'000; ++step) {
        const std::string owner = "owner" + std::to_string(random() % owners);
        const std::string name = "name" + std::to_string(random() % names);
        auto* found = table.find({owner, name});
        if (found) {
            table.erase(found);
            expected.erase({owner, name});
        } else {
            auto slot = std::make_shared<TestSlot>(owner, name);
            auto* made = slot.get();
            expected[{owner, name}] = made;
            EXPECT_EQ(table.insert(std::move(slot)).get(), made);
        }
        if (step % 1000 == 0) expect_same(table, expected, names, owners);
    }
    expect_same(table, expected, names, owners);
}

TEST(SlotTable, GrowsToManyKeysAndShrinksBackWithNoneLost) {
    Table table;
    std::map<std::pair<std::string, std::string>, TestSlot*> expected;
    constexpr int names = 5'000;
    for (int n = 0; n < names; ++n) {
        auto slot = std::make_shared<TestSlot>("owner0", "name" + std::to_string(n));
        expected[{"owner0", "name" + std::to_string(n)}] = slot.get();
        table.insert(std::move(slot));
    }
    expect_same(table, expected, names, 1);
    // Erased from the middle outwards, so that runs are cut everywhere.
    for (int n = names / 2, k = 0; k < names - 10; ++k, n = (n + 7919) % names) {
        auto* found = table.find({"owner0", "name" + std::to_string(n)});
        if (!found) continue;
        table.erase(found);
        expected.erase({"owner0", "name" + std::to_string(n)});
    }
    expect_same(table, expected, names, 1);
}
