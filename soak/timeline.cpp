#include "timeline.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

namespace dlock::soak {
namespace {

using namespace std::chrono_literals;

double minutes_since(Clock::time_point start, Clock::time_point t) {
    return std::chrono::duration<double, std::ratio<60>>(t - start).count();
}

// Kills the server and starts it again, with or without its data.
Restart restart(dlock::support::RedisServer& server, bool keep_data, int held_before, double at_minutes) {
    Restart r{keep_data ? "keeps data" : "loses data", at_minutes};
    r.held_before = held_before;
    const auto killed = Clock::now();
    server.kill();
    if (!keep_data) std::filesystem::remove_all(server.dir() + "/appendonlydir");
    server.start();
    r.downtime_ms = ms(Clock::now() - killed);
    std::printf("%6.2f min  restarted, %s (%.0f ms down)\n", at_minutes, r.kind.c_str(), r.downtime_ms);
    std::fflush(stdout);
    return r;
}

void print_sample(const Sample& s) {
    auto mib = [](long bytes) {
        char text[16];
        if (bytes < 0) return std::string("  n/a");
        std::snprintf(text, sizeof text, "%5.1f", bytes / 1048576.0);
        return std::string(text);
    };
    std::printf("%6.2f min  client RSS %s MiB, heap %s MiB  server used_memory %s MiB  keys %6ld  held %5d  cycles %7ld\n",
                s.minutes, mib(s.client_rss).c_str(), mib(s.client_heap).c_str(), mib(s.used_memory).c_str(), s.keys,
                s.held, s.cycles);
    std::fflush(stdout);
}

// Losses reported within the window of each kill, and the last of them.
void count_losses(Result& result, const std::vector<Clock::time_point>& kills,
                  const std::vector<Clock::time_point>& losses) {
    for (std::size_t i = 0; i < kills.size(); ++i) {
        auto& r = result.restarts[i];
        for (auto t : losses) {
            if (t < kills[i] || t > kills[i] + restart_window) continue;
            ++r.losses_reported;
            r.last_notice_ms = std::max(r.last_notice_ms, ms(t - kills[i]));
        }
    }
}

std::vector<Clock::time_point> restart_times(Clock::time_point start, const Settings& settings) {
    if (settings.restart_every <= Clock::duration::zero())
        return {start + settings.total * 2 / 5, start + settings.total * 7 / 10};
    std::vector<Clock::time_point> at;
    for (auto t = start + settings.restart_every; t + restart_window < start + settings.total; t += settings.restart_every)
        at.push_back(t);
    return at;
}

class Timeline {
public:
    Timeline(dlock::support::RedisServer& server, const Settings& settings, Result& result, Series& series)
        : server_(server), settings_(settings), result_(result), series_(series),
          client_(server.uri()), checker_(server.uri()),
          pool_(client_, checker_, settings.held, held_lease, retention),
          keeper_([this](std::stop_token stop) { pool_.run(stop); }),
          cyclers_(client_, settings.threads, settings.names, cycle_lease, retention) {}

    void run() {
        // Bounded by end_; each step sleeps at most 100 ms.
        while (Clock::now() < end_ && result_.failures.empty()) {
            const auto now = Clock::now();
            const auto figures = pool_.figures();
            note_held_again(now, figures);
            if (next_restart_ < restarts_at_.size() && now >= restarts_at_[next_restart_]) {
                at_kill_ = figures;
                kills_.push_back(Clock::now());
                result_.restarts.push_back(
                    restart(server_, next_restart_ % 2 == 0, figures.held_now, minutes_since(start_, now)));
                ++next_restart_;
                continue;
            }
            if (now >= next_sample_) {
                sample(now, figures.held_now);
                next_sample_ += settings_.period;
            }
            // Every pass and every cycle is bounded by the client's timeouts.
            if (now - pool_.heartbeat() > 60s) result_.failures.push_back("the held pool's thread is stuck");
            if (now - cyclers_.slowest_heartbeat() > 30s) result_.failures.push_back("a cycling thread is stuck");
            std::this_thread::sleep_for(std::min<Clock::duration>(100ms, std::max<Clock::duration>(end_ - now, 0ms)));
        }
        finish();
    }

private:
    // Held again: every hold lost since the last kill taken anew, within
    // the restart's window (no key is removed behind the client's back then).
    void note_held_again(Clock::time_point now, const HeldPoolFigures& figures) {
        if (result_.restarts.empty() || result_.restarts.back().all_held_again_ms >= 0) return;
        if (now > kills_.back() + restart_window) return;
        const long lost = figures.losses_reported - at_kill_.losses_reported;
        const long taken = figures.acquisitions - at_kill_.acquisitions;
        if (lost > 0 && taken >= lost && figures.held_now == settings_.held)
            result_.restarts.back().all_held_again_ms = ms(now - kills_.back());
    }

    void sample(Clock::time_point now, int held) {
        Sample s{minutes_since(start_, now), resident_bytes(), heap_in_use_bytes()};
        sample_server(checker_, s);
        s.held = held;
        const auto cycled = cyclers_.figures();
        s.cycles = cycled.cycles;
        s.busy = cycled.busy;
        result_.samples.push_back(s);
        print_sample(s);
        if (!result_.after_second_restart_seen && kills_.size() >= 2 && now > kills_[1] + restart_window) {
            result_.after_second_restart = s;
            result_.after_second_restart_seen = true;
        }
        if (now - start_ < settings_.total / 5) return;  // warming up
        series_.add(s);
        const bool near_restart = std::any_of(restarts_at_.begin(), restarts_at_.end(), [&](auto at) {
            return now > at - restart_window && now < at + restart_window;
        });
        if (!near_restart) pool_.remove_one_behind_its_back();
    }

    void finish() {
        cyclers_.stop();
        keeper_.request_stop();
        keeper_.join();
        result_.unlock_failures = pool_.release_all();
        result_.pool = pool_.figures();
        result_.cycles = cyclers_.figures();
        for (auto& failure : pool_.failures()) result_.failures.push_back(failure);
        count_losses(result_, kills_, pool_.loss_times());
        // Nothing may stay once everything is released and the retention is over.
        std::this_thread::sleep_for(retention + 1500ms);
        Sample after;
        sample_server(checker_, after);
        result_.keys_after_retention = after.keys;
    }

    dlock::support::RedisServer& server_;
    const Settings& settings_;
    Result& result_;
    Series& series_;
    Client client_;
    Client checker_;  // audits and samples through its own connection
    HeldPool pool_;
    std::jthread keeper_;
    Cyclers cyclers_;
    const Clock::time_point start_ = Clock::now();
    const Clock::time_point end_ = start_ + settings_.total;
    const std::vector<Clock::time_point> restarts_at_ = restart_times(start_, settings_);
    std::size_t next_restart_ = 0;
    HeldPoolFigures at_kill_;
    std::vector<Clock::time_point> kills_;
    Clock::time_point next_sample_ = start_;
};

}  // namespace

void Series::add(const Sample& s) {
    if (s.client_rss >= 0) rss.push_back({s.minutes, static_cast<double>(s.client_rss)});
    if (s.client_heap >= 0) heap.push_back({s.minutes, static_cast<double>(s.client_heap)});
    if (s.used_memory >= 0) used_memory.push_back({s.minutes, static_cast<double>(s.used_memory)});
    if (s.keys >= 0) keys.push_back({s.minutes, static_cast<double>(s.keys)});
}

void run_timeline(dlock::support::RedisServer& server, const Settings& settings, Result& result, Series& series) {
    Timeline(server, settings, result, series).run();
}

}  // namespace dlock::soak
