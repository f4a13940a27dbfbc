// The acquisition engine (src/hold/acquisition_engine.hpp) over a scripted
// protocol, no server: the deadline bounds every wait, a single attempt
// waits for its answer only answer_time(), an outage is ridden and reported,
// listening is followed by an attempt at once, a call that ends without the
// lock gives up exactly once.
#include <gtest/gtest.h>

#include <deque>
#include <thread>

#include "dlock/error.hpp"
#include "hold/acquisition_engine.hpp"
#include "metrics/metrics_tag.hpp"

using namespace std::chrono_literals;
using dlock::detail::AcquisitionCall;
using dlock::detail::AcquisitionProtocol;
using dlock::detail::AttemptResult;
using Clock = std::chrono::steady_clock;

namespace {

class Scripted final : public AcquisitionProtocol {
public:
    std::deque<AttemptResult> answers;  // then busy for an hour, for ever
    std::chrono::milliseconds attempt_takes{0};
    dlock::detail::QueueRegistry* local_queues = nullptr;
    int attempts = 0, listens = 0, give_ups = 0;
    std::vector<bool> in_line;
    std::vector<std::optional<Clock::time_point>> wait_until;

    const dlock::detail::MetricsTag& metrics() const override { return tag_; }
    std::error_code usable() const override { return {}; }
    dlock::detail::ClosingGate& closing() override { return closing_; }
    const dlock::ClientOptions& client_options() const override { return options_; }
    std::chrono::milliseconds answer_time() const override { return 50ms; }
    const std::string& name() const override { return name_; }
    dlock::detail::QueueRegistry* queues() override { return local_queues; }
    AttemptResult attempt(AcquisitionCall&, bool line, std::optional<Clock::time_point> until,
                          std::error_code& ec) override {
        ++attempts;
        in_line.push_back(line);
        wait_until.push_back(until);
        std::this_thread::sleep_for(attempt_takes);
        if (answers.empty()) return AttemptResult::busy(1h);
        auto answer = answers.front();
        answers.pop_front();
        if (answer.kind == AttemptResult::Kind::failed) ec = dlock::errc::connection_lost;
        return answer;
    }
    Listening listen(AcquisitionCall&, Clock::time_point) override {
        ++listens;
        return {true, true};
    }
    void give_up() noexcept override { ++give_ups; }

private:
    dlock::detail::ClosingGate closing_;
    dlock::detail::MetricsTag tag_;
    dlock::ClientOptions options_{};
    std::string name_ = "scripted";
};

}  // namespace

TEST(AcquisitionEngine, ABusyFirstAttemptAnsweredPastTheDeadlineDoesNotQueueForAnother) {
    dlock::detail::QueueRegistry queues;
    Scripted kind;
    kind.local_queues = &queues;
    kind.attempt_takes = 30ms;
    std::error_code ec;
    EXPECT_FALSE(acquire_with(kind, Clock::now() + 10ms, {}, ec));
    EXPECT_FALSE(ec);
    EXPECT_EQ(kind.attempts, 1);
    EXPECT_EQ(kind.give_ups, 1);
}

TEST(AcquisitionEngine, ListensThenTriesAgainAtOnceAndSleepsNoLongerThanTheDeadline) {
    Scripted kind;
    std::error_code ec;
    const auto start = Clock::now();
    EXPECT_FALSE(acquire_with(kind, start + 200ms, {}, ec));
    EXPECT_FALSE(ec);
    EXPECT_LT(Clock::now() - start, 5s);  // not the hour the busy answers asked for
    EXPECT_EQ(kind.listens, 1);
    EXPECT_EQ(kind.attempts, 2);  // the second right after listening
    EXPECT_TRUE(kind.in_line.at(0));
    EXPECT_EQ(kind.give_ups, 1);
}

TEST(AcquisitionEngine, ASingleAttemptWaitsForItsAnswerOnlyTheAnswerTimeAndIsNotRidden) {
    Scripted kind;
    kind.answers = {AttemptResult::failed(true)};
    std::error_code ec;
    const auto start = Clock::now();
    EXPECT_FALSE(acquire_with(kind, Clock::time_point::min(), {}, ec));
    EXPECT_EQ(ec, dlock::errc::connection_lost);
    ASSERT_EQ(kind.attempts, 1);
    EXPECT_FALSE(kind.in_line[0]);
    ASSERT_TRUE(kind.wait_until[0]);
    EXPECT_GE(*kind.wait_until[0], start + 50ms);
    EXPECT_LT(*kind.wait_until[0], Clock::now() + 50ms);
}

TEST(AcquisitionEngine, AnOutageIsRiddenUntilTheDeadlineAndReportsItsError) {
    Scripted kind;
    for (int i = 0; i < 1000; ++i) kind.answers.push_back(AttemptResult::failed(true));
    std::error_code ec;
    const auto start = Clock::now();
    EXPECT_FALSE(acquire_with(kind, start + 300ms, {}, ec));
    EXPECT_EQ(ec, dlock::errc::connection_lost);
    EXPECT_GE(kind.attempts, 2);
    EXPECT_LT(Clock::now() - start, 5s);
}

TEST(AcquisitionEngine, AgainIsTriedAtOnceAndAGrantGivesNothingUp) {
    Scripted kind;
    kind.answers = {AttemptResult::again(), AttemptResult::again(), AttemptResult::granted()};
    std::error_code ec;
    EXPECT_TRUE(acquire_with(kind, std::nullopt, {}, ec));
    EXPECT_FALSE(ec);
    EXPECT_EQ(kind.attempts, 3);
    EXPECT_EQ(kind.listens, 0);
    EXPECT_EQ(kind.give_ups, 0);
}

TEST(AcquisitionEngine, WalkingAwayBeforeAnyAnswerIsATimeoutNotContention) {
    Scripted kind;
    kind.answers = {AttemptResult::walked_away()};
    std::error_code ec;
    EXPECT_FALSE(acquire_with(kind, Clock::now() + 100ms, {}, ec));
    EXPECT_EQ(ec, dlock::errc::command_timeout);
    kind.answers = {AttemptResult::busy(1ms), AttemptResult::walked_away()};
    ec.clear();
    EXPECT_FALSE(acquire_with(kind, Clock::now() + 100ms, {}, ec));
    EXPECT_FALSE(ec) << "answered busy before: contention";
}
