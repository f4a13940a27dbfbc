// dlock/metrics.hpp — what a client's locks did: counters, gauges and
// histograms, in Prometheus's naming and base units (seconds).
//
// Every Client (and Masters) records into a Metrics; by default each has its
// own, or several share one passed in ClientOptions::metrics. Read it three
// ways:
//   prometheus_text()  the text exposition format (version 0.0.4), to serve
//                      from your own HTTP endpoint or write for
//                      node_exporter's textfile collector;
//   collect(visitor)   every series now, as numbers, for other systems;
//   set_sink(sink)     each observation as it happens (a push sink).
//
// The families (label `kind`: lock, fair_lock, read, write, semaphore,
// redlock, multi_lock):
//   dlock_acquire_duration_seconds{kind,outcome}  histogram: call to outcome
//   dlock_acquisitions_total{kind,outcome}        outcome: acquired, busy (one
//                      attempt found it held), timed_out, cancelled (stop
//                      token), error
//   dlock_wait_duration_seconds{kind}   histogram: time queued after the first
//                                       busy answer, for calls that waited
//   dlock_hold_duration_seconds{kind}   histogram: grant to release or loss
//   dlock_leases_lost_total{kind,reason}  reason: expired (validity ran out
//                      before a renewal was confirmed), refused (the server
//                      said it is not ours), revoked (force-released)
//   dlock_renewals_total{result}        renewed, refused, failed (no answer)
//   dlock_grant_confirmations_total{result}  a grant of a fixed lease (renew
//                      false) taken from the server's line: confirmed,
//                      refused or failed (no answer); not counted as a
//                      renewal (a renewed lease sends no confirmation)
//   dlock_handoffs_total{how}           local (from a thread of this process),
//                                       direct (granted in the server's line)
//   dlock_waiting_callers{kind}         gauge: calls queued now
//   dlock_holds{kind}                   gauge: holds live now
//   dlock_resubscriptions_total         the lock inbox subscribed again
//                                       (notices may have been missed)
//   dlock_script_reloads_total          NOSCRIPT answered: the call sent again
//   dlock_replica_ack_shortfalls_total  WAIT confirmed fewer replicas than asked
//   dlock_failovers_total               a master change seen (Sentinel, Cluster)
//
// Lock names are not labels by default (one series per name would grow
// without bound). MetricsOptions::name_label_delimiter opts in to a `name`
// label holding the part of each lock name before that character
// ("orders:42" -> "orders"), up to max_name_labels distinct values; later
// ones share the label "_other".
//
// Cost: recording is a few relaxed atomic additions on the calling thread;
// no lock and no allocation (the README's benchmark shows the overhead).
// Thread-safety: every member may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock {

namespace detail {
class MetricsRecorder;
}

struct MetricsOptions {
    // false: nothing is recorded (every series stays at zero).
    bool enabled = true;
    // '\0' (default): no name label. Otherwise the `name` label is the lock
    // name up to the first such character (the whole name if none), with
    // bytes that are not UTF-8 and control characters as '?', and "_empty"
    // for an empty prefix.
    char name_label_delimiter = '\0';
    // Distinct name labels, 1 .. 1000 (values outside are taken as the
    // nearest); later prefixes, and a prefix "_other" itself, share "_other".
    std::size_t max_name_labels = 64;
};

class Metrics {
public:
    explicit Metrics(MetricsOptions options = {});
    ~Metrics();
    Metrics(const Metrics&) = delete;
    Metrics& operator=(const Metrics&) = delete;

    const MetricsOptions& options() const noexcept;

    // The text exposition format: "# HELP", "# TYPE", then one line per
    // series; histograms as _bucket{le=...} (cumulative), _sum and _count.
    std::string prometheus_text() const;

    enum class Type { counter, gauge, histogram };
    struct Series {
        std::vector<std::pair<std::string_view, std::string_view>> labels;
        double value = 0;  // counter, gauge; a histogram's sum
        std::uint64_t count = 0;  // histogram: observations
        // histogram: (upper bound, cumulative count); the last bound is +inf.
        std::vector<std::pair<double, std::uint64_t>> buckets;
    };
    struct Family {
        std::string_view name;
        std::string_view help;
        Type type;
        std::vector<Series> series;  // only series that were ever touched
    };
    // Every family, in a fixed order.
    void collect(const std::function<void(const Family&)>& visitor) const;
    // One series' value (a histogram's count), 0 if never touched: for tests
    // and quick checks. labels: the series' labels in any order.
    double value(std::string_view family,
                 const std::vector<std::pair<std::string_view, std::string_view>>& labels = {}) const;

    // One observation as recorded: family and labels as in the exposition,
    // value the amount added (counters), the new level (gauges) or the
    // observed seconds (histograms).
    struct Observation {
        std::string_view family;
        Type type;
        std::vector<std::pair<std::string_view, std::string_view>> labels;
        double value;
    };
    // Called on the recording thread (often the client's I/O thread): it
    // must be quick and must not block or call into dlock. Replaces any
    // earlier sink; an empty function removes it.
    void set_sink(std::function<void(const Observation&)> sink);

    // For dlock's own layers.
    detail::MetricsRecorder& recorder() noexcept { return *recorder_; }

private:
    std::unique_ptr<detail::MetricsRecorder> recorder_;
};

}  // namespace dlock
