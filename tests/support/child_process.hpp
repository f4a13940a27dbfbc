// Runs a function in a forked child (a separate process with its own
// Clients), for tests that need several processes or a holder to kill -9.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace dlock::support {

// The child exits with f's return value, skipping the test framework's
// teardown; it is killed if this process dies.
inline pid_t run_in_child(const std::function<int()>& f) {
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int code = 100;
        try {
            code = f();
        } catch (...) {
            code = 101;
        }
        _exit(code);
    }
    return pid;
}

// The child's exit code, or -signal when it died of one.
inline int wait_child(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? -WTERMSIG(status) : -1000;
}

}  // namespace dlock::support
