// Names for owners and operations, unique to one client (or one group of
// Redlock masters): a random 128-bit id, then the thread or handle, and a
// counter for operation ids. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace dlock::detail {

class OwnerIds {
public:
    OwnerIds();

    const std::string& id() const noexcept { return id_; }
    // id + calling thread: the default owner.
    std::string thread_owner() const;
    // The same, shared: the calling thread keeps the last one it was given
    // and hands it out again while it reads the same (same id, same
    // thread or OwnerScope), so that a lock object made per name does not
    // make its owner's name again.
    std::shared_ptr<const std::string> shared_thread_owner() const;
    // id + a number unique under this id: an explicit owner handle.
    std::string new_handle_owner();
    // base + calling thread (or the OwnerScope in force).
    static std::string with_thread(std::string base);
    // The number with_thread() appends for the calling thread (or the
    // OwnerScope in force): equal numbers, equal owners. Never 0.
    static std::uint64_t calling_number() noexcept;
    // A number for an owner that is not a thread (an asynchronous
    // operation, OwnerScope), never equal to a thread's.
    static std::uint64_t new_owner_number();
    // Distinct for every acquire/release sent under this id: lets a retried
    // call be told apart from a new one.
    std::string next_operation_id();

    // "host=NAME pid=N thread=N" of the calling thread, stored with a fresh
    // grant so that an operator can find the holder (`dlock status`).
    // The calling thread's own copy, made once per thread and again in a
    // forked child or when the host's name changed (looked at again at most
    // once a second): no system call per acquisition. The view stays valid
    // until this thread's next call (also while the thread ends).
    static std::string_view holder_label();

private:
    const std::string id_;
    std::atomic<std::uint64_t> next_operation_{1};
    std::atomic<std::uint64_t> next_handle_{1};
};

// While alive, the calling thread acts as the owner `number`
// (OwnerIds::new_owner_number) wherever it would act as itself, and as that
// owner also for locks whose ownership is by handle: an asynchronous
// operation (fiber.hpp) owns the holds it makes, whichever thread runs
// it. Nests; restores the previous owner when destroyed.
class OwnerScope {
public:
    explicit OwnerScope(std::uint64_t number);
    ~OwnerScope();
    OwnerScope(const OwnerScope&) = delete;
    OwnerScope& operator=(const OwnerScope&) = delete;
    static bool active() noexcept;

private:
    std::uint64_t previous_;
};

}  // namespace dlock::detail
