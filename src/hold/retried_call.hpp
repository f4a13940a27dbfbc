// One lock operation, sent until its outcome is known.
//
// A lock script that fails in transit (connection lost, no reply in time)
// may or may not have run. The call is then sent again, byte for byte — the
// same operation id, which the scripts answer as they answered the first
// copy — until an answer comes or the retry window ends. A call that was
// never sent (refused, not connected) fails at once: there is nothing to
// learn. A call that a cluster did not run because a migration split its
// slot's keys (errc::slot_migrating) did not run: an acquisition is sent
// again as long as its caller waits (each such answer opens the retry
// window again), anything else within the window. A call that ends without
// an answer after some copy may have run reports that copy's unknown
// outcome, never what the later copies heard.
//
// The caller waits with its own deadline and stop token, and may walk away
// before the outcome is known (try_lock_until's deadline, a stop request).
// The call then carries on by itself on the client's I/O thread, and the
// caller's `if_walked_away` handler gets the outcome when it comes (to undo
// a grant nobody will use), or an error at the end of the window.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "dlock/script.hpp"
#include "awaited_outcome.hpp"
#include "redis/client_core.hpp"
#include "runtime/function_ref.hpp"
#include "validity.hpp"

namespace dlock::detail {

// Failures after which the call may or may not have run on the server.
inline bool outcome_unknown(std::error_code ec) {
    return ec == errc::connection_lost || ec == errc::command_timeout;
}

class RetriedCall : public std::enable_shared_from_this<RetriedCall> {
public:
    using Done = std::function<void(std::error_code, Reply&&)>;

    // How the first copy goes: EVALSHA (with the EVAL fallback on NOSCRIPT),
    // or as EVAL at once unless the server is known to have the script
    // (known_scripts.hpp): for a call that must not fall behind the
    // client's next request.
    enum class Send { evalsha, eval_unless_cached };
    // What a cluster's TRYAGAIN (errc::slot_migrating: a migration split the
    // slot's keys; the call did not run) costs the caller: an acquisition is
    // sent again for as long as its caller waits (a migration is routine,
    // and its caller chose how long to wait); anything else (a release, a
    // renewal) within the retry window, whose bound its caller relies on.
    enum class Migration { within_window, while_awaited };

    // Sends script(keys, argv) now; retries until give_up_by at the latest.
    static std::shared_ptr<RetriedCall> start(const std::shared_ptr<ClientCore>& client, const Script& script,
                                              ClientCore::Args keys, ClientCore::Args argv,
                                              Clock::time_point give_up_by, Send how = Send::evalsha,
                                              Migration migration = Migration::within_window);

    // Blocks until the outcome is known (true: ec and reply set), or until
    // deadline or stop (false: walked away; if_walked_away runs once on the
    // I/O thread with the outcome, when it comes).
    bool wait(std::optional<Clock::time_point> deadline, std::stop_token stop, std::error_code& ec, Reply& reply,
              Done if_walked_away);
    // As wait(), with the handler made only when the caller walks away
    // (a call answered in time makes none).
    bool wait_making(std::optional<Clock::time_point> deadline, std::stop_token stop, std::error_code& ec,
                     Reply& reply, FunctionRef<Done()> make_if_walked_away);

    // As wait() with no time to wait at all: no sleep (a caller that
    // never waits for the answer, Lock::unlock_nowait).
    bool leave_now(std::error_code& ec, Reply& reply, Done if_answered_later) {
        Answer answer;
        if (!outcome_.leave_now(answer, [handler = std::move(if_answered_later)](Answer&& late) {
                if (handler) handler(late.ec, std::move(late.reply));
            }))
            return false;
        ec = answer.ec;
        reply = std::move(answer.reply);
        return true;
    }

    // When the first copy left: a lease granted by any copy started no earlier.
    Clock::time_point first_sent() const noexcept { return first_sent_; }

    RetriedCall(std::shared_ptr<ClientCore> client, const Script& script, Clock::time_point give_up_by);

private:
    friend class RetriedCallPool;
    void begin(ClientCore::Args keys, ClientCore::Args argv, Send how, Migration migration);

    void send(std::string_view bytes);
    void on_reply(std::error_code ec, Reply&& reply);
    void resend_after_pause();
    void finish(std::error_code ec, Reply&& reply);

    // Dropped when the outcome is known: a call kept for reuse does not
    // keep its client alive. client_core_ stays for the waiting caller,
    // who keeps the client.
    std::shared_ptr<ClientCore> client_;
    ClientCore* client_core_;
    const Script* script_;
    Clock::duration window_;  // give_up_by as first asked, from the start
    Clock::time_point give_up_by_;  // I/O thread after the first send
    Clock::time_point first_sent_{};
    std::string evalsha_;
    bool was_sent_ = false;  // I/O thread after the first send: some copy may have run
    bool sent_as_eval_ = false;  // went as EVAL (the script's text)
    ClientCore::ScriptResend resend_;  // the NOSCRIPT detours taken
    Migration migration_ = Migration::within_window;
    std::error_code unknown_;    // the first failure after which some copy may have run
    std::optional<asio::steady_timer> retry_timer_;
    std::shared_ptr<RetriedCall> in_flight_;  // while a copy is in flight: this

    struct Answer {
        std::error_code ec;
        Reply reply;
    };
    AwaitedOutcome<Answer> outcome_;
};

// One client's RetriedCalls kept for reuse: a lock call's state, and the
// room of its command bytes, are made once rather than per call. A kept
// call is reused once nothing else refers to it (its caller, its copies
// in flight). Thread-safe.
class RetriedCallPool {
public:
    // As RetriedCall::start.
    std::shared_ptr<RetriedCall> start(const std::shared_ptr<ClientCore>& client, const Script& script,
                                       ClientCore::Args keys, ClientCore::Args argv, Clock::time_point give_up_by,
                                       RetriedCall::Send how = RetriedCall::Send::evalsha,
                                       RetriedCall::Migration migration = RetriedCall::Migration::within_window);

private:
    static constexpr std::size_t max_kept = 16;  // calls in flight at once beyond this are not kept
    std::shared_ptr<RetriedCall> idle_call();

    std::mutex mutex_;
    std::vector<std::shared_ptr<RetriedCall>> kept_;
};

}  // namespace dlock::detail
