#include "unattended_calls.hpp"

namespace dlock::detail {

void UnattendedCalls::end() {
    // The common case (no close waiting) takes no lock.
    if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::lock_guard lock(mutex_);
    settled_.notify_all();
}

void UnattendedCalls::send(const std::shared_ptr<ClientCore>& client, const Script& script, ClientCore::Args keys,
                           ClientCore::Args argv, Clock::time_point give_up_by, RetriedCall::Done on_settled,
                           RetriedCall::Send how) {
    auto call = RetriedCall::start(client, script, keys, argv, give_up_by, how);
    std::error_code ec;
    Reply reply;
    auto settle = [pending = begin(), on_settled = std::move(on_settled)](std::error_code ec, Reply&& reply) {
        if (on_settled) on_settled(ec, std::move(reply));
    };
    // The copy left behind runs when the outcome comes; `settle` itself
    // (and its `pending`) goes when this function returns.
    if (call->leave_now(ec, reply, settle)) settle(ec, std::move(reply));
}

bool UnattendedCalls::settle_by(Clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    return settled_.wait_until(lock, deadline, [this] { return in_flight_.load(std::memory_order_acquire) == 0; });
}

}  // namespace dlock::detail
