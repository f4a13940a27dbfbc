// Every message a semaphore's channel carries, as a client subscribed to it
// reads them: what the tests of grant notices look at.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/subscription.hpp"
#include "lock/semaphore_keys.hpp"

namespace dlock::support {

// Every message on the semaphore's channel.
class ChannelLog {
public:
    ChannelLog(dlock::Client& client, const std::string& name)
        : subscription_(client.subscribe(dlock::detail::SemaphoreKeys(name).channel(),
                                         [this](dlock::Subscription::Event event, std::string_view payload) {
                                             if (event != dlock::Subscription::Event::message) return;
                                             std::lock_guard lock(mutex_);
                                             messages_.emplace_back(payload);
                                         })) {
        EXPECT_TRUE(subscription_.wait_active(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
    }
    std::vector<std::string> messages() {
        std::lock_guard lock(mutex_);
        return messages_;
    }

private:
    std::mutex mutex_;
    std::vector<std::string> messages_;
    dlock::Subscription subscription_;
};

}  // namespace dlock::support
