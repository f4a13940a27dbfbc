// The cluster router against a scripted node (tests/support/scripted_server.hpp)
// that names 1,200 node addresses over three slot maps: a load of
// connection attempts that is about the router's bookkeeping, not about
// thread interleavings, and too slow under ThreadSanitizer (hence its own
// binary and label, outside the TSan run).
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "eventually.hpp"
#include "redis/client_core.hpp"
#include "redis/cluster_router.hpp"
#include "redis/cluster_slots.hpp"
#include "scripted_server.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;
using dlock::support::ScriptedServer;

// Over a long life a cluster's nodes change address (replaced machines,
// rescheduled containers). Nodes the map no longer names are let go, so
// the client keeps following maps however many addresses it has seen (past
// its cap on nodes at once, 1024).
TEST(ClusterMap, NodesTheMapNoLongerNamesAreLetGo) {
    constexpr int nodes_per_map = 400, maps = 3;  // 1,200 addresses in all
    auto port_of = [](int map, int node) { return std::to_string(1 + (map - 1) * nodes_per_map + node); };
    std::atomic<int> current_map{1};
    ScriptedServer seed([&](const std::vector<std::string>& command) -> std::string {
        if (command.empty()) return "-ERR empty\r\n";
        if (command[0] == "PING") return "+PONG\r\n";
        if (command[0] == "CLIENT") return "+OK\r\n";
        if (command[0] != "CLUSTER") return "-ERR unknown command\r\n";
        const int map = current_map;
        std::vector<std::string> ranges;
        const int width = dlock::detail::cluster_slots / nodes_per_map;
        for (int node = 0; node < nodes_per_map; ++node) {
            const int first = node * width, last = node + 1 == nodes_per_map ? 16383 : first + width - 1;
            ranges.push_back(ScriptedServer::array(
                {":" + std::to_string(first) + "\r\n", ":" + std::to_string(last) + "\r\n",
                 ScriptedServer::array({ScriptedServer::bulk("127.0.0.1"), ":" + port_of(map, node) + "\r\n",
                                        ScriptedServer::bulk("id")})}));
        }
        return ScriptedServer::array(ranges);
    });
    dlock::Client client("redis-cluster://127.0.0.1:" + std::to_string(seed.port()),
                         {.connect_timeout = 500ms, .command_timeout = 500ms, .cluster_refresh_interval = 100ms});
    auto core = client.core();
    auto router = core->cluster();
    auto map_in_use = [&](int map) {
        return eventually(
            [&] {
                auto master = router->master_for_slot(0);
                return master && std::to_string(master->port) == port_of(map, 0);
            },
            20s);
    };
    ASSERT_TRUE(map_in_use(1));
    // A subscriber connection and a pool of dedicated connections to the
    // master of a slot in the first map (nothing listens there: they fail).
    {
        auto subscription = core->subscribe("{x}channel", [](dlock::Subscription::Event, std::string_view) {});
    }
    std::promise<void> conversation_done;
    core->submit_dedicated(
        "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", {},
        [&](std::error_code, std::vector<dlock::Reply>&&) { conversation_done.set_value(); }, Clock::now() + 1s);
    ASSERT_EQ(conversation_done.get_future().wait_for(10s), std::future_status::ready);
    EXPECT_EQ(core->cluster_footprint().subscriber_shards, 1u);
    EXPECT_EQ(core->cluster_footprint().node_pools, 1u);
    for (int map = 2; map <= maps; ++map) {
        current_map = map;
        EXPECT_TRUE(map_in_use(map)) << "map " << map << " was not applied";
    }
    EXPECT_EQ(router->masters().size(), std::size_t(nodes_per_map));
    EXPECT_TRUE(eventually([&] { return core->cluster_footprint().router_nodes <= nodes_per_map + 1u; }, 5s))
        << core->cluster_footprint().router_nodes;  // the map's nodes, and the seed
    EXPECT_EQ(core->cluster_footprint().subscriber_shards, 0u);
    EXPECT_EQ(core->cluster_footprint().node_pools, 0u);
}


// A periodic refresh whose wait had already completed when the Client closed
// still runs its handler: it must not re-arm the timer, or the I/O thread
// never runs out of work and the Client's destructor never returns. A short
// refresh interval makes that moment common; each close is bounded.
TEST(ClusterMap, AClientClosesWhileItsPeriodicRefreshIsDue) {
    std::atomic<int> seed_port{0};
    ScriptedServer seed([&](const std::vector<std::string>& command) -> std::string {
        if (command.empty()) return "-ERR empty\r\n";
        if (command[0] == "CLUSTER")  // every slot on the seed itself
            return ScriptedServer::array({ScriptedServer::array(
                {":0\r\n", ":16383\r\n",
                 ScriptedServer::array({ScriptedServer::bulk("127.0.0.1"), ":" + std::to_string(seed_port) + "\r\n"})})});
        return "+OK\r\n";
    });
    seed_port = seed.port();
    int hung = 0;
    for (int round = 0; round < 200 && hung == 0; ++round) {
        auto client = std::make_unique<dlock::Client>(
            "redis-cluster://127.0.0.1:" + std::to_string(seed.port()),
            dlock::ClientOptions{.connect_timeout = 500ms, .command_timeout = 500ms, .cluster_refresh_interval = 1ms});
        std::this_thread::sleep_for(std::chrono::microseconds(round * 37 % 3000));
        auto closed = std::make_shared<std::promise<void>>();
        auto closing = closed->get_future();
        std::thread([client = std::move(client), closed]() mutable {
            client.reset();
            closed->set_value();
        }).detach();
        if (closing.wait_for(10s) != std::future_status::ready) ++hung;  // the detached close is left behind
    }
    EXPECT_EQ(hung, 0) << "a Client's close did not return";
}

// Sharded pub/sub against a scripted node that serves every slot: its first
// SSUBSCRIBE (of "x") is answered MOVED while the SSUBSCRIBE of "y" waits
// behind it; then "z" is refused (NOPERM). Each answer belongs to its own
// command: z is refused at once and named in the warning; x and y, which
// the node confirmed, are not refused.
TEST(ClusterMap, AnSsubscribeRefusedAfterAMovedOneIsToldForItsOwnChannel) {
    std::atomic<int> seed_port{0};
    std::atomic<bool> moved_once{false};
    ScriptedServer node([&](const std::vector<std::string>& command) -> std::string {
        if (command.empty()) return "-ERR empty\r\n";
        if (command[0] == "CLUSTER")
            return ScriptedServer::array({ScriptedServer::array(
                {":0\r\n", ":16383\r\n",
                 ScriptedServer::array({ScriptedServer::bulk("127.0.0.1"), ":" + std::to_string(seed_port) + "\r\n"})})});
        if ((command[0] == "SSUBSCRIBE" || command[0] == "SUNSUBSCRIBE") && command.size() == 2) {
            if (command[0] == "SSUBSCRIBE" && command[1] == "x" && !moved_once.exchange(true)) {
                std::this_thread::sleep_for(200ms);  // y's SSUBSCRIBE arrives meanwhile
                return "-MOVED 16287 127.0.0.1:" + std::to_string(seed_port) + "\r\n";
            }
            if (command[0] == "SSUBSCRIBE" && command[1] == "z") return "-NOPERM no rights on channel z\r\n";
            const std::string kind = command[0] == "SSUBSCRIBE" ? "ssubscribe" : "sunsubscribe";
            return ScriptedServer::array({ScriptedServer::bulk(kind), ScriptedServer::bulk(command[1]), ":1\r\n"});
        }
        return "+OK\r\n";
    });
    seed_port = node.port();
    std::mutex mutex;
    std::vector<std::string> warnings;
    dlock::ClientOptions options;
    options.on_warning = [&](std::string_view message) {
        std::lock_guard lock(mutex);
        warnings.emplace_back(message);
    };
    dlock::Client client("redis-cluster://127.0.0.1:" + std::to_string(node.port()), options);
    // The slot map is in and the node's connection up: x and y go in this order.
    auto warm = client.subscribe("warm", [](dlock::Subscription::Event, std::string_view) {});
    ASSERT_TRUE(warm.wait_active(Clock::now() + 5s));
    auto x = client.subscribe("x", [](dlock::Subscription::Event, std::string_view) {});
    auto y = client.subscribe("y", [](dlock::Subscription::Event, std::string_view) {});
    ASSERT_TRUE(x.wait_active(Clock::now() + 5s));
    ASSERT_TRUE(y.wait_active(Clock::now() + 5s));
    auto z = client.subscribe("z", [](dlock::Subscription::Event, std::string_view) {});
    const auto started = Clock::now();
    EXPECT_FALSE(z.wait_active(started + 3s));
    EXPECT_LT(Clock::now() - started, 1s) << "the refused channel was waited for in vain";
    EXPECT_TRUE(z.refused());
    EXPECT_FALSE(x.refused()) << "x was confirmed, yet marked refused";
    EXPECT_FALSE(y.refused()) << "y was confirmed, yet marked refused";
    std::lock_guard lock(mutex);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("subscribe to z "), std::string::npos) << warnings[0];
}
