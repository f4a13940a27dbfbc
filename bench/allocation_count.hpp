// Heap allocations of the whole process, all threads: the benchmark runners
// replace the global operator new and delete, and C's malloc family
// (allocation_count.cpp), so that they can report allocations per lock
// operation, a figure that does not move with how busy the machine is.
// Two counts: operator new alone (C++ code's allocations), and every heap
// allocation, malloc called directly included (hiredis's reader and
// formatter, OpenSSL) and those under operator new.
#pragma once

#include <cstdint>

namespace dlock::bench {

struct AllocationCount {
    std::uint64_t allocations = 0;       // operator new calls, every form
    std::uint64_t frees = 0;             // operator delete calls on a non-null pointer
    std::uint64_t heap_allocations = 0;  // malloc, calloc, realloc, aligned allocations: all of them
};

// The counts so far. Relaxed reads: callers take them between phases, after
// the threads that allocated have been joined or have gone quiet.
AllocationCount allocation_count() noexcept;

// Whether heap_allocations counts: not in sanitizer builds, whose runtime
// owns malloc.
bool heap_allocations_counted() noexcept;

}  // namespace dlock::bench
