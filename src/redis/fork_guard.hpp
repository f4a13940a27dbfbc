// fork() and the parent's sockets.
//
// A child process inherits the parent's descriptors, which share their
// sockets, their epoll instance and their timers with the parent, but not
// its I/O thread. The rule: in a child nothing dlock does may write to or
// close a socket of the parent, deregister it from the shared epoll
// instance, or wait for the parent's I/O thread (nor take a mutex that
// thread may have held at fork() time); such calls fail with
// errc::forked_child. Each object that owns such state keeps a ForkGuard
// from its construction and checks it where other threads come in.
#pragma once

#include "runtime/fork_generation.hpp"

namespace dlock::detail {

class ForkGuard {
public:
    ForkGuard() noexcept : generation_(current_fork_generation()) {}
    // True in a child of the process that made this guard.
    bool forked() const noexcept { return current_fork_generation() != generation_; }

private:
    unsigned generation_;
};

// For an object of the parent whose last reference goes away in a child:
// it is kept, never destroyed (its destructor would close and deregister
// the parent's sockets), and stays reachable so leak checkers do not
// report it. Never throws; the object is then only leaked.
void keep_in_child(const void* object) noexcept;

}  // namespace dlock::detail
