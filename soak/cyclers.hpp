// Threads that take and release locks on many names with short leases, as
// fast as they can, through restarts: the churn that would show a leak.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <stop_token>
#include <thread>
#include <vector>

#include "dlock/client.hpp"

namespace dlock::soak {

struct CyclerFigures {
    long cycles = 0;    // acquired and released
    long busy = 0;      // another thread had the name
    long errors = 0;    // a call failed (server down, lease lost)
};

class Cyclers {
public:
    Cyclers(Client& client, int threads, int names, std::chrono::milliseconds lease,
            std::chrono::milliseconds retention);
    ~Cyclers();  // stops and joins

    void stop();
    CyclerFigures figures() const;
    // The oldest of the threads' last finished iterations (a watchdog reads it).
    std::chrono::steady_clock::time_point slowest_heartbeat() const;

private:
    struct Counters {
        std::atomic<long> cycles{0}, busy{0}, errors{0};
        std::atomic<std::chrono::steady_clock::rep> heartbeat{0};
    };
    void run(std::stop_token stop, Counters& counters, unsigned seed);

    Client& client_;
    const int names_;
    const std::chrono::milliseconds lease_, retention_;
    std::vector<std::unique_ptr<Counters>> counters_;
    std::vector<std::jthread> threads_;
};

}  // namespace dlock::soak
