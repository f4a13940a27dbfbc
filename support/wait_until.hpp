// Waits for a deployment to reach a state, polling; throws on timeout (the
// test harness's own waits, which must never hang a test).
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace dlock::support {

template <typename Check>
void wait_until(Check check, std::chrono::seconds timeout, const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!check()) {
        if (std::chrono::steady_clock::now() >= deadline) throw std::runtime_error("timed out waiting for " + what);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

}  // namespace dlock::support
