// dlock/server_address.hpp — where a Redis server is and how to log in.
//
// Accepted URI forms (the default is redis://127.0.0.1:6379):
//   redis://[user[:password]@]host[:port][/db]
//   rediss://[user[:password]@]host[:port][/db]        TLS
//   unix://[user[:password]@]/absolute/path.sock[?db=N]
//   redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master-name
//   rediss-sentinel://...                              TLS to the sentinels and the master
//   redis-cluster://[[user]:password@]host[:port][,host[:port]...]
//   rediss-cluster://...                               TLS to every node
// Sentinel: the hosts are sentinels (default port 26379), asked for the
// master that they monitor under master-name; the credentials and db are the
// master's (sentinels that want a password of their own get it from
// ClientOptions::sentinel_password). Cluster: the hosts are seed nodes
// (default port 6379), asked for the slot map; a cluster has only db 0. Every
// client of a cluster takes a cluster URI: the URI decides how its lock scripts
// publish notices (Script::for_cluster), and a redis:// client of one cluster
// node and a redis-cluster:// client do not hear each other's.
// host may be a name, an IPv4 address or a bracketed IPv6 address ([::1]).
// user and password may be percent-encoded (%40 for '@'). An empty user with a
// password (redis://:secret@host) means the default user. Ports are 1..65535,
// db is 0..2147483647. A socket path, once decoded, is at most 107 bytes
// (max_socket_path) and holds no NUL. Anything else is rejected with errc::invalid_uri and a
// message naming the offending part; parsing never touches the network.
#pragma once

#include "dlock/error.hpp"  // every throwing call throws dlock::Error

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock {

struct ServerAddress {
    enum class Transport : std::uint8_t { tcp, tls, unix_socket };
    // What the address names: one server, the master a Sentinel deployment
    // names, or a Redis Cluster.
    enum class Topology : std::uint8_t { standalone, sentinel, cluster };
    struct Endpoint {
        std::string host;  // IPv6 without brackets
        std::uint16_t port = 0;
        bool operator==(const Endpoint&) const = default;
    };

    Transport transport = Transport::tcp;
    Topology topology = Topology::standalone;
    std::string host = "127.0.0.1";   // tcp and tls; IPv6 without brackets (sentinel, cluster: the first endpoint)
    std::uint16_t port = 6379;        // tcp and tls
    // sentinel: the sentinels; cluster: the seed nodes; in URI order, at
    // most max_endpoints. Empty for a standalone server.
    std::vector<Endpoint> endpoints;
    std::string master_name;          // sentinel: the name the sentinels monitor
    std::string socket_path;          // unix_socket; at most max_socket_path bytes, no NUL
    std::string username;             // empty: the default user
    std::string password;             // empty: no AUTH
    long database = 0;                // SELECT after connecting when non-zero

    // The longest unix socket path the kernel takes: sizeof(sockaddr_un::sun_path) - 1.
    static constexpr std::size_t max_socket_path = 107;
    // The most sentinels or seed nodes one URI may list.
    static constexpr std::size_t max_endpoints = 64;

    // Throws dlock::Error(errc::invalid_uri) with the reason.
    static ServerAddress parse(std::string_view uri);
    // Never throws; on failure sets ec and leaves message with the reason.
    static ServerAddress parse(std::string_view uri, std::error_code& ec, std::string* message = nullptr);

    // The URI with the password replaced by "***": safe for logs.
    std::string to_string() const;
    // This server alone: a standalone address for host:port, with this
    // address's transport and credentials (a master a sentinel named, a
    // cluster node).
    ServerAddress node(std::string node_host, std::uint16_t node_port) const;
};

inline constexpr std::string_view default_server_uri = "redis://127.0.0.1:6379";

}  // namespace dlock
