// dlock — distributed locks on Redis, from the command line.
//
//   dlock [global options] COMMAND ...
//   (--url given 3, 5, ... times, or as a comma list: a Redlock over those masters)
//   dlock run [--ttl D] [--wait D | --no-wait] [--on-lost term|kill|ignore]
//             [--grace D] [--conflict-exit-code N] KEY -- COMMAND [ARG...]
//   dlock status [--json] KEY
//   dlock release --force KEY
//   dlock demo [--processes N] [--threads N] [--bonuses N] [--json] [--url URL]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.hpp"
#include "demo.hpp"
#include "dlock/error.hpp"
#include "duration.hpp"
#include "run_command.hpp"

#ifndef DLOCK_VERSION
#define DLOCK_VERSION "unknown"
#endif

namespace {

using namespace dlock::cli;

const char* const epilog = R"(Durations: 250ms, 30s, 2m, 1h; a bare integer means seconds.

Several masters: --url given 3, 5, ... times (or one comma list) makes run, status
and release work on a Redlock over those independent Redis masters.

Exit status of `dlock run`: the command's own (128 + N if it died of signal N);
75 (or --conflict-exit-code) when the lock was not acquired in time; 79 when the
lease was lost while the command ran; 64 for usage errors; 69 when Redis cannot be
reached or refuses us (also: authentication, TLS).

If dlock is killed with SIGKILL, the command gets SIGKILL too (unless --on-lost
ignore): nobody would renew the lease, and it must not run on after it expires.

Example: a nightly job that must run on one host only (crontab on every host):
  0 3 * * *  dlock --url redis://locks.internal:6379 run --no-wait nightly-report -- /usr/local/bin/report)";

// CLI11 takes durations as strings; this turns them into milliseconds or a usage error.
std::chrono::milliseconds duration_option(const std::string& text, const char* option) {
    try {
        return parse_duration(text);
    } catch (const std::invalid_argument& e) {
        throw CLI::ValidationError(option, e.what());
    }
}

}  // namespace

int main(int argc, char** argv) {
    // Everything after the first "--" is the command `dlock run` executes;
    // CLI11 must not read its options as ours.
    std::vector<std::string> args(argv + 1, argv + argc);
    std::vector<std::string> command;
    bool has_separator = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--") {
            command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
            args.resize(i);
            has_separator = true;
            break;
        }
    }

    CLI::App app{"dlock: distributed locks on Redis", "dlock"};
    app.footer(epilog);
    app.set_version_flag("--version", "dlock " DLOCK_VERSION);
    app.require_subcommand(1);
    GlobalOptions global;
    std::vector<std::string> url_options;
    std::string connect_timeout = "2s";
    app.add_option("--url", url_options,
                   "Redis URL; default $DLOCK_URL, then $REDIS_URL, then redis://127.0.0.1:6379. Given 3 or more "
                   "times (or as a comma list): independent masters of a Redlock")
        ->take_all()
        ->allow_extra_args(false);
    app.add_option("--connect-timeout", connect_timeout, "how long to try to reach Redis (default 2s)");
    app.add_option("--tls-ca", global.tls_ca, "CA certificate file for rediss:// URLs")->check(CLI::ExistingFile);
    app.add_option("--tls-cert", global.tls_cert, "client certificate file")->check(CLI::ExistingFile);
    app.add_option("--tls-key", global.tls_key, "client key file")->check(CLI::ExistingFile);
    app.add_flag("-q,--quiet", global.quiet, "no messages but errors");
    app.add_flag("-v,--verbose", global.verbose, "say what happens");

    RunOptions run;
    std::string ttl = "30s", wait, grace = "10s", on_lost = "term";
    auto* run_cmd = app.add_subcommand("run", "run a command while holding a lock");
    run_cmd->add_option("--ttl", ttl, "lease, renewed while the command runs (default 30s)");
    auto* wait_opt = run_cmd->add_option("--wait", wait, "wait at most this long for the lock (default: as long as it takes)");
    run_cmd->add_flag("--no-wait", run.no_wait, "one attempt; give up if the lock is held")->excludes(wait_opt);
    run_cmd->add_option("--on-lost", on_lost, "if the lease is lost: term (default), kill or ignore")
        ->check(CLI::IsMember({"term", "kill", "ignore"}));
    run_cmd->add_option("--grace", grace, "after SIGTERM on a lost lease, SIGKILL after this (default 10s)");
    run_cmd->add_option("--conflict-exit-code", run.conflict_exit_code, "exit status when not acquired (default 75)")
        ->check(CLI::Range(0, 255));
    run_cmd->add_option("key", run.key, "the lock's name")->required();

    std::string status_key;
    bool status_json = false;
    auto* status_cmd = app.add_subcommand("status", "show a lock: holder, hold count, lease left, fencing token");
    status_cmd->add_flag("--json", status_json, "one JSON object");
    status_cmd->add_option("key", status_key, "the lock's name")->required();

    std::string release_key;
    bool force = false;
    auto* release_cmd = app.add_subcommand("release", "remove a lock whoever holds it (its holder is told)");
    release_cmd->add_flag("--force", force, "required: this breaks someone else's lock");
    release_cmd->add_option("key", release_key, "the lock's name")->required();

    DemoOptions demo;
    std::string demo_url;
    auto* demo_cmd = app.add_subcommand("demo", "race processes x threads for a bonus pool, with and without the lock");
    demo_cmd->add_option("--processes", demo.processes, "processes (default 4)")->check(CLI::Range(1, 64));
    demo_cmd->add_option("--threads", demo.threads, "threads per process (default 25)")->check(CLI::Range(1, 1000));
    demo_cmd->add_option("--bonuses", demo.bonuses, "bonuses in the pool (default 10)")->check(CLI::Range(1, 100000));
    demo_cmd->add_flag("--json", demo.json, "a JSON summary");
    demo_cmd->add_option("--url", demo_url, "Redis URL; default: start a private redis-server");

    try {
        std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
        app.parse(args);
        global.connect_timeout = duration_option(connect_timeout, "--connect-timeout");
        if (global.connect_timeout.count() == 0) throw CLI::ValidationError("--connect-timeout", "must be positive");
        if (*run_cmd) {
            run.ttl = duration_option(ttl, "--ttl");
            if (run.ttl.count() == 0 || run.ttl > dlock::max_lease)
                throw CLI::ValidationError("--ttl", "must be between 1ms and 24h");
            if (!wait.empty()) run.wait = duration_option(wait, "--wait");
            run.grace = duration_option(grace, "--grace");
            run.on_lost = on_lost == "kill" ? OnLost::kill : on_lost == "ignore" ? OnLost::ignore : OnLost::term;
            run.command = command;
            if (!has_separator || command.empty())
                throw CLI::ValidationError("command", "missing: dlock run KEY -- COMMAND [ARG...]");
        } else if (has_separator) {
            throw CLI::ValidationError("--", "only `dlock run` takes a command");
        }
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
        complain(e.what());
        return exit_usage;
    }

    const char* env_url = std::getenv("DLOCK_URL");
    if (!env_url || !*env_url) env_url = std::getenv("REDIS_URL");
    if (!url_options.empty()) global.urls = split_urls(url_options);
    else if (env_url && *env_url) global.urls = split_urls({env_url});
    global.url_given = !global.urls.empty();
    if (global.urls.empty()) global.urls.emplace_back(dlock::default_server_uri);
    if (global.urls.size() == 2 || global.urls.size() % 2 == 0) {
        complain("a Redlock needs an odd number of masters, at least 3; got " + std::to_string(global.urls.size()) +
                 " URLs");
        return exit_usage;
    }

    try {
        if (*run_cmd) {
            if (run.key.empty()) throw dlock::Error(dlock::errc::invalid_argument, "the key is empty");
            return run_under_lock(global, run);
        }
        if (*status_cmd) return run_status(global, status_key, status_json);
        if (*release_cmd) return run_release(global, release_key, force);
        if (*demo_cmd) {
            if (demo_url.empty() && global.urls.size() > 1) {
                complain("dlock demo runs against one server; give it one URL");
                return exit_usage;
            }
            demo.url = !demo_url.empty() ? demo_url : global.url_given ? global.urls.front() : std::string();
            return run_demo(demo);
        }
    } catch (const dlock::Error& e) {
        complain(e.what());
        return exit_code_for(e.code());
    } catch (const std::exception& e) {
        complain(e.what());
        return exit_internal;
    }
    return exit_usage;
}
