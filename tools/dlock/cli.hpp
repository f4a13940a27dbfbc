// What the dlock subcommands share: global options, exit codes, the client.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/lock.hpp"
#include "dlock/redlock.hpp"

namespace dlock::cli {

// sysexits(3) where one fits.
enum ExitCode : int {
    exit_ok = 0,
    exit_not_held = 1,        // release --force: already free; status --exit-status: free; wait-free: timed out
    exit_usage = 64,          // EX_USAGE: bad option, duration, key or command
    exit_data = 65,           // EX_DATAERR: the name is held as another kind or in a later data layout, or a semaphore has another limit
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
    // What the sentinels of a redis-sentinel:// URL require of their own.
    std::string sentinel_user, sentinel_password;
    bool quiet = false;
    bool verbose = false;
    // Where every client made from these options records (run --metrics-file);
    // null: each client its own.
    std::shared_ptr<Metrics> metrics;
};

ClientOptions client_options(const GlobalOptions& global);

// Makes the client in slot and waits for its connection, so that a failure
// to connect is reported as such (with its reason: TLS, authentication, the
// server's refusal) rather than as a command that timed out. Throws Error.
// With `by` (a --wait's end): waits no longer than that and connect_grace
// (a --wait of 0 still connects, then makes one attempt, as flock -w 0
// does), and a connection still being made then is errc::command_timeout,
// "the server did not answer".
inline constexpr std::chrono::milliseconds connect_grace{200};
Client& connect(std::optional<Client>& slot, const GlobalOptions& global, const std::string& url,
                std::optional<std::chrono::steady_clock::time_point> by = std::nullopt);

// Every server the URLs name: the masters of a Redlock, or the one server
// (connected, as connect() does).
struct Servers {
    std::optional<Masters> masters;
    std::optional<Client> single;
    std::vector<Client*> all;
    explicit Servers(const GlobalOptions& global);
};

// The exit code for a dlock error: usage for bad input, unavailable otherwise.
int exit_code_for(const std::error_code& ec);

// A library error as the command line says it: naming the server when it
// is one server and the text does not, and the fix where there is one
// (start the server or give --url, the password options, --connect-timeout).
std::string explain(const Error& e, const GlobalOptions& global);

// One line on stderr: "dlock: <message>"; with --json-events an "error"
// event instead (event_log.hpp).
void complain(const std::string& message);
// "dlock: warning: <message>", or a "warning" event.
void warn(const std::string& message);

// A mistake on the command line: main prints it and exits with exit_usage.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Splits "a,b" lists. An empty URL or an empty element ("a,,b", a trailing
// comma) is a UsageError: it usually is an unset variable, and falling back
// to a default server would let every host lock its own Redis.
std::vector<std::string> split_urls(const std::vector<std::string>& given);

// Where a password may come from, besides the URL (where `ps` shows it).
struct Credentials {
    std::string user;           // --user, else $DLOCK_USER; empty: the URL's, or the default user
    std::string password_file;  // --password-file: its first line
    std::string sentinel_user;           // --sentinel-user
    std::string sentinel_password_file;  // --sentinel-password-file, else $DLOCK_SENTINEL_PASSWORD
};

// Puts user and password into every URL that has none of its own. The
// password comes from --password-file, else $DLOCK_PASSWORD, else
// $REDISCLI_AUTH (as redis-cli reads it). Throws UsageError for an
// unreadable or empty password file and for --user without a password.
void apply_credentials(std::vector<std::string>& urls, const Credentials& credentials);
// The sentinels' own credentials, into global (a redis-sentinel:// URL's are the master's).
void apply_sentinel_credentials(GlobalOptions& global, const Credentials& credentials);

// The owner as an operator can use it: host, pid and thread when the lock
// recorded them, then the owner id.
std::string describe_owner(const LockInfo& info);

// Words about one master of a Redlock, for a line of its own: text with the
// master's address (password hidden) named once, in front unless the text
// names it in a sentence ("no connection to ADDRESS within 2000 ms").
// Connection errors name it already (they are written for a single server);
// others (AUTH, a server's refusal) do not.
std::string about_master(const Client& master, const std::string& text);

// Waits for each master's connection; complains about those that fail.
// True when a majority is reachable.
// Each master's connection, waited for up to `by` (and connect_grace) when given.
bool enough_masters_reachable(Masters& masters,
                              std::optional<std::chrono::steady_clock::time_point> by = std::nullopt);

struct StatusOptions {
    std::string key;
    bool json = false;
    bool exit_status = false;  // exit 0 when held, exit_not_held when free
};
int run_status(const GlobalOptions& global, const StatusOptions& options);
// dlock list [PATTERN] [--json]: the locks held now.
int run_list(const GlobalOptions& global, const std::string& pattern, bool json);
// dlock wait-free KEY [--timeout D]: exit 0 once free, exit_not_held at the
// timeout. Several URLs: free on every master.
struct WaitFreeOptions {
    std::string key;
    std::optional<std::chrono::milliseconds> timeout;  // empty: no limit
};
int run_wait_free(const GlobalOptions& global, const WaitFreeOptions& options);
// dlock release --force KEY [--all | --holder OWNER]: breaks holds of every
// kind; a name with several (readers, permits) needs --all or one holder.
struct ReleaseOptions {
    std::string key;
    bool force = false;
    bool all = false;
    std::string holder;  // an owner id or a permit id, as status shows it
};
int run_release(const GlobalOptions& global, const ReleaseOptions& options);

}  // namespace dlock::cli
