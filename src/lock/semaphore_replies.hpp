// What the semaphore scripts (src/scripts/semaphore_*.lua) answer, read
// from the Reply alone, so that tests and fuzzers can feed it anything. A
// reply outside a script's vocabulary reads as malformed, never as a grant,
// and never indexes past what arrived.
#pragma once

#include <chrono>

#include "dlock/reply.hpp"
#include "dlock/semaphore.hpp"

namespace dlock::detail {

// semaphore_acquire.lua: {1, limit} granted; {0, wake ms} not granted;
// {-2} the id may not grant any more; {-3, limit} k is over the limit.
struct SemaphoreAcquire {
    enum class Kind { granted, not_granted, stale, over_limit, malformed };
    Kind kind = Kind::malformed;
    unsigned limit = 0;                 // granted, over_limit: 1 .. max_semaphore_limit
    std::chrono::milliseconds wake{0};  // not_granted: 0 (a 'try'), or 1 ms .. max_lease
};
SemaphoreAcquire read_semaphore_acquire(const Reply& reply);
bool is_semaphore_grant(const Reply& reply);

// semaphore_release.lua: 1 released, 0 a resent release (released), -1 not held.
enum class SemaphoreRelease { released, not_held, malformed };
SemaphoreRelease read_semaphore_release(const Reply& reply);

// semaphore_set_limit.lua: the previous limit, 0 .. max_semaphore_limit;
// throws Error(protocol_error) for anything else.
unsigned read_semaphore_set_limit(const Reply& reply);

// semaphore_inspect.lua: {limit, used, waiting, {id, ms left, ...}}; throws
// Error(protocol_error) for anything else.
SemaphoreInfo read_semaphore_inspect(const Reply& reply);

}  // namespace dlock::detail
