#include "dlock/server_address.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>

#include "dlock/error.hpp"

using dlock::ServerAddress;
using Transport = dlock::ServerAddress::Transport;

TEST(ServerAddress, DefaultUri) {
    auto a = ServerAddress::parse(dlock::default_server_uri);
    EXPECT_EQ(a.transport, Transport::tcp);
    EXPECT_EQ(a.host, "127.0.0.1");
    EXPECT_EQ(a.port, 6379);
    EXPECT_EQ(a.database, 0);
    EXPECT_TRUE(a.password.empty());
}

TEST(ServerAddress, FullTcpForm) {
    auto a = ServerAddress::parse("redis://alice:s3cret@cache.example:6380/4");
    EXPECT_EQ(a.username, "alice");
    EXPECT_EQ(a.password, "s3cret");
    EXPECT_EQ(a.host, "cache.example");
    EXPECT_EQ(a.port, 6380);
    EXPECT_EQ(a.database, 4);
}

TEST(ServerAddress, PasswordOnlyAndPercentEncoding) {
    auto a = ServerAddress::parse("redis://:p%40ss%3Aword@localhost");
    EXPECT_TRUE(a.username.empty());
    EXPECT_EQ(a.password, "p@ss:word");
    EXPECT_EQ(a.port, 6379);
    // An unencoded '@' in the password still works: the last '@' ends the credentials.
    EXPECT_EQ(ServerAddress::parse("redis://:a@b@host").password, "a@b");
}

TEST(ServerAddress, TlsAndIpv6) {
    auto a = ServerAddress::parse("rediss://[::1]:7000/");
    EXPECT_EQ(a.transport, Transport::tls);
    EXPECT_EQ(a.host, "::1");
    EXPECT_EQ(a.port, 7000);
    EXPECT_EQ(a.database, 0);
    EXPECT_EQ(ServerAddress::parse("redis://[::1]").port, 6379);
}

TEST(ServerAddress, UnixSocket) {
    auto a = ServerAddress::parse("unix:///run/redis/redis.sock?db=3");
    EXPECT_EQ(a.transport, Transport::unix_socket);
    EXPECT_EQ(a.socket_path, "/run/redis/redis.sock");
    EXPECT_EQ(a.database, 3);
    auto b = ServerAddress::parse("unix://bob:pw@/tmp/r.sock");
    EXPECT_EQ(b.username, "bob");
    EXPECT_EQ(b.password, "pw");
    EXPECT_EQ(b.socket_path, "/tmp/r.sock");
}

TEST(ServerAddress, ToStringHidesPassword) {
    auto a = ServerAddress::parse("redis://alice:s3cret@h:1/2");
    EXPECT_EQ(a.to_string(), "redis://alice:***@h:1/2");
    EXPECT_EQ(ServerAddress::parse("rediss://[::1]:9").to_string(), "rediss://[::1]:9");
    EXPECT_EQ(ServerAddress::parse("unix:///x.sock?db=1").to_string(), "unix:///x.sock?db=1");
}

TEST(ServerAddress, UnixSocketPathsTheKernelCannotTakeAreRejected) {
    // sockaddr_un holds 108 bytes with the terminating NUL.
    const std::string longest = "/" + std::string(106, 'a');
    EXPECT_EQ(ServerAddress::parse("unix://" + longest).socket_path, longest);
    for (const std::string& path : {longest + "a", "/" + std::string(200, 'a')}) {
        std::error_code ec;
        std::string reason;
        ServerAddress::parse("unix://" + path, ec, &reason);
        EXPECT_EQ(ec, dlock::errc::invalid_uri) << path.size();
        EXPECT_NE(reason.find("the limit is 107"), std::string::npos) << reason;
    }
    // The limit is on the decoded path: "%61" is one byte of it.
    std::error_code ec;
    EXPECT_EQ(ServerAddress::parse("unix:///" + std::string(100, 'a') + "%61%61%61%61%61%61").socket_path, longest);
    std::string reason;
    ServerAddress::parse("unix:///tmp/a%00b", ec, &reason);
    EXPECT_EQ(ec, dlock::errc::invalid_uri);
    EXPECT_NE(reason.find("NUL"), std::string::npos) << reason;
}

TEST(ServerAddress, SentinelForm) {
    auto a = ServerAddress::parse("redis-sentinel://:pw@s1,s2:26380,[::1]:7/3#my%2Dmaster");
    EXPECT_EQ(a.topology, ServerAddress::Topology::sentinel);
    EXPECT_EQ(a.transport, Transport::tcp);
    ASSERT_EQ(a.endpoints.size(), 3u);
    EXPECT_EQ(a.endpoints[0], (ServerAddress::Endpoint{"s1", 26379}));  // the sentinel default port
    EXPECT_EQ(a.endpoints[1], (ServerAddress::Endpoint{"s2", 26380}));
    EXPECT_EQ(a.endpoints[2], (ServerAddress::Endpoint{"::1", 7}));
    EXPECT_EQ(a.host, "s1");
    EXPECT_EQ(a.port, 26379);
    EXPECT_EQ(a.password, "pw");  // the master's
    EXPECT_EQ(a.database, 3);
    EXPECT_EQ(a.master_name, "my-master");
    EXPECT_EQ(a.to_string(), "redis-sentinel://:***@s1:26379,s2:26380,[::1]:7/3#my-master");
    auto tls = ServerAddress::parse("rediss-sentinel://s#m");
    EXPECT_EQ(tls.transport, Transport::tls);
    EXPECT_EQ(tls.master_name, "m");
    EXPECT_EQ(tls.database, 0);
}

TEST(ServerAddress, AMasterNameParsesBackFromItsText) {
    for (std::string name : {"a%b", "a#b", "a/b?c", "plain-name_1.x~"}) {
        std::string encoded;
        for (unsigned char c : name) {
            char hex[4];
            std::snprintf(hex, sizeof hex, "%%%02X", c);
            encoded += std::isalnum(c) ? std::string(1, static_cast<char>(c)) : std::string(hex);
        }
        auto a = ServerAddress::parse("redis-sentinel://s1#" + encoded);
        EXPECT_EQ(a.master_name, name);
        EXPECT_EQ(ServerAddress::parse(a.to_string()).master_name, name) << a.to_string();
    }
}

TEST(ServerAddress, ClusterForm) {
    auto a = ServerAddress::parse("redis-cluster://alice:pw@n1:7000,n2");
    EXPECT_EQ(a.topology, ServerAddress::Topology::cluster);
    ASSERT_EQ(a.endpoints.size(), 2u);
    EXPECT_EQ(a.endpoints[1], (ServerAddress::Endpoint{"n2", 6379}));
    EXPECT_EQ(a.username, "alice");
    EXPECT_EQ(a.to_string(), "redis-cluster://alice:***@n1:7000,n2:6379");
    EXPECT_EQ(ServerAddress::parse("rediss-cluster://n1:1/").transport, Transport::tls);
    // A node of it: the same transport and credentials, standalone.
    auto node = a.node("10.0.0.5", 7001);
    EXPECT_EQ(node.topology, ServerAddress::Topology::standalone);
    EXPECT_EQ(node.to_string(), "redis://alice:***@10.0.0.5:7001");
}

TEST(ServerAddress, HostListsAreBounded) {
    std::string uri = "redis-cluster://";
    for (std::size_t i = 0; i <= ServerAddress::max_endpoints; ++i) uri += (i ? ",h:" : "h:") + std::to_string(i + 1);
    std::error_code ec;
    std::string reason;
    ServerAddress::parse(uri, ec, &reason);
    EXPECT_EQ(ec, dlock::errc::invalid_uri);
    EXPECT_NE(reason.find("more than 64 hosts"), std::string::npos) << reason;
}

TEST(ServerAddress, AServerListInARedisUriSaysWhatIsWrong) {
    std::error_code ec;
    std::string reason;
    ServerAddress::parse("redis://127.0.0.1:7001,127.0.0.1:7001", ec, &reason);
    EXPECT_EQ(ec, dlock::errc::invalid_uri);
    EXPECT_NE(reason.find("the master 127.0.0.1:7001 is named twice"), std::string::npos) << reason;
    EXPECT_EQ(reason.find("IPv6"), std::string::npos) << reason;

    ServerAddress::parse("redis://:pw@a:1,[::1]:2/3", ec, &reason);
    EXPECT_EQ(ec, dlock::errc::invalid_uri);
    EXPECT_NE(reason.find("give one URI per master (redis://a:1,redis://[::1]:2)"), std::string::npos) << reason;
    EXPECT_EQ(reason.find("pw"), std::string::npos) << reason;

    // A bad host in the list is reported as itself.
    ServerAddress::parse("redis://a:1,b:x", ec, &reason);
    EXPECT_EQ(ec, dlock::errc::invalid_uri);
    EXPECT_NE(reason.find("port 'x' is not a number"), std::string::npos) << reason;
}

class MalformedUri : public ::testing::TestWithParam<const char*> {};

TEST_P(MalformedUri, IsRejectedWithReason) {
    std::error_code ec;
    std::string reason;
    ServerAddress::parse(GetParam(), ec, &reason);
    EXPECT_EQ(ec, dlock::errc::invalid_uri) << GetParam();
    EXPECT_FALSE(reason.empty()) << GetParam();
    try {
        ServerAddress::parse(GetParam());
        ADD_FAILURE() << "no exception for " << GetParam();
    } catch (const dlock::Error& e) {
        EXPECT_EQ(e.code(), dlock::errc::invalid_uri);
        EXPECT_NE(std::string(e.what()).find(reason), std::string::npos);
    }
}

INSTANTIATE_TEST_SUITE_P(
    ServerAddress, MalformedUri,
    ::testing::Values("", "localhost:6379", "http://localhost", "redis:/localhost", "redis://", "redis://:6379",
                      "redis://host:", "redis://host:0", "redis://host:65536", "redis://host:99999999999",
                      "redis://host:-1", "redis://host:+5", "redis://host:63a9", "redis://host/abc",
                      "redis://host/-1", "redis://host/1/2", "redis://host/99999999999", "redis://host?db=1",
                      "redis://host#x", "redis://::1:6379", "redis://[::1", "redis://[]:1", "redis://[::1]x",
                      "redis://[zz]:1", "redis://ho st", "redis://user@host", "redis://user:@host",
                      "redis://:p%4@host", "redis://:p%zz@host", "unix://", "unix:///", "unix://relative/path",
                      "unix:///tmp/s?db=x", "unix:///tmp/s?foo=1", "unix:///tmp/s?db", "REDIS://host",
                      "redis-sentinel://s1", "redis-sentinel://s1#", "redis-sentinel://s1,#m",
                      "redis-sentinel://,s1#m", "redis-sentinel://s1:0#m", "redis-sentinel://s1/x#m",
                      "redis-sentinel://s1#a%0Ab", "redis-sentinel://s1#a%20b", "redis-sentinel://s1?x=1#m", "redis-cluster://",
                      "redis-cluster://n1/1", "redis-cluster://n1#m", "redis-cluster://n1,,n2",
                      "redis-cluster://n1:7000,n2:x", "redis-cluster://user@n1"));
