// Counting replacements of the global operator new and delete. Linked into
// dlock_runner only: the library and the other benchmarks keep the standard
// ones. Each counter is one relaxed atomic, so every thread of the process
// (the caller's, the client's I/O thread) counts without a lock; the cost is
// one contended cache line per allocation, small next to a round trip.
//
// libstdc++'s array and nothrow forms call these, so replacing the plain and
// the aligned forms (and their deletes) covers every operator new.
//
// C's malloc family is replaced too (glibc lets a program define malloc,
// calloc, realloc and free, and serves them from __libc_malloc and its
// kin): every heap allocation counts there, hiredis's included. Not in
// sanitizer builds, whose runtime owns malloc.
#include "allocation_count.hpp"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <new>

namespace {

std::atomic<std::uint64_t> allocations{0};
std::atomic<std::uint64_t> frees{0};
std::atomic<std::uint64_t> heap_allocations{0};

void* counted_malloc(std::size_t size) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    // operator new(0) must return a distinct pointer; malloc(0) may not.
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    throw std::bad_alloc();
}

void* counted_aligned(std::size_t size, std::align_val_t align) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    const auto alignment = static_cast<std::size_t>(align);
    // aligned_alloc wants a size that is a multiple of the alignment.
    const std::size_t rounded = (size + alignment - 1) / alignment * alignment;
    if (void* p = std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded)) return p;
    throw std::bad_alloc();
}

void counted_free(void* p) noexcept {
    if (!p) return;
    frees.fetch_add(1, std::memory_order_relaxed);
    std::free(p);
}

}  // namespace

void* operator new(std::size_t size) { return counted_malloc(size); }
void* operator new(std::size_t size, std::align_val_t align) { return counted_aligned(size, align); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DLOCK_BENCH_COUNT_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define DLOCK_BENCH_COUNT_MALLOC 0
#endif
#endif
#ifndef DLOCK_BENCH_COUNT_MALLOC
#define DLOCK_BENCH_COUNT_MALLOC 1
#endif

#if DLOCK_BENCH_COUNT_MALLOC
extern "C" {
void* __libc_malloc(std::size_t size);
void* __libc_calloc(std::size_t count, std::size_t size);
void* __libc_realloc(void* p, std::size_t size);
void* __libc_memalign(std::size_t alignment, std::size_t size);
void __libc_free(void* p);

void* malloc(std::size_t size) noexcept {
    heap_allocations.fetch_add(1, std::memory_order_relaxed);
    return __libc_malloc(size);
}
void* calloc(std::size_t count, std::size_t size) noexcept {
    heap_allocations.fetch_add(1, std::memory_order_relaxed);
    return __libc_calloc(count, size);
}
void* realloc(void* p, std::size_t size) noexcept {
    heap_allocations.fetch_add(1, std::memory_order_relaxed);
    return __libc_realloc(p, size);
}
void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept {
    heap_allocations.fetch_add(1, std::memory_order_relaxed);
    return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t size) noexcept {
    heap_allocations.fetch_add(1, std::memory_order_relaxed);
    void* p = __libc_memalign(alignment, size);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void free(void* p) noexcept { __libc_free(p); }
}
#endif

namespace dlock::bench {

AllocationCount allocation_count() noexcept {
    return {allocations.load(std::memory_order_relaxed), frees.load(std::memory_order_relaxed),
            heap_allocations.load(std::memory_order_relaxed)};
}

bool heap_allocations_counted() noexcept { return DLOCK_BENCH_COUNT_MALLOC != 0; }

}  // namespace dlock::bench
