#include "topology.hpp"

#include "cluster_topology.hpp"
#include "server_topology.hpp"

namespace dlock::detail {

std::shared_ptr<Topology> Topology::make(asio::io_context& io, const ServerAddress& address,
                                         const ClientOptions& options) {
    switch (address.topology) {
        case ServerAddress::Topology::cluster: return std::make_shared<ClusterTopology>(io, address, options);
        case ServerAddress::Topology::sentinel:
            return std::make_shared<SentinelTopology>(io, address, options,
                                                      std::make_shared<SentinelLocator>(io, address, options));
        case ServerAddress::Topology::standalone: break;
    }
    return std::make_shared<ServerTopology>(io, address, options);
}

}  // namespace dlock::detail
