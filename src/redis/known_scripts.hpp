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
        entry(sha1).session = session;
    }

    bool known(std::string_view sha1, std::uint64_t session) const {
        std::lock_guard lock(mutex_);
        for (const auto& e : entries_)
            if (e.sha1 == sha1) return e.session == session;
        return false;
    }

    // EVALs of the script (its text) submitted on `session` and not yet
    // answered: while there is one, a call answered NOSCRIPT on that session
    // ran before it, and may go again as EVALSHA, which the server reads
    // after it (client_core.hpp, resend_after_no_script).
    void note_eval(std::string_view sha1, std::uint64_t session) {
        std::lock_guard lock(mutex_);
        auto& e = entry(sha1);
        if (e.eval_session != session) e.evals_unanswered = 0;
        e.eval_session = session;
        ++e.evals_unanswered;
    }
    void note_eval_answered(std::string_view sha1, std::uint64_t session) {
        std::lock_guard lock(mutex_);
        auto& e = entry(sha1);
        if (e.eval_session == session && e.evals_unanswered > 0) --e.evals_unanswered;
    }
    bool eval_sent(std::string_view sha1, std::uint64_t session) const {
        std::lock_guard lock(mutex_);
        for (const auto& e : entries_)
            if (e.sha1 == sha1) return e.eval_session == session && e.evals_unanswered > 0;
        return false;
    }

private:
    static constexpr std::uint64_t none = UINT64_MAX;
    struct Entry {
        std::string sha1;
        std::uint64_t session = none;
        std::uint64_t eval_session = none;
        std::uint64_t evals_unanswered = 0;
    };

    // The script's entry (made if new); mutex_ held.
    Entry& entry(std::string_view sha1) {
        for (auto& e : entries_)
            if (e.sha1 == sha1) return e;
        // Bounded by the scripts the program uses (each an object it made).
        return entries_.emplace_back(Entry{std::string(sha1)});
    }


    mutable std::mutex mutex_;
    std::vector<Entry> entries_;
};

}  // namespace dlock::detail
