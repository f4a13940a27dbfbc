// What a client tells ClientOptions::on_warning, collected for a test to read.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::support {

class Warnings {
public:
    // The hook to set as ClientOptions::on_warning; this object must outlive the client.
    std::function<void(std::string_view)> hook() {
        return [this](std::string_view message) {
            std::lock_guard lock(mutex_);
            told_.emplace_back(message);
        };
    }
    std::vector<std::string> told() const {
        std::lock_guard lock(mutex_);
        return told_;
    }

private:
    mutable std::mutex mutex_;
    std::vector<std::string> told_;
};

}  // namespace dlock::support
