// dlock hold: the coprocess pattern. A script that cannot wrap one command
// in `dlock run` starts `dlock hold KEY` beside it, reads the fencing token
// from its stdout, works, and lets go by closing dlock's stdin when that is
// a pipe, socket or terminal (or with SIGTERM); the lease is renewed meanwhile.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "json.hpp"
#include "lock_session.hpp"
#include "run_command.hpp"

namespace dlock::cli {
namespace {

// Whether stdin's end is something a user does: closing a pipe or a socket
// (a coprocess, `exec {fd}>&-`) or Ctrl-D at a terminal. A shell gives a
// background job /dev/null, and a file ends as soon as it is read: taking
// their end for "let go" would release the lock the moment it is taken.
bool stdin_is_a_channel() {
    struct stat st;
    if (fstat(STDIN_FILENO, &st) != 0) return false;
    return S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || isatty(STDIN_FILENO);
}

template <typename AnyLock>
int hold(const GlobalOptions& global, const RunOptions& options, AnyLock& lock, Session& session) {
    auto& watch = session.watch;
    auto& lost_signal = session.lost;
    const EventLog events(false, options.keys);
    if (auto failed = acquire_watching_signals(global, options, lock, session, events)) return *failed;
    const auto token = lock.fencing_token();
    if (options.json) {
        // The owner as the server recorded it, for `dlock status` and logs to match.
        const LockInfo info = inspect_lock(session.probe, options.keys.front());
        std::printf("{\"key\": %s, \"fencing_token\": %llu, \"lease_ms\": %lld, \"owner\": %s, \"holder\": %s}\n",
                    json_string(options.keys.front()).c_str(), static_cast<unsigned long long>(token),
                    static_cast<long long>(options.ttl.count()), json_string(info.owner).c_str(),
                    json_string(describe_owner(info)).c_str());
    } else {
        std::printf("%llu\n", static_cast<unsigned long long>(token));
    }
    std::fflush(stdout);

    // Until stdin ends (or fails), a signal arrives, or the lease is lost.
    // poll() skips a negative descriptor: stdin that is no channel is not watched.
    const int input = stdin_is_a_channel() ? STDIN_FILENO : -1;
    if (input < 0 && global.verbose)
        complain("stdin is not a pipe, socket or terminal: holding " + options.label() +
                 " until SIGTERM, SIGINT or SIGHUP");
    for (;;) {
        pollfd fds[] = {{watch.signals.fd, POLLIN, 0}, {lost_signal.event_fd, POLLIN, 0}, {input, POLLIN, 0}};
        if (poll(fds, 3, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (fds[1].revents & POLLIN) {
            complain("the lock on " + options.label() + " was lost: " + loss_text(lost_signal.get()));
            std::error_code ignored;
            lock.unlock(ignored);
            return exit_lost;
        }
        if (fds[0].revents & POLLIN) {
            signalfd_siginfo info;
            bool told = false;
            while (read(watch.signals.fd, &info, sizeof info) == sizeof info) told |= info.ssi_signo != SIGCHLD;
            if (told) break;
        }
        if (fds[2].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) {
            char buffer[512];
            const auto n = read(STDIN_FILENO, buffer, sizeof buffer);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;  // what is written is ignored
        }
    }
    return release(lock, options, events, session, false) ? exit_ok : exit_lost;
}

}  // namespace

int hold_until_told(const GlobalOptions& global, const RunOptions& options) {
    // A reader that went away before the token was written must not kill
    // dlock with SIGPIPE while it holds the lock: it waits for stdin's end.
    signal(SIGPIPE, SIG_IGN);
    return with_lock(global, options, [&](auto& lock, Session& session) { return hold(global, options, lock, session); });
}

}  // namespace dlock::cli
