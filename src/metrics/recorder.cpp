#include "recorder.hpp"

#include <algorithm>
#include <limits>

namespace dlock::detail {
namespace {

constexpr std::string_view kind_names[lock_kinds] = {"lock",      "fair_lock", "read",      "write",
                                                     "semaphore", "redlock",   "multi_lock"};
constexpr std::string_view outcome_names[acquire_outcomes] = {"acquired", "busy", "timed_out", "cancelled", "error"};
constexpr std::string_view loss_names[loss_reasons] = {"expired", "refused", "revoked"};
constexpr std::string_view renewal_names[renewal_results] = {"renewed", "refused", "failed"};
constexpr std::string_view confirmation_names[renewal_results] = {"confirmed", "refused", "failed"};
constexpr std::string_view hand_off_names[hand_offs] = {"local", "direct"};

struct EventFamily {
    std::string_view name, help;
};
constexpr EventFamily event_families[client_events] = {
    {"dlock_resubscriptions_total", "The lock inbox was subscribed again; notices may have been missed."},
    {"dlock_script_reloads_total", "NOSCRIPT answers: the call was sent again (as EVAL, or as EVALSHA behind an EVAL just sent)."},
    {"dlock_replica_ack_shortfalls_total", "WAIT confirmed fewer replicas than the lock asked for."},
    {"dlock_failovers_total", "Master changes seen (Sentinel, Cluster)."},
};

constexpr auto relaxed = std::memory_order_relaxed;

}  // namespace

std::string_view name_of(LockKind kind) noexcept { return kind_names[static_cast<std::size_t>(kind)]; }
std::string_view name_of(AcquireOutcome outcome) noexcept { return outcome_names[static_cast<std::size_t>(outcome)]; }
std::string_view name_of(LossReason reason) noexcept { return loss_names[static_cast<std::size_t>(reason)]; }
std::string_view name_of(RenewalResult result) noexcept { return renewal_names[static_cast<std::size_t>(result)]; }
std::string_view name_of(HandOff how) noexcept { return hand_off_names[static_cast<std::size_t>(how)]; }

void Histogram::observe(std::chrono::nanoseconds took) noexcept {
    const double seconds = std::chrono::duration<double>(took).count();
    const auto bucket = static_cast<std::size_t>(
        std::lower_bound(histogram_bounds.begin(), histogram_bounds.end(), seconds) - histogram_bounds.begin());
    buckets_[bucket].fetch_add(1, relaxed);
    count_.fetch_add(1, relaxed);
    sum_ns_.fetch_add(static_cast<std::uint64_t>(std::max<std::int64_t>(took.count(), 0)), relaxed);
}

std::array<std::uint64_t, histogram_bounds.size() + 1> Histogram::cumulative() const noexcept {
    std::array<std::uint64_t, histogram_bounds.size() + 1> out{};
    std::uint64_t running = 0;
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = running += buckets_[i].load(relaxed);
    return out;
}

MetricsRecorder::MetricsRecorder(MetricsOptions options)
    : options_(options),
      label_slots_(options.name_label_delimiter
                       ? std::clamp<std::size_t>(options.max_name_labels, 1, max_name_labels_cap) + 1
                       : 1),
      blocks_(new std::atomic<LabelBlock*>[label_slots_]) {
    for (std::size_t i = 0; i < label_slots_; ++i) blocks_[i].store(nullptr, relaxed);
    if (!options.name_label_delimiter) {
        owned_blocks_.push_back(std::make_unique<LabelBlock>());
        blocks_[0].store(owned_blocks_.back().get(), std::memory_order_release);
    }
}

MetricsRecorder::Label MetricsRecorder::name_label(std::string_view lock_name) {
    if (!options_.name_label_delimiter) return 0;
    const auto prefix = label_value(lock_name.substr(0, lock_name.find(options_.name_label_delimiter)));
    std::lock_guard lock(labels_mutex_);
    if (auto it = labels_.find(prefix); it != labels_.end()) return it->second;
    // A name whose prefix is the overflow's own value shares its series:
    // two series with one label set would be an invalid exposition.
    const bool full = labels_.size() + 1 >= label_slots_ || prefix == overflow_label;
    const Label label = full ? static_cast<Label>(label_slots_ - 1) : static_cast<Label>(labels_.size());
    if (!blocks_[label].load(relaxed)) {
        auto fresh = std::make_unique<LabelBlock>();
        fresh->name = full ? std::string(overflow_label) : prefix;
        blocks_[label].store(fresh.get(), std::memory_order_release);
        owned_blocks_.push_back(std::move(fresh));
    }
    if (!full) labels_.emplace(prefix, label);
    return label;
}

// A label value as the exposition wants it: UTF-8, one line. Bytes that are
// not valid UTF-8, and control characters, become '?'; an empty prefix is
// "_empty" (an empty value would read as no label at all).
std::string MetricsRecorder::label_value(std::string_view text) {
    if (text.empty()) return "_empty";
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto byte = static_cast<unsigned char>(text[i]);
        std::size_t length = byte < 0x80 ? 1 : (byte >> 5) == 0x6 ? 2 : (byte >> 4) == 0xE ? 3 : (byte >> 3) == 0x1E ? 4 : 0;
        bool valid = length > 0 && i + length <= text.size();
        for (std::size_t k = 1; valid && k < length; ++k) valid = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
        if (!valid) {
            out += '?';
            ++i;
            continue;
        }
        if (length == 1 && (byte < 0x20 || byte == 0x7F)) out += '?';
        else out.append(text.substr(i, length));
        i += length;
    }
    return out;
}

std::vector<std::pair<std::string_view, std::string_view>> MetricsRecorder::kind_labels(LockKind kind,
                                                                                      Label label) const {
    std::vector<std::pair<std::string_view, std::string_view>> labels{{"kind", name_of(kind)}};
    if (options_.name_label_delimiter) labels.emplace_back("name", block(label)->name);
    return labels;
}

void MetricsRecorder::acquisition(LockKind kind, Label label, AcquireOutcome outcome, Clock::duration took) noexcept {
    if (!enabled()) return;
    block(label)->acquire[static_cast<std::size_t>(kind)][static_cast<std::size_t>(outcome)].observe(took);
    if (has_sink_.load(relaxed)) {
        auto labels = kind_labels(kind, label);
        labels.emplace_back("outcome", name_of(outcome));
        emit("dlock_acquire_duration_seconds", Metrics::Type::histogram, labels,
             std::chrono::duration<double>(took).count());
        emit("dlock_acquisitions_total", Metrics::Type::counter, std::move(labels), 1);
    }
}

void MetricsRecorder::waited(LockKind kind, Label label, Clock::duration took) noexcept {
    if (!enabled()) return;
    block(label)->wait[static_cast<std::size_t>(kind)].observe(took);
    if (has_sink_.load(relaxed))
        emit("dlock_wait_duration_seconds", Metrics::Type::histogram, kind_labels(kind, label),
             std::chrono::duration<double>(took).count());
}

void MetricsRecorder::held(LockKind kind, Label label, Clock::duration took) noexcept {
    if (!enabled()) return;
    block(label)->hold[static_cast<std::size_t>(kind)].observe(took);
    if (has_sink_.load(relaxed))
        emit("dlock_hold_duration_seconds", Metrics::Type::histogram, kind_labels(kind, label),
             std::chrono::duration<double>(took).count());
}

void MetricsRecorder::lost(LockKind kind, Label label, LossReason reason) noexcept {
    if (!enabled()) return;
    block(label)->lost[static_cast<std::size_t>(kind)][static_cast<std::size_t>(reason)].fetch_add(1, relaxed);
    if (has_sink_.load(relaxed)) {
        auto labels = kind_labels(kind, label);
        labels.emplace_back("reason", name_of(reason));
        emit("dlock_leases_lost_total", Metrics::Type::counter, std::move(labels), 1);
    }
}

void MetricsRecorder::gauge_changed(LabelBlock::Gauges LabelBlock::*gauges, std::string_view family, LockKind kind,
                                    Label label, int delta) noexcept {
    if (!enabled()) return;
    auto& gauge = (block(label)->*gauges)[static_cast<std::size_t>(kind)];
    gauge.touched.store(true, relaxed);
    const auto now = gauge.level.fetch_add(delta, relaxed) + delta;
    if (has_sink_.load(relaxed)) emit(family, Metrics::Type::gauge, kind_labels(kind, label), static_cast<double>(now));
}

void MetricsRecorder::holds_changed(LockKind kind, Label label, int delta) noexcept {
    gauge_changed(&LabelBlock::holds, "dlock_holds", kind, label, delta);
}

void MetricsRecorder::waiting_changed(LockKind kind, Label label, int delta) noexcept {
    gauge_changed(&LabelBlock::waiting, "dlock_waiting_callers", kind, label, delta);
}

void MetricsRecorder::renewal(RenewalResult result) noexcept {
    if (!enabled()) return;
    renewals_[static_cast<std::size_t>(result)].fetch_add(1, relaxed);
    if (has_sink_.load(relaxed))
        emit("dlock_renewals_total", Metrics::Type::counter, {{"result", name_of(result)}}, 1);
}

void MetricsRecorder::grant_confirmation(RenewalResult result) noexcept {
    if (!enabled()) return;
    grant_confirmations_[static_cast<std::size_t>(result)].fetch_add(1, relaxed);
    if (has_sink_.load(relaxed))
        emit("dlock_grant_confirmations_total", Metrics::Type::counter,
             {{"result", confirmation_names[static_cast<std::size_t>(result)]}}, 1);
}

void MetricsRecorder::hand_off(HandOff how) noexcept {
    if (!enabled()) return;
    hand_offs_[static_cast<std::size_t>(how)].fetch_add(1, relaxed);
    if (has_sink_.load(relaxed)) emit("dlock_handoffs_total", Metrics::Type::counter, {{"how", name_of(how)}}, 1);
}

void MetricsRecorder::event(ClientEvent what) noexcept {
    if (!enabled()) return;
    events_[static_cast<std::size_t>(what)].fetch_add(1, relaxed);
    if (has_sink_.load(relaxed))
        emit(event_families[static_cast<std::size_t>(what)].name, Metrics::Type::counter, {}, 1);
}

void MetricsRecorder::set_sink(std::function<void(const Metrics::Observation&)> sink) {
    std::lock_guard lock(sink_mutex_);
    if (sink) sink_ = std::make_shared<const std::function<void(const Metrics::Observation&)>>(std::move(sink));
    else sink_.reset();
    has_sink_.store(sink_ != nullptr, relaxed);
}

void MetricsRecorder::emit(std::string_view family, Metrics::Type type,
                           std::vector<std::pair<std::string_view, std::string_view>> labels, double value) noexcept {
    std::shared_ptr<const std::function<void(const Metrics::Observation&)>> sink;
    {
        std::lock_guard lock(sink_mutex_);
        sink = sink_;
    }
    if (!sink) return;
    try {
        (*sink)(Metrics::Observation{family, type, std::move(labels), value});
    } catch (...) {
        // A sink's failure must not reach the lock call or the I/O thread.
    }
}

void MetricsRecorder::collect(const std::function<void(const Metrics::Family&)>& visitor) const {
    using Family = Metrics::Family;
    using Series = Metrics::Series;
    std::vector<const LabelBlock*> blocks;
    for (std::size_t i = 0; i < label_slots_; ++i)
        if (auto* b = block(static_cast<Label>(i))) blocks.push_back(b);
    auto labels_of = [&](const LabelBlock& b, std::size_t kind) {
        std::vector<std::pair<std::string_view, std::string_view>> labels{{"kind", kind_names[kind]}};
        if (options_.name_label_delimiter) labels.emplace_back("name", b.name);
        return labels;
    };
    auto histogram_series = [](const Histogram& h, std::vector<std::pair<std::string_view, std::string_view>> labels) {
        Series s;
        s.labels = std::move(labels);
        // One read of the buckets gives the count too: +Inf and _count agree
        // even while others record (the sum may lag or lead by an observation).
        const auto cumulative = h.cumulative();
        s.count = cumulative.back();
        s.value = h.sum_seconds();
        for (std::size_t i = 0; i < cumulative.size(); ++i)
            s.buckets.emplace_back(i < histogram_bounds.size() ? histogram_bounds[i] : std::numeric_limits<double>::infinity(),
                                   cumulative[i]);
        return s;
    };

    Family acquire{"dlock_acquire_duration_seconds", "Time from an acquisition call to its outcome.",
                   Metrics::Type::histogram, {}};
    Family acquisitions{"dlock_acquisitions_total", "Acquisition calls by outcome.", Metrics::Type::counter, {}};
    Family wait{"dlock_wait_duration_seconds", "Time queued after the first busy answer, for calls that waited.",
                Metrics::Type::histogram, {}};
    Family hold{"dlock_hold_duration_seconds", "Time from a grant to its release or loss.", Metrics::Type::histogram,
                {}};
    Family lost{"dlock_leases_lost_total", "Holds lost, by reason.", Metrics::Type::counter, {}};
    Family holds{"dlock_holds", "Holds live now.", Metrics::Type::gauge, {}};
    Family waiting{"dlock_waiting_callers", "Acquisition calls queued now.", Metrics::Type::gauge, {}};
    for (const auto* b : blocks) {
        for (std::size_t kind = 0; kind < lock_kinds; ++kind) {
            for (std::size_t outcome = 0; outcome < acquire_outcomes; ++outcome) {
                const auto& h = b->acquire[kind][outcome];
                if (!h.count()) continue;
                auto labels = labels_of(*b, kind);
                labels.emplace_back("outcome", outcome_names[outcome]);
                auto timed = histogram_series(h, labels);
                Series counted;
                counted.labels = std::move(labels);
                counted.value = static_cast<double>(timed.count);  // the same read as the histogram's
                acquisitions.series.push_back(std::move(counted));
                acquire.series.push_back(std::move(timed));
            }
            if (b->wait[kind].count()) wait.series.push_back(histogram_series(b->wait[kind], labels_of(*b, kind)));
            if (b->hold[kind].count()) hold.series.push_back(histogram_series(b->hold[kind], labels_of(*b, kind)));
            for (std::size_t reason = 0; reason < loss_reasons; ++reason) {
                const auto n = b->lost[kind][reason].load(relaxed);
                if (!n) continue;
                Series s;
                s.labels = labels_of(*b, kind);
                s.labels.emplace_back("reason", loss_names[reason]);
                s.value = static_cast<double>(n);
                lost.series.push_back(std::move(s));
            }
            for (auto [gauges, family] : {std::pair{&LabelBlock::holds, &holds}, std::pair{&LabelBlock::waiting, &waiting}}) {
                const auto& gauge = (b->*gauges)[kind];
                if (!gauge.touched.load(relaxed)) continue;
                Series s;
                s.labels = labels_of(*b, kind);
                s.value = static_cast<double>(gauge.level.load(relaxed));
                family->series.push_back(std::move(s));
            }
        }
    }
    visitor(acquire);
    visitor(acquisitions);
    visitor(wait);
    visitor(hold);
    visitor(lost);

    auto counters = [&](std::string_view name, std::string_view help, std::string_view label, const auto& values,
                        const auto& names) {
        Family f{name, help, Metrics::Type::counter, {}};
        for (std::size_t i = 0; i < values.size(); ++i) {
            Series s;
            s.labels = {{label, names[i]}};
            s.value = static_cast<double>(values[i].load(relaxed));
            f.series.push_back(std::move(s));
        }
        visitor(f);
    };
    counters("dlock_renewals_total", "Lease renewals by result.", "result", renewals_, renewal_names);
    counters("dlock_grant_confirmations_total",
             "Confirmations of grants of fixed leases taken from the server's line (direct hand-offs), by result.", "result",
             grant_confirmations_, confirmation_names);
    counters("dlock_handoffs_total", "Grants passed on without a free lock: local (a thread of this process) or "
                                     "direct (the server's line).",
             "how", hand_offs_, hand_off_names);
    visitor(waiting);
    visitor(holds);
    for (std::size_t i = 0; i < client_events; ++i) {
        Family f{event_families[i].name, event_families[i].help, Metrics::Type::counter, {}};
        Series s;
        s.value = static_cast<double>(events_[i].load(relaxed));
        f.series.push_back(std::move(s));
        visitor(f);
    }
}

}  // namespace dlock::detail
