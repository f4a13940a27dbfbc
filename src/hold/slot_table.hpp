// The hold registry's (name, owner) -> slot table: open addressing with
// linear probing over a vector of slot pointers, each slot carrying its own
// key (OwnerSlot::key_owner, key_name). A slot made for a new name costs
// its own allocation and nothing else: a node-based hash map costs one
// more per entry, and a lock object is made per name in a loop.
//
// At most half full; grows by doubling, shrinks by half once an eighth full
// (never below its first size). An erase moves later entries of the same
// probe run back (no tombstones), so a lookup stops at the first empty
// place. Not thread-safe: HoldRegistry guards it with its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::detail {

template <typename Slot>
class SlotTable {
public:
    struct Key {
        std::string_view owner, name;
        bool operator==(const Key&) const = default;
    };

    // The slot with this key, or null.
    const std::shared_ptr<Slot>* find(const Key& key) const {
        if (places_.empty()) return nullptr;
        for (std::size_t i = home(key);; i = next(i)) {
            const auto& place = places_[i];
            if (!place) return nullptr;
            if (key_of(*place) == key) return &place;
        }
    }
    // Adds a slot whose key is not in the table yet.
    const std::shared_ptr<Slot>& insert(std::shared_ptr<Slot> slot) {
        if ((used_ + 1) * 2 > places_.size()) rebuild(places_.empty() ? first_size : places_.size() * 2);
        ++used_;
        return put(std::move(slot));
    }
    // Removes the slot found at `at` (a find() result).
    void erase(const std::shared_ptr<Slot>* at) {
        std::size_t hole = static_cast<std::size_t>(at - places_.data());
        places_[hole].reset();
        --used_;
        // Each later entry of the run moves into the hole unless its home
        // lies cyclically in (hole, here]: then a lookup from its home
        // still reaches it without crossing the hole.
        for (std::size_t here = next(hole); places_[here]; here = next(here)) {
            const std::size_t from = home(key_of(*places_[here]));
            const bool reachable = hole < here ? (from > hole && from <= here) : (from > hole || from <= here);
            if (reachable) continue;
            places_[hole] = std::move(places_[here]);
            hole = here;
        }
        if (places_.size() > first_size && used_ * 8 < places_.size()) rebuild(places_.size() / 2);
    }
    std::size_t size() const noexcept { return used_; }

    static std::size_t hash(const Key& key) noexcept {
        // FNV-1a over the owner, a separator, then the name.
        std::uint64_t h = 14695981039346656037ull;
        auto mix = [&h](std::string_view bytes) {
            for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
        };
        mix(key.owner);
        mix("\n");
        mix(key.name);
        return static_cast<std::size_t>(h ^ (h >> 29));
    }

private:
    static constexpr std::size_t first_size = 16;  // a power of two, as every size

    static Key key_of(const Slot& slot) noexcept { return {slot.key_owner, slot.key_name}; }
    std::size_t home(const Key& key) const noexcept { return hash(key) & (places_.size() - 1); }
    std::size_t next(std::size_t i) const noexcept { return (i + 1) & (places_.size() - 1); }
    const std::shared_ptr<Slot>& put(std::shared_ptr<Slot> slot) {
        std::size_t i = home(key_of(*slot));
        while (places_[i]) i = next(i);
        places_[i] = std::move(slot);
        return places_[i];
    }
    void rebuild(std::size_t size) {
        auto old = std::exchange(places_, std::vector<std::shared_ptr<Slot>>(size));
        for (auto& slot : old)
            if (slot) put(std::move(slot));
    }

    std::vector<std::shared_ptr<Slot>> places_;
    std::size_t used_ = 0;
};

}  // namespace dlock::detail
