// The CLI's side of the metrics' text exposition: writing it for
// node_exporter's textfile collector, and adding up those of several
// processes (the demo's).
#pragma once

#include <string>
#include <vector>

#include "dlock/metrics.hpp"

namespace dlock::cli {

// False (after a warning on stderr naming the path and the reason) when the
// file could not be written; the command's exit status does not change.
// Written into a temporary file beside it, then renamed over it, so that a
// scrape never reads half a file.
bool write_metrics_file(const std::string& path, const Metrics& metrics);

// One exposition whose every sample is the sum of that sample in each of
// `texts` (counters, histogram buckets, sums and counts, and gauges of
// things each process has, all add up). Families keep the order they first
// appear in, each with its comment lines and then its samples, whichever
// text had them.
std::string sum_expositions(const std::vector<std::string>& texts);

}  // namespace dlock::cli
