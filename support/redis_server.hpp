// A private, throwaway redis-server, for the tests and the benchmarks
// (the shipped tool has its own, tools/dlock/demo_server.hpp): started on
// a free loopback port (and
// optionally a unix socket, TLS, a password, ACL users), no persistence,
// killed by pid when the object goes away — also if the test process dies
// (the child gets SIGKILL through PR_SET_PDEATHSIG).
//
// Designed to grow: replicas, sentinels and cluster nodes are more servers
// started with extra_args.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock::support {

// Certificates made with openssl once per test process.
struct TlsFiles {
    std::string ca_cert;
    std::string server_cert;
    std::string server_key;
    std::string other_ca_cert;  // a CA that did not sign the server certificate
    std::string client_cert;    // signed by ca_cert, for servers that require client certificates
    std::string client_key;
    static const TlsFiles& get();
};

struct RedisServerOptions {
    std::string password;                               // requirepass
    std::vector<std::vector<std::string>> acl_users;    // each: {"alice", "on", ">pw", "~*", "+@all"}
    bool tls = false;                                   // serve TLS only
    bool tls_require_client_cert = false;               // with tls: clients must present a certificate
    bool unix_socket = false;                           // also listen on <dir>/redis.sock
    std::vector<std::string> extra_args;                // more "--directive value" arguments
    // Written to <dir>/redis.conf and given first: a sentinel needs a
    // config file of its own, which it rewrites. Empty: no file.
    std::string config_text;
    // The highest port to take: a cluster node also listens on port + 10000
    // (its bus), so it needs a port up to 55535.
    std::uint16_t max_port = 65535;
};

class RedisServer {
public:
    explicit RedisServer(RedisServerOptions options = {});
    ~RedisServer();
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;

    std::uint16_t port() const { return port_; }
    pid_t pid() const { return pid_; }
    const std::string& dir() const { return dir_; }
    std::string socket_path() const { return dir_ + "/redis.sock"; }
    // redis:// or rediss:// URI with the password (if any).
    std::string uri() const;
    std::string unix_uri() const { return "unix://" + socket_path(); }

    void start();    // (re)start on the same port; waits until it accepts connections
    void stop();     // SIGTERM, wait for exit
    void kill();     // SIGKILL, wait for exit
    void restart() { stop(); start(); }
    void pause();    // SIGSTOP: accepts TCP connections (backlog) but answers nothing
    void resume();   // SIGCONT
    bool running() const { return pid_ > 0; }

    // Runs redis-cli against this server and returns its output (trimmed):
    // a check that does not go through the code under test.
    std::string cli(const std::vector<std::string>& args) const;
    // How many times the server has run `command` (lower case, e.g.
    // "evalsha"), from INFO commandstats; 0 before the first.
    long command_calls(const std::string& command) const;
    // The server's clock (TIME), in microseconds since the epoch.
    std::uint64_t time_us() const;

private:
    std::vector<std::string> arguments() const;
    void wait_ready();

    RedisServerOptions options_;
    std::string dir_;
    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
    bool paused_ = false;
};

std::uint16_t free_port();

}  // namespace dlock::support
