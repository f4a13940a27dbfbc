#include "signal_watch.hpp"

#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdint>

namespace dlock::cli {
namespace {

sigset_t handled_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, s);
    return set;
}

}  // namespace

Fd::~Fd() {
    if (fd >= 0) close(fd);
}

void signal_event(int fd) {
    std::uint64_t one = 1;
    (void)!write(fd, &one, sizeof one);
}

void drain_event(int fd) {
    std::uint64_t value;
    (void)!read(fd, &value, sizeof value);
}

// Made before the client starts its threads, so that every thread inherits the mask.
SignalWatch::SignalWatch()
    : handled(handled_signals()),
      signals(-1),
      lost_event(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      acquired_event(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    pthread_sigmask(SIG_BLOCK, &handled, &original);
    signals.fd = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
}

SignalWatch::~SignalWatch() = default;

void LostSignal::operator()(std::string_view, std::error_code why) {
    {
        std::lock_guard lock(mutex);
        reason = why;
    }
    signal_event(event_fd);
}

std::error_code LostSignal::get() {
    std::lock_guard lock(mutex);
    return reason;
}

}  // namespace dlock::cli
