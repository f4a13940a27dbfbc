// A throwaway Redis Cluster for the tests: three masters with one replica
// each (redis-server --cluster-enabled yes, then redis-cli --cluster create),
// on free loopback ports, killed by pid when the object goes away. Nodes
// time out after cluster-node-timeout 1000 ms, so a failover after a kill
// takes a few seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redis_server.hpp"

namespace dlock::support {

class ClusterDeployment {
public:
    // Starts 6 nodes, creates the cluster, waits until every node says
    // cluster_state:ok and agrees on the slot map.
    explicit ClusterDeployment(int masters = 3);
    ~ClusterDeployment();

    // redis-cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3 (the first masters as seeds)
    std::string uri() const;
    std::vector<RedisServer*> nodes() const;
    RedisServer& node_on_port(std::uint16_t port) const;

    // CLUSTER KEYSLOT, asked of a node.
    int key_slot(const std::string& key) const;
    // The port of the master serving slot, as a live node says.
    std::uint16_t master_for_slot(int slot) const;
    std::string node_id(std::uint16_t port) const;
    // A replica of the master on port.
    std::uint16_t replica_of(std::uint16_t master_port) const;

    // Slot migration, step by step (an ASK window lies between the steps).
    void begin_migration(int slot, std::uint16_t from, std::uint16_t to);
    // MIGRATE every key of slot from -> to (in batches).
    void move_keys(int slot, std::uint16_t from, std::uint16_t to);
    // CLUSTER SETSLOT NODE on both and the other masters.
    void finish_migration(int slot, std::uint16_t from, std::uint16_t to);
    void migrate_slot(int slot, std::uint16_t from, std::uint16_t to) {
        begin_migration(slot, from, to);
        move_keys(slot, from, to);
        finish_migration(slot, from, to);
    }

    // CLUSTER FAILOVER on the replica of master_port; waits until it is a
    // master and the cluster is ok everywhere. Returns the new master's port.
    std::uint16_t failover_replica_of(std::uint16_t master_port);
    // SIGKILL of a node.
    void kill_node(std::uint16_t port);
    // Until every live node says cluster_state:ok and the slot's master is
    // not old_port (0: any).
    void wait_cluster_ok(std::chrono::seconds timeout = std::chrono::seconds(30), int slot = -1,
                         std::uint16_t not_on = 0) const;

private:
    std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace dlock::support
