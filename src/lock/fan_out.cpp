#include "fan_out.hpp"

namespace dlock::detail {

FanOut::FanOut(std::size_t size, Clock::time_point deadline, AllAnswered all_answered)
    : ballots_(size), deadline_(deadline), all_answered_(std::move(all_answered)) {}

std::shared_ptr<FanOut> FanOut::send(std::span<const std::shared_ptr<ClientCore>> masters, const Script& script,
                                     std::span<const std::string_view> keys, std::span<const std::string_view> argv,
                                     Clock::time_point deadline, AllAnswered all_answered) {
    std::shared_ptr<FanOut> fan(new FanOut(masters.size(), deadline, std::move(all_answered)));
    for (std::size_t i = 0; i < masters.size(); ++i) {
        if (auto ec = masters[i]->usable()) {
            fan->record(i, ec, Reply{});  // closed: its I/O thread would never answer
            continue;
        }
        masters[i]->eval_async(
            script, keys, argv, [fan, i](std::error_code ec, Reply&& reply) { fan->record(i, ec, std::move(reply)); },
            deadline);
    }
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
    std::unique_lock lock(mutex_);
    waiting_.push_back(&enough);
    // Every call completes by its deadline; the margin only covers a call
    // dropped by a client that closed meanwhile.
    changed_.wait_until(lock, deadline_ + std::chrono::milliseconds(200),
                        [&] { return answered_ == ballots_.size() || enough(ballots_); });
    std::erase(waiting_, &enough);
    return ballots_;
}

bool FanOut::complete() {
    std::lock_guard lock(mutex_);
    return answered_ == ballots_.size();
}

}  // namespace dlock::detail
