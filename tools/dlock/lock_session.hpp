// How `dlock run` and `dlock hold` take a lock: the client (one server, or a
// Redlock over several masters), the lock (a MultiLock for several keys on
// one server), and an acquisition that keeps watching signals (Ctrl-C while
// waiting ends the wait).
#pragma once

#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/rw_lock.hpp"
#include "event_log.hpp"
#include "json.hpp"
#include "run_command.hpp"
#include "signal_watch.hpp"

namespace dlock::cli {

// "held by HOLDER, lease N ms left"; empty when free; the reason when it cannot tell.
std::string holder_of(Client& client, const std::string& key);
// For a multi-lock: "KEY held by HOLDER, ..." for the first key it does not
// hold yet and someone else does; empty when there is none.
std::string holder_of_missing(Client& client, const MultiLock& lock);

// (key, fencing token) of what a lock holds: one pair, or one per key in
// canonical order for a multi-lock.
using Tokens = std::vector<std::pair<std::string, std::uint64_t>>;
inline Tokens tokens_of(const MultiLock& lock) { return lock.fencing_tokens(); }
template <typename OneName>
Tokens tokens_of(const OneName& lock) {
    return {{lock.name(), lock.fencing_token()}};
}
// The tokens as JSON members for events: "fencing_token": N for one key,
// "fencing_tokens": {"KEY": N, ...} for several.
std::string token_fields(const Tokens& tokens);

// Says once who holds the lock: after a second of waiting on stderr when it
// is a terminal (no noise in logs and cron mail); as a "waiting" event as
// soon as the first attempt is answered busy (a log shipper sees every wait).
void announce_waiting(const GlobalOptions& global, const RunOptions& options, const EventLog& events,
                      const std::string& holder);

// Why a lease was lost, for people: "revoked by `dlock release --force`",
// "lease expired: ...". reason: on_lost's or unlock's code.
std::string loss_text(const std::error_code& reason);
// The "lost" event's members: "reason": "revoked" (a LostReason's name, or
// "lost" when the code does not say), "message": the code's message.
std::string loss_fields(const std::error_code& reason);
// What to say when KEY is held as another kind, or its semaphore has
// another limit (errc::kind_mismatch, errc::limit_mismatch): what it is, and
// the option to use; `detail` (the server's words) when it cannot tell.
std::string mismatch_message(Client& client, const RunOptions& options, const std::error_code& ec,
                             const std::string& detail);

// "N of LIMIT permits held, W waiting"; the reason when it cannot tell.
std::string permits_of(Client& client, const std::string& key);

// One permit of a semaphore, held through the lock vocabulary that run and
// hold use. Permits carry no fencing token: fencing_token() is 0.
class PermitLock {
public:
    PermitLock(Client& client, const std::string& key, unsigned limit, SemaphoreOptions options)
        : semaphore_(client, key, with_limit(std::move(options), limit)) {}

    bool try_lock() { return take(semaphore_.try_acquire()); }
    bool try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
        return take(semaphore_.try_acquire_until(deadline, 1, std::move(stop)));
    }
    bool lock(std::stop_token stop) { return take(semaphore_.acquire(1, std::move(stop))); }
    void unlock() noexcept {
        std::error_code ignored;
        permit_.release(ignored);
    }
    void unlock(std::error_code& ec) noexcept { permit_.release(ec); }
    std::uint64_t fencing_token() const { return 0; }
    std::chrono::steady_clock::time_point valid_until() const { return permit_.valid_until(); }
    const std::string& name() const noexcept { return semaphore_.name(); }

private:
    static SemaphoreOptions with_limit(SemaphoreOptions options, unsigned limit) {
        options.limit = limit;
        return options;
    }
    bool take(Permit permit) {
        permit_ = std::move(permit);
        return static_cast<bool>(permit_);
    }
    Semaphore semaphore_;
    Permit permit_;
};

// The read side of an RwLock under the names run and hold call.
class ReadSide {
public:
    explicit ReadSide(RwLock& lock) : lock_(lock) {}
    bool try_lock() { return lock_.try_lock_shared(); }
    bool try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
        return lock_.try_lock_shared_until(deadline, stop);
    }
    bool lock(std::stop_token stop) { return lock_.lock_shared(stop); }
    void unlock() noexcept { lock_.unlock_shared(); }
    void unlock(std::error_code& ec) noexcept { lock_.unlock_shared(ec); }
    // The token of the last write this reader follows.
    std::uint64_t fencing_token() const { return lock_.shared_fencing_token(); }
    std::chrono::steady_clock::time_point valid_until() const { return lock_.shared_valid_until(); }
    const std::string& name() const noexcept { return lock_.name(); }

private:
    RwLock& lock_;
};

// What run and hold have while they hold a lock.
struct Session {
    SignalWatch& watch;
    LostSignal& lost;
    Client& probe;  // to look at the lock with (the first master's for a Redlock)
    std::function<std::string()> describe_holder;
};

// Blocks the handled signals (before the client starts its threads), builds
// the client and the lock, then returns body(lock, session). Several keys
// (only where Several is true: body must take a MultiLock) make a MultiLock
// on the one server; main refuses several keys with several URLs.
template <bool Several = false, typename Body>
int with_lock(const GlobalOptions& global, const RunOptions& options, Body body) {
    SignalWatch watch;
    if (!watch.ok()) {
        complain(std::string("cannot set up signal handling: ") + std::strerror(errno));
        return exit_internal;
    }
    LostSignal lost{watch.lost_event.fd};
    auto on_lost = [&lost](std::string_view name, std::error_code reason) { lost(name, reason); };
    auto run_body = [&](auto& lock, Client& probe) {
        Session session{watch, lost, probe, [&] { return holder_of(probe, options.keys.front()); }};
        return body(lock, session);
    };
    if (options.permits > 0 && global.urls.size() > 1) {
        complain("run --permits takes one server URL: a semaphore lives on one server");
        return exit_usage;
    }
    if (options.permits > 0 && options.keys.size() > 1) {
        complain("run --permits takes one key: the semaphore's name");
        return exit_usage;
    }
    if (options.shared && (options.permits > 0 || options.keys.size() > 1)) {
        complain("--shared takes one key and no --permits: it is the read side of one read-write lock");
        return exit_usage;
    }
    if (options.fair && (options.shared || options.permits > 0 || options.keys.size() > 1 || global.urls.size() > 1)) {
        complain("--fair takes one key on one server, without --shared or --permits: it is one fair lock");
        return exit_usage;
    }
    if (global.urls.size() > 1) {
        if (options.shared) {
            complain("--shared needs one server: a Redlock has no read side");
            return exit_usage;
        }
        Masters masters(global.urls, client_options(global));
        if (!enough_masters_reachable(masters, options.wait ? std::optional(options.started + *options.wait)
                                                            : std::nullopt))
            return exit_unavailable;
        Redlock lock(masters, options.keys.front(),
                     {.lease = options.ttl, .ownership = Ownership::handle, .on_lost = on_lost});
        return run_body(lock, masters.client(0));
    }
    std::optional<Client> slot;
    auto& client = connect(slot, global, global.urls.front(),
                           options.wait ? std::optional(options.started + *options.wait) : std::nullopt);
    const LockOptions lock_options{.lease = options.ttl, .ownership = Ownership::handle, .on_lost = on_lost};
    if (options.permits > 0) {
        PermitLock permit(client, options.keys.front(), options.permits,
                          {.set_limit = options.set_limit, .lease = options.ttl, .on_lost = on_lost});
        Session session{watch, lost, client, [&] { return permits_of(client, options.keys.front()); }};
        return body(permit, session);
    }
    if constexpr (Several) {
        if (options.keys.size() > 1) {
            MultiLock lock(client, options.keys, lock_options);
            Session session{watch, lost, client, [&] { return holder_of_missing(client, lock); }};
            return body(lock, session);
        }
    }
    if (options.fair) {
        // The same lock hash as a Lock or a write side on KEY, so it excludes
        // them; unlike the write side it does not wait for --shared readers.
        FairLock lock(client, options.keys.front(), lock_options);
        return run_body(lock, client);
    }
    // The write side of KEY's read-write lock: exclusive, like a Lock on KEY
    // (the same key in Redis), and it also waits for --shared holders.
    RwLock lock(client, options.keys.front(), {.lease = options.ttl, .ownership = Ownership::handle, .on_lost = on_lost});
    if (!options.shared) return run_body(lock, client);
    ReadSide reader(lock);
    return run_body(reader, client);
}

// Releases and says exactly what happened when it was not a plain release:
// the server's own refusal, and whether the lock is still there. False when
// the lease turned out to be lost. loss_reported: the caller has already
// said that this hold was lost (the unlock then fails with lease_lost too,
// and a log must see one loss per hold, not two).
template <typename AnyLock>
bool release(AnyLock& lock, const RunOptions& options, const EventLog& events, Session& session,
             bool loss_reported) {
    std::error_code ec;
    lock.unlock(ec);
    if (!ec) {
        events.emit("released");
        return true;
    }
    if (ec == errc::lease_lost) {
        if (!loss_reported)
            events.report("lost", loss_fields(ec),
                          "the lock on " + options.label() + " was lost before the end: " + loss_text(ec));
        return false;
    }
    const std::string server_text = last_server_error();
    std::string holder = session.describe_holder();
    std::string outcome = holder.empty() ? "the lock is no longer held"
                                         : "the lock stays until its lease ends (" + holder + ")";
    events.report("release_failed", "\"error\": " + json_string(server_text.empty() ? ec.message() : server_text),
                  "releasing " + options.label() + ": " +
                      (server_text.empty() ? ec.message() : "Redis refused: " + server_text) + "; " + outcome);
    return true;
}

// Acquires on a helper thread while this one watches signals. Returns
// nothing once acquired; otherwise the exit status to end with.
template <typename AnyLock>
std::optional<int> acquire_watching_signals(const GlobalOptions& global, const RunOptions& options, AnyLock& lock,
                                            Session& session, const EventLog& events) {
    auto& watch = session.watch;
    using Clock = std::chrono::steady_clock;
    std::stop_source stop;
    bool acquired = false;
    std::error_code acquire_error;
    std::string acquire_detail;
    // With events on, the wait is told as soon as the first attempt is
    // answered busy: one attempt first, then the wait. (Without, the wait
    // is one call: a waited acquisition counts once in --metrics-file.)
    const auto deadline = options.wait ? std::optional(options.started + *options.wait) : std::nullopt;
    std::thread acquirer([&] {
        try {
            const bool try_first = options.no_wait || events.enabled();
            if (try_first) acquired = lock.try_lock();
            const bool wait = !acquired && !options.no_wait;
            if (wait && try_first)
                events.emit("waiting", "\"holder\": " + json_string(session.describe_holder()));
            if (wait && deadline) acquired = lock.try_lock_until(*deadline, stop.get_token());
            else if (wait) acquired = lock.lock(stop.get_token());
        } catch (const Error& e) {
            acquire_error = e.code();
            acquire_detail = e.what();
        }
        signal_event(watch.acquired_event.fd);
    });
    int interrupted_by = 0;
    const auto announce_at = Clock::now() + std::chrono::seconds(1);
    // Asking who holds it may take up to a command timeout when Redis does
    // not answer, and this thread then sees neither the outcome nor a
    // signal: a wait that ends sooner than that after the announcement
    // makes none, so that --wait D ends at D, not a command timeout later.
    const bool worth_announcing =
        !options.no_wait &&
        (!options.wait || Clock::now() + *options.wait > announce_at + session.probe.options().command_timeout);
    bool announced = !worth_announcing;
    for (bool done = false; !done;) {
        int timeout = -1;
        if (!announced)
            timeout = static_cast<int>(std::max<long long>(
                std::chrono::ceil<std::chrono::milliseconds>(announce_at - Clock::now()).count(), 0));
        pollfd fds[] = {{watch.signals.fd, POLLIN, 0}, {watch.acquired_event.fd, POLLIN, 0}};
        if (poll(fds, 2, timeout) < 0 && errno != EINTR) break;
        if (fds[0].revents & POLLIN) {
            signalfd_siginfo info;
            while (read(watch.signals.fd, &info, sizeof info) == sizeof info) {
                if (info.ssi_signo == SIGCHLD) continue;
                interrupted_by = static_cast<int>(info.ssi_signo);
                stop.request_stop();
            }
        }
        if (fds[1].revents & POLLIN) done = true;
        else if (!announced && Clock::now() >= announce_at) {
            announced = true;
            // With events, the acquirer said it at the first busy answer.
            if (!events.enabled()) announce_waiting(global, options, events, session.describe_holder());
        }
    }
    acquirer.join();
    if (acquire_error) {
        // The detail carries Redis's own text (OOM, READONLY, NOPERM...): a
        // log that only reads events must learn why nothing ran.
        if (acquire_error == errc::kind_mismatch || acquire_error == errc::limit_mismatch)
            acquire_detail = mismatch_message(session.probe, options, acquire_error, acquire_detail);
        events.report("error", "\"error\": " + json_string(acquire_detail), acquire_detail);
        return exit_code_for(acquire_error);
    }
    if (interrupted_by) {
        if (acquired) lock.unlock();
        return 128 + interrupted_by;
    }
    if (!acquired) {
        const std::string waited =
            options.no_wait ? "without waiting" : "within " + std::to_string(options.wait->count()) + " ms";
        // A lost race under --no-wait is silent, as flock -n is: its exit
        // code says it, and cron mails nothing; -v or events report it.
        const bool silent = global.quiet || (options.no_wait && !global.verbose);
        events.report("not_acquired", {},
                      silent ? std::string()
                             : options.label() +
                                         (options.keys.size() > 1 ? " are not all free" : " is held by another owner") +
                                         "; not acquired " + waited);
        return options.conflict_exit_code;
    }
    events.emit("acquired", token_fields(tokens_of(lock)) + ", \"lease_ms\": " + std::to_string(options.ttl.count()));
    return std::nullopt;
}

}  // namespace dlock::cli
