// Which side of a fork() this process is: a number every child process
// sees raised (pthread_atfork), for state a child must not take over from
// its parent as it is (the parent's sockets: redis/fork_guard.hpp; the
// process id in the holder label: owner_ids.hpp).
#pragma once

namespace dlock::detail {

// Raised in every child after fork(). Any thread; never fails.
unsigned current_fork_generation() noexcept;

}  // namespace dlock::detail
