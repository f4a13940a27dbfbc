#include "fan_out.hpp"

namespace dlock::detail {

FanOut::FanOut(std::size_t size, Clock::time_point deadline, AllAnswered all_answered)
    : ballots_(size), deadline_(deadline), all_answered_(std::move(all_answered)) {}

std::shared_ptr<FanOut> FanOut::send(std::span<const std::shared_ptr<ClientCore>> masters, const Script& script,
                                     std::span<const std::string_view> keys, std::span<const std::string_view> argv,
                                     Clock::time_point deadline, AllAnswered all_answered) {
    std::shared_ptr<FanOut> fan(new FanOut(masters.size(), deadline, std::move(all_answered)));
    // Inside a fan-out DriveScope, every call a parked connection claims is
    // read by the caller in wait(); one that is not (its connection under
    // the I/O thread, still connecting, failed at once) is answered by the
    // I/O thread, and then the caller waits to be woken instead.
    auto* scope = DriveScope::current();
    bool every_one_claimed = scope != nullptr;
    for (std::size_t i = 0; i < masters.size(); ++i) {
        if (auto ec = masters[i]->usable()) {
            fan->record(i, ec, Reply{});  // closed: its I/O thread would never answer
            continue;
        }
        const auto claims = scope ? scope->claims_made() : 0;
        masters[i]->eval_async(
            script, keys, argv, [fan, i](std::error_code ec, Reply&& reply) { fan->record(i, ec, std::move(reply)); },
            deadline);
        every_one_claimed = every_one_claimed && scope->claims_made() != claims;
    }
    fan->driven_ = every_one_claimed;
    return fan;
}

void FanOut::record(std::size_t index, std::error_code ec, Reply&& reply) {
    AllAnswered then;
    bool decided;
    {
        std::lock_guard lock(mutex_);
        auto& ballot = ballots_[index];
        ballot.answered = true;
        ballot.error = ec;
        ballot.reply = std::move(reply);
        decided = ++answered_ == ballots_.size();
        if (decided) then = std::move(all_answered_);
        // A waiter is woken once, when what it waits for is decided, not
        // by every answer on the way: each wake-up is a context switch.
        for (std::size_t i = 0; i < waiting_.size() && !decided; ++i) decided = (*waiting_[i])(ballots_);
    }
    if (decided) changed_.notify_all();
    // Every ballot is in and no one writes them any more: no lock needed.
    if (then) then(ballots_);
}

void FanOut::when_complete(AllAnswered then) {
    {
        std::lock_guard lock(mutex_);
        if (answered_ != ballots_.size()) {
            all_answered_ = std::move(then);
            return;
        }
    }
    then(ballots_);
}

std::vector<Ballot> FanOut::wait(const Enough& enough) {
    // Every call completes by its deadline; the margin only covers a call
    // dropped by a client that closed meanwhile.
    const auto until = deadline_ + std::chrono::milliseconds(200);
    if (auto* scope = DriveScope::current()) {
        auto decided_now = [&] {
            std::lock_guard lock(mutex_);
            return decided(enough);
        };
        // Read on this thread: no wake-up of the I/O thread, no sleep but in poll().
        if (driven_ && scope->drive(decided_now, until)) {
            std::lock_guard lock(mutex_);
            return ballots_;
        }
        // Whatever the scope claimed and nobody drives goes to the I/O thread.
        scope->release_claims();
    }
    std::unique_lock lock(mutex_);
    waiting_.push_back(&enough);
    changed_.wait_until(lock, until, [&] { return decided(enough); });
    std::erase(waiting_, &enough);
    return ballots_;
}

bool FanOut::complete() {
    std::lock_guard lock(mutex_);
    return answered_ == ballots_.size();
}

}  // namespace dlock::detail
