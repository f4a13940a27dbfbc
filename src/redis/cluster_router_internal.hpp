// What the files of ClusterRouter share (cluster_router.cpp, the routing and
// the node table; cluster_redirects.cpp, what the cluster answers instead of
// running a command; cluster_slot_map.cpp, the slot map and its refreshes).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "cluster_router.hpp"

namespace dlock::detail {

// The most distinct nodes one client keeps connections to: far more than a
// cluster has masters, so that a map that names hostile numbers of nodes
// cannot make it open sockets without end.
constexpr std::size_t max_nodes = 1024;

struct ClusterRouter::Routed {
    std::string bytes;
    Completion done;
    Clock::time_point deadline;
    int redirects = 0;  // MOVED and ASK hops since the last pause: a loop between nodes ends
    std::unique_ptr<asio::steady_timer> pause;
};

}  // namespace dlock::detail
