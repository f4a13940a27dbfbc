// Heap allocations of the whole process, all threads: the benchmark runner
// replaces the global operator new and delete (allocation_count.cpp) so that
// it can report allocations per lock operation, a figure that does not move
// with how busy the machine is. Only what goes through operator new is
// counted: malloc called directly (hiredis's reader, OpenSSL) is not.
#pragma once

#include <cstdint>

namespace dlock::bench {

struct AllocationCount {
    std::uint64_t allocations = 0;  // operator new calls, every form
    std::uint64_t frees = 0;        // operator delete calls on a non-null pointer
};

// The counts so far. Relaxed reads: callers take them between phases, after
// the threads that allocated have been joined or have gone quiet.
AllocationCount allocation_count() noexcept;

}  // namespace dlock::bench
