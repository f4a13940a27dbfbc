// Giving the allocator's free memory back to the system.
//
// A burst (a thousand holds lost and taken again after a server restart)
// leaves the allocator's arenas holding pages it no longer uses: the heap in
// use comes back down, the resident size does not. After such a burst the
// client gives those pages back, so that what a restart costs in memory does
// not add up over many restarts. Where the C library offers no way (not
// glibc), it does nothing.
#pragma once

namespace dlock::detail {

// Returns free pages of every arena to the system. Takes a few milliseconds
// at most; call it after a burst, not on a hot path. Thread-safe.
void give_back_free_memory() noexcept;

}  // namespace dlock::detail
