// A reader of a dlock::RwLock on a thread of its own (so another owner under
// Ownership::thread), holding the read side from its construction until
// release() or its destruction.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "dlock/rw_lock.hpp"
#include "eventually.hpp"

namespace dlock::support {

class HeldReader {
public:
    explicit HeldReader(dlock::RwLock& lock)
        : thread_([this, &lock] {
              lock.lock_shared();
              held_ = true;
              std::unique_lock guard(mutex_);
              cv_.wait(guard, [&] { return release_; });
              lock.unlock_shared();
          }) {
        EXPECT_TRUE(eventually([&] { return held_.load(); }));
    }
    void release() {
        {
            std::lock_guard guard(mutex_);
            release_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
    }
    ~HeldReader() { release(); }

private:
    std::atomic<bool> held_{false};
    std::mutex mutex_;
    std::condition_variable cv_;
    bool release_ = false;
    std::thread thread_;
};

}  // namespace dlock::support
