// Where dlock's layers record what Metrics (dlock/metrics.hpp) shows.
//
// Every series lives in fixed arrays of relaxed atomics, chosen by small
// enums, so recording costs a few additions and never allocates or locks
// (a sink, when one is set, is the exception: see Metrics::set_sink). A lock
// object asks for its name label once, at construction; that lookup may
// lock a mutex and allocate the label's block.
//
// Thread-safety: any member from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dlock/metrics.hpp"

namespace dlock::detail {

enum class LockKind : std::uint8_t { lock, fair_lock, read, write, semaphore, redlock, multi_lock };
enum class AcquireOutcome : std::uint8_t { acquired, busy, timed_out, cancelled, error };
enum class LossReason : std::uint8_t { expired, refused, revoked };
enum class RenewalResult : std::uint8_t { renewed, refused, failed };
enum class HandOff : std::uint8_t { local, direct };
enum class ClientEvent : std::uint8_t { resubscription, script_reload, replica_ack_shortfall, failover };

inline constexpr std::size_t lock_kinds = 7, acquire_outcomes = 5, loss_reasons = 3, renewal_results = 3,
                             hand_offs = 2, client_events = 4;

std::string_view name_of(LockKind kind) noexcept;
std::string_view name_of(AcquireOutcome outcome) noexcept;
std::string_view name_of(LossReason reason) noexcept;
std::string_view name_of(RenewalResult result) noexcept;
std::string_view name_of(HandOff how) noexcept;

// Upper bounds in seconds; one more bucket, +Inf, follows.
inline constexpr std::array<double, 18> histogram_bounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                            0.05,   0.1,   0.25,   0.5,   1,    2.5,
                                                            5,      10,    30,     60,    300,  1800};

class Histogram {
public:
    void observe(std::chrono::nanoseconds took) noexcept;
    std::uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
    double sum_seconds() const noexcept { return static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9; }
    // Cumulative counts, one per bound and one for +Inf.
    std::array<std::uint64_t, histogram_bounds.size() + 1> cumulative() const noexcept;

private:
    std::array<std::atomic<std::uint64_t>, histogram_bounds.size() + 1> buckets_{};
    std::atomic<std::uint64_t> count_{0};
    std::atomic<std::uint64_t> sum_ns_{0};
};

// The series of one name label (all of them when names are not labels).
struct LabelBlock {
    std::string name;  // the name label's value; set before the block is published
    std::array<std::array<Histogram, acquire_outcomes>, lock_kinds> acquire;
    std::array<Histogram, lock_kinds> wait;
    std::array<Histogram, lock_kinds> hold;
    std::array<std::array<std::atomic<std::uint64_t>, loss_reasons>, lock_kinds> lost{};
    struct Gauge {
        std::atomic<std::int64_t> level{0};
        std::atomic<bool> touched{false};  // shown once it moved
    };
    using Gauges = std::array<Gauge, lock_kinds>;
    Gauges holds;
    Gauges waiting;
};

class MetricsRecorder {
public:
    using Clock = std::chrono::steady_clock;
    using Label = std::uint16_t;

    explicit MetricsRecorder(MetricsOptions options);

    const MetricsOptions& options() const noexcept { return options_; }
    bool enabled() const noexcept { return options_.enabled; }

    // The label of a lock name (0 when names are not labels). Once per lock object.
    Label name_label(std::string_view lock_name);
    static std::string label_value(std::string_view text);

    // MetricsOptions::max_name_labels is taken up to this (each label costs
    // its series, about 9 KB).
    static constexpr std::size_t max_name_labels_cap = 1000;
    static constexpr std::string_view overflow_label = "_other";

    void acquisition(LockKind kind, Label label, AcquireOutcome outcome, Clock::duration took) noexcept;
    void waited(LockKind kind, Label label, Clock::duration took) noexcept;
    void held(LockKind kind, Label label, Clock::duration took) noexcept;
    void lost(LockKind kind, Label label, LossReason reason) noexcept;
    void holds_changed(LockKind kind, Label label, int delta) noexcept;
    void waiting_changed(LockKind kind, Label label, int delta) noexcept;
    void renewal(RenewalResult result) noexcept;
    // A grant taken from the server's line, confirmed (renewed), refused or
    // unanswered (failed): not a renewal.
    void grant_confirmation(RenewalResult result) noexcept;
    void hand_off(HandOff how) noexcept;
    void event(ClientEvent what) noexcept;

    void set_sink(std::function<void(const Metrics::Observation&)> sink);
    void collect(const std::function<void(const Metrics::Family&)>& visitor) const;

private:
    LabelBlock* block(Label label) const noexcept { return blocks_[label].load(std::memory_order_acquire); }
    // Only with a sink set; `labels` as in the exposition.
    void emit(std::string_view family, Metrics::Type type,
              std::vector<std::pair<std::string_view, std::string_view>> labels, double value) noexcept;
    std::vector<std::pair<std::string_view, std::string_view>> kind_labels(LockKind kind, Label label) const;
    void gauge_changed(LabelBlock::Gauges LabelBlock::*gauges, std::string_view family, LockKind kind, Label label,
                       int delta) noexcept;

    const MetricsOptions options_;
    const std::size_t label_slots_;  // 1 (no name label) or max_name_labels + 1 ("_other" last)
    std::unique_ptr<std::atomic<LabelBlock*>[]> blocks_;
    std::vector<std::unique_ptr<LabelBlock>> owned_blocks_;  // under labels_mutex_
    mutable std::mutex labels_mutex_;
    std::unordered_map<std::string, Label> labels_;

    std::array<std::atomic<std::uint64_t>, renewal_results> renewals_{};
    std::array<std::atomic<std::uint64_t>, renewal_results> grant_confirmations_{};
    std::array<std::atomic<std::uint64_t>, hand_offs> hand_offs_{};
    std::array<std::atomic<std::uint64_t>, client_events> events_{};

    std::atomic<bool> has_sink_{false};
    mutable std::mutex sink_mutex_;
    std::shared_ptr<const std::function<void(const Metrics::Observation&)>> sink_;
};

}  // namespace dlock::detail
