#include "lock_service.hpp"

#include <future>

#include "dlock/error.hpp"
#include "lock_scripts.hpp"
#include "redis/command_format.hpp"
#include "replica_ack.hpp"

namespace dlock::detail {

LockService::LockService(ClientCore& core)
    : core_(core), keeper_(core, [this](auto& due, auto sent) { send_renewals(due, sent); }) {
    core_.before_stop([this] { release_all_on_stop(); });
}

std::shared_ptr<LockService> LockService::of(ClientCore& core) {
    return std::static_pointer_cast<LockService>(core.attachment([&] { return std::make_shared<LockService>(core); }));
}

void LockService::send_renewals(std::vector<std::shared_ptr<Hold>>& due, LockClock::time_point sent) {
    std::vector<std::string_view> commands;
    std::vector<Completion> dones;
    for (auto& hold : due) {
        const auto& ack = hold->lock->options.replica_ack;
        if (ack.replicas > 0 && ack.on_renewal) {
            send_acknowledged_renewal(hold, sent);
            continue;
        }
        // Formatting is most of a renewal's client-side cost, and the
        // command never changes: format it once per hold.
        if (hold->renew_command.empty()) {
            std::string_view keys[] = {hold->lock->keys.lock};
            std::string_view argv[] = {hold->owner, hold->lock->lease_ms};
            append_eval(hold->renew_command, "EVALSHA", renew_script().sha1(), keys, argv);
        }
        commands.emplace_back(hold->renew_command);  // `due` keeps the hold alive through the submit
        std::weak_ptr<Hold> weak = hold;
        dones.push_back([this, weak, sent](std::error_code ec, Reply&& reply) { on_renewed(weak, sent, ec, reply); });
    }
    core_.submit_many(commands, dones);
}

void LockService::send_acknowledged_renewal(const std::shared_ptr<Hold>& hold, LockClock::time_point sent) {
    const auto& ack = hold->lock->options.replica_ack;
    std::string_view keys[] = {hold->lock->keys.lock};
    std::string_view argv[] = {hold->owner, hold->lock->lease_ms};
    std::weak_ptr<Hold> weak = hold;
    eval_acknowledged_async(core_, renew_script(), keys, argv, ack,
                            [this, weak, sent, wanted = ack.replicas](std::error_code ec, Reply&& reply, long long n) {
                                auto held = weak.lock();
                                if (!held) return;
                                if (ec) return keeper_.failed(held, ec);
                                if (!reply.is_integer() || reply.integer != 1) return keeper_.refused(held);
                                // Extended on the master only: not yet safe from a failover.
                                if (n < wanted) return keeper_.failed(held, errc::replicas_not_acknowledged);
                                keeper_.renewed(held, sent);
                            });
}

void LockService::on_renewed(const std::weak_ptr<Hold>& weak, LockClock::time_point sent, std::error_code ec,
                             const Reply& reply) {
    auto hold = weak.lock();
    if (!hold) return;
    if (ec == errc::no_script) {
        // The server forgot the script (SCRIPT FLUSH, restart): the same
        // renewal again through the path that falls back to EVAL.
        std::string_view keys[] = {hold->lock->keys.lock};
        std::string_view argv[] = {hold->owner, hold->lock->lease_ms};
        core_.eval_async(renew_script(), keys, argv,
                         [this, weak, sent](std::error_code e, Reply&& r) { on_renewed(weak, sent, e, r); });
        return;
    }
    if (ec) return keeper_.failed(hold, ec);
    if (reply.is_integer() && reply.integer == 1) return keeper_.renewed(hold, sent);
    keeper_.refused(hold);
}

void LockService::release_all_on_stop() {
    auto holds = keeper_.live_holds();
    std::vector<ClientCore::EvalCall> calls;
    std::vector<std::future<void>> done;
    for (auto& hold : holds) {
        {
            std::lock_guard lock(hold->mutex);
            if (hold->released || hold->lost || hold->count == 0) continue;
            hold->released = true;
        }
        auto promise = std::make_shared<std::promise<void>>();
        done.push_back(promise->get_future());
        calls.push_back({{hold->lock->keys.lock, hold->lock->keys.fence(), hold->lock->keys.channel()},
                         {hold->owner, hold->lock->lease_ms, next_operation_id(), "1"},
                         [promise](std::error_code, Reply&&) { promise->set_value(); }});
    }
    core_.eval_many(release_script(), calls);
    // Bounded: every call completes by its command timeout.
    for (auto& f : done) f.wait();
}

}  // namespace dlock::detail
