// What every hold of one client, or of one set of Redlock masters, shares:
// owner and operation names, the holds by (name, owner), this process's
// wait queues by name, the lease keeper, the calls nobody waits for, and
// the gate at which the close stops acquisitions under way.
//
// One runtime per client (LockService: Lock, FairLock, RwLock, Semaphore,
// MultiLock) and one per set of masters (MastersCore: Redlock). What differs
// between them is the topology's part only: how the renewals that fall due
// together are sent (one pipelined write to one server; a vote of the
// masters that needs a majority), how a hold is released at the close, and
// what else a single server offers (the inbox, lines, channel watches).
//
// The close, the same for both: the acquisitions under way are stopped
// first (each gives back what its attempts left on the server while the
// client can still send it; a grant that came meanwhile becomes a hold),
// then every hold still ours is taken out of the keeper for the topology to
// release (close_holds).
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <memory>
#include <vector>

#include "closing_gate.hpp"
#include "hold_registry.hpp"
#include "lease_keeper.hpp"
#include "name_queue.hpp"
#include "runtime/owner_ids.hpp"
#include "retried_call.hpp"
#include "unattended_calls.hpp"

namespace dlock::detail {

class HoldRuntime : public OwnerIds, public QueueRegistry {
public:
    // The keeper's timer runs on timer_home's I/O thread; send_renewals is
    // the topology's renewal strategy (LeaseKeeper::SendRenewals).
    HoldRuntime(ClientCore& timer_home, LeaseKeeper::SendRenewals send_renewals)
        : keeper_(timer_home, std::move(send_renewals)) {}

    LeaseKeeper& keeper() noexcept { return keeper_; }
    // The holds by name and owner (for a single server: the exclusive ones,
    // Lock and the write side of an RwLock).
    HoldRegistry& holds() noexcept { return holds_; }
    // Calls nobody waits for; the close waits for them.
    UnattendedCalls& unattended() noexcept { return unattended_; }
    // The lock calls' state, kept for reuse.
    RetriedCallPool& calls() noexcept { return calls_; }
    // The acquisitions under way: the close stops them first.
    ClosingGate& closing() noexcept { return closing_; }

    // The close's common steps: stops the acquisitions under way (waiting
    // for them until `until` at the most), then takes every hold still ours
    // (renewal in flight or not) out of the keeper. The caller releases them.
    std::vector<std::shared_ptr<Hold>> close_holds(LockClock::time_point until) {
        (void)closing_.close(until);
        return drop_holds();
    }
    // The holds still live, dropped and forgotten by the keeper: those the
    // close must release (after closing_ let every acquisition out).
    std::vector<std::shared_ptr<Hold>> drop_holds() {
        std::vector<std::shared_ptr<Hold>> ours;
        for (auto& hold : keeper_.live_holds()) {
            if (!hold->drop()) continue;
            keeper_.forget(hold);
            ours.push_back(std::move(hold));
        }
        return ours;
    }

private:
    HoldRegistry holds_;
    LeaseKeeper keeper_;
    UnattendedCalls unattended_;
    RetriedCallPool calls_;
    ClosingGate closing_;
};

}  // namespace dlock::detail
