#include "sentinel_deployment.hpp"

#include <stdexcept>
#include <thread>

#include "wait_until.hpp"

namespace dlock::support {
namespace {

std::string field(const std::string& info, const std::string& name) {
    auto at = info.find(name + ":");
    if (at == std::string::npos) return {};
    auto end = info.find_first_of("\r\n", at);
    return info.substr(at + name.size() + 1, end - at - name.size() - 1);
}

}  // namespace

SentinelDeployment::SentinelDeployment(SentinelDeploymentOptions options) : options_(std::move(options)) {
    RedisServerOptions master_options;
    master_options.password = options_.password;
    if (!options_.password.empty()) master_options.extra_args = {"--masterauth", options_.password};
    master_options.extra_args.insert(master_options.extra_args.end(), {"--repl-diskless-sync-delay", "0"});
    nodes_.push_back(std::make_unique<RedisServer>(master_options));
    const auto master_port = std::to_string(nodes_[0]->port());
    for (int i = 0; i < options_.replicas; ++i) {
        auto replica_options = master_options;
        replica_options.extra_args.insert(replica_options.extra_args.end(), {"--replicaof", "127.0.0.1", master_port});
        nodes_.push_back(std::make_unique<RedisServer>(replica_options));
    }
    for (int i = 0; i < 3; ++i) {
        RedisServerOptions sentinel_options;
        std::string config = "sentinel monitor " + options_.master_name + " 127.0.0.1 " + master_port + " 2\n" +
                             "sentinel down-after-milliseconds " + options_.master_name + " " +
                             std::to_string(options_.down_after_ms) + "\n" + "sentinel failover-timeout " +
                             options_.master_name + " " + std::to_string(options_.failover_timeout_ms) + "\n" +
                             "sentinel parallel-syncs " + options_.master_name + " 1\n";
        if (!options_.password.empty())
            config += "sentinel auth-pass " + options_.master_name + " " + options_.password + "\n";
        sentinel_options.config_text = config;
        sentinel_options.password = options_.sentinel_password;
        sentinel_options.extra_args = {"--sentinel"};
        sentinels_.push_back(std::make_unique<RedisServer>(sentinel_options));
    }
    wait_ready();
}

SentinelDeployment::~SentinelDeployment() {
    // Sentinels first, so none reconfigures what is being torn down.
    sentinels_.clear();
    nodes_.clear();
}

std::string SentinelDeployment::uri() const {
    std::string uri = "redis-sentinel://";
    if (!options_.password.empty()) uri += ":" + options_.password + "@";
    for (std::size_t i = 0; i < sentinels_.size(); ++i)
        uri += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(sentinels_[i]->port());
    return uri + "#" + options_.master_name;
}

std::vector<RedisServer*> SentinelDeployment::data_nodes() const {
    std::vector<RedisServer*> out;
    for (auto& node : nodes_) out.push_back(node.get());
    return out;
}

RedisServer& SentinelDeployment::node_on_port(std::uint16_t port) const {
    for (auto& node : nodes_)
        if (node->port() == port) return *node;
    throw std::runtime_error("no data node on port " + std::to_string(port));
}

std::vector<std::uint16_t> SentinelDeployment::sentinel_ports() const {
    std::vector<std::uint16_t> out;
    for (auto& s : sentinels_) out.push_back(s->port());
    return out;
}

std::uint16_t SentinelDeployment::current_master_port() const {
    for (auto& s : sentinels_) {
        if (!s->running()) continue;
        auto text = s->cli({"SENTINEL", "get-master-addr-by-name", options_.master_name});
        auto newline = text.find('\n');
        if (newline == std::string::npos) continue;
        try {
            return static_cast<std::uint16_t>(std::stoi(text.substr(newline + 1)));
        } catch (const std::exception&) {
        }
    }
    return 0;
}

RedisServer* SentinelDeployment::running_master() const {
    for (auto* node : data_nodes())
        if (node->cli({"ROLE"}).rfind("master", 0) == 0) return node;
    return nullptr;
}

void SentinelDeployment::wait_ready() const {
    const auto master = std::to_string(nodes_[0]->port());
    wait_until(
        [&] {
            for (auto& s : sentinels_) {
                auto info = s->cli({"SENTINEL", "master", options_.master_name});
                // Flat field/value lines: each sentinel must see the others and every replica.
                auto value_after = [&](const std::string& name) {
                    auto at = info.find(name + "\n");
                    if (at == std::string::npos) return std::string();
                    auto start = at + name.size() + 1;
                    return info.substr(start, info.find('\n', start) - start);
                };
                if (value_after("port") != master) return false;
                if (value_after("num-other-sentinels") != "2") return false;
                if (value_after("num-slaves") != std::to_string(options_.replicas)) return false;
            }
            return true;
        },
        std::chrono::seconds(30), "the sentinels to agree on the deployment");
    wait_replicated();
}

void SentinelDeployment::wait_replicated() const {
    wait_until(
        [&] {
            const auto master_port = current_master_port();
            if (!master_port) return false;
            auto info = node_on_port(master_port).cli({"INFO", "replication"});
            const auto offset = field(info, "master_repl_offset");
            int online = 0;
            for (int i = 0; i < options_.replicas; ++i) {
                auto slave = field(info, "slave" + std::to_string(i));
                if (slave.find("state=online") != std::string::npos &&
                    slave.find("offset=" + offset + ",") != std::string::npos)
                    ++online;
            }
            return online == options_.replicas;
        },
        std::chrono::seconds(30), "the replicas to catch up");
}

std::uint16_t SentinelDeployment::failover() {
    const auto old_port = current_master_port();
    for (auto& s : sentinels_) {
        if (!s->running()) continue;
        if (s->cli({"SENTINEL", "FAILOVER", options_.master_name}) == "OK") break;
    }
    return wait_for_new_master(old_port);
}

std::uint16_t SentinelDeployment::kill_master() {
    const auto port = current_master_port();
    node_on_port(port).kill();
    return port;
}

std::uint16_t SentinelDeployment::wait_for_new_master(std::uint16_t old_port, std::chrono::seconds timeout) {
    std::uint16_t now = 0;
    wait_until(
        [&] {
            for (auto& s : sentinels_) {
                if (!s->running()) continue;
                auto text = s->cli({"SENTINEL", "get-master-addr-by-name", options_.master_name});
                auto newline = text.find('\n');
                if (newline == std::string::npos) return false;
                auto port = static_cast<std::uint16_t>(std::stoi(text.substr(newline + 1)));
                if (port == old_port) return false;
                now = port;
            }
            auto role = node_on_port(now).cli({"ROLE"});
            return role.rfind("master", 0) == 0;
        },
        timeout, "a new master");
    return now;
}

}  // namespace dlock::support
