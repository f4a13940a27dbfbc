// The standard's Lockable and TimedLockable named requirements, as concepts,
// for the static_asserts that every lock kind works with std::scoped_lock,
// std::unique_lock and std::lock_guard.
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

}  // namespace dlock::support
