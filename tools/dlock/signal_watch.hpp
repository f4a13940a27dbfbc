// What `dlock run` and `dlock hold` share while they hold a lock: signals read
// from a signalfd (no handler runs at an awkward moment), and wake-ups for
// the poll loop from the client's threads (acquired, lost).
#pragma once

#include <signal.h>

#include <mutex>
#include <string_view>
#include <system_error>

namespace dlock::cli {

// A file descriptor that closes itself.
struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    ~Fd();
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
};

void signal_event(int fd);
void drain_event(int fd);

// The signals dlock handles itself. They are blocked in every thread (the
// client's I/O thread inherits the mask) and read from the signalfd.
struct SignalWatch {
    sigset_t handled;
    sigset_t original;  // the mask to restore in a child before exec
    Fd signals;
    Fd lost_event;
    Fd acquired_event;
    SignalWatch();
    ~SignalWatch();
    bool ok() const { return signals.fd >= 0 && lost_event.fd >= 0 && acquired_event.fd >= 0; }
};

// What a lost lease leaves for the poll loop: the reason, and a wake-up.
struct LostSignal {
    int event_fd;
    std::mutex mutex;
    std::error_code reason;
    void operator()(std::string_view, std::error_code why);
    std::error_code get();
};

}  // namespace dlock::cli
