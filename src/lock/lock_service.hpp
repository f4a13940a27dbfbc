// What every lock of one client shares: the client's owner and operation
// names, the local wait queues, and the lease keeper. Made on first use and
// kept as long as the client; when the client stops it releases every lock
// still held through it.
#pragma once

#include <memory>

#include "lease_keeper.hpp"
#include "name_queue.hpp"
#include "owner_ids.hpp"

namespace dlock::detail {

class LockService : public OwnerIds, public QueueRegistry {
public:
    explicit LockService(ClientCore& core);
    static std::shared_ptr<LockService> of(ClientCore& core);

    LeaseKeeper& keeper() noexcept { return keeper_; }

private:
    // Renewals due together leave in one write on the command connection.
    void send_renewals(std::vector<std::shared_ptr<Hold>>& due, LockClock::time_point sent);
    // With LockOptions::replica_ack: renew, then WAIT, on a dedicated connection.
    void send_acknowledged_renewal(const std::shared_ptr<Hold>& hold, LockClock::time_point sent);
    void on_renewed(const std::weak_ptr<Hold>& weak, LockClock::time_point sent, std::error_code ec,
                    const Reply& reply);
    void release_all_on_stop();

    ClientCore& core_;
    LeaseKeeper keeper_;
};

}  // namespace dlock::detail
