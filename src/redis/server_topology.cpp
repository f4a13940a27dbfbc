#include "server_topology.hpp"

#include "dlock/error.hpp"
#include "sentinel_master.hpp"

namespace dlock::detail {

ServerTopology::ServerTopology(asio::io_context& io, ServerAddress address, ClientOptions options,
                               std::shared_ptr<ConnectTarget> target)
    : io_(io),
      address_(std::move(address)),
      options_(std::move(options)),
      target_(std::move(target)),
      commands_(std::make_shared<Connection>(io_, address_, options_, Connection::Mode::request_reply,
                                             Connection::Hooks{}, target_)) {}

void ServerTopology::start() { commands_->start(); }

void ServerTopology::shutdown() {
    commands_->shutdown();
    std::shared_ptr<DedicatedConnections> dedicated;
    {
        std::lock_guard lock(dedicated_mutex_);
        dedicated_closed_ = true;  // none is made after this
        dedicated.swap(dedicated_);
    }
    if (dedicated) dedicated->shutdown();
}

void ServerTopology::submit_dedicated(std::string first, DedicatedConnections::Next next,
                                      DedicatedConnections::Done done, Clock::time_point deadline) {
    std::shared_ptr<DedicatedConnections> dedicated;
    {
        std::lock_guard lock(dedicated_mutex_);
        if (!dedicated_ && !dedicated_closed_)
            dedicated_ = std::make_shared<DedicatedConnections>(io_, address_, options_, target_);
        dedicated = dedicated_;
    }
    if (!dedicated) return done(errc::client_closed, {});  // shut down first
    dedicated->submit(std::move(first), std::move(next), std::move(done), deadline);
}

std::shared_ptr<Connection> ServerTopology::connect(const Home& home, ClientOptions options, Connection::Mode mode,
                                                    Connection::Hooks hooks) {
    return std::make_shared<Connection>(io_, home.address, std::move(options), mode, std::move(hooks), target_);
}

const std::shared_ptr<ClusterRouter>& ServerTopology::cluster_router() const {
    static const std::shared_ptr<ClusterRouter> none;
    return none;
}

SentinelTopology::SentinelTopology(asio::io_context& io, ServerAddress address, ClientOptions options,
                                   std::shared_ptr<SentinelLocator> locator)
    : ServerTopology(io, std::move(address), std::move(options), std::make_shared<SentinelMaster>(locator)),
      locator_(std::move(locator)) {}

void SentinelTopology::start() {
    locator_->start();
    ServerTopology::start();
}

void SentinelTopology::shutdown() {
    // The connections first, as before the locator they ask.
    ServerTopology::shutdown();
    locator_->shutdown();
}

void SentinelTopology::on_change(ChangeListener listener) {
    locator_->on_change([listener = std::move(listener)](const ServerAddress&) { return listener(); });
}

}  // namespace dlock::detail
