// The metrics recorder without a server: the name-label cap and its
// overflow, label values the exposition can carry, and snapshots that agree
// with themselves while others record.
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <set>
#include <sstream>
#include <thread>

#include "dlock/metrics.hpp"
#include "metrics/recorder.hpp"

using dlock::detail::AcquireOutcome;
using dlock::detail::LockKind;
using dlock::detail::MetricsRecorder;

namespace {

void acquired(dlock::Metrics& metrics, std::string_view name) {
    auto& recorder = metrics.recorder();
    recorder.acquisition(LockKind::lock, recorder.name_label(name), AcquireOutcome::acquired, std::chrono::microseconds(100));
}

// Each sample line's "name{labels}" part once: a duplicate is an invalid exposition.
bool no_duplicate_series(const std::string& text) {
    std::set<std::string> seen;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] == '#') continue;
        if (!seen.insert(line.substr(0, line.rfind(' '))).second) return false;
    }
    return true;
}

}  // namespace

TEST(MetricsRecorder, AnyCapIsTakenWithinItsBounds) {
    for (std::size_t cap : {std::size_t{0}, std::numeric_limits<std::size_t>::max(), std::size_t{70'000}}) {
        dlock::Metrics metrics({.name_label_delimiter = ':', .max_name_labels = cap});
        for (int i = 0; i < 1100; ++i) acquired(metrics, "p" + std::to_string(i) + ":x");
        const double first = metrics.value("dlock_acquisitions_total", {{"kind", "lock"}, {"name", "p0"}, {"outcome", "acquired"}});
        const double other = metrics.value("dlock_acquisitions_total", {{"kind", "lock"}, {"name", "_other"}, {"outcome", "acquired"}});
        EXPECT_EQ(first, 1) << cap;  // never shared with another prefix
        const double labelled = cap == 0 ? 1 : static_cast<double>(MetricsRecorder::max_name_labels_cap);
        EXPECT_EQ(other, 1100 - labelled) << cap;
    }
}

TEST(MetricsRecorder, APrefixNamedLikeTheOverflowSharesItsSeries) {
    dlock::Metrics metrics({.name_label_delimiter = ':', .max_name_labels = 2});
    for (const char* name : {"_other:1", "b:1", "c:1", "d:1"}) acquired(metrics, name);
    const auto text = metrics.prometheus_text();
    EXPECT_TRUE(no_duplicate_series(text)) << text;
    EXPECT_EQ(metrics.value("dlock_acquisitions_total", {{"kind", "lock"}, {"name", "_other"}, {"outcome", "acquired"}}), 2);
    EXPECT_EQ(metrics.value("dlock_acquisitions_total", {{"kind", "lock"}, {"name", "b"}, {"outcome", "acquired"}}), 1);
    EXPECT_EQ(metrics.value("dlock_acquisitions_total", {{"kind", "lock"}, {"name", "c"}, {"outcome", "acquired"}}), 1);
}

TEST(MetricsRecorder, LabelValuesAreOneLineOfUtf8) {
    EXPECT_EQ(MetricsRecorder::label_value("bad\xff\xfe\r\t"), "bad????");
    EXPECT_EQ(MetricsRecorder::label_value(""), "_empty");
    EXPECT_EQ(MetricsRecorder::label_value("caf\xc3\xa9"), "caf\xc3\xa9");  // é stays
    EXPECT_EQ(MetricsRecorder::label_value("\xe2\x82"), "??");              // cut short
    EXPECT_EQ(MetricsRecorder::label_value("a\nb"), "a?b");
}

TEST(MetricsRecorder, ASnapshotAgreesWithItselfWhileOthersRecord) {
    dlock::Metrics metrics;
    std::atomic<bool> stop{false};
    std::vector<std::thread> writers;
    for (int t = 0; t < 2; ++t)
        writers.emplace_back([&] {
            while (!stop) acquired(metrics, "x");
        });
    int disagreements = 0;
    for (int i = 0; i < 20'000; ++i) {
        metrics.collect([&](const dlock::Metrics::Family& family) {
            if (family.name != "dlock_acquire_duration_seconds") return;
            for (const auto& series : family.series)
                disagreements += series.buckets.back().second != series.count;
        });
    }
    stop = true;
    for (auto& w : writers) w.join();
    EXPECT_EQ(disagreements, 0);
}
