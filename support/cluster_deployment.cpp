#include "cluster_deployment.hpp"

#include <sstream>
#include <stdexcept>
#include <thread>

#include "wait_until.hpp"

namespace dlock::support {
namespace {

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

std::vector<std::string> words(const std::string& line) {
    std::vector<std::string> out;
    std::istringstream in(line);
    for (std::string word; in >> word;) out.push_back(word);
    return out;
}

}  // namespace

ClusterDeployment::ClusterDeployment(int masters) {
    RedisServerOptions options;
    options.max_port = 55535;  // the cluster bus listens on port + 10000
    options.extra_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                          "--cluster-node-timeout", "1000", "--repl-diskless-sync-delay", "0"};
    for (int i = 0; i < masters * 2; ++i) nodes_.push_back(std::make_unique<RedisServer>(options));
    std::string command = "redis-cli --cluster create";
    for (auto& node : nodes_) command += " 127.0.0.1:" + std::to_string(node->port());
    command += " --cluster-replicas 1 --cluster-yes >/dev/null 2>&1";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("redis-cli --cluster create failed");
    wait_cluster_ok();
}

ClusterDeployment::~ClusterDeployment() = default;

std::string ClusterDeployment::uri() const {
    std::string uri = "redis-cluster://";
    for (std::size_t i = 0; i < 3 && i < nodes_.size(); ++i)
        uri += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(nodes_[i]->port());
    return uri;
}

std::vector<RedisServer*> ClusterDeployment::nodes() const {
    std::vector<RedisServer*> out;
    for (auto& node : nodes_) out.push_back(node.get());
    return out;
}

RedisServer& ClusterDeployment::node_on_port(std::uint16_t port) const {
    for (auto& node : nodes_)
        if (node->port() == port) return *node;
    throw std::runtime_error("no cluster node on port " + std::to_string(port));
}

int ClusterDeployment::key_slot(const std::string& key) const {
    for (auto& node : nodes_)
        if (node->running()) return std::stoi(node->cli({"CLUSTER", "KEYSLOT", key}));
    throw std::runtime_error("no live node");
}

std::string ClusterDeployment::node_id(std::uint16_t port) const { return node_on_port(port).cli({"CLUSTER", "MYID"}); }

std::uint16_t ClusterDeployment::master_for_slot(int slot) const {
    for (auto& node : nodes_) {
        if (!node->running()) continue;
        // "<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <state> <slots...>"
        for (const auto& line : lines(node->cli({"CLUSTER", "NODES"}))) {
            auto w = words(line);
            if (w.size() < 9 || w[2].find("master") == std::string::npos || w[2].find("fail") != std::string::npos)
                continue;
            for (std::size_t i = 8; i < w.size(); ++i) {
                if (w[i].front() == '[') continue;  // migration markers
                auto dash = w[i].find('-');
                int first = std::stoi(w[i].substr(0, dash));
                int last = dash == std::string::npos ? first : std::stoi(w[i].substr(dash + 1));
                if (slot >= first && slot <= last) {
                    auto address = w[1].substr(0, w[1].find('@'));
                    return static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
                }
            }
        }
        return 0;
    }
    return 0;
}

std::uint16_t ClusterDeployment::replica_of(std::uint16_t master_port) const {
    const auto id = node_id(master_port);
    for (auto& node : nodes_) {
        if (!node->running() || node->port() == master_port) continue;
        auto role = node->cli({"ROLE"});
        if (role.rfind("slave", 0) == 0 && role.find("\n" + std::to_string(master_port) + "\n") != std::string::npos)
            return node->port();
    }
    throw std::runtime_error("no replica of " + std::to_string(master_port) + " (" + id + ")");
}

void ClusterDeployment::begin_migration(int slot, std::uint16_t from, std::uint16_t to) {
    const auto s = std::to_string(slot);
    node_on_port(to).cli({"CLUSTER", "SETSLOT", s, "IMPORTING", node_id(from)});
    node_on_port(from).cli({"CLUSTER", "SETSLOT", s, "MIGRATING", node_id(to)});
}

void ClusterDeployment::move_keys(int slot, std::uint16_t from, std::uint16_t to) {
    auto& source = node_on_port(from);
    for (int round = 0; round < 10000; ++round) {
        auto keys = lines(source.cli({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"}));
        if (keys.empty() || (keys.size() == 1 && keys[0].empty())) return;
        std::vector<std::string> args{"MIGRATE", "127.0.0.1", std::to_string(to), "", "0", "5000", "KEYS"};
        args.insert(args.end(), keys.begin(), keys.end());
        auto answer = source.cli(args);
        if (answer != "OK" && answer != "NOKEY") throw std::runtime_error("MIGRATE: " + answer);
    }
    throw std::runtime_error("MIGRATE did not empty the slot");
}

void ClusterDeployment::finish_migration(int slot, std::uint16_t from, std::uint16_t to) {
    const auto s = std::to_string(slot);
    const auto target = node_id(to);
    node_on_port(to).cli({"CLUSTER", "SETSLOT", s, "NODE", target});
    node_on_port(from).cli({"CLUSTER", "SETSLOT", s, "NODE", target});
    for (auto& node : nodes_)
        if (node->running() && node->port() != from && node->port() != to)
            node->cli({"CLUSTER", "SETSLOT", s, "NODE", target});
    wait_until([&] { return master_for_slot(slot) == to; }, std::chrono::seconds(30), "the slot's new owner");
}

std::uint16_t ClusterDeployment::failover_replica_of(std::uint16_t master_port) {
    const auto replica = replica_of(master_port);
    auto answer = node_on_port(replica).cli({"CLUSTER", "FAILOVER"});
    if (answer != "OK") throw std::runtime_error("CLUSTER FAILOVER: " + answer);
    wait_until([&] { return node_on_port(replica).cli({"ROLE"}).rfind("master", 0) == 0; }, std::chrono::seconds(30),
               "the replica to become master");
    // Every node's view, not only the new master's: until they agree, a
    // client's map refresh may be answered with the old one.
    wait_until(
        [&] {
            for (auto& node : nodes_) {
                if (!node->running()) continue;
                const auto view = node->cli({"CLUSTER", "NODES"});
                const auto at = view.find(":" + std::to_string(replica) + "@");
                if (at == std::string::npos) return false;
                const auto line = view.substr(at, view.find('\n', at) - at);
                if (line.find("master") == std::string::npos || line.find("slave") != std::string::npos) return false;
            }
            return true;
        },
        std::chrono::seconds(30), "every node to see the new master");
    wait_cluster_ok();
    return replica;
}

void ClusterDeployment::kill_node(std::uint16_t port) { node_on_port(port).kill(); }

void ClusterDeployment::wait_cluster_ok(std::chrono::seconds timeout, int slot, std::uint16_t not_on) const {
    wait_until(
        [&] {
            for (auto& node : nodes_) {
                if (!node->running()) continue;
                if (node->cli({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) return false;
            }
            if (slot >= 0) {
                auto master = master_for_slot(slot);
                if (!master || master == not_on) return false;
            }
            return true;
        },
        timeout, "cluster_state:ok");
}

}  // namespace dlock::support
