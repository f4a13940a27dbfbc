// Times one acquisition call and records its outcome (and, when it had to
// queue, how long it waited) when the call ends, however it ends.
//
// The outcome: acquired; error (ec set, or an exception left the call);
// cancelled (its stop token was requested); busy (a single attempt, as
// try_lock(), found the lock taken); timed_out (its deadline passed).
#pragma once

#include <stop_token>
#include <system_error>

#include "metrics_tag.hpp"

namespace dlock::detail {

class AcquisitionMeter {
public:
    using Clock = MetricsRecorder::Clock;

    AcquisitionMeter(const MetricsTag& tag, bool single_attempt, const std::stop_token& stop) noexcept
        : tag_(tag), recorder_(tag.recorder()), single_attempt_(single_attempt), stop_(stop) {
        if (recorder_ && recorder_->enabled()) started_ = Clock::now();
        else recorder_ = nullptr;
    }
    ~AcquisitionMeter() {
        if (!recorder_) return;
        if (!finished_) outcome_ = AcquireOutcome::error;  // an exception is leaving the call
        const auto now = Clock::now();
        if (waiting_) {
            recorder_->waiting_changed(tag_.kind, tag_.label, -1);
            recorder_->waited(tag_.kind, tag_.label, now - waiting_since_);
        }
        recorder_->acquisition(tag_.kind, tag_.label, outcome_, now - started_);
    }
    AcquisitionMeter(const AcquisitionMeter&) = delete;
    AcquisitionMeter& operator=(const AcquisitionMeter&) = delete;

    // The call makes one attempt only after all (a lock kind's own rule).
    void single_attempt() noexcept { single_attempt_ = true; }

    // The call queues now (its first attempt found the lock taken).
    void waiting() noexcept {
        if (!recorder_ || waiting_) return;
        waiting_ = true;
        waiting_since_ = Clock::now();
        recorder_->waiting_changed(tag_.kind, tag_.label, +1);
    }

    // The call returns `acquired` with ec. Returns acquired.
    bool finish(bool acquired, const std::error_code& ec) noexcept {
        finished_ = true;
        if (acquired) outcome_ = AcquireOutcome::acquired;
        else if (ec) outcome_ = AcquireOutcome::error;
        else if (stop_.stop_requested()) outcome_ = AcquireOutcome::cancelled;
        else if (single_attempt_) outcome_ = AcquireOutcome::busy;
        else outcome_ = AcquireOutcome::timed_out;
        return acquired;
    }

private:
    const MetricsTag& tag_;
    MetricsRecorder* recorder_;
    bool single_attempt_;
    const std::stop_token& stop_;
    Clock::time_point started_{};
    bool waiting_ = false;
    Clock::time_point waiting_since_{};
    bool finished_ = false;
    AcquireOutcome outcome_ = AcquireOutcome::error;
};

}  // namespace dlock::detail
