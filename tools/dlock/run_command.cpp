#include "run_command.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <stop_token>
#include <thread>

#include "dlock/error.hpp"
#include "json.hpp"
#include "lock_session.hpp"
#include "exposition.hpp"

extern char** environ;

namespace dlock::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The command's environment: dlock's own variables from an outer `dlock
// run` go, these come: DLOCK_KEY_COUNT=N, DLOCK_KEY_i and
// DLOCK_FENCING_TOKEN_i (i = 1..N, the keys in the order given), and for one
// key also DLOCK_KEY and DLOCK_FENCING_TOKEN. With several keys those two
// stay unset: a script written for one key must not use one key's token for
// all of them.
std::vector<std::string> child_environment(const RunOptions& options, const Tokens& tokens) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        std::string_view entry(*e);
        bool ours = false;
        for (std::string_view prefix : {"DLOCK_KEY=", "DLOCK_KEY_", "DLOCK_FENCING_TOKEN=", "DLOCK_FENCING_TOKEN_"})
            ours |= entry.rfind(prefix, 0) == 0;
        if (!ours) env.emplace_back(entry);
    }
    auto token_of = [&](const std::string& key) {
        for (const auto& [name, token] : tokens)
            if (name == key) return token;
        return std::uint64_t{0};
    };
    const auto& keys = options.keys;
    env.push_back("DLOCK_KEY_COUNT=" + std::to_string(keys.size()));
    for (std::size_t i = 0; i < keys.size(); ++i) {
        env.push_back("DLOCK_KEY_" + std::to_string(i + 1) + "=" + keys[i]);
        env.push_back("DLOCK_FENCING_TOKEN_" + std::to_string(i + 1) + "=" + std::to_string(token_of(keys[i])));
    }
    if (keys.size() == 1) {
        env.push_back("DLOCK_KEY=" + keys.front());
        env.push_back("DLOCK_FENCING_TOKEN=" + std::to_string(token_of(keys.front())));
    }
    return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

int status_to_exit_code(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return exit_internal;
}


// In the forked child: makes the kernel kill the command when dlock dies
// without passing anything on (SIGKILL, a crash). Nobody renews the lease
// then, so a command left running would be unprotected once it expires.
// SIGKILL rather than SIGTERM: no dlock is left to follow a SIGTERM with
// SIGKILL after --grace, and a command that traps TERM or stops slowly would
// outlive the lease. --on-lost ignore lets the command finish after a lost
// lease, and dlock's death is one. False if the command must not start.
bool dies_with_dlock(pid_t dlock_pid, OnLost on_lost) {
    if (on_lost == OnLost::ignore) return true;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        complain(std::string("cannot tie the command to dlock: ") + std::strerror(errno));
        return false;
    }
    // dlock may have died between fork() and prctl(): then no signal will
    // come, and this process already has another parent.
    return getppid() == dlock_pid;
}

// In the forked child: execs the command, or exits as a shell would.
[[noreturn]] void exec_command(const RunOptions& options, pid_t dlock_pid, const sigset_t& original,
                               std::vector<char*>& argv, std::vector<char*>& env) {
    if (!dies_with_dlock(dlock_pid, options.on_lost)) _exit(exit_internal);
    pthread_sigmask(SIG_SETMASK, &original, nullptr);
    execvpe(argv[0], argv.data(), env.data());
    int code = errno == ENOENT ? 127 : 126;  // as shells do
    // An event too with --json-events (complain knows): the message log
    // was copied into this process with the rest of dlock's memory.
    complain(std::string(argv[0]) + ": " + std::strerror(errno));
    _exit(code);
}

}  // namespace

// Acquire, run the command, release: the same for a Lock on one server and
// a Redlock over several masters.
template <typename AnyLock>
int hold_and_run(const GlobalOptions& global, const RunOptions& options, AnyLock& lock, Session& session,
                 std::optional<Clock::time_point>* acquired_at) {
    auto& watch = session.watch;
    auto& lost_signal = session.lost;
    const EventLog events(options.json_events, options.keys);
    if (auto failed = acquire_watching_signals(global, options, lock, session, events)) return *failed;
    if (acquired_at) *acquired_at = Clock::now();
    const auto tokens = tokens_of(lock);
    // The "acquired" event already said so.
    if (global.verbose && !events.enabled()) {
        std::string said = tokens.size() == 1 ? "token " + std::to_string(tokens.front().second) : "tokens";
        for (const auto& [key, token] : tokens)
            if (tokens.size() > 1) said += (said == "tokens" ? " " : ", ") + key + " " + std::to_string(token);
        complain("acquired " + options.label() + " (fencing " + said + ")");
    }

    auto env = child_environment(options, tokens);
    auto env_pointers = pointers(env);
    auto argv = options.command;
    auto argv_pointers = pointers(argv);
    // The parent-death signal follows the thread that forks: this one, which
    // lives as long as dlock.
    const pid_t dlock_pid = getpid();
    pid_t child = fork();
    if (child < 0) {
        complain(std::string("fork failed: ") + std::strerror(errno));
        lock.unlock();
        return exit_internal;
    }
    if (child == 0) exec_command(options, dlock_pid, watch.original, argv_pointers, env_pointers);

    bool lost = false;
    int status = 0;
    std::optional<Clock::time_point> kill_at;
    // Renewals happen in the client's lease keeper; with --json-events this
    // loop looks at the hold's validity (local state, no request to Redis)
    // a few times per renewal period and reports each one it sees.
    const auto renewal_check = std::max(options.ttl / 6, std::chrono::milliseconds(50));
    auto valid_until = lock.valid_until();
    std::optional<Clock::time_point> check_at;
    if (events.enabled()) check_at = Clock::now() + renewal_check;
    for (bool exited = false; !exited;) {
        std::optional<Clock::time_point> wake = kill_at;
        if (check_at && (!wake || *check_at < *wake)) wake = check_at;
        int timeout = -1;
        if (wake) {
            auto left = std::chrono::ceil<std::chrono::milliseconds>(*wake - Clock::now()).count();
            timeout = static_cast<int>(std::max<long long>(left, 0));
        }
        pollfd fds[] = {{watch.signals.fd, POLLIN, 0}, {lost_signal.event_fd, POLLIN, 0}};
        int ready = poll(fds, 2, timeout);
        if (ready < 0 && errno != EINTR) break;
        if (check_at && Clock::now() >= *check_at && !lost) {
            const auto now_valid_until = lock.valid_until();
            if (now_valid_until > valid_until && valid_until != Clock::time_point{})
                events.emit("renewed", "\"valid_for_ms\": " +
                                           std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                              now_valid_until - Clock::now())
                                                              .count()));
            valid_until = now_valid_until;
            check_at = Clock::now() + renewal_check;
        }
        if (kill_at && Clock::now() >= *kill_at) {
            kill(child, SIGKILL);  // the grace period is over
            kill_at.reset();
        }
        if (fds[1].revents & POLLIN) {
            drain_event(lost_signal.event_fd);
            if (!lost) {
                lost = true;
                std::error_code reason = lost_signal.get();
                const char* action = options.on_lost == OnLost::term   ? "sending SIGTERM to the command"
                                     : options.on_lost == OnLost::kill ? "killing the command"
                                                                       : "letting the command finish";
                events.report("lost", loss_fields(reason),
                              "the lock on " + options.label() + " was lost: " + loss_text(reason) + "; " + action);
                if (options.on_lost == OnLost::term) {
                    kill(child, SIGTERM);
                    kill_at = Clock::now() + options.grace;
                } else if (options.on_lost == OnLost::kill) {
                    kill(child, SIGKILL);
                }
            }
        }
        if (fds[0].revents & POLLIN) {
            signalfd_siginfo info;
            while (read(watch.signals.fd, &info, sizeof info) == sizeof info) {
                if (info.ssi_signo != SIGCHLD) kill(child, static_cast<int>(info.ssi_signo));  // forward
            }
            // SIGCHLDs may coalesce: ask for this child by pid every time.
            if (waitpid(child, &status, WNOHANG) == child) exited = true;
        }
    }
    events.emit("exited", WIFSIGNALED(status) ? "\"signal\": " + std::to_string(WTERMSIG(status))
                                              : "\"exit_code\": " + std::to_string(status_to_exit_code(status)));
    if (!release(lock, options, events, session, lost)) lost = true;
    return lost ? exit_lost : status_to_exit_code(status);
}

int run_under_lock(const GlobalOptions& global, const RunOptions& options) {
    if (options.metrics_file.empty())
        return with_lock<true>(global, options, [&](auto& lock, Session& session) {
            return hold_and_run(global, options, lock, session, nullptr);
        });
    // Whatever the ending (the command's status, a lost lease, an error),
    // the file says how this run went.
    check_metrics_path(options.metrics_file);
    RunRecord record;
    for (const auto& key : options.keys) record.key += (record.key.empty() ? "" : ",") + key;
    record.job = options.metrics_job.empty() ? record.key : options.metrics_job;
    // One start for every figure: the --wait deadline's (options.started).
    // The wall-clock timestamp is that moment; durations are steady-clock
    // from it, so the run's duration is never shorter than its wait.
    record.start = std::chrono::system_clock::now() -
                   std::chrono::duration_cast<std::chrono::system_clock::duration>(Clock::now() - options.started);
    std::optional<Clock::time_point> acquired_at;
    auto finish = [&](int status) {
        const auto now = Clock::now();
        record.took = now - options.started;
        record.acquired = acquired_at.has_value();
        record.waited = acquired_at.value_or(now) - options.started;
        record.exit_code = status;
        write_metrics_file(options.metrics_file, run_exposition(record));
        return status;
    };
    try {
        return finish(with_lock<true>(global, options, [&](auto& lock, Session& session) {
            return hold_and_run(global, options, lock, session, &acquired_at);
        }));
    } catch (const dlock::Error& e) {
        finish(exit_code_for(e.code()));
        throw;
    } catch (...) {
        finish(exit_internal);
        throw;
    }
}

}  // namespace dlock::cli
