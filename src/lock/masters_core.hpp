// What every Redlock over one set of masters shares: the masters' clients,
// all on one I/O loop (redis/io_loop.hpp; a blocking caller reads its
// vote's answers itself, fan_out.hpp), and their hold runtime (hold/hold_runtime.hpp: owner and operation names,
// the holds, the local wait queues, the lease keeper, the close's gate),
// with the masters' renewal strategy: a renewal needs a majority.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "fan_out.hpp"
#include "hold/hold_runtime.hpp"

namespace dlock::detail {

class MastersCore : public std::enable_shared_from_this<MastersCore> {
public:
    MastersCore(const std::vector<std::string>& urls, const ClientOptions& options);
    ~MastersCore();

    // Releases every hold still live (waits up to each master's node
    // timeout), then closes the clients. Idempotent. On the masters' I/O
    // thread it does not wait: the releases are sent, and the clients (and
    // this core) are kept until every master answered them or timed out.
    void close();
    // client_closed after close(); forked_child in a child process.
    std::error_code usable() const noexcept;

    std::size_t size() const noexcept { return cores.size(); }
    // A blocking caller here may read the masters' answers itself (a
    // DriveScope): not on their I/O thread, not in a fiber.
    bool may_drive() const noexcept { return cores.front()->may_drive(); }
    std::size_t quorum() const noexcept;
    Client& client(std::size_t index);
    // The one Metrics every master's client records into.
    const std::shared_ptr<Metrics>& metrics() const noexcept;

    const std::vector<std::string> addresses;  // as Client::address() shows them: no password
    const std::vector<std::shared_ptr<ClientCore>> cores;
    LeaseKeeper& keeper() noexcept { return runtime.keeper(); }
    // Drops every hold of owner on every master (release.lua with a fresh
    // operation id), each master given identity's node timeout.
    std::shared_ptr<FanOut> send_release(const RedlockIdentity& identity, const std::string& owner);
    // A release still reaching the slower masters after its caller moved on:
    // close() waits for it, so a process that exits right after unlock()
    // leaves no grant behind on a minority of masters.
    void finish_before_close(std::shared_ptr<FanOut> release);
    // The close's releases: every hold still live, and what acquisitions
    // left on their way out (the stragglers), sent. Once no acquisition is inside.
    std::vector<std::shared_ptr<FanOut>> releases_of_close();

private:
    explicit MastersCore(std::vector<std::unique_ptr<Client>> clients);
    // A client per master, all on one loop, which runs once they all started.
    static std::vector<std::unique_ptr<Client>> connect_all(const std::vector<std::string>& urls,
                                                           ClientOptions options);
    void send_renewals(std::vector<std::shared_ptr<Hold>>& due, LockClock::time_point sent);
    // close() on the loop's thread: closes the clients once every release is answered.
    void close_when_answered(std::shared_ptr<MastersCore> self, const std::vector<std::shared_ptr<FanOut>>& releases);

    std::vector<std::unique_ptr<Client>> clients_;
    std::mutex stragglers_mutex_;
    std::vector<std::shared_ptr<FanOut>> stragglers_;
    std::atomic<bool> closed_{false};

public:
    // After cores: the keeper's timer lives on the first master's I/O context.
    HoldRuntime runtime;
};

}  // namespace dlock::detail
