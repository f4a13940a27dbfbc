// The fault-injecting TCP proxy, checked with plain sockets against a real
// redis-server (nothing of dlock in between), and once through dlock::Client.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "eventually.hpp"
#include "ping.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;
using dlock::support::ping;
using dlock::support::RedisServer;
using dlock::support::TcpProxy;

namespace {

// What a client of the proxy sees, byte for byte.
class RawClient {
public:
    explicit RawClient(std::uint16_t port) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(port);
        if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
            throw std::runtime_error("cannot connect to the proxy");
    }
    ~RawClient() { close(fd_); }
    RawClient(const RawClient&) = delete;
    RawClient& operator=(const RawClient&) = delete;

    void send(std::string_view bytes) {
        ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    }

    // Reads until `count` bytes came, the peer closed, or `limit` passed.
    std::string read(std::size_t count, std::chrono::milliseconds limit = 2s) {
        std::string got;
        const auto deadline = Clock::now() + limit;
        while (got.size() < count && !closed_) {
            auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
            pollfd fd{fd_, POLLIN, 0};
            if (left <= 0 || poll(&fd, 1, static_cast<int>(left)) <= 0) break;
            char buffer[4096];
            ssize_t n = recv(fd_, buffer, std::min(sizeof buffer, count - got.size()), 0);
            if (n <= 0) closed_ = true;
            else got.append(buffer, static_cast<std::size_t>(n));
        }
        return got;
    }

    // True if nothing arrives for `quiet` and the connection stays open.
    bool silent_for(std::chrono::milliseconds quiet) { return read(1, quiet).empty() && !closed_; }

    // True if the peer closes (EOF or reset) within `limit`.
    bool closed_within(std::chrono::milliseconds limit) {
        const auto deadline = Clock::now() + limit;
        while (!closed_ && Clock::now() < deadline)
            read(1 << 20, std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
        return closed_;
    }

private:
    int fd_;
    bool closed_ = false;
};

const std::string pong = "+PONG\r\n";

// Sends PING and checks that PONG comes back within `limit`.
void expect_pong(RawClient& client, std::chrono::milliseconds limit = 2s) {
    client.send("PING\r\n");
    EXPECT_EQ(client.read(pong.size(), limit), pong);
}

// A server and a proxy in front of it.
class TcpProxyTest : public ::testing::Test {
protected:
    RedisServer server;
    TcpProxy proxy{server.port()};
};

}  // namespace

TEST_F(TcpProxyTest, ForwardsBothWaysAndCountsOpenConnections) {
    EXPECT_EQ(proxy.uri(), "redis://127.0.0.1:" + std::to_string(proxy.port()));
    {
        RawClient a(proxy.port()), b(proxy.port());
        expect_pong(a);
        b.send("SET k v\r\nGET k\r\n");
        EXPECT_EQ(b.read(12), "+OK\r\n$1\r\nv\r\n");
        EXPECT_EQ(server.cli({"GET", "k"}), "v");
        EXPECT_TRUE(eventually([&] { return proxy.connections() == 2; }));
    }
    EXPECT_TRUE(eventually([&] { return proxy.connections() == 0; })) << "closed by the clients";
}

TEST_F(TcpProxyTest, BlackHoleIsSilenceNotAResetAndHealsInOrder) {
    RawClient before(proxy.port());
    expect_pong(before);
    proxy.black_hole(true);
    before.send("INCR n\r\n");
    before.send("INCR n\r\n");
    EXPECT_TRUE(before.silent_for(400ms));
    EXPECT_EQ(server.cli({"GET", "n"}), "") << "requests must not reach the server";
    RawClient after(proxy.port());  // accepted, but carries nothing either
    after.send("PING\r\n");
    EXPECT_TRUE(after.silent_for(300ms));
    EXPECT_TRUE(eventually([&] { return proxy.connections() == 2; }));

    proxy.black_hole(false);
    EXPECT_EQ(before.read(8), ":1\r\n:2\r\n");
    EXPECT_EQ(after.read(pong.size()), pong);
    EXPECT_EQ(server.cli({"GET", "n"}), "2");
}

TEST_F(TcpProxyTest, DelayRepliesDeliversEachReplyAtLeastThatLateInOrder) {
    RawClient client(proxy.port());
    expect_pong(client);
    proxy.delay_replies(400ms);
    std::vector<Clock::time_point> sent;
    for (int i = 0; i < 3; ++i) {
        sent.push_back(Clock::now());
        client.send("INCR n\r\n");
        std::this_thread::sleep_for(100ms);
    }
    // Requests are not delayed: the server has run all three before any reply is out.
    EXPECT_TRUE(eventually([&] { return server.cli({"GET", "n"}) == "3"; }, 2s));
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(client.read(4), ":" + std::to_string(i + 1) + "\r\n");
        EXPECT_GE(Clock::now() - sent[static_cast<std::size_t>(i)], 400ms) << "reply " << i;
    }

    // A change applies to replies already waiting.
    proxy.delay_replies(10s);
    client.send("PING\r\n");
    std::this_thread::sleep_for(100ms);
    proxy.delay_replies(0ms);
    auto start = Clock::now();
    EXPECT_EQ(client.read(pong.size()), pong);
    EXPECT_LT(Clock::now() - start, 1s);
}

TEST_F(TcpProxyTest, HoldRequestsHoldsThemInOrderWhileRepliesStillFlow) {
    RawClient subscriber(proxy.port()), writer(proxy.port());
    subscriber.send("SUBSCRIBE ch\r\n");
    const std::string subscribed = "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n";
    EXPECT_EQ(subscriber.read(subscribed.size()), subscribed);
    expect_pong(writer);

    proxy.hold_requests(true);
    for (char c : {'a', 'b', 'c'}) {
        writer.send(std::string("APPEND k ") + c + "\r\n");  // three separate chunks
        std::this_thread::sleep_for(30ms);
    }
    subscriber.send("PING\r\n");
    EXPECT_TRUE(writer.silent_for(300ms));
    EXPECT_EQ(server.cli({"GET", "k"}), "");
    // Server -> client still flows: a message published meanwhile arrives.
    EXPECT_EQ(server.cli({"PUBLISH", "ch", "hello"}), "1");
    const std::string message = "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n";
    EXPECT_EQ(subscriber.read(message.size()), message);
    EXPECT_TRUE(subscriber.silent_for(100ms)) << "its PING is held";

    proxy.hold_requests(false);
    EXPECT_EQ(writer.read(12), ":1\r\n:2\r\n:3\r\n");
    EXPECT_EQ(server.cli({"GET", "k"}), "abc");
    const std::string subscribed_pong = "*2\r\n$4\r\npong\r\n$0\r\n\r\n";
    EXPECT_EQ(subscriber.read(subscribed_pong.size()), subscribed_pong);
}

TEST_F(TcpProxyTest, DropConnectionsClosesBothSidesOfEveryCurrentConnection) {
    RawClient a(proxy.port()), b(proxy.port());
    expect_pong(a);
    expect_pong(b);
    proxy.black_hole(true);
    a.send("INCR n\r\n");  // held bytes go with the connection
    proxy.drop_connections();
    EXPECT_EQ(proxy.connections(), 0u);
    EXPECT_TRUE(a.closed_within(1s));
    EXPECT_TRUE(b.closed_within(1s));
    EXPECT_TRUE(eventually([&] {
        return server.cli({"INFO", "clients"}).find("connected_clients:1\r") != std::string::npos;
    })) << "only redis-cli itself is left on the server";

    proxy.black_hole(false);
    EXPECT_EQ(server.cli({"GET", "n"}), "");
    RawClient later(proxy.port());
    expect_pong(later);
}

TEST_F(TcpProxyTest, RefuseNewClosesNewConnectionsAndLeavesCurrentOnes) {
    RawClient current(proxy.port());
    expect_pong(current);
    proxy.refuse_new(true);
    RawClient refused(proxy.port());  // the kernel completes the handshake; the proxy closes it
    EXPECT_TRUE(refused.closed_within(1s));
    expect_pong(current);
    proxy.refuse_new(false);
    RawClient welcome(proxy.port());
    expect_pong(welcome);
}

TEST_F(TcpProxyTest, DestructorClosesEveryConnection) {
    std::optional<TcpProxy> second(std::in_place, server.port());
    RawClient client(second->port());
    expect_pong(client);
    second->delay_replies(10s);
    client.send("PING\r\n");
    auto start = Clock::now();
    second.reset();
    EXPECT_TRUE(client.closed_within(1s));
    EXPECT_LT(Clock::now() - start, 2s) << "the destructor does not wait for delayed replies";
}

TEST_F(TcpProxyTest, DlockClientSeesCommandTimeoutUnderBlackHoleAndRecovers) {
    dlock::ClientOptions options;
    options.connect_timeout = 500ms;
    options.command_timeout = 300ms;
    options.reconnect_backoff_max = 200ms;
    dlock::Client client(proxy.uri(), options);
    ASSERT_FALSE(ping(client));
    proxy.black_hole(true);
    auto start = Clock::now();
    EXPECT_EQ(ping(client), dlock::errc::command_timeout);
    EXPECT_GE(Clock::now() - start, 250ms);
    EXPECT_LT(Clock::now() - start, 1500ms);
    proxy.black_hole(false);
    EXPECT_TRUE(eventually([&] { return !ping(client); }, 5s));
}
