// The soak's timeline against one server: samples every period, the
// restarts (two, at 40 % and 70 % of the run, or one every restart_every), a held lock's key deleted behind
// the client's back at each sample after the warm-up (not near a restart,
// whose losses are counted on their own), and watchdogs on every thread.
#pragma once

#include <chrono>
#include <vector>

#include "redis_server.hpp"
#include "result.hpp"

namespace dlock::soak {

struct Settings {
    Clock::duration total;
    Clock::duration period;
    int held = 1000;
    int threads = 4;
    int names = 500;
    // 0: one restart keeping the data at 40 % of the run and one losing it
    // at 70 %. Otherwise a restart every this often, alternating kinds
    // (keeps data first), the last at least a restart window before the end.
    Clock::duration restart_every{};
};

inline constexpr auto held_lease = std::chrono::seconds(3);
inline constexpr auto cycle_lease = std::chrono::milliseconds(500);
inline constexpr auto retention = std::chrono::seconds(1);  // the shortest allowed: leftovers show within the run
// The losses a restart causes are reported within a lease of it, plus a
// margin for a slow restart.
inline constexpr auto restart_window = held_lease + std::chrono::seconds(3);

// What trends are judged on: the samples after the warm-up.
struct Series {
    std::vector<Point> rss, heap, used_memory, keys;
    void add(const Sample& s);
};

// Runs the whole soak against `server`; fills result (all but the
// judgement) and series.
void run_timeline(dlock::support::RedisServer& server, const Settings& settings, Result& result, Series& series);

}  // namespace dlock::soak
