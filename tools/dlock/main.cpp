// dlock — distributed locks on Redis, from the command line.
//
//   dlock [global options] COMMAND [options] ...   (global options may also follow COMMAND)
//   dlock run [--ttl D] [--wait D | -w SECONDS | -n|--no-wait] [-s|--shared] [--on-lost term|kill|ignore]
//             [--grace D] [-E|--conflict-exit-code N] [--json-events] [--metrics-file F [--metrics-job NAME]]
//             KEY... (-- COMMAND [ARG...] | -c 'SHELL COMMAND')
//   dlock hold [--ttl D] [--wait D | -w SECONDS | -n|--no-wait] [--json] KEY
//   dlock status [--json] [--exit-status] KEY
//   dlock wait-free [--timeout D] KEY
//   dlock list [--json] [PATTERN]
//   dlock release --force KEY
//   dlock demo [--processes N] [--threads N] [--bonuses N] [--json] [--metrics] [--url URL]
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "command_line.hpp"
#include "demo.hpp"
#include "dlock/error.hpp"
#include "dlock/semaphore.hpp"
#include "duration.hpp"
#include "event_log.hpp"
#include "help_text.hpp"
#include "run_command.hpp"

#ifndef DLOCK_VERSION
#define DLOCK_VERSION "unknown"
#endif

namespace {

using namespace dlock::cli;

// A process started with descriptor 0, 1 or 2 closed hands the next
// descriptor it opens that number: dlock's eventfd or its Redis socket would
// become "stdin" (polled by hold) or "stderr" (complaints written into the
// protocol), and the command run starts would get a closed descriptor that
// its own first open() takes. /dev/null takes those places first.
void open_closed_standard_descriptors() {
    for (int fd = 0; fd <= 2; ++fd) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        const int opened = open("/dev/null", O_RDWR);
        if (opened >= 0 && opened != fd) {  // only when a lower one could not be opened
            dup2(opened, fd);
            close(opened);
        }
    }
}

// CLI11 takes durations as strings; this turns them into milliseconds or a usage error.
std::chrono::milliseconds duration_option(const std::string& text, const char* option) {
    try {
        return parse_duration(text);
    } catch (const std::invalid_argument& e) {
        throw CLI::ValidationError(option, e.what());
    }
}

// `dlock -h redis.internal run ...` reads like redis-cli's -h HOST. It must
// not print help and exit 0 with the command never run.
bool is_command(CLI::App& app, const std::string& word) {
    for (const auto* command : app.get_subcommands([](CLI::App*) { return true; }))
        if (command->get_name() == word) return true;
    return false;
}

// The leases the library takes, as --help and errors say them: from its
// constants, so that the words cannot drift from the check.
std::string lease_range() {
    return format_duration(dlock::min_lease) + " and " + format_duration(dlock::max_lease);
}

// Where the command word is in args; args.size() when there is none.
std::size_t command_position(CLI::App& app, const std::vector<std::string>& args) {
    std::size_t i = 0;
    while (i < args.size() && args[i] != "--" && !is_command(app, args[i])) ++i;
    return i < args.size() && args[i] != "--" ? i : args.size();
}

// The lock's name: a word, or --key=NAME for a name that begins with '-'
// (as a word it would be read as an option). The same --key everywhere; run
// takes it repeated (AcquireFlags).
constexpr const char* key_option_help = "the lock's name; --key=NAME for one that begins with '-'";
void add_key(CLI::App& command, std::string& key) {
    command.add_option("key,--key", key, key_option_help)->required();
}

// -h, --help and --version are taken only alone after the command: with
// other words they are more likely a lock name from a variable (`dlock run
// "$KEY" -- job` with KEY=-h), and help with exit 0 would skip the job, or
// hand a coprocess's script the help as its token, without a word of error.
void refuse_help_among_other_words(CLI::App& app, const std::vector<std::string>& args, bool has_command) {
    const std::size_t command = command_position(app, args);
    if (command == args.size()) return;
    const std::size_t words = args.size() - command - 1 + (has_command ? 1 : 0);
    for (std::size_t i = command + 1; i < args.size() && args[i] != "--"; ++i) {
        const auto& word = args[i];
        if ((word == "-h" || word == "--help" || word == "--version") && words > 1)
            throw UsageError(word + " takes no other words after the command; a lock name that begins with '-' "
                                    "goes in --key=" + word);
    }
}

// The options `dlock run` and `dlock hold` share.
struct AcquireFlags {
    std::string ttl = "30s", wait, wait_seconds;
    CLI::Option* wait_option = nullptr;
    CLI::Option* wait_seconds_option = nullptr;
    std::vector<std::string> positional_keys, key_options;
    bool several_keys = false;  // run: KEY... and --key repeated hold all of them
    void add_to(CLI::App& command, RunOptions& run, bool several) {
        several_keys = several;
        command.add_option("--ttl", ttl, "lease, renewed while held, between " + lease_range() + " (default 30s)");
        wait_option = command.add_option("--wait", wait, "wait at most this long for the lock (default: as long as it takes)");
        // flock(1)'s short forms, with its meanings: -w SECONDS, -n, -E CODE (and run's -s).
        wait_seconds_option = command.add_option("-w", wait_seconds, "as --wait, in seconds (flock's -w: 10, 0.5)")
                                  ->excludes(wait_option);
        command.add_flag("-n,--no-wait", run.no_wait, "one attempt; give up (silently: exit 75) if the lock is held")
            ->excludes(wait_option)
            ->excludes(wait_seconds_option);
        command.add_flag("--fair", run.fair,
                         "a fair lock: waiters of every host are served strictly in arrival order");
        command.add_option("-E,--conflict-exit-code", run.conflict_exit_code, "exit status when not acquired (default 75)")
            ->check(CLI::Range(0, 255));
        // One --key for every command (add_key's words); run's takes it repeated.
        if (several) {
            command.add_option("key", positional_keys, "the lock's name; several: all of them, as one multi-lock");
            command
                .add_option("--key", key_options,
                            std::string(key_option_help) + "; repeat it for several (after the KEY arguments)")
                ->take_all()
                ->allow_extra_args(false);
        } else {
            command.add_option("key", positional_keys, "the lock's name");
            // One name, as for status (add_key): TEXT, not a list, in --help.
            command.add_option_function<std::string>(
                "--key", [this](const std::string& key) { key_options.push_back(key); }, key_option_help);
        }
    }
    // First, so that run's events name the keys in every later complaint.
    void resolve_keys(RunOptions& run) const {
        // KEY arguments, then --key values; a repeated key counts once.
        for (const auto* given : {&positional_keys, &key_options}) {
            for (const auto& key : *given) {
                if (key.empty()) throw CLI::ValidationError("key", "the key is empty");
                if (std::find(run.keys.begin(), run.keys.end(), key) == run.keys.end()) run.keys.push_back(key);
            }
        }
        if (run.keys.empty())
            throw UsageError(several_keys ? "missing KEY: dlock run KEY... -- COMMAND [ARG...]" : "missing KEY");
        if (!several_keys && positional_keys.size() + key_options.size() > 1)
            throw UsageError("one KEY only (`dlock run` takes several): unexpected " +
                             (positional_keys.size() > 1 ? positional_keys[1] : key_options.back()));
    }
    void resolve(RunOptions& run) const {
        resolve_keys(run);
        resolve_durations(run);
    }
    void resolve_durations(RunOptions& run) const {
        run.ttl = duration_option(ttl, "--ttl");
        if (run.ttl < dlock::min_lease || run.ttl > dlock::max_lease)
            throw CLI::ValidationError("--ttl", "must be between " + lease_range());
        // Given but empty ("--wait $UNSET") is a usage error, not "forever".
        if (wait_option->count() > 0) run.wait = duration_option(wait, "--wait");
        if (wait_seconds_option->count() > 0) run.wait = seconds_option(wait_seconds);
    }
    // -w SECONDS as flock takes it (a number, maybe with a fraction), or a
    // duration with its unit.
    static std::chrono::milliseconds seconds_option(const std::string& text) {
        // Decimal digits with at most one '.', nothing else: stod alone would
        // also read hex ("0x10"), exponents, "inf" and "nan".
        const bool plain_number = !text.empty() && text.size() <= 12 && std::isdigit(static_cast<unsigned char>(text.front())) &&
                                  std::count(text.begin(), text.end(), '.') <= 1 &&
                                  std::all_of(text.begin(), text.end(), [](char c) {
                                      return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
                                  });
        if (plain_number) return std::chrono::milliseconds(static_cast<long long>(std::stod(text) * 1000 + 0.5));
        try {
            return parse_duration(text);
        } catch (const std::invalid_argument&) {
            std::string message = "-w takes SECONDS (as flock's -w: 10, 0.5) or a duration (10s); got '" + text + "'.";
            // Only a word that begins with '-' may have been meant as a name.
            if (!text.empty() && text.front() == '-') message += " A lock name that begins with '-' goes in --key=NAME";
            throw UsageError(message);
        }
    }
};

}  // namespace

int main(int argc, char** argv) {
    open_closed_standard_descriptors();
    // Everything after the first "--" is the command `dlock run` executes;
    // CLI11 must not read its options as ours (other commands get it back).
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

    // With --json-events every line dlock writes on stderr is an event, its
    // complaints too, even about the command line: a log shipper parses each
    // line as JSON. Known before parsing, so that parse errors are events as
    // well; the keys are filled in once read (null until then).
    EventLog messages(true, {});
    if (std::find(args.begin(), args.end(), "--json-events") != args.end()) send_messages_to(&messages);

    CLI::App app{"dlock: distributed locks on Redis", "dlock"};
    // What each command takes, as the man page's synopsis says it.
    app.formatter(std::make_shared<UsageFormatter>(std::map<std::string, std::string>{
        {"", "dlock [OPTIONS] COMMAND [COMMAND OPTIONS] ..."},
        {"run", "dlock run [OPTIONS] KEY... (-- COMMAND [ARG...] | -c 'SHELL COMMAND')"},
        {"hold", "dlock hold [OPTIONS] KEY"},
        {"status", "dlock status [OPTIONS] KEY"},
        {"wait-free", "dlock wait-free [OPTIONS] KEY"},
        {"list", "dlock list [OPTIONS] [PATTERN]"},
        {"release", "dlock release --force [OPTIONS] KEY"},
        {"demo", "dlock demo [OPTIONS]"},
    }));
    app.footer(help::global);
    app.set_version_flag("--version", "dlock " DLOCK_VERSION);
    app.require_subcommand(1);
    // Options a command does not know are the global ones: they may follow it.
    app.fallthrough();
    GlobalOptions global;
    Credentials credentials;
    std::vector<std::string> url_options;
    std::string connect_timeout = "2s";
    auto* url_option = app.add_option("--url", url_options,
                   "Redis URL; default $DLOCK_URL, then $REDIS_URL, then redis://127.0.0.1:6379. Given 3 or more "
                   "times (or as a comma list): independent masters of a Redlock")
        ->take_all()
        ->allow_extra_args(false);
    app.add_option("--user", credentials.user, "ACL user (with a password from --password-file or the environment)");
    auto* password_file_option = app.add_option("--password-file", credentials.password_file,
                   "read the password from this file's first line (else $DLOCK_PASSWORD, then $REDISCLI_AUTH)");
    app.add_option("--sentinel-user", credentials.sentinel_user,
                   "ACL user on the sentinels of a redis-sentinel:// URL (the URL's credentials are the master's)");
    app.add_option("--sentinel-password-file", credentials.sentinel_password_file,
                   "the sentinels' password, from this file's first line (else $DLOCK_SENTINEL_PASSWORD)");
    app.add_option("--connect-timeout", connect_timeout, "how long to try to reach Redis (default 2s)");
    app.add_option("--tls-ca", global.tls_ca, "CA certificate file for rediss:// URLs")->check(CLI::ExistingFile);
    app.add_option("--tls-cert", global.tls_cert, "client certificate file")->check(CLI::ExistingFile);
    app.add_option("--tls-key", global.tls_key, "client key file")->check(CLI::ExistingFile);
    app.add_flag("-q,--quiet", global.quiet, "no messages but errors");
    app.add_flag("-v,--verbose", global.verbose, "say what happens");

    RunOptions run;
    AcquireFlags run_flags;
    std::string grace = "10s", on_lost = "term", shell_command;
    auto* run_cmd = app.add_subcommand("run", "run a command while holding a lock");
    run_cmd->footer(help::run);
    run_flags.add_to(*run_cmd, run, true);
    run_cmd
        ->add_option("--on-lost", on_lost,
                     "if the lease is lost: term (SIGTERM, SIGKILL after --grace), kill or ignore (default term)")
        ->check(CLI::IsMember({"term", "kill", "ignore"}));
    run_cmd->add_option("--grace", grace, "after SIGTERM on a lost lease, SIGKILL after this (default 10s)");
    run_cmd->add_option("-c,--command", shell_command, "run this string with /bin/sh -c (instead of -- COMMAND)");
    run_cmd->add_flag("--json-events", run.json_events,
                      "one JSON object per line on stderr for each event, dlock's errors and warnings too");
    run_cmd->add_option("--permits", run.permits,
                        "hold one of N permits of semaphore KEY instead of a lock (N: the limit, set if new)");
    run_cmd
        ->add_option("--metrics-file", run.metrics_file,
                     "when it ends, write this run's gauges there (start, end, duration, exit code, wait, "
                     "acquired: node_exporter's textfile collector; one file per job; its directory must exist)")
        ->check([](const std::string& path) {
            // Given but empty ("--metrics-file $UNSET") would write nothing, silently.
            return path.empty() ? std::string("needs a file name; it was given empty") : std::string();
        });
    run_cmd->add_option("--metrics-job", run.metrics_job,
                        "the job label of --metrics-file's gauges (default: the keys, joined by commas)");
    run_cmd->add_flag("--set-limit", run.set_limit,
                      "with --permits N: when the semaphore exists with another limit, set it to N (else exit 65)");
    run_cmd->add_flag("-s,--shared", run.shared,
                      "take KEY's read side: runs beside other --shared runs, never beside one without it");

    RunOptions hold;
    AcquireFlags hold_flags;
    auto* hold_cmd = app.add_subcommand(
        "hold", "hold a lock until a signal, or until stdin (a pipe or terminal) closes: print its token first");
    hold_cmd->footer(help::hold);
    hold_flags.add_to(*hold_cmd, hold, false);
    hold_cmd->add_flag("--json", hold.json, "print key, token, lease and holder as one JSON object");

    StatusOptions status;
    auto* status_cmd = app.add_subcommand("status", "show a lock: holder, hold count, lease left, fencing token");
    status_cmd->footer(help::status);
    status_cmd->add_flag("--json", status.json, "one JSON object");
    status_cmd->add_flag("--exit-status", status.exit_status, "exit 0 when held, 1 when free (for probes)");
    add_key(*status_cmd, status.key);

    WaitFreeOptions wait_free;
    std::string wait_free_timeout;
    auto* wait_free_cmd = app.add_subcommand("wait-free", "wait until a lock is free, without taking it");
    wait_free_cmd->footer(help::wait_free);
    auto* wait_free_timeout_option =
        wait_free_cmd->add_option("--timeout", wait_free_timeout, "give up after this long (default: never)");
    add_key(*wait_free_cmd, wait_free.key);

    std::string list_pattern = "*";
    bool list_json = false;
    auto* list_cmd = app.add_subcommand("list", "the locks held now: holder, hold count, lease left, token");
    list_cmd->footer(help::list);
    list_cmd->add_flag("--json", list_json, "one JSON object per line");
    list_cmd->add_option("pattern,--pattern", list_pattern,
                         "a glob on lock names (default *); --pattern=P for one that begins with '-'");

    ReleaseOptions release;
    auto* release_cmd = app.add_subcommand("release", "remove a lock whoever holds it (its holders are told)");
    release_cmd->footer(help::release);
    release_cmd->add_flag("--force", release.force, "required: this breaks someone else's lock");
    auto* release_all = release_cmd->add_flag(
        "--all", release.all, "break every hold of a name held several times (readers, permits)");
    release_cmd
        ->add_option("--holder", release.holder, "break only this holder's hold (an owner or permit id, as status shows)")
        ->excludes(release_all);
    add_key(*release_cmd, release.key);

    DemoOptions demo;
    std::string demo_url;
    auto* demo_cmd = app.add_subcommand("demo", "race processes x threads for a bonus pool, with and without the lock");
    demo_cmd->footer(help::demo);
    demo_cmd->add_option("--processes", demo.processes, "processes (default 4)")->check(CLI::Range(1, 64));
    demo_cmd->add_option("--threads", demo.threads, "threads per process (default 25)")->check(CLI::Range(1, 1000));
    demo_cmd->add_option("--bonuses", demo.bonuses, "bonuses in the pool (default 10)")->check(CLI::Range(1, 100000));
    demo_cmd->add_flag("--json", demo.json, "a JSON summary");
    demo_cmd->add_flag("--metrics", demo.metrics,
                       "then the race's metrics, every process's added up (Prometheus text format)");
    demo_cmd->add_option("--url", demo_url, "Redis URL; default: start a private redis-server");

    // For every other command -- only ends the options, as everywhere:
    // `dlock status -- -weird` names a lock that begins with '-'.
    if (has_separator) {
        const auto at = command_position(app, args);
        if (at == args.size() || args[at] != "run") {
            args.push_back("--");
            args.insert(args.end(), command.begin(), command.end());
            command.clear();
            has_separator = false;
        }
    }

    try {
        // -h is help, as everywhere; a word after it that is not a command
        // is most likely a host (redis-cli's -h): refuse rather than print
        // help and exit 0 without running anything. The command after --
        // is not dlock's to judge.
        for (std::size_t i = 0; i + 1 < args.size() && args[i] != "--"; ++i) {
            if (args[i] != "-h" && args[i] != "--help") continue;
            const auto& next = args[i + 1];
            if (next.empty() || next.front() == '-' || is_command(app, next)) continue;
            throw UsageError("-h is --help; to name a server say --url redis://" +
                             (next.find(':') != next.rfind(':') ? "[" + next + "]" : next));
        }
        refuse_help_among_other_words(app, args, has_separator);
        check_words(app, args);
        std::vector<const char*> pointers{argv[0]};
        for (const auto& a : args) pointers.push_back(a.c_str());
        app.parse(static_cast<int>(pointers.size()), pointers.data());
        // The word may have been another option's value (-c --json-events).
        if (!run.json_events) send_messages_to(nullptr);
        global.connect_timeout = duration_option(connect_timeout, "--connect-timeout");
        if (global.connect_timeout.count() == 0) throw CLI::ValidationError("--connect-timeout", "must be positive");
        if (*run_cmd) {
            run_flags.resolve_keys(run);
            if (run.json_events) messages = EventLog(true, run.keys);  // the keys are known now
            run_flags.resolve_durations(run);
            run.grace = duration_option(grace, "--grace");
            if (run.set_limit && run_cmd->count("--permits") == 0)
                throw UsageError("--set-limit goes with --permits N: it sets the semaphore's limit to N");
            if (run_cmd->count("--permits") > 0 && (run.permits == 0 || run.permits > dlock::max_semaphore_limit))
                throw CLI::ValidationError("--permits", "must be between 1 and " +
                                                            std::to_string(dlock::max_semaphore_limit));
            run.on_lost = on_lost == "kill" ? OnLost::kill : on_lost == "ignore" ? OnLost::ignore : OnLost::term;
            if (!shell_command.empty() && has_separator)
                throw UsageError("give either -c 'SHELL COMMAND' or -- COMMAND [ARG...], not both");
            if (run_cmd->count("-c") && shell_command.empty()) throw UsageError("-c: the command string is empty");
            run.command = shell_command.empty() ? command : std::vector<std::string>{"/bin/sh", "-c", shell_command};
            if (run.command.empty())
                throw UsageError("run: missing command: dlock run KEY... -- COMMAND [ARG...] (or -c 'SHELL COMMAND')");
        }
        if (*hold_cmd) hold_flags.resolve(hold);
        if (wait_free_timeout_option->count() > 0)
            wait_free.timeout = duration_option(wait_free_timeout, "--timeout");
        if (password_file_option->count() > 0 && credentials.password_file.empty())
            throw UsageError("--password-file: the path is empty");
        // An option given but empty ("--url $UNSET") must not mean the default server.
        if (url_option->count() > 0) global.urls = split_urls(url_options);
        // Set but empty ("DLOCK_URL=$UNSET" in a crontab) is an empty URL too.
        else if (const char* env = std::getenv("DLOCK_URL")) global.urls = split_urls({env});
        else if (const char* env2 = std::getenv("REDIS_URL")) global.urls = split_urls({env2});
        global.url_given = !global.urls.empty();
        if (global.urls.empty()) global.urls.emplace_back(dlock::default_server_uri);
        apply_credentials(global.urls, credentials);
        apply_sentinel_credentials(global, credentials);
        if (global.urls.size() % 2 == 0)
            throw UsageError("a Redlock needs an odd number of masters, at least 3; got " +
                             std::to_string(global.urls.size()) + " URLs");
        if (*run_cmd && run.keys.size() > 1 && global.urls.size() > 1)
            throw UsageError("several keys are a multi-lock on one server; it does not run over a Redlock's masters");
    } catch (const CLI::ExtrasError&) {
        // CLI11's own message lists them last first.
        std::string extras;
        for (const auto& a : app.remaining(true)) extras += " " + a;
        const auto* given = app.get_subcommands().empty() ? nullptr : app.get_subcommands().front();
        complain("unexpected arguments:" + extras + ". See 'dlock " + (given ? given->get_name() + " " : "") +
                 "--help'");
        return exit_usage;
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
        complain(e.what());
        return exit_usage;
    } catch (const UsageError& e) {
        complain(e.what());
        return exit_usage;
    }

    try {
        if (*run_cmd) return run_under_lock(global, run);
        if (*hold_cmd) return hold_until_told(global, hold);
        if (*status_cmd) return run_status(global, status);
        if (*wait_free_cmd) return run_wait_free(global, wait_free);
        if (*list_cmd) return run_list(global, list_pattern, list_json);
        if (*release_cmd) return run_release(global, release);
        if (*demo_cmd) {
            if (demo_url.empty() && global.urls.size() > 1) {
                complain("dlock demo runs against one server; give it one URL");
                return exit_usage;
            }
            if (!demo_url.empty()) {
                // The same credentials as every other command's URL.
                std::vector<std::string> urls{demo_url};
                apply_credentials(urls, credentials);
                demo_url = urls.front();
            }
            demo.url = !demo_url.empty() ? demo_url : global.url_given ? global.urls.front() : std::string();
            return run_demo(demo);
        }
    } catch (const UsageError& e) {  // found once the command runs (--metrics-file's directory)
        complain(e.what());
        return exit_usage;
    } catch (const dlock::Error& e) {
        complain(explain(e, global));
        return exit_code_for(e.code());
    } catch (const std::exception& e) {
        complain(e.what());
        return exit_internal;
    }
    return exit_usage;
}
