// One soak run's figures, and how they are written: a JSON file, a markdown
// file, and a summary on stdout.
#pragma once

#include <string>
#include <vector>

#include "cyclers.hpp"
#include "held_pool.hpp"
#include "metrics.hpp"
#include "trend.hpp"

namespace dlock::soak {

struct Restart {
    std::string kind;               // "keeps data" or "loses data"
    double at_minutes = 0;
    double downtime_ms = 0;         // kill -9 until the new server accepts connections
    int held_before = 0;
    long losses_reported = 0;       // on_lost calls within lease + 3 s of the kill
    double last_notice_ms = 0;      // kill to the last of those
    double all_held_again_ms = -1;  // kill until every lock was held again; -1: not seen
};

struct Result {
    double minutes = 0;
    double period_s = 0;
    int held_locks = 0, held_lease_ms = 0;
    int cycler_threads = 0, cycler_names = 0, cycler_lease_ms = 0;
    std::vector<Sample> samples;
    HeldPoolFigures pool;
    CyclerFigures cycles;
    std::vector<Restart> restarts;
    Trend rss, heap, used_memory, keys;
    // With restarts every few minutes: the first sample a restart window
    // after the second restart, which the last sample is held to (10 %).
    Sample after_second_restart{-1};
    bool after_second_restart_seen = false;
    long keys_after_retention = -1;
    int unlock_failures = 0;
    std::vector<std::string> failures;
};

std::string markdown_of(const Result& result);  // a two-column table
void write_json(const Result& result, const std::string& path);
void write_markdown(const Result& result, const std::string& path);
void print_summary(const Result& result);

}  // namespace dlock::soak
