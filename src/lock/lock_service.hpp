// What every lock of one client shares: the client's hold runtime
// (hold/hold_runtime.hpp: owner and operation names, the holds by (name,
// owner), the local wait queues, the lease keeper, the close's gate), with
// the single server's renewal strategy (renewals due together leave in one
// write), and what only a single server offers: the client's inbox, its
// waiters in servers' lines, the semaphores' channel watches and the read
// sides' holds. Made on first use and kept as long as the client; when the
// client stops it releases every lock still held through it.
//
// The inbox: one channel per client ("dlock:inbox:<client id>") on the
// client's subscriber connection. A script that takes a lock away from its
// owner (force-release) publishes there, so the holder hears of it within a
// round trip instead of at its next renewal. After the subscriber
// reconnects (messages may have been missed), every hold is renewed at once.
// Direct grants to a waiter in a lock's line are announced there too
// (line_waiters.hpp).
#pragma once

#include <atomic>
#include <memory>

#include "dlock/subscription.hpp"
#include "hold/channel_watch.hpp"
#include "hold/hold_runtime.hpp"
#include "hold/line_waiters.hpp"
#include "hold/recent_revocations.hpp"

namespace dlock::detail {

class LockService : public ClientExtension, public HoldRuntime {
public:
    explicit LockService(ClientCore& core);
    static std::shared_ptr<LockService> of(ClientCore& core);

    // holds(): the exclusive holds (Lock, the write side of an RwLock), by
    // name and owner; the inbox's revocations look there.
    // The waiters of semaphores, by channel.
    ChannelWatches& watches() noexcept { return watches_; }
    // The read side of RwLocks, by name and owner: one owner may hold both
    // sides of one name, each with its own hold, count and gate.
    HoldRegistry& shared_holds() noexcept { return shared_holds_; }
    asio::io_context& io() noexcept { return core_.io(); }
    // This client's waiters in servers' lines (queued locks).
    LineWaiters& line_waiters() noexcept { return line_waiters_; }
    // True once the inbox subscription is confirmed (grant notices reach
    // this client); waits until deadline at the most.
    bool inbox_active(LockClock::time_point deadline) const { return inbox_ && inbox_.wait_active(deadline); }
    // Waits until the channel that tells this client of its holds' revocations
    // listens (name_inbox in a cluster, else the client's inbox), up to a
    // command timeout, `until` or stop: a hold granted before then could be
    // revoked unheard. Not while the subscriber connection is failing (a
    // free lock is not refused for want of notices): false at once then.
    // Once a wait has run its whole command timeout unconfirmed (a server
    // that refuses the SUBSCRIBE, a subscriber connection that does not
    // answer), later calls do not wait again until a subscription of this
    // client is confirmed. True when it listens. Instant once it does.
    bool wait_for_inbox(const Subscription& name_inbox, std::optional<LockClock::time_point> until,
                        const std::stop_token& stop) const;
    // In a Redis Cluster, scripts tell this client about one lock's holds
    // and waits on a channel of that lock's slot (inbox_of in publish.lua):
    // a lock object listens there while it lives. Empty elsewhere, where the
    // client's one inbox serves every name.
    Subscription name_inbox(const std::string& lock_key);
    // The answer to the confirmation of a direct grant its waiter took from
    // the notice, of a fixed lease (sent at `sent`; confirm_grant.lua, a
    // semaphore's renewal):
    // kept (extended as by a renewal), or lost.
    void confirmed(const std::shared_ptr<Hold>& hold, LockClock::time_point sent, std::error_code ec, bool kept);
    // A hold just made, once findable (tracked by the keeper; a lock's also
    // set in its owner's slot): lost now (revoked) when its force release was
    // heard before it was made (hold/recent_revocations.hpp). `permit`: a
    // semaphore's permit, named by its id; else a lock's, by its token.
    void lose_if_revoked(const std::shared_ptr<Hold>& hold, bool permit);

private:
    // Renewals due together leave in one write on the command connection.
    void send_renewals(std::vector<std::shared_ptr<Hold>>& due, LockClock::time_point sent);
    // A hold's renewal, with the holder's label where it brings one.
    static HoldCall renewal_of(const Hold& hold);
    // With LockOptions::replica_ack: renew, then WAIT, on a dedicated connection.
    void send_acknowledged_renewal(const std::shared_ptr<Hold>& hold, LockClock::time_point sent);
    void send_line_refreshes(std::vector<std::shared_ptr<LineWaiters::Waiter>>& due);
    void on_renewed(const std::shared_ptr<Hold>& hold, LockClock::time_point sent, std::error_code ec,
                    const Reply& reply);
    void release_all_on_stop();
    void listen_to_inbox();
    void on_inbox(Subscription::Event event, std::string_view payload);
    void check_eviction_policy();
    // After a reconnect's burst (every hold renewed, lost or taken again):
    // once it has settled, the allocator's free pages go back (free_memory.hpp).
    void give_back_memory_after_burst();

    ClientCore& core_;
    ChannelWatches watches_;
    HoldRegistry shared_holds_;
    LineWaiters line_waiters_;
    RecentRevocations revocations_;  // noted by on_inbox, before it looks at the holds
    Subscription inbox_;
    asio::steady_timer settle_timer_;  // I/O thread
    // A wait_for_inbox ran its command timeout out and no subscription
    // (the inbox, a name inbox) has been confirmed since.
    mutable std::atomic<bool> inbox_unconfirmed_{false};
};

}  // namespace dlock::detail
