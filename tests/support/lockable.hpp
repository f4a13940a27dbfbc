// The standard's Lockable, TimedLockable, SharedLockable and
// SharedTimedLockable named requirements ([thread.req.lockable]), as
// concepts, for the static_asserts that every lock kind works with
// std::scoped_lock, std::unique_lock, std::lock_guard and std::shared_lock.
#pragma once

#include <chrono>
#include <concepts>

namespace dlock::support {

template <typename L>
concept Lockable = requires(L l) {
    l.lock();
    { l.try_lock() } -> std::convertible_to<bool>;
    l.unlock();
};

template <typename L>
concept TimedLockable = Lockable<L> && requires(L l) {
    { l.try_lock_for(std::chrono::milliseconds(1)) } -> std::convertible_to<bool>;
    { l.try_lock_until(std::chrono::steady_clock::now()) } -> std::convertible_to<bool>;
    { l.try_lock_until(std::chrono::system_clock::now()) } -> std::convertible_to<bool>;
};

template <typename L>
concept SharedLockable = requires(L l) {
    l.lock_shared();
    { l.try_lock_shared() } -> std::convertible_to<bool>;
    l.unlock_shared();
};

template <typename L>
concept SharedTimedLockable = SharedLockable<L> && requires(L l) {
    { l.try_lock_shared_for(std::chrono::milliseconds(1)) } -> std::convertible_to<bool>;
    { l.try_lock_shared_until(std::chrono::steady_clock::now()) } -> std::convertible_to<bool>;
    { l.try_lock_shared_until(std::chrono::system_clock::now()) } -> std::convertible_to<bool>;
};

}  // namespace dlock::support
