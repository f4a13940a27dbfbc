// A throwaway Redis Sentinel deployment for the tests: one master, its
// replicas and three sentinels (quorum 2) watching it under one name, all on
// free loopback ports, killed by pid when the object goes away. Failures are
// detected fast (down-after-milliseconds 400 by default), so a failover
// takes a couple of seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redis_server.hpp"

namespace dlock::support {

struct SentinelDeploymentOptions {
    std::string master_name = "mymaster";
    int replicas = 1;
    std::string password;           // the data nodes' (requirepass, masterauth, sentinel auth-pass)
    std::string sentinel_password;  // the sentinels' own requirepass
    int down_after_ms = 400;
    int failover_timeout_ms = 2000;
};

class SentinelDeployment {
public:
    // Starts everything and waits until the sentinels agree on the master,
    // know each other and see the replicas. Throws std::runtime_error on timeout.
    explicit SentinelDeployment(SentinelDeploymentOptions options = {});
    ~SentinelDeployment();

    // redis-sentinel://[:password@]127.0.0.1:s1,...#name
    std::string uri() const;
    const std::string& master_name() const { return options_.master_name; }
    // Data nodes: index 0 started as the master; which one is master now is
    // what the sentinels say (current_master_port).
    std::vector<RedisServer*> data_nodes() const;
    RedisServer& node_on_port(std::uint16_t port) const;
    RedisServer& current_master() const { return node_on_port(current_master_port()); }
    std::vector<std::uint16_t> sentinel_ports() const;
    // The data node that answers ROLE master (one that is down answers
    // nothing), or nullptr. Unlike current_master(), it does not depend on
    // which sentinel has caught up with a failover: a client may reach the
    // new master before all have. It only asks the servers, so another
    // thread may call it while this one kills a node.
    RedisServer* running_master() const;
    RedisServer& sentinel(std::size_t i) const { return *sentinels_.at(i); }

    // What a sentinel names as the master now (asks them in turn).
    std::uint16_t current_master_port() const;
    // SENTINEL FAILOVER, then waits until every sentinel names the new
    // master and it says ROLE master. Returns its port.
    std::uint16_t failover();
    // SIGKILL of the current master; returns its port.
    std::uint16_t kill_master();
    // Waits until the sentinels name a master other than old_port and it answers as master.
    std::uint16_t wait_for_new_master(std::uint16_t old_port, std::chrono::seconds timeout = std::chrono::seconds(30));
    // Waits until every replica of the current master has caught up (INFO replication offsets).
    void wait_replicated() const;

private:
    void wait_ready() const;

    SentinelDeploymentOptions options_;
    std::vector<std::unique_ptr<RedisServer>> nodes_;
    std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

}  // namespace dlock::support
