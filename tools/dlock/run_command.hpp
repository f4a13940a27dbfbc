// dlock run: hold a lock while a command runs, like flock(1) across hosts.
// dlock hold: hold a lock until told to let go (the coprocess pattern).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"

namespace dlock::cli {

enum class OnLost { term, kill, ignore };

struct RunOptions {
    // The keys in the order given, duplicates removed (the first stays).
    // One key is a Lock; several are a MultiLock, which takes them in its own
    // canonical order.
    std::vector<std::string> keys;
    std::vector<std::string> command;
    std::chrono::milliseconds ttl{30'000};
    std::optional<std::chrono::milliseconds> wait;  // empty: as long as it takes
    // When the command began: --wait counts from here (connecting included).
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    bool no_wait = false;
    OnLost on_lost = OnLost::term;
    std::chrono::milliseconds grace{10'000};
    int conflict_exit_code = exit_conflict;
    bool json_events = false;  // run: one JSON line per event on stderr
    bool shared = false;       // run: the read side of KEY's read-write lock (rw_lock.hpp)
    bool fair = false;         // a FairLock on KEY (fair_lock.hpp): strict arrival order across hosts
    bool json = false;         // hold: the token, lease and owner as one JSON object
    unsigned permits = 0;      // run --permits N: one of N permits of semaphore KEY; 0: a lock
    bool set_limit = false;    // run --set-limit: a semaphore with another limit gets N (SemaphoreOptions::set_limit)
    std::string metrics_file;  // run: this run's gauges written here when it ends (exposition.hpp)
    std::string metrics_job;   // run: their job label; empty: the keys, comma-separated

    // The keys for messages: "a", or "a, b, c".
    std::string label() const;
};

// Returns dlock's exit status: the command's (128 + signal if it died of
// one), conflict_exit_code when not acquired in time, exit_lost when the
// lease was lost while it ran, exit_usage / exit_unavailable on errors.
int run_under_lock(const GlobalOptions& global, const RunOptions& options);

// Acquires, prints the fencing token (or, with json, one object) on stdout,
// keeps the lease renewed until SIGTERM, SIGINT or SIGHUP arrives or stdin
// reaches its end (only when stdin is a pipe, socket or terminal: /dev/null
// and files end at once), then releases. Returns exit_ok after a clean release,
// exit_lost when the lease was lost meanwhile, the conflict code when not
// acquired in time, exit_usage / exit_unavailable on errors.
int hold_until_told(const GlobalOptions& global, const RunOptions& options);

}  // namespace dlock::cli
