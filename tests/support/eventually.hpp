// Waits for a condition that the system under test makes true by itself.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace dlock::support {

// Checks condition every 5 ms until it holds or limit has passed; returns the last answer.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        if (condition()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return condition();
}

}  // namespace dlock::support
