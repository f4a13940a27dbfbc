// The Redis keys of one lock. All carry the hash tag {<tag>}, the name
// with '%' and '}' percent-encoded (key_tag), so that they live in one
// cluster slot and one script may touch them together, whatever bytes the
// name holds: a raw '}' first in the name would leave the tag empty ("{}"),
// and Redis would hash each whole key instead, to slots of their own.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dlock::detail {

// The name as it stands between the braces of its keys: '%' becomes "%25"
// and '}' "%7D", nothing else changes (so names without either keep the
// keys they always had). Never empty for a non-empty name, never holds '}'.
inline std::string key_tag(std::string_view name) {
    std::string tag;
    tag.reserve(name.size());
    for (char c : name) {
        if (c == '%') tag += "%25";
        else if (c == '}') tag += "%7D";
        else tag += c;
    }
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
    // The keys every acquisition and release names are made once, here:
    // a lock object keeps five key names, and its calls make none.
    explicit LockKeys(std::string_view name)
        : lock("dlock:{" + key_tag(name) + "}"),
          fence_(lock + ":fence"),
          channel_(lock + ":ch"),
          line_(lock + ":line"),
          places_(lock + ":places"),
          readers_(lock + ":readers"),
          semaphore_permits_("dlock:sem:{" + key_tag(name) + "}"),
          semaphore_waiters_(semaphore_permits_ + ":waiters") {}

    // hash {owner, count, seq, token}, PEXPIRE = lease
    std::string lock;
    // hash {token: last fencing token}; expires retention after the lock is
    // free (lease + retention after the last acquisition or renewal).
    const std::string& fence() const { return fence_; }
    // a message on every full release
    const std::string& channel() const { return channel_; }
    // string: the operation id of owner's last final release, so that a
    // retry of it is answered "released" and a late copy of an older
    // operation of that owner is ignored; expires after retention.
    std::string tombstone(std::string_view owner) const {
        std::string key = lock;
        key.append(":done:").append(owner);
        return key;
    }

    // The line of waiters (prelude.lua, "The line"): sorted set waiter ->
    // arrival number, and sorted set waiter -> server-time (ms) end of its place.
    const std::string& line() const { return line_; }
    const std::string& places() const { return places_; }

    // Read-write lock (rw_lock.hpp): the writer is the lock hash above, and
    // the fence, channel and write tombstones are the ones above too.
    // sorted set reader -> server-time deadline (ms)
    const std::string& readers() const { return readers_; }
    // hash {n:<reader> count, s:<reader> last operation id, t:<reader> token}
    std::string reader_state() const { return lock + ":rstate"; }
    // sorted set waiting writer -> server-time deadline (ms) of its mark
    std::string waiting_writers() const { return lock + ":wwait"; }
    // string: as tombstone(), for the owner's read operations
    std::string read_tombstone(std::string_view owner) const {
        std::string key = lock;
        key.append(":rdone:").append(owner);
        return key;
    }

    // One name is one resource: an acquisition looks whether the name is
    // live as another kind (prelude.lua, kind_error). A semaphore of this
    // name (semaphore_keys.hpp) is live while these hold a live member:
    // its permits, and the place deadlines of its waiters.
    const std::string& semaphore_permits() const { return semaphore_permits_; }
    const std::string& semaphore_waiters() const { return semaphore_waiters_; }

private:
    std::string fence_, channel_, line_, places_, readers_, semaphore_permits_, semaphore_waiters_;
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
