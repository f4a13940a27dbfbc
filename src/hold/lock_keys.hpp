// The Redis keys of one lock. All carry the hash tag {<tag>}, the name
// with '%' and '}' percent-encoded (key_tag), so that they live in one
// cluster slot and one script may touch them together, whatever bytes the
// name holds: a raw '}' first in the name would leave the tag empty ("{}"),
// and Redis would hash each whole key instead, to slots of their own.
#pragma once

#include <array>
#include <optional>
#include <utility>
#include <string>
#include <string_view>

namespace dlock::detail {

// The name as it stands between the braces of its keys: '%' becomes "%25"
// and '}' "%7D", nothing else changes (so names without either keep the
// keys they always had). Never empty for a non-empty name, never holds '}'.
inline void append_key_tag(std::string& out, std::string_view name) {
    for (char c : name) {
        if (c == '%') out += "%25";
        else if (c == '}') out += "%7D";
        else out += c;
    }
}
inline std::string key_tag(std::string_view name) {
    std::string tag;
    tag.reserve(name.size());
    append_key_tag(tag, name);
    return tag;
}

// key_tag's inverse; nullopt for text key_tag cannot have made.
inline std::optional<std::string> name_of_tag(std::string_view tag) {
    std::string name;
    name.reserve(tag.size());
    for (std::size_t i = 0; i < tag.size(); ++i) {
        if (tag[i] == '}') return std::nullopt;
        if (tag[i] != '%') {
            name += tag[i];
            continue;
        }
        const auto code = tag.substr(i, 3);
        if (code == "%25") name += '%';
        else if (code == "%7D") name += '}';
        else return std::nullopt;
        i += 2;
    }
    return name;
}

struct LockKeys {
    // The keys every acquisition and release names are made once, here, in
    // two allocations (a lock object is made per name in a loop): the lock
    // key, and one buffer holding every other key name.
    explicit LockKeys(std::string_view name) : lock(key_of("dlock:{", name)) {
        constexpr std::string_view sem_prefix = "dlock:sem:{", waiters = ":waiters";
        // The semaphore keys' tag is the lock key's: "dlock:{<tag>}" without "dlock:{".
        const auto tag = std::string_view(lock).substr(std::string_view("dlock:{").size());
        std::size_t size = 2 * (sem_prefix.size() + tag.size()) + waiters.size();
        for (auto suffix : suffixes) size += lock.size() + suffix.size();
        others_.reserve(size);
        for (std::size_t i = 0; i < suffixes.size(); ++i) place(i, lock, suffixes[i]);
        place(suffixes.size(), sem_prefix, tag);
        const auto sem = at_[suffixes.size()];
        at_[suffixes.size() + 1] = {others_.size(), sem.second + waiters.size()};
        others_.append(others_, sem.first, sem.second).append(waiters);
    }

    // hash {owner, count, seq, token}, PEXPIRE = lease
    std::string lock;
    // hash {token: last fencing token}; expires retention after the lock is
    // free (lease + retention after the last acquisition or renewal).
    std::string_view fence() const { return other(0); }
    // a message on every full release
    std::string_view channel() const { return other(1); }
    // string: the operation id of owner's last final release, so that a
    // retry of it is answered "released" and a late copy of an older
    // operation of that owner is ignored; expires after retention.
    std::string tombstone(std::string_view owner) const { return lock_key_with(":done:", owner); }

    // The line of waiters (prelude.lua, "The line"): sorted set waiter ->
    // arrival number, and sorted set waiter -> server-time (ms) end of its place.
    std::string_view line() const { return other(2); }
    std::string_view places() const { return other(3); }

    // Read-write lock (rw_lock.hpp): the writer is the lock hash above, and
    // the fence, channel and write tombstones are the ones above too.
    // sorted set reader -> server-time deadline (ms)
    std::string_view readers() const { return other(4); }
    // hash {n:<reader> count, s:<reader> last operation id, t:<reader> token}
    std::string reader_state() const { return lock + ":rstate"; }
    // sorted set waiting writer -> server-time deadline (ms) of its mark
    std::string waiting_writers() const { return lock + ":wwait"; }
    // string: as tombstone(), for the owner's read operations
    std::string read_tombstone(std::string_view owner) const { return lock_key_with(":rdone:", owner); }

    // One name is one resource: an acquisition looks whether the name is
    // live as another kind (prelude.lua, kind_error). A semaphore of this
    // name (semaphore_keys.hpp) is live while these hold a live member:
    // its permits, and the place deadlines of its waiters.
    std::string_view semaphore_permits() const { return other(5); }
    std::string_view semaphore_waiters() const { return other(6); }

private:
    static constexpr std::array<std::string_view, 5> suffixes{":fence", ":ch", ":line", ":places", ":readers"};

    // "<prefix><tag>}" in one allocation.
    static std::string key_of(std::string_view prefix, std::string_view name) {
        std::string key;
        key.reserve(prefix.size() + name.size() + 1);
        key.append(prefix);
        append_key_tag(key, name);
        key += '}';
        return key;
    }
    void place(std::size_t i, std::string_view base, std::string_view suffix) {
        at_[i] = {others_.size(), base.size() + suffix.size()};
        others_.append(base).append(suffix);
    }
    // "<lock>:<what>:<owner>" in one allocation.
    std::string lock_key_with(std::string_view what, std::string_view owner) const {
        std::string key;
        key.reserve(lock.size() + what.size() + owner.size());
        key.append(lock).append(what).append(owner);
        return key;
    }
    // Offsets, not views: a copied LockKeys reads its own buffer.
    std::string_view other(std::size_t i) const { return std::string_view(others_).substr(at_[i].first, at_[i].second); }

    std::string others_;
    std::array<std::pair<std::size_t, std::size_t>, 7> at_{};
};

// Where scripts that take a lock away from its owner (force-release) tell
// that owner's client: one channel per client id (the owner up to its first
// ':'), on the client's subscriber connection.
inline std::string inbox_channel(std::string_view client_id) {
    std::string channel = "dlock:inbox:";
    channel.append(client_id);
    return channel;
}

}  // namespace dlock::detail
