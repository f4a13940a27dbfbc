// dlock/fair_lock.hpp — a lock that grants strictly in arrival order, across
// every thread of every process.
//
// A FairLock is a Lock (lock.hpp) with the same contract — reentrant,
// leased and renewed, lost-lease notification, a fencing token on every
// grant, both ownership modes, the std Lockable and TimedLockable concepts —
// and one difference in how waiters are served: every waiting owner (each
// thread, or each handle) takes its own place in the lock's line on the
// server, ordered by the server as requests arrive (no client clock decides
// anything), and the lock goes to the first in line only: the release
// grants it to that waiter directly, with a new fencing token, and tells
// only that waiter's client, whose waiting thread returns holding it
// (lock.hpp, "Waiting"). No thread hands the lock to another of its
// process's threads past the line (LockOptions::handoff_slice is not used),
// and try_lock() never jumps the line either: with anybody waiting, it fails.
//
// Arrival order is the order in which the server received each waiter's
// first busy attempt. A waiter that gives up (its deadline, a stop request)
// leaves the line at once, and gives back a grant that reached it too late.
// A waiter whose process died leaves the line within
// LockOptions::waiter_lease; a waiter granted the lock just before it died
// holds it for about a waiter_lease at most (the grant's own lease until its first renewal:
// the longer of the releaser's waiter_lease and the rest of its place). A holder
// whose lease ran out without a release passes the lock to the first in
// line within about a third of waiter_lease.
//
// FairLock and Lock on the same name are one lock: they exclude each other
// and share one line (a Lock's local hand-off may still pass its own
// process's first waiter ahead).
#pragma once

#include "dlock/error.hpp"  // every throwing call throws dlock::Error
#include "dlock/lock.hpp"

namespace dlock {

class FairLock : public Lock {
public:
    // Throws as Lock's constructor; also for a waiter_lease outside 100 ms .. 1 min.
    FairLock(Client& client, std::string name, LockOptions options = {});
};

}  // namespace dlock
