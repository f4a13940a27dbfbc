#include "cyclers.hpp"

#include <random>
#include <string>

#include "dlock/error.hpp"

namespace dlock::soak {

using Clock = std::chrono::steady_clock;

Cyclers::Cyclers(Client& client, int threads, int names, std::chrono::milliseconds lease,
                 std::chrono::milliseconds retention)
    : client_(client), names_(names), lease_(lease), retention_(retention) {
    for (int i = 0; i < threads; ++i) {
        counters_.push_back(std::make_unique<Counters>());
        counters_.back()->heartbeat = Clock::now().time_since_epoch().count();
    }
    for (int i = 0; i < threads; ++i)
        threads_.emplace_back([this, i](std::stop_token stop) { run(stop, *counters_[i], 7919u * (i + 1)); });
}

Cyclers::~Cyclers() { stop(); }

void Cyclers::stop() {
    for (auto& thread : threads_) thread.request_stop();
    for (auto& thread : threads_)
        if (thread.joinable()) thread.join();
}

void Cyclers::run(std::stop_token stop, Counters& counters, unsigned seed) {
    std::minstd_rand random(seed);
    std::uniform_int_distribution<int> pick(0, names_ - 1);
    std::uniform_int_distribution<int> hold_us(0, 2000);
    while (!stop.stop_requested()) {
        // A new Lock object each time, as short-lived code would make one.
        auto lock = client_.lock("soak:cycle:" + std::to_string(pick(random)),
                                 {.lease = lease_, .retention = retention_});
        try {
            if (lock.try_lock_for(std::chrono::milliseconds(20))) {
                std::this_thread::sleep_for(std::chrono::microseconds(hold_us(random)));
                std::error_code ec;
                lock.unlock(ec);
                ++(ec ? counters.errors : counters.cycles);
            } else {
                ++counters.busy;
            }
        } catch (const Error&) {
            ++counters.errors;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the server is away: do not spin
        }
        counters.heartbeat = Clock::now().time_since_epoch().count();
    }
}

CyclerFigures Cyclers::figures() const {
    CyclerFigures figures;
    for (const auto& c : counters_) {
        figures.cycles += c->cycles;
        figures.busy += c->busy;
        figures.errors += c->errors;
    }
    return figures;
}

Clock::time_point Cyclers::slowest_heartbeat() const {
    auto slowest = Clock::time_point::max();
    for (const auto& c : counters_) slowest = std::min(slowest, Clock::time_point(Clock::duration(c->heartbeat.load())));
    return slowest;
}

}  // namespace dlock::soak
