// The CLI's side of the metrics' text exposition: a `dlock run`'s gauges
// for node_exporter's textfile collector, and adding up the expositions of
// several processes (the demo's).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "dlock/metrics.hpp"

namespace dlock::cli {

// What one `dlock run` did, for its metrics file. As node_exporter's
// textfile conventions ask of a batch job: gauges of the last run (no
// counters, which would restart at every run), labelled by job and key.
struct RunRecord {
    std::string job;                              // --metrics-job, else the keys
    std::string key;                              // the keys, comma-separated
    std::chrono::system_clock::time_point start;  // dlock started
    std::chrono::steady_clock::duration took{};   // from start until the lock was released (or given up)
    std::chrono::steady_clock::duration waited{}; // from start until acquired, or until it gave up
    bool acquired = false;
    int exit_code = 0;                            // dlock's exit status
};

// The exposition of one run: dlock_run_last_{start,end}_timestamp_seconds,
// _duration_seconds, _exit_code, _wait_seconds, _acquired.
std::string run_exposition(const RunRecord& run);

// Throws UsageError when the file cannot be made where `path` says: its
// directory is missing or not a directory, `path` is a directory, or its
// file name is longer than the directory's file system allows.
// Checked before the lock is taken, so the mistake is known before the job runs.
void check_metrics_path(const std::string& path);

// False (after an error on stderr naming the path and the reason) when the
// file could not be written; the command's exit status does not change.
// Written into a temporary file beside it (.dlock-metrics.XXXXXX, which the
// collector does not read: it reads *.prom), then renamed over it, so that a
// scrape never reads half a file.
bool write_metrics_file(const std::string& path, const std::string& text);

// One exposition whose every sample is the sum of that sample in each of
// `texts` (counters, histogram buckets, sums and counts, and gauges of
// things each process has, all add up). Families keep the order they first
// appear in, each with its comment lines and then its samples, whichever
// text had them.
std::string sum_expositions(const std::vector<std::string>& texts);

}  // namespace dlock::cli
