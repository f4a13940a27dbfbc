// Which scripts the server is known to have cached, as of the command
// connection's current session (Connection::sessions(), which changes when the
// connection becomes ready and when it drops).
//
// A script is known once an EVALSHA or EVAL of it was answered (not with an
// error) on the current session: a drop ends the session, and the reconnect
// may meet a restarted or failed-over server with an empty cache, so
// nothing is known while it reconnects or after. Not seen: an operator's
// SCRIPT FLUSH on a live connection, and a drop that comes between the
// check and the write.
//
// Why it matters: a call that nobody waits for and that must run before the
// client's next request (Lock::unlock_nowait) cannot take the NOSCRIPT
// detour, whose EVAL would leave behind whatever was sent meanwhile; it goes
// as EVAL at once unless its script is known here.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {

class KnownScripts {
public:
    void note(std::string_view sha1, std::uint64_t session) {
        std::lock_guard lock(mutex_);
        for (auto& entry : entries_) {
            if (entry.sha1 != sha1) continue;
            entry.session = session;
            return;
        }
        // Bounded by the scripts the program uses (each an object it made).
        entries_.push_back({std::string(sha1), session});
    }

    bool known(std::string_view sha1, std::uint64_t session) const {
        std::lock_guard lock(mutex_);
        for (const auto& entry : entries_)
            if (entry.sha1 == sha1) return entry.session == session;
        return false;
    }

private:
    struct Entry {
        std::string sha1;
        std::uint64_t session;
    };
    mutable std::mutex mutex_;
    std::vector<Entry> entries_;
};

}  // namespace dlock::detail
