// What the dlock subcommands share: global options, exit codes, the client.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/redlock.hpp"

namespace dlock::cli {

// sysexits(3) where one fits.
enum ExitCode : int {
    exit_ok = 0,
    exit_not_held = 1,        // release --force: the lock was already free
    exit_usage = 64,          // EX_USAGE: bad option, duration, key or command
    exit_unavailable = 69,    // EX_UNAVAILABLE: Redis unreachable, auth or TLS failure, server error
    exit_internal = 70,       // EX_SOFTWARE
    exit_conflict = 75,       // EX_TEMPFAIL: not acquired in time (run --conflict-exit-code)
    exit_lost = 79,           // the lease was lost while the command ran
};

struct GlobalOptions {
    // Resolved: --url (repeated or comma-separated), $DLOCK_URL, $REDIS_URL,
    // then the default. Three or more (an odd number) mean Redlock.
    std::vector<std::string> urls;
    bool url_given = false;     // by option or environment (demo starts its own server otherwise)
    std::chrono::milliseconds connect_timeout{2000};
    std::string tls_ca, tls_cert, tls_key;
    bool quiet = false;
    bool verbose = false;
};

ClientOptions client_options(const GlobalOptions& global);

// The exit code for a dlock error: usage for bad input, unavailable otherwise.
int exit_code_for(const std::error_code& ec);

// One line on stderr: "dlock: <message>".
void complain(const std::string& message);

// Splits "a,b" lists and drops empty entries.
std::vector<std::string> split_urls(const std::vector<std::string>& given);

// Waits for each master's connection; complains about those that fail.
// True when a majority is reachable.
bool enough_masters_reachable(Masters& masters);

int run_status(const GlobalOptions& global, const std::string& key, bool json);
int run_release(const GlobalOptions& global, const std::string& key, bool force);

}  // namespace dlock::cli
