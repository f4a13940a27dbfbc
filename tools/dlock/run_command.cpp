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
#include "dlock/redlock.hpp"

extern char** environ;

namespace dlock::cli {
namespace {

using Clock = std::chrono::steady_clock;

// A file descriptor that closes itself.
struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    ~Fd() {
        if (fd >= 0) close(fd);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
};

void signal_event(int fd) {
    std::uint64_t one = 1;
    (void)!write(fd, &one, sizeof one);
}

void drain_event(int fd) {
    std::uint64_t value;
    (void)!read(fd, &value, sizeof value);
}

// The signals dlock handles itself. They are blocked in every thread
// (the client's I/O thread inherits the mask) and read from a signalfd, so
// no handler runs at an awkward moment.
sigset_t handled_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, s);
    return set;
}

std::vector<std::string> child_environment(const RunOptions& options, std::uint64_t token) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        std::string_view entry(*e);
        if (entry.rfind("DLOCK_KEY=", 0) == 0 || entry.rfind("DLOCK_FENCING_TOKEN=", 0) == 0) continue;
        env.emplace_back(entry);
    }
    env.push_back("DLOCK_KEY=" + options.key);
    env.push_back("DLOCK_FENCING_TOKEN=" + std::to_string(token));
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

std::string describe(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

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
        std::fprintf(stderr, "dlock: cannot tie the command to dlock: %s\n", std::strerror(errno));
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
    std::fprintf(stderr, "dlock: %s: %s\n", argv[0], std::strerror(errno));
    _exit(code);
}

}  // namespace

// What a lost lease leaves for the poll loop: the reason, and a wake-up.
struct LostSignal {
    int event_fd;
    std::mutex mutex;
    std::error_code reason;
    void operator()(std::string_view, std::error_code why) {
        {
            std::lock_guard lock(mutex);
            reason = why;
        }
        signal_event(event_fd);
    }
    std::error_code get() {
        std::lock_guard lock(mutex);
        return reason;
    }
};

// Acquire, run the command, release: the same for a Lock on one server and
// a Redlock over several masters.
template <typename AnyLock>
int hold_and_run(const GlobalOptions& global, const RunOptions& options, AnyLock& lock, LostSignal& lost_signal,
                 Fd& signals, Fd& acquired_event, const sigset_t& original) {
    // Acquire on a helper thread, so this one can keep watching signals:
    // Ctrl-C while waiting for a busy lock must end the wait.
    std::stop_source stop;
    bool acquired = false;
    std::error_code acquire_error;
    std::string acquire_detail;
    std::thread acquirer([&] {
        try {
            if (options.no_wait) acquired = lock.try_lock();
            else if (options.wait) acquired = lock.try_lock_until(Clock::now() + *options.wait, stop.get_token());
            else acquired = lock.lock(stop.get_token());
        } catch (const Error& e) {
            acquire_error = e.code();
            acquire_detail = e.what();
        }
        signal_event(acquired_event.fd);
    });
    int interrupted_by = 0;
    for (bool done = false; !done;) {
        pollfd fds[] = {{signals.fd, POLLIN, 0}, {acquired_event.fd, POLLIN, 0}};
        if (poll(fds, 2, -1) < 0 && errno != EINTR) break;
        if (fds[0].revents & POLLIN) {
            signalfd_siginfo info;
            while (read(signals.fd, &info, sizeof info) == sizeof info) {
                if (info.ssi_signo == SIGCHLD) continue;
                interrupted_by = static_cast<int>(info.ssi_signo);
                stop.request_stop();
            }
        }
        if (fds[1].revents & POLLIN) done = true;
    }
    acquirer.join();
    if (acquire_error) {
        complain(acquire_detail);
        return exit_code_for(acquire_error);
    }
    if (interrupted_by) {
        if (acquired) lock.unlock();
        return 128 + interrupted_by;
    }
    if (!acquired) {
        if (!global.quiet) {
            std::string waited = options.no_wait ? "without waiting" : "within " + describe(*options.wait);
            complain(options.key + " is held by another owner; not acquired " + waited);
        }
        return options.conflict_exit_code;
    }
    const auto token = lock.fencing_token();
    if (global.verbose) complain("acquired " + options.key + " (fencing token " + std::to_string(token) + ")");

    auto env = child_environment(options, token);
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
    if (child == 0) exec_command(options, dlock_pid, original, argv_pointers, env_pointers);

    bool lost = false;
    int status = 0;
    std::optional<Clock::time_point> kill_at;
    for (bool exited = false; !exited;) {
        int timeout = -1;
        if (kill_at) {
            auto left = std::chrono::ceil<std::chrono::milliseconds>(*kill_at - Clock::now()).count();
            timeout = static_cast<int>(std::max<long long>(left, 0));
        }
        pollfd fds[] = {{signals.fd, POLLIN, 0}, {lost_signal.event_fd, POLLIN, 0}};
        int ready = poll(fds, 2, timeout);
        if (ready < 0 && errno != EINTR) break;
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
                complain("lost the lock on " + options.key + " (" + reason.message() + "); " + action);
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
            while (read(signals.fd, &info, sizeof info) == sizeof info) {
                if (info.ssi_signo != SIGCHLD) kill(child, static_cast<int>(info.ssi_signo));  // forward
            }
            // SIGCHLDs may coalesce: ask for this child by pid every time.
            if (waitpid(child, &status, WNOHANG) == child) exited = true;
        }
    }
    std::error_code unlock_error;
    lock.unlock(unlock_error);
    if (!lost && unlock_error == errc::lease_lost) {
        lost = true;
        complain("the lock on " + options.key + " was lost before the command ended");
    } else if (unlock_error && !lost) {
        complain("releasing " + options.key + ": " + unlock_error.message() + " (its lease will end it)");
    }
    return lost ? exit_lost : status_to_exit_code(status);
}

int run_under_lock(const GlobalOptions& global, const RunOptions& options) {
    const sigset_t handled = handled_signals();
    sigset_t original;
    pthread_sigmask(SIG_BLOCK, &handled, &original);
    Fd signals(signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
    Fd lost_event(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    Fd acquired_event(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (signals.fd < 0 || lost_event.fd < 0 || acquired_event.fd < 0) {
        complain(std::string("cannot set up signal handling: ") + std::strerror(errno));
        return exit_internal;
    }
    LostSignal lost_signal{lost_event.fd};
    // The acquiring thread and the unlocking thread differ: the lock object owns the hold.
    auto on_lost = [&](std::string_view name, std::error_code reason) { lost_signal(name, reason); };

    if (global.urls.size() > 1) {
        Masters masters(global.urls, client_options(global));
        if (!enough_masters_reachable(masters)) return exit_unavailable;
        Redlock lock(masters, options.key,
                     {.lease = options.ttl, .ownership = Ownership::handle, .on_lost = on_lost});
        return hold_and_run(global, options, lock, lost_signal, signals, acquired_event, original);
    }
    Client client(global.urls.front(), client_options(global));
    std::error_code ec;
    client.wait_connected(ec);
    if (ec) {
        complain("cannot use " + client.address().to_string() + ": " + ec.message());
        return exit_unavailable;
    }
    Lock lock(client, options.key, {.lease = options.ttl, .ownership = Ownership::handle, .on_lost = on_lost});
    return hold_and_run(global, options, lock, lost_signal, signals, acquired_event, original);
}

}  // namespace dlock::cli
