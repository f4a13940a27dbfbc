// What a lock object's holds and calls record into: its client's metrics,
// its kind and its name label. Carried by the lock's identity, so that a
// hold records its own end whoever ends it (the owner, the lease keeper,
// the inbox), and kept alive by it (a hold may outlive its client).
#pragma once

#include <memory>
#include <string_view>

#include "dlock/metrics.hpp"
#include "recorder.hpp"

namespace dlock::detail {

struct MetricsTag {
    std::shared_ptr<Metrics> metrics;  // null: nothing recorded
    LockKind kind = LockKind::lock;
    MetricsRecorder::Label label = 0;

    static MetricsTag of(const std::shared_ptr<Metrics>& metrics, LockKind kind, std::string_view name) {
        if (!metrics) return {};
        return {metrics, kind, metrics->recorder().name_label(name)};
    }
    MetricsRecorder* recorder() const noexcept { return metrics ? &metrics->recorder() : nullptr; }
};

}  // namespace dlock::detail
