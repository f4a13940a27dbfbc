// A per-thread object that calls made while the thread ends still find.
//
// A thread's thread_local objects are destroyed in the reverse order they
// were made. One made before the library's first use on that thread (a
// user's thread_local Lock, a per-thread cache flushed under a lock) is
// destroyed after the library's own, and its destructor may still call in:
// a plain `thread_local std::string buffer` would then be written after it
// was freed (a double free at the thread's exit, seen with a Lock held in a
// thread_local object).
//
// thread_kept<T, Tag>() gives the calling thread's T, made on first use,
// or null once the thread's exit has destroyed it; the caller then uses a
// T of its own for that call (thread_kept_or). The slot itself is trivially
// destructible, so reading it stays valid for the whole of the thread's
// exit. Tag tells apart two objects of one type.
//
// Thread-safety: each thread sees only its own object.
#pragma once

namespace dlock::detail {

template <typename T, typename Tag>
T* thread_kept() {
    struct Slot {
        T* value = nullptr;
        bool ended = false;
    };
    thread_local Slot slot;  // trivially destructible: never destroyed
    if (slot.value) return slot.value;
    if (slot.ended) return nullptr;
    // Made now, so destroyed before anything made earlier on this thread.
    struct Reaper {
        ~Reaper() {
            delete slot.value;
            slot.value = nullptr;
            slot.ended = true;
        }
    };
    thread_local Reaper reaper;
    (void)reaper;
    slot.value = new T();
    return slot.value;
}

// The thread's kept T, or fallback once the thread's exit destroyed it.
template <typename Tag, typename T>
T& thread_kept_or(T& fallback) {
    T* kept = thread_kept<T, Tag>();
    return kept ? *kept : fallback;
}

}  // namespace dlock::detail
