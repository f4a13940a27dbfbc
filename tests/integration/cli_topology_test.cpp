// dlock run, status and release --force against a Sentinel deployment and a
// Redis Cluster, given nothing but their URLs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "cli_runner.hpp"
#include "cluster_deployment.hpp"
#include "eventually.hpp"
#include "sentinel_deployment.hpp"

using namespace std::chrono_literals;
using namespace dlock::test::cli;
using dlock::support::eventually;

namespace {

// The checks every topology passes: runs exclude each other, status says
// where the lock lives, release --force breaks it and its holder hears.
void run_status_and_release(const std::string& url, const std::string& where) {
    auto counter = temp_path("counter");
    std::ofstream(counter) << "0\n";
    const std::string script = "n=$(cat " + counter + "); sleep 0.05; echo $((n+1)) > " + counter;
    std::vector<Running> runs;
    for (int i = 0; i < 6; ++i) runs.push_back(start({"--url", url, "run", "shared-file", "--", "sh", "-c", script}));
    for (auto& r : runs) EXPECT_EQ(finish(r).code, 0);
    EXPECT_EQ(read_file(counter), "6\n");

    auto holder = start({"--url", url, "run", "--ttl", "3s", "job}1", "--", "sleep", "30"});
    Finished status;
    ASSERT_TRUE(eventually(
        [&] {
            status = dlock_cli({"--url", url, "status", "job}1"});
            return status.out.find("held by") != std::string::npos;
        },
        10s))
        << status.out << status.err;
    EXPECT_NE(status.out.find(where), std::string::npos) << status.out;
    auto json = dlock_cli({"--url", url, "status", "--json", "job}1"});
    EXPECT_NE(json.out.find("\"server\": \"127.0.0.1:"), std::string::npos) << json.out;
    auto listed = dlock_cli({"--url", url, "list"});
    EXPECT_NE(listed.out.find("job}1: held by"), std::string::npos) << listed.out;
    auto released = dlock_cli({"--url", url, "release", "--force", "job}1"});
    EXPECT_EQ(released.code, 0) << released.err;
    // The holder learns of it and stops its command: exit code 79 (lost).
    auto ended = finish(holder);
    EXPECT_EQ(ended.code, 79) << ended.err;
    EXPECT_LT(std::chrono::duration<double>(ended.took).count(), 20.0);
}

}  // namespace

TEST(CliTopology, RunStatusAndReleaseOnASentinelUrl) {
    dlock::support::SentinelDeployment deployment;
    run_status_and_release(deployment.uri(), "[on master 127.0.0.1:" + std::to_string(deployment.current_master_port()));
}

TEST(CliTopology, RunStatusAndReleaseOnAClusterUrl) {
    dlock::support::ClusterDeployment cluster;
    const int slot = cluster.key_slot("dlock:{job%7D1}");
    run_status_and_release(cluster.uri(), "[slot " + std::to_string(slot) + " on 127.0.0.1:" +
                                              std::to_string(cluster.master_for_slot(slot)) + "]");
}

// kill -9 of the master under a waiting `dlock run --wait`: the waiter rides
// through the failover and runs its command on the new master, before its
// deadline, instead of exiting 69 with "connection refused".
TEST(CliTopology, AWaiterRidesThroughAKilledSentinelMaster) {
    dlock::support::SentinelDeployment deployment;
    const auto url = deployment.uri();
    // The holder's short lease wakes the waiter during the outage.
    Gate gate;
    auto holder = start(gated({"--url", url, "run", "--ttl", "1s", "ha:kill"}, gate));
    ASSERT_TRUE(eventually(
        [&] { return dlock_cli({"--url", url, "status", "ha:kill"}).out.find("held by") != std::string::npos; }, 10s));
    auto waiter = start({"--url", url, "run", "--json-events", "--ttl", "3s", "--wait", "45s", "ha:kill", "--", "sh",
                         "-c", "echo ran"});
    // Waiting, as it says: a fixed sleep was not enough for a slow start.
    ASSERT_TRUE(eventually([&] { return read_file(waiter.err_path).find("\"event\": \"waiting\"") != std::string::npos; },
                           20s))
        << read_file(waiter.err_path);
    deployment.wait_replicated();
    const auto killed = Clock::now();
    deployment.kill_master();
    gate.open();  // the holder's command ends in the outage
    auto waited = finish(waiter);
    EXPECT_EQ(waited.code, 0) << waited.err;
    EXPECT_NE(waited.out.find("ran"), std::string::npos) << waited.out << waited.err;
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - killed).count(), 40.0);
    if (waited.code == 0)
        std::printf("[ figure ] dlock run --wait 45s: ran %.2f s after the kill -9 of the master\n",
                    std::chrono::duration<double>(Clock::now() - killed).count());
    (void)finish(holder);  // 0, or 79 when its lease ran out in the outage
}
