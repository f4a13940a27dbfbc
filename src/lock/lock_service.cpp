#include "lock_service.hpp"

#include <future>
#include <map>
#include <optional>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "hold/lock_keys.hpp"
#include "lock_scripts.hpp"
#include "redis/command_format.hpp"
#include "redis/subscriber.hpp"
#include "replica_ack.hpp"
#include "runtime/free_memory.hpp"
#include "script_replies.hpp"

namespace dlock::detail {

HoldCall LockIdentity::renewal(const std::string& owner) const {
    return {&renew_script(), {keys.lock, std::string(keys.fence())}, {owner, lease_ms, retention_ms, "0"}};
}

HoldCall LockIdentity::release(const std::string& owner, const std::string& operation, std::string how_many,
                               const std::string& undoing, std::string_view grant_arrival) const {
    const ReleaseViews views(*this, owner, operation, how_many, undoing, {}, grant_arrival);
    return {&release_script(), {views.keys.begin(), views.keys.end()}, {views.argv.begin(), views.argv.end()}};
}

HoldCall LockIdentity::final_release(const std::string& owner, const std::string& operation,
                                     std::string_view grant_arrival) const {
    return release(owner, operation, "all", {}, grant_arrival);
}


LockService::LockService(ClientCore& core)
    : HoldRuntime(core, [this](auto& due, auto sent) { send_renewals(due, sent); }),
      core_(core),
      line_waiters_(core, [this](auto& due) { send_line_refreshes(due); }),
      settle_timer_(core.io()) {
    core_.before_stop([this] { release_all_on_stop(); });
    core_.on_io_shutdown([this] { settle_timer_.cancel(); });  // no timer outlives the client
    // A new master (Sentinel failover): every hold is asked for there at
    // once, so one it does not have is reported lost now rather than at the
    // next renewal; waiters try again (a release may have been missed).
    core_.on_failover([this] {
        line_waiters_.wake_all();
        keeper().renew_all_now();
    });
    listen_to_inbox();
    check_eviction_policy();
}

std::shared_ptr<LockService> LockService::of(ClientCore& core) {
    return core.extension<LockService>([&] { return std::make_shared<LockService>(core); });
}

Subscription LockService::name_inbox(const std::string& lock_key) {
    if (!core_.cluster() || core_.usable()) return {};
    try {
        // Its first confirmation needs no renewals: holds of this lock wait for it (wait_for_inbox).
        return core_.subscribe(lock_key + ":inbox:" + id(), [this](Subscription::Event event, std::string_view payload) {
            if (event != Subscription::Event::subscribed) return on_inbox(event, payload);
            inbox_unconfirmed_ = false;
        });
    } catch (const Error&) {
        return {};  // closed meanwhile: renewals still find a revoked lock
    }
}

bool LockService::wait_for_inbox(const Subscription& name_inbox, std::optional<LockClock::time_point> until,
                                 const std::stop_token& stop) const {
    const Subscription& inbox = name_inbox ? name_inbox : inbox_;
    if (inbox.wait_active(LockClock::time_point::min())) return true;
    // Its subscription was not confirmed within a whole command timeout
    // before: waiting again would delay every acquisition by as much.
    if (inbox_unconfirmed_) return false;
    const auto timed_out = LockClock::now() + core_.options().command_timeout;
    const auto end = until ? std::min(timed_out, *until) : timed_out;
    // In slices, so that a stop request is honoured within one; and not on
    // a subscriber connection that failed (refused, timed out): the caller
    // goes ahead without it (the subscribed event renews what it missed).
    constexpr std::chrono::milliseconds slice{10};
    while (!stop.stop_requested()) {
        const auto now = LockClock::now();
        if (now >= end || Subscriber::failing(inbox)) {
            if (now >= timed_out) inbox_unconfirmed_ = true;
            return false;
        }
        if (inbox.wait_active(std::min(end, now + slice))) return true;
    }
    return false;
}

void LockService::listen_to_inbox() {
    if (core_.usable() || core_.cluster()) return;
    try {
        inbox_ = core_.subscribe(inbox_channel(id()),
                                 [this](Subscription::Event event, std::string_view payload) { on_inbox(event, payload); });
    } catch (const Error&) {
        // No inbox (closed meanwhile): renewals still find a revoked lock.
    }
}

void LockService::on_inbox(Subscription::Event event, std::string_view payload) {
    // Holds taken before the inbox listened (their call gave up waiting for
    // it: wait_for_inbox) may have been revoked unheard: ask the server about
    // each at once rather than at its next renewal.
    if (event == Subscription::Event::subscribed) {
        inbox_unconfirmed_ = false;
        return keeper().renew_all_now();
    }
    if (event == Subscription::Event::resubscribed) {
        core_.recorder().event(ClientEvent::resubscription);
        give_back_memory_after_burst();
        line_waiters_.wake_all();
        return keeper().renew_all_now();
    }
    if (const auto grant = read_grant_notice(payload))
        return line_waiters_.granted(grant->name, grant->owner, {grant->token, grant->arrival});
    // Permits granted to a waiter of this client: its semaphore's watch
    // wakes it (a watch that is gone had nobody waiting: the permit ends with
    // the waiter's place).
    if (const auto grant = read_permit_grant_notice(payload)) {
        if (auto watch = watches_.existing(std::string(grant->channel))) watch->granted(grant->permit);
        return;
    }
    // A permit taken back: the notice names the permit, which is the hold's
    // owner (permits are not registered by name, and this is rare: a scan
    // of the live holds).
    if (is_permit_revocation(payload)) {
        const auto id = permit_revoked(payload);
        // Kept before the holds are looked at: a permit whose grant is read
        // after this look finds it (lose_if_revoked).
        revocations_.note(RecentRevocations::permit(id));
        for (auto& hold : keeper().live_holds()) {
            if (hold->owner != id) continue;
            keeper().forget(hold);
            mark_lost(hold, LostReason::revoked, core_.io());
        }
        return;
    }
    const auto notice = read_revocation(payload);
    if (!notice) return;
    const std::string name(notice->name), owner(notice->owner);
    if (notice->reader) {
        if (auto hold = shared_holds_.current(name, owner); hold && hold->view().token == notice->token) {
            keeper().forget(hold);
            mark_lost(hold, LostReason::revoked, core_.io());
        }
        return;
    }
    // Kept before the holds are looked at: a hold whose grant is read after
    // this look finds it (lose_if_revoked). Not a reader's (above): readers
    // of one name may share a token, so it would not name one grant.
    revocations_.note(RecentRevocations::hold(name, owner, notice->token));
    // A waiter of this client may have been granted that lock and not have
    // made its hold yet.
    line_waiters_.revoked(name, owner, notice->token);
    // Only the hold that was revoked: this owner may have taken the lock
    // again (a new token) before the notice arrived.
    if (auto hold = holds().current(name, owner); hold && hold->view().token == notice->token) {
        keeper().forget(hold);
        mark_lost(hold, LostReason::revoked, core_.io());
    }
}

void LockService::lose_if_revoked(const std::shared_ptr<Hold>& hold, bool permit) {
    if (!revocations_.heard_of(*hold, permit)) return;
    keeper().forget(hold);
    mark_lost(hold, LostReason::revoked, core_.io());
}

void LockService::give_back_memory_after_burst() {
    // The holds' renewals, losses and the callers' retakes take a few
    // seconds; a later reconnect within them moves the moment on.
    settle_timer_.expires_after(std::chrono::seconds(10));
    settle_timer_.async_wait([](std::error_code ec) {
        if (!ec) give_back_free_memory();
    });
}

void LockService::check_eviction_policy() {
    if (!core_.options().on_warning || core_.usable()) return;
    std::string_view args[] = {"CONFIG", "GET", "maxmemory-policy"};
    auto& options = core_.options();
    core_.submit(args, [&options](std::error_code ec, Reply&& reply) {
        // Not allowed to read it (ACL, a managed server that renamed CONFIG): say nothing.
        if (ec || !reply.is_array() || reply.elements.size() != 2) return;
        const auto& policy = reply.elements[1].text;
        if (policy == "noeviction") return;
        try {
            options.on_warning("the server's maxmemory-policy is " + policy +
                               ": under memory pressure it may evict lock keys, and a held lock would vanish; "
                               "use noeviction for locks");
        } catch (...) {
            // A warning hook must not take the I/O thread down.
        }
    });
}


HoldCall LockService::renewal_of(const Hold& hold) {
    auto call = hold.lock->renewal(hold.owner);
    if (!hold.keeper.renewal_label.empty()) call.argv.push_back(hold.keeper.renewal_label);  // renew.lua's ARGV[5]
    return call;
}

void LockService::send_renewals(std::vector<std::shared_ptr<Hold>>& due, LockClock::time_point sent) {
    std::vector<std::string_view> commands;
    std::vector<Completion> dones;
    auto deadline = LockClock::time_point::max();
    for (auto& hold : due) {
        const auto& ack = hold->lock->options.replica_ack;
        if (ack.replicas > 0 && ack.on_renewal) {
            send_acknowledged_renewal(hold, sent);
            continue;
        }
        // Formatting is most of a renewal's client-side cost, and the
        // command never changes: format it once per hold.
        auto& command = hold->keeper.renew_command;
        if (command.empty()) {
            const auto call = renewal_of(*hold);
            const HoldCallViews views(call);
            append_eval(command, "EVALSHA", core_.script_for_server(*call.script).sha1(), views.keys, views.argv);
        }
        commands.emplace_back(command);  // `due` keeps the hold alive through the submit
        deadline = std::min(deadline, LeaseKeeper::renewal_deadline(*hold, sent, core_.options().command_timeout));
        dones.push_back([this, hold, sent](std::error_code ec, Reply&& reply) { on_renewed(hold, sent, ec, reply); });
    }
    core_.submit_many(commands, dones, deadline);
}

void LockService::send_line_refreshes(std::vector<std::shared_ptr<LineWaiters::Waiter>>& due) {
    std::vector<std::string_view> commands;
    std::vector<Completion> dones;
    auto deadline = LockClock::time_point::max();
    for (auto& waiter : due) {
        auto& command = waiter->refresh_command;
        if (command.empty()) {
            const auto& id = *waiter->identity;
            std::string_view keys[] = {id.keys.lock, id.keys.fence(), id.keys.line(), id.keys.places()};
            std::string_view argv[] = {waiter->owner, id.waiter_lease_ms, id.retention_ms};
            append_eval(command, "EVALSHA", core_.script_for_server(line_refresh_script()).sha1(), keys, argv);
        }
        commands.emplace_back(command);
        // A deadline shorter than the command timeout would give up on the
        // shared connection (and everything in flight on it) sooner than
        // any other command does.
        deadline = std::min(deadline, LockClock::now() + core_.options().command_timeout);
        dones.push_back([this, waiter, sent = LockClock::now()](std::error_code ec, Reply&& reply) {
            if (ec != errc::no_script) return LineWaiters::refreshed(*waiter, ec, reply, sent);
            // The server does not know the script yet (its first refresh, or
            // after a restart): the same refresh as EVAL, which also loads it
            // for the next EVALSHA. Waking the waiter instead would make it
            // ask for the lock every tick.
            // Or behind an EVAL already sent, as EVALSHA (resend_after_no_script).
            ClientCore::ScriptResend resend;
            auto bytes = core_.resend_after_no_script(core_.script_for_server(line_refresh_script()),
                                                     waiter->refresh_command, resend);
            core_.submit_formatted(
                bytes,
                [this, waiter, sent, eval = resend.eval](std::error_code e, Reply&& r) {
                    if (eval) core_.note_eval_answered(core_.script_for_server(line_refresh_script()));
                    LineWaiters::refreshed(*waiter, e, r, sent);
                },
                LockClock::now() + core_.options().command_timeout);
        });
    }
    core_.submit_many(commands, dones, deadline);
}

void LockService::send_acknowledged_renewal(const std::shared_ptr<Hold>& hold, LockClock::time_point sent) {
    const auto& ack = hold->lock->options.replica_ack;
    const auto call = hold->lock->renewal(hold->owner);
    const HoldCallViews views(call);
    eval_acknowledged_async(core_, *call.script, views.keys, views.argv, ack, read_renewed, hold->view().valid_until,
                            [this, hold, sent, wanted = ack.replicas](AcknowledgedAnswer&& answer) {
                                if (answer.ec) return keeper().failed(hold, answer.ec);
                                if (!read_renewed(answer.reply)) return keeper().refused(hold);
                                // Extended on the master only: not yet safe from a failover.
                                if (answer.replicas < wanted)
                                    return keeper().failed(hold, errc::replicas_not_acknowledged);
                                keeper().renewed(hold, sent);
                            });
}

void LockService::confirmed(const std::shared_ptr<Hold>& hold, LockClock::time_point sent, std::error_code ec,
                            bool kept) {
    if (ec == errc::client_closed) return keeper().failed(hold, ec);
    using Answer = LeaseKeeper::Answer;
    if (!ec && kept) return keeper().renewed(hold, sent, Answer::grant_confirmation);
    // Refused, or not confirmed within the whole retry window: lost now.
    // Only a fixed lease is confirmed (a renewed one needs no confirmation),
    // and nothing else would extend it: left alone, its short lease ends it.
    // Unconfirmed, it is told as a lease whose renewal was not confirmed;
    // refused, as taken over.
    keeper().refused(hold, ec ? LostReason::expired : LostReason::taken_over, Answer::grant_confirmation);
}

void LockService::on_renewed(const std::shared_ptr<Hold>& hold, LockClock::time_point sent, std::error_code ec,
                             const Reply& reply) {
    if (ec == errc::no_script) {
        // The server forgot the script (SCRIPT FLUSH, restart): the same
        // renewal again through the path that falls back to EVAL.
        const auto call = renewal_of(*hold);
        const HoldCallViews views(call);
        core_.eval_async(*call.script, views.keys, views.argv,
                         [this, hold, sent](std::error_code e, Reply&& r) { on_renewed(hold, sent, e, r); },
                         LeaseKeeper::renewal_deadline(*hold, sent, core_.options().command_timeout));
        return;
    }
    if (ec) return keeper().failed(hold, ec);
    if (read_renewed(reply)) return keeper().renewed(hold, sent);
    keeper().refused(hold);
}

void LockService::release_all_on_stop() {
    // One short bound for all of it (Client::max_close_wait): a server that
    // answers settles everything within a round trip or two; one that does
    // not answer leaves what was not answered to its leases (a hold, a
    // grant nobody will use, a place in line), rather than holding up the
    // closing program for a command timeout.
    const auto until = Clock::now() + std::min<Clock::duration>(core_.options().command_timeout, Client::max_close_wait);
    // The waiters first (each gives back what its attempts left on the
    // server while the client can still send it), then every hold still
    // ours, renewal in flight or not.
    auto holds = close_holds(until);
    // By script: the holds of each kind leave in one write.
    std::map<const Script*, std::vector<ClientCore::EvalCall>> calls;
    std::vector<std::future<void>> done;
    for (auto& hold : holds) {
        auto promise = std::make_shared<std::promise<void>>();
        done.push_back(promise->get_future());
        auto call = hold->lock->final_release(hold->owner, next_operation_id(), hold->grant_arrival.view());
        calls[call.script].push_back({std::move(call.keys), std::move(call.argv),
                                      [promise](std::error_code, Reply&&) { promise->set_value(); }});
    }
    for (auto& [script, of_script] : calls) core_.eval_many(*script, of_script);
    // Each call completes by its command timeout; the close waits until `until` only.
    for (auto& f : done)
        if (f.wait_until(until) != std::future_status::ready) break;
    // Undos, withdrawals and places given back that are still on their way
    // (a NOSCRIPT answer's EVAL not sent yet).
    (void)unattended().settle_by(until);
}

}  // namespace dlock::detail
