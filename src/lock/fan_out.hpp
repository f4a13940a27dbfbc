// One script call sent to every Redlock master at once.
//
// Each master gets the same call with its own deadline; answers arrive on
// the masters' I/O thread (one for all of them, see masters_core.hpp) in any
// order. The caller either waits until it has heard enough (a majority
// either way), woken once when that is decided, or hands over a callback
// that runs once every master has answered or timed out. Sent and waited
// for inside a DriveScope of Reach::fan_out (redis/connection.hpp), the
// answers are read on the caller's own thread, and those that come after
// the decision are left to whoever reads next: a callback may then run on
// any thread, up to a tick (50 ms) after its answer came.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <system_error>
#include <vector>

#include "runtime/condition.hpp"
#include "dlock/reply.hpp"
#include "dlock/script.hpp"
#include "redis/client_core.hpp"

namespace dlock::detail {

struct Ballot {
    bool answered = false;
    std::error_code error;  // transport failure or error reply
    Reply reply;
};

class FanOut : public std::enable_shared_from_this<FanOut> {
public:
    using Enough = std::function<bool(const std::vector<Ballot>&)>;
    using AllAnswered = std::function<void(const std::vector<Ballot>&)>;

    // Sends the call to every master. When given, all_answered runs once, on
    // the I/O thread, as the last master answers.
    static std::shared_ptr<FanOut> send(std::span<const std::shared_ptr<ClientCore>> masters, const Script& script,
                                        std::span<const std::string_view> keys,
                                        std::span<const std::string_view> argv, Clock::time_point deadline,
                                        AllAnswered all_answered = {});

    // Blocks until enough(ballots) holds or every master answered (or, should
    // a master's client be closing and drop the call, shortly after the
    // deadline); returns the ballots as they were then (unanswered ones have
    // answered=false). enough also runs on the I/O thread, under the fan's
    // lock, at each answer while the caller waits (so that only the answer
    // that decides wakes it): it must only read the ballots.
    std::vector<Ballot> wait(const Enough& enough);
    // Every master has answered (or timed out).
    bool complete();
    // Runs then() once every master has answered: at once, on this thread,
    // if they all have; else on the I/O thread, as the last one answers.
    // Replaces any callback given to send().
    void when_complete(AllAnswered then);

private:
    FanOut(std::size_t size, Clock::time_point deadline, AllAnswered all_answered);
    void record(std::size_t index, std::error_code ec, Reply&& reply);
    // Every master answered, or enough did for the caller. mutex_ held.
    bool decided(const Enough& enough) const { return answered_ == ballots_.size() || enough(ballots_); }

    std::mutex mutex_;
    Condition changed_;
    std::vector<Ballot> ballots_;
    std::size_t answered_ = 0;
    std::vector<const Enough*> waiting_;  // the predicates of the callers in wait()
    bool driven_ = false;  // every call claimed by the sender's fan-out DriveScope: wait() reads them
    const Clock::time_point deadline_;
    AllAnswered all_answered_;
};

}  // namespace dlock::detail
