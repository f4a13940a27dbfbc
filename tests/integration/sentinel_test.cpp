// Locks behind Redis Sentinel, against a real master, replica and three
// sentinels (support/sentinel_deployment.hpp): failovers by SENTINEL
// FAILOVER and by kill -9, holds that the new master lacks, replica_ack,
// waiters across a failover, and the typed errors of the discovery.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <future>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "redis/sentinel_locator.hpp"
#include "acquirable.hpp"
#include "eventually.hpp"
#include "scripted_server.hpp"
#include "sentinel_deployment.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;
using dlock::support::SentinelDeployment;

using dlock::test::lock_key;
using dlock::test::seconds_since;

namespace {

// A scripted sentinel: answers the handshake, SUBSCRIBE and other SENTINEL
// questions plainly, and get-master-addr-by-name with master_answer (raw RESP).
dlock::support::ScriptedServer::Handler fake_sentinel(std::string master_answer) {
    using dlock::support::ScriptedServer;
    return [master_answer = std::move(master_answer)](const std::vector<std::string>& command) -> std::string {
        if (command.empty()) return "-ERR empty\r\n";
        if (command[0] == "PING") return "+PONG\r\n";
        if (command[0] == "CLIENT") return "+OK\r\n";
        if (command[0] == "SUBSCRIBE" && command.size() == 2)
            return ScriptedServer::array({ScriptedServer::bulk("subscribe"), ScriptedServer::bulk(command[1]), ":1\r\n"});
        if (command[0] == "SENTINEL" && command.size() == 3 && command[1] == "get-master-addr-by-name")
            return master_answer;
        if (command[0] == "SENTINEL") return "*0\r\n";
        return "-ERR unknown command\r\n";
    };
}

std::string address_reply(std::uint16_t port) {
    using dlock::support::ScriptedServer;
    return ScriptedServer::array({ScriptedServer::bulk("127.0.0.1"), ScriptedServer::bulk(std::to_string(port))});
}

}  // namespace

TEST(Sentinel, LockRenewAndReleaseThroughASentinelFailover) {
    SentinelDeployment deployment;
    dlock::Client client(deployment.uri());
    std::atomic<int> losses{0};
    auto lock = client.lock("through-failover", {.lease = 1500ms, .on_lost = [&](auto, auto) { ++losses; }});
    lock.lock();
    const auto token = lock.fencing_token();
    deployment.wait_replicated();
    const auto old_port = deployment.current_master_port();
    const auto started = Clock::now();
    const auto new_port = deployment.failover();
    ASSERT_NE(new_port, old_port);
    std::printf("[ figure ] SENTINEL FAILOVER: the sentinels named the new master after %.2f s\n",
                seconds_since(started));
    // Renewed on the new master for several leases: the hold was never lost.
    std::this_thread::sleep_for(3s);
    EXPECT_TRUE(lock.is_held());
    EXPECT_EQ(losses.load(), 0);
    EXPECT_EQ(lock.fencing_token(), token);
    EXPECT_GE(client.metrics().value("dlock_failovers_total"), 1);  // seen, and counted
    auto& master = deployment.node_on_port(new_port);
    EXPECT_NE(master.cli({"HGET", lock_key("through-failover"), "owner"}), "");
    const auto pttl = std::stol(master.cli({"PTTL", lock_key("through-failover")}));
    EXPECT_GT(pttl, 0);
    lock.unlock();
    EXPECT_EQ(master.cli({"EXISTS", lock_key("through-failover")}), "0");
    // And another client takes it at once.
    dlock::Client other(deployment.uri());
    auto again = other.lock("through-failover");
    EXPECT_TRUE(again.try_lock());
    EXPECT_GT(again.fencing_token(), token);
    again.unlock();
}

TEST(Sentinel, AHoldTheNewMasterLacksIsReportedLostAtOnce) {
    SentinelDeployment deployment;
    dlock::Client client(deployment.uri());
    std::promise<std::error_code> lost;
    auto lock = client.lock("lacking", {.lease = 30s, .on_lost = [&](auto, std::error_code ec) { lost.set_value(ec); }});
    lock.lock();
    deployment.wait_replicated();
    // The replica that will be promoted forgets the lock (as one that had
    // not received it yet would).
    auto* replica = deployment.data_nodes()[1];
    replica->cli({"CONFIG", "SET", "replica-read-only", "no"});
    replica->cli({"DEL", lock_key("lacking")});
    const auto started = Clock::now();
    deployment.failover();
    auto future = lost.get_future();
    // Far sooner than the 30 s lease, let alone its next renewal at 10 s.
    ASSERT_EQ(future.wait_for(5s), std::future_status::ready) << "the loss was not reported after the failover";
    EXPECT_EQ(future.get(), dlock::errc::lease_lost);
    std::printf("[ figure ] a hold the new master lacked was reported lost %.2f s after the failover began\n",
                seconds_since(started));
    EXPECT_FALSE(lock.is_held());
    // Never silently taken again: the key stays absent on the new master.
    EXPECT_EQ(deployment.current_master().cli({"EXISTS", lock_key("lacking")}), "0");
    std::error_code ec;
    lock.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::lease_lost);
}

TEST(Sentinel, WithReplicaAckAKilledMasterLosesNoHoldAndGrantsNoSecond) {
    SentinelDeployment deployment;
    dlock::Client client(deployment.uri());
    std::atomic<int> losses{0};
    auto lock = client.lock("acknowledged", {.lease = 20s,
                                             .on_lost = [&](auto, auto) { ++losses; },
                                             .replica_ack = {.replicas = 1, .timeout = 1000ms}});
    lock.lock();
    const auto token = lock.fencing_token();
    const auto started = Clock::now();
    const auto old_port = deployment.kill_master();
    deployment.wait_for_new_master(old_port);
    dlock::Client other(deployment.uri());
    const double resumed = dlock::support::seconds_until_acquirable(other, "probe-after-kill", started);
    ASSERT_GE(resumed, 0) << "no acquisition for 30 s after the kill";
    std::printf("[ figure ] kill -9 of the master: acquisitions succeeded again after %.2f s\n", resumed);
    // The confirmed hold is on the new master: nobody else gets it.
    auto rival = other.lock("acknowledged");
    EXPECT_FALSE(rival.try_lock_for(500ms));
    EXPECT_TRUE(eventually([&] { return lock.is_held(); }, 1s));
    EXPECT_EQ(losses.load(), 0);
    EXPECT_EQ(lock.fencing_token(), token);
    lock.unlock();
    EXPECT_TRUE(rival.try_lock_for(5s));
    EXPECT_GT(rival.fencing_token(), token);
    rival.unlock();
}

TEST(Sentinel, AWaiterIsServedAcrossAFailover) {
    SentinelDeployment deployment;
    dlock::Client holder_client(deployment.uri()), waiter_client(deployment.uri());
    auto held = holder_client.lock("queue");
    held.lock();
    auto waiter = waiter_client.lock("queue");
    std::promise<bool> got;
    std::thread waiting([&] { got.set_value(waiter.try_lock_for(30s)); });
    std::this_thread::sleep_for(300ms);  // in line
    deployment.wait_replicated();
    deployment.failover();
    held.unlock();
    auto future = got.get_future();
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready) << "the waiter was not served after the failover";
    EXPECT_TRUE(future.get());
    waiting.join();
    waiter.unlock();
}

TEST(Sentinel, DiscoveryErrorsAreTyped) {
    SentinelDeployment deployment({.replicas = 0, .sentinel_password = "s3nt"});
    const auto ports = deployment.sentinel_ports();
    const std::string sentinels = "127.0.0.1:" + std::to_string(ports[0]) + ",127.0.0.1:" + std::to_string(ports[1]);
    dlock::ClientOptions fast{.connect_timeout = 500ms, .command_timeout = 1000ms};
    auto connect_error = [&](const std::string& uri, dlock::ClientOptions options) {
        dlock::Client client(uri, options);
        std::error_code ec;
        client.wait_connected(ec);
        return ec;
    };
    auto with_password = fast;
    with_password.sentinel_password = "s3nt";
    // The sentinels' own password is not the master's.
    EXPECT_EQ(connect_error("redis-sentinel://" + sentinels + "#mymaster", fast), dlock::errc::auth_failed);
    auto wrong = fast;
    wrong.sentinel_password = "wrong";
    EXPECT_EQ(connect_error("redis-sentinel://" + sentinels + "#mymaster", wrong), dlock::errc::auth_failed);
    EXPECT_FALSE(connect_error("redis-sentinel://" + sentinels + "#mymaster", with_password));
    // A name no sentinel monitors.
    EXPECT_EQ(connect_error("redis-sentinel://" + sentinels + "#nosuch", with_password), dlock::errc::no_master);
    // No sentinel listening.
    const auto closed = std::to_string(dlock::support::free_port());
    EXPECT_EQ(connect_error("redis-sentinel://127.0.0.1:" + closed + "#mymaster", with_password),
              dlock::errc::connection_refused);
    // A dead first sentinel: the next one answers.
    EXPECT_FALSE(connect_error("redis-sentinel://127.0.0.1:" + closed + "," + sentinels + "#mymaster", with_password));
    // The failure names each sentinel's answer.
    dlock::Client client("redis-sentinel://" + sentinels + "#nosuch", with_password);
    try {
        client.command({"PING"});
        ADD_FAILURE() << "no error";
    } catch (const dlock::Error& e) {
        EXPECT_EQ(e.code(), dlock::errc::no_master);
        EXPECT_NE(std::string(e.what()).find("does not know it"), std::string::npos) << e.what();
    }
}

// A sentinel that names a server nobody can use (a closed port here; a
// replica, a stale address) must not pin the client: after the failed
// attempt the next round starts with the next sentinel.
TEST(Sentinel, ASentinelNamingAnUnusableMasterIsPassedOver) {
    SentinelDeployment deployment({.replicas = 0});
    const auto closed = std::to_string(dlock::support::free_port());
    using dlock::support::ScriptedServer;
    ScriptedServer liar(fake_sentinel(address_reply(static_cast<std::uint16_t>(std::stoi(closed)))));
    std::string uri = "redis-sentinel://127.0.0.1:" + std::to_string(liar.port());
    for (auto port : deployment.sentinel_ports()) uri += ",127.0.0.1:" + std::to_string(port);
    dlock::Client client(uri + "#mymaster", {.connect_timeout = 500ms, .command_timeout = 1000ms});
    auto lock = client.lock("passed-over");
    const auto started = Clock::now();
    EXPECT_TRUE(eventually(
        [&] {
            try {
                return lock.try_lock_for(1s);
            } catch (const dlock::Error&) {
                return false;  // connection_refused while the liar is believed
            }
        },
        15s));
    EXPECT_LT(seconds_since(started), 15.0);
    EXPECT_GE(liar.count("SENTINEL"), 1);  // it was asked, and named the closed port
    lock.unlock();
}

// A sentinel that still names a replica as the master (partitioned, or
// misconfigured), listed first: the ROLE check passes it over within the
// same round of asking, the next sentinel names the real master, and the
// first lock attempt succeeds there. The sentinel that answered well is
// asked first from then on.
TEST(Sentinel, AStaleSentinelListedFirstIsPassedOverWithinOneRound) {
    SentinelDeployment deployment({.replicas = 1});
    auto& replica = *deployment.data_nodes()[1];
    ASSERT_TRUE(eventually([&] { return replica.cli({"ROLE"}).rfind("slave", 0) == 0; }, 5s));
    using dlock::support::ScriptedServer;
    ScriptedServer stale(fake_sentinel(address_reply(replica.port())));
    std::string uri = "redis-sentinel://127.0.0.1:" + std::to_string(stale.port());
    for (auto port : deployment.sentinel_ports()) uri += ",127.0.0.1:" + std::to_string(port);
    dlock::Client client(uri + "#mymaster",
                         {.connect_timeout = 500ms, .command_timeout = 2000ms, .sentinel_poll_interval = 100ms});
    auto lock = client.lock("stale-sentinel");
    bool taken = false;
    std::string error;
    try {
        taken = lock.try_lock_for(5s);
    } catch (const dlock::Error& e) {
        error = e.what();
    }
    ASSERT_TRUE(taken) << error;
    EXPECT_EQ(deployment.current_master().cli({"EXISTS", lock_key("stale-sentinel")}), "1");
    EXPECT_GE(stale.count("SENTINEL"), 1);  // it was asked first, and named the replica
    // From now on the sentinel that answered well is asked first: the stale
    // one hears no more questions while the others answer.
    const int asked = stale.count("SENTINEL");
    std::this_thread::sleep_for(1500ms);  // ~15 polls
    EXPECT_EQ(stale.count("SENTINEL"), asked);
    lock.unlock();
}

// A master demoted behind the sentinels' back: its READONLY answer never
// reaches the caller as such, and the ROLE check refuses it until it is a
// master again.
TEST(Sentinel, ADemotedMasterIsLeftAndCheckedWithRole) {
    SentinelDeployment deployment;
    dlock::Client client(deployment.uri(), {.connect_timeout = 500ms, .command_timeout = 1000ms});
    client.command({"SET", "k", "1"});
    auto& master = *deployment.data_nodes()[0];
    auto& replica = *deployment.data_nodes()[1];
    replica.cli({"REPLICAOF", "NO", "ONE"});
    master.cli({"REPLICAOF", "127.0.0.1", std::to_string(replica.port())});
    ASSERT_TRUE(eventually([&] { return master.cli({"ROLE"}).rfind("slave", 0) == 0; }, 5s));
    std::error_code ec;
    auto reply = client.command(std::vector<std::string_view>{"SET", "k", "2"}, ec);
    EXPECT_EQ(ec, dlock::errc::connection_lost) << ec.message() << " " << reply.text;
    // Reconnecting, the sentinels still name the demoted master: ROLE says no.
    EXPECT_TRUE(eventually(
        [&] {
            client.command(std::vector<std::string_view>{"PING"}, ec);
            return ec == dlock::errc::not_master;
        },
        5s))
        << ec.message();
    // Put back: served again.
    master.cli({"REPLICAOF", "NO", "ONE"});
    replica.cli({"REPLICAOF", "127.0.0.1", std::to_string(master.port())});
    EXPECT_TRUE(eventually(
        [&] {
            client.command(std::vector<std::string_view>{"SET", "k", "3"}, ec);
            return !ec;
        },
        10s))
        << ec.message();
}

// Given one sentinel, the client learns the others from it, and follows a
// failover through them once that one is gone.
TEST(Sentinel, TheSentinelListGrowsWithWhatTheSentinelsReport) {
    SentinelDeployment deployment;
    const auto first = deployment.sentinel_ports()[0];
    dlock::Client client("redis-sentinel://127.0.0.1:" + std::to_string(first) + "#mymaster",
                         {.connect_timeout = 500ms, .command_timeout = 1000ms, .sentinel_poll_interval = 100ms});
    client.command({"SET", "k", "1"});
    std::this_thread::sleep_for(500ms);  // a few polls: the first asks for the other sentinels
    deployment.sentinel(0).kill();
    deployment.wait_replicated();
    const auto new_port = deployment.failover();
    std::error_code ec;
    EXPECT_TRUE(eventually(
        [&] {
            client.command(std::vector<std::string_view>{"SET", "k", "2"}, ec);
            return !ec;
        },
        10s))
        << ec.message();
    EXPECT_EQ(deployment.node_on_port(new_port).cli({"GET", "k"}), "2");
}

// Learnt sentinels that stop answering are dropped when the round that
// found them silent ends; a sentinel the reporter flags as down is not
// learnt. Rounds that start anywhere in the list then never wait for them.
TEST(Sentinel, LearntSentinelsThatStopAnsweringAreDropped) {
    using dlock::support::ScriptedServer;
    // Silent: answers the handshake, then nothing (a hung or cut-off sentinel).
    std::atomic<int> silent_asked{0};  // for the master
    ScriptedServer silent([&](const std::vector<std::string>& command) -> std::string {
        if (command.size() == 3 && command[1] == "get-master-addr-by-name") ++silent_asked;
        if (!command.empty() && command[0] == "PING") return "+PONG\r\n";
        if (!command.empty() && command[0] == "CLIENT") return "+OK\r\n";
        return "";
    });
    ScriptedServer good(fake_sentinel(address_reply(6390)));
    ScriptedServer flagged_down(fake_sentinel("$-1\r\n"));
    auto entry = [](std::uint16_t port, const std::string& flags) {
        return ScriptedServer::array({ScriptedServer::bulk("ip"), ScriptedServer::bulk("127.0.0.1"),
                                      ScriptedServer::bulk("port"), ScriptedServer::bulk(std::to_string(port)),
                                      ScriptedServer::bulk("flags"), ScriptedServer::bulk(flags)});
    };
    // The URI's sentinel does not know the master; it reports the others
    // (the silent one as down once its peers noticed, as Sentinel does).
    ScriptedServer first([&](const std::vector<std::string>& command) -> std::string {
        if (command.size() == 3 && command[0] == "SENTINEL" && command[1] == "sentinels")
            return ScriptedServer::array({entry(silent.port(), silent_asked > 0 ? "s_down,sentinel" : "sentinel"),
                                          entry(good.port(), "sentinel"),
                                          entry(flagged_down.port(), "s_down,sentinel,disconnected")});
        return fake_sentinel("$-1\r\n")(command);
    });

    dlock::ServerAddress address = dlock::ServerAddress::parse(
        "redis-sentinel://127.0.0.1:" + std::to_string(first.port()) + "#mymaster");
    dlock::ClientOptions options{.connect_timeout = 300ms, .command_timeout = 300ms, .sentinel_poll_interval = 20ms};
    asio::io_context io;
    auto work = asio::make_work_guard(io);
    std::thread io_thread([&] { io.run(); });
    auto locator = std::make_shared<dlock::detail::SentinelLocator>(io, address, options);
    auto on_io = [&](auto body) {
        std::promise<decltype(body())> result;
        asio::post(io, [&] { result.set_value(body()); });
        return result.get_future().get();
    };
    locator->start();
    // Learnt: the silent one and the good one, not the one flagged down.
    EXPECT_TRUE(eventually([&] { return on_io([&] { return locator->sentinel_count(); }) == 3; }, 5s));
    // Rounds starting from every place in the list (not_master moves the
    // start on by one): the silent sentinel is asked once, then dropped.
    int rounds_that_waited = 0;
    for (int round = 0; round < 8; ++round) {
        const auto started = Clock::now();
        std::promise<std::error_code> found;
        asio::post(io, [&] {
            locator->locate([&](std::error_code ec, const dlock::ServerAddress&, const std::string&) { found.set_value(ec); });
        });
        EXPECT_FALSE(found.get_future().get());
        if (Clock::now() - started >= 250ms) ++rounds_that_waited;
        on_io([&] {
            locator->not_master(address.node("127.0.0.1", 6390));
            return 0;
        });
    }
    EXPECT_EQ(silent_asked, 1);
    EXPECT_LE(rounds_that_waited, 1);
    EXPECT_EQ(on_io([&] { return locator->sentinel_count(); }), 2u);
    EXPECT_EQ(flagged_down.count("SENTINEL"), 0);
    on_io([&] {
        locator->shutdown();
        return 0;
    });
    work.reset();
    io_thread.join();
}
