// What every lock of one client shares: the client's random id, owner and
// operation numbering, the local wait queues, and the lease keeper. Made on
// first use and kept as long as the client; when the client stops it
// releases every lock still held through it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "lease_keeper.hpp"
#include "name_queue.hpp"

namespace dlock::detail {

class LockService {
public:
    explicit LockService(ClientCore& core);
    static std::shared_ptr<LockService> of(ClientCore& core);

    const std::string& client_id() const noexcept { return client_id_; }
    // client id + calling thread: the default owner.
    std::string thread_owner() const;
    // client id + a number unique in this client: an explicit owner handle.
    std::string new_handle_owner();
    // Distinct for every acquire/release this client sends: lets a retried
    // call be told apart from a new one.
    std::string next_operation_id();

    std::shared_ptr<NameQueue> queue(const std::string& name);
    std::shared_ptr<NameQueue> existing_queue(const std::string& name);

    LeaseKeeper& keeper() noexcept { return keeper_; }

private:
    void release_all_on_stop();

    ClientCore& core_;
    const std::string client_id_;
    std::atomic<std::uint64_t> next_operation_{1};
    std::atomic<std::uint64_t> next_handle_{1};
    LeaseKeeper keeper_;

    std::mutex queues_mutex_;
    std::unordered_map<std::string, std::weak_ptr<NameQueue>> queues_;
    std::size_t queues_created_ = 0;
};

}  // namespace dlock::detail
