// Metrics (dlock/metrics.hpp) against a real server: each series moved by
// the scenario that should move it, every lock kind counted, the name label
// opt-in and its cap, the push sink, and the exposition parsed back.
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/metrics.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/semaphore.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using dlock::support::eventually;
using dlock::support::RedisServer;
using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

namespace {

double acquisitions(const dlock::Metrics& metrics, std::string_view kind, std::string_view outcome) {
    return metrics.value("dlock_acquisitions_total", {{"kind", kind}, {"outcome", outcome}});
}

// The exposition, read back line by line as a scraper would.
struct Parsed {
    std::map<std::string, std::string> types;           // family -> type
    std::map<std::string, double> samples;              // "name{labels}" -> value
    std::vector<std::string> errors;
};

Parsed parse_exposition(const std::string& text) {
    Parsed parsed;
    static const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$)");
    static const std::regex type(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$)");
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        std::smatch m;
        if (line.rfind("# HELP ", 0) == 0) continue;
        if (std::regex_match(line, m, type)) {
            parsed.types[m[1]] = m[2];
            continue;
        }
        if (!std::regex_match(line, m, sample)) {
            parsed.errors.push_back(line);
            continue;
        }
        const std::string value = m[m.size() - 1];
        parsed.samples[m[1].str() + m[2].str()] = value == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(value);
    }
    return parsed;
}

}  // namespace

TEST(Metrics, AcquisitionOutcomesHoldsAndWaitsAreCounted) {
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    auto& metrics = client.metrics();
    auto lock = client.lock("outcomes");
    ASSERT_TRUE(lock.try_lock());
    EXPECT_EQ(metrics.value("dlock_holds", {{"kind", "lock"}}), 1);
    lock.unlock();
    EXPECT_EQ(acquisitions(metrics, "lock", "acquired"), 1);
    EXPECT_EQ(metrics.value("dlock_hold_duration_seconds", {{"kind", "lock"}}), 1);
    EXPECT_EQ(metrics.value("dlock_holds", {{"kind", "lock"}}), 0);

    // Held by another client: a single attempt is busy; a deadline times
    // out (after waiting); a stop request cancels.
    auto theirs = other.lock("outcomes");
    theirs.lock();
    EXPECT_FALSE(lock.try_lock());
    EXPECT_EQ(acquisitions(metrics, "lock", "busy"), 1);
    EXPECT_FALSE(lock.try_lock_for(150ms));
    EXPECT_EQ(acquisitions(metrics, "lock", "timed_out"), 1);
    EXPECT_EQ(metrics.value("dlock_wait_duration_seconds", {{"kind", "lock"}}), 1);
    std::stop_source stop;
    std::thread canceller([&] {
        std::this_thread::sleep_for(100ms);
        stop.request_stop();
    });
    EXPECT_FALSE(lock.try_lock_until(std::chrono::steady_clock::now() + 10s, stop.get_token()));
    canceller.join();
    EXPECT_EQ(acquisitions(metrics, "lock", "cancelled"), 1);
    EXPECT_EQ(metrics.value("dlock_waiting_callers", {{"kind", "lock"}}), 0);
    theirs.unlock();
    // The other client's calls are its own.
    EXPECT_EQ(acquisitions(other.metrics(), "lock", "acquired"), 1);
    EXPECT_EQ(acquisitions(other.metrics(), "lock", "busy"), 0);

    // A key of the wrong type: an error.
    client.command({"SET", "dlock:{typed}", "x"});
    auto typed = client.lock("typed");
    EXPECT_THROW((void)typed.try_lock(), dlock::Error);
    EXPECT_EQ(acquisitions(metrics, "lock", "error"), 1);
    // Sum of the outcomes is every call.
    EXPECT_EQ(metrics.value("dlock_acquire_duration_seconds", {{"kind", "lock"}, {"outcome", "busy"}}), 1);
}

TEST(Metrics, AWaiterQueuedWhileHeldIsCountedWaitingThenHandedTheLock) {
    RedisServer server;
    dlock::Client client(server.uri());
    auto& metrics = client.metrics();
    auto holder = client.lock("queued", {.ownership = dlock::Ownership::handle});
    auto waiter = client.lock("queued", {.ownership = dlock::Ownership::handle});
    holder.lock();
    std::atomic<bool> got{false};
    std::thread waiting([&] {
        waiter.lock();
        got = true;
        waiter.unlock();
    });
    EXPECT_TRUE(eventually([&] { return metrics.value("dlock_waiting_callers", {{"kind", "lock"}}) == 1; }));
    // In line on the server too: counted waiting, its first attempt may not
    // have been answered yet (on a busy machine), and a release before it
    // leaves a free name that the attempt takes with no hand-off.
    EXPECT_TRUE(eventually([&] { return client.command({"ZCARD", "dlock:{queued}:line"}).integer == 1; }));
    holder.unlock();
    waiting.join();
    EXPECT_TRUE(got);
    EXPECT_EQ(metrics.value("dlock_waiting_callers", {{"kind", "lock"}}), 0);
    EXPECT_EQ(metrics.value("dlock_wait_duration_seconds", {{"kind", "lock"}}), 1);
    EXPECT_EQ(metrics.value("dlock_handoffs_total", {{"how", "local"}}) +
                  metrics.value("dlock_handoffs_total", {{"how", "direct"}}),
              1);
}

TEST(Metrics, LostLeasesAreCountedByReason) {
    RedisServer server;
    dlock::Client client(server.uri());
    auto& metrics = client.metrics();
    // Revoked: force-released, the inbox tells the holder.
    auto revoked = client.lock("revoked");
    revoked.lock();
    ASSERT_TRUE(dlock::force_release(client, "revoked"));
    EXPECT_TRUE(eventually([&] { return metrics.value("dlock_leases_lost_total", {{"kind", "lock"}, {"reason", "revoked"}}) == 1; }));
    revoked.unlock();
    // Refused: the key is gone behind the holder's back; the next renewal
    // finds it is not ours.
    auto refused = client.lock("refused", {.lease = 600ms});
    refused.lock();
    client.command({"DEL", "dlock:{refused}"});
    EXPECT_TRUE(eventually([&] { return metrics.value("dlock_leases_lost_total", {{"kind", "lock"}, {"reason", "refused"}}) == 1; }, 5s));
    EXPECT_GE(metrics.value("dlock_renewals_total", {{"result", "refused"}}), 1);
    refused.unlock();
    // Expired: the server stops answering; validity runs out first.
    EXPECT_EQ(metrics.value("dlock_leases_lost_total", {{"kind", "lock"}, {"reason", "expired"}}), 0);
    auto expiring = client.lock("expiring", {.lease = 600ms});
    expiring.lock();
    server.pause();
    EXPECT_TRUE(eventually([&] { return metrics.value("dlock_leases_lost_total", {{"kind", "lock"}, {"reason", "expired"}}) == 1; }, 5s));
    server.resume();
    expiring.unlock();
    EXPECT_EQ(metrics.value("dlock_holds", {{"kind", "lock"}}), 0);
    EXPECT_EQ(metrics.value("dlock_hold_duration_seconds", {{"kind", "lock"}}), 3);
}

TEST(Metrics, RenewalsResubscriptionsAndScriptReloadsAreCounted) {
    RedisServer server;
    dlock::Client client(server.uri());
    auto& metrics = client.metrics();
    auto lock = client.lock("renewed", {.lease = 300ms});
    lock.lock();
    EXPECT_TRUE(eventually([&] { return metrics.value("dlock_renewals_total", {{"result", "renewed"}}) >= 2; }, 5s));
    lock.unlock();
    // The server forgot the scripts: the next call goes again as EVAL.
    client.command({"SCRIPT", "FLUSH"});
    lock.lock();
    lock.unlock();
    EXPECT_GE(metrics.value("dlock_script_reloads_total"), 1);
    // The subscriber's connection dropped: the inbox is subscribed again.
    client.command({"CLIENT", "KILL", "TYPE", "pubsub"});
    EXPECT_TRUE(eventually([&] { return metrics.value("dlock_resubscriptions_total") >= 1; }, 10s));
}

TEST(Metrics, AReplicaAckShortfallIsCounted) {
    RedisServer server;  // no replicas: WAIT 1 confirms none
    dlock::Client client(server.uri());
    auto lock = client.lock("acked", {.replica_ack = {.replicas = 1, .timeout = 50ms}});
    std::error_code ec;
    EXPECT_FALSE(lock.try_lock_until(std::chrono::steady_clock::now() + 2s, ec));
    EXPECT_EQ(ec, dlock::errc::replicas_not_acknowledged);
    EXPECT_GE(client.metrics().value("dlock_replica_ack_shortfalls_total"), 1);
    EXPECT_GE(acquisitions(client.metrics(), "lock", "error"), 1);
}

TEST(Metrics, EveryLockKindIsCountedUnderItsOwnKind) {
    RedisServer server, second, third;
    dlock::Client client(server.uri());
    auto& metrics = client.metrics();
    {
        dlock::FairLock fair(client, "kinds-fair");
        fair.lock();
        fair.unlock();
    }
    {
        auto rw = client.rw_lock("kinds-rw");
        rw.lock_shared();
        rw.unlock_shared();
        rw.lock();
        rw.unlock();
    }
    {
        dlock::Semaphore semaphore(client, "kinds-semaphore", {.limit = 2});
        auto permit = semaphore.acquire(2);
        EXPECT_FALSE(semaphore.try_acquire(1));
    }
    {
        dlock::MultiLock multi(client, {"kinds-a", "kinds-b"});
        multi.lock();
        multi.unlock();
    }
    EXPECT_EQ(acquisitions(metrics, "fair_lock", "acquired"), 1);
    // Free at once: it stood in line, but never waited there.
    EXPECT_EQ(metrics.value("dlock_wait_duration_seconds", {{"kind", "fair_lock"}}), 0);
    EXPECT_EQ(acquisitions(metrics, "read", "acquired"), 1);
    EXPECT_EQ(acquisitions(metrics, "write", "acquired"), 1);
    EXPECT_EQ(acquisitions(metrics, "semaphore", "acquired"), 1);
    EXPECT_EQ(acquisitions(metrics, "semaphore", "busy"), 1);
    EXPECT_EQ(acquisitions(metrics, "multi_lock", "acquired"), 1);
    EXPECT_EQ(acquisitions(metrics, "lock", "acquired"), 2);  // the multi-lock's names
    EXPECT_EQ(metrics.value("dlock_hold_duration_seconds", {{"kind", "semaphore"}}), 1);

    dlock::Masters masters({server.uri(), second.uri(), third.uri()});
    {
        dlock::Redlock redlock(masters, "kinds-redlock");
        redlock.lock();
        redlock.unlock();
    }
    EXPECT_EQ(acquisitions(masters.metrics(), "redlock", "acquired"), 1);
    EXPECT_EQ(masters.metrics().value("dlock_hold_duration_seconds", {{"kind", "redlock"}}), 1);
    // One Metrics for all the masters' clients.
    EXPECT_EQ(&masters.client(0).metrics(), &masters.metrics());
    EXPECT_EQ(&masters.client(2).metrics(), &masters.metrics());
}

TEST(Metrics, NamesAreLabelsOnlyWhenAskedAndUpToTheCap) {
    RedisServer server;
    auto shared = std::make_shared<dlock::Metrics>(dlock::MetricsOptions{.name_label_delimiter = ':', .max_name_labels = 2});
    dlock::ClientOptions sharing;
    sharing.metrics = shared;
    dlock::Client a(server.uri(), sharing), b(server.uri(), sharing);
    for (const char* name : {"orders:1", "orders:2", "users:7", "carts:3", "invoices:4"}) {
        auto lock = a.lock(name);
        lock.lock();
        lock.unlock();
    }
    auto lock = b.lock("orders:9");
    lock.lock();
    lock.unlock();
    EXPECT_EQ(&a.metrics(), shared.get());
    EXPECT_EQ(shared->value("dlock_acquisitions_total", {{"kind", "lock"}, {"name", "orders"}, {"outcome", "acquired"}}), 3);
    EXPECT_EQ(shared->value("dlock_acquisitions_total", {{"kind", "lock"}, {"name", "users"}, {"outcome", "acquired"}}), 1);
    EXPECT_EQ(shared->value("dlock_acquisitions_total", {{"kind", "lock"}, {"name", "_other"}, {"outcome", "acquired"}}), 2);
    // Without the opt-in there is no name label at all.
    dlock::Client plain(server.uri());
    auto unlabelled = plain.lock("orders:1");
    unlabelled.lock();
    unlabelled.unlock();
    EXPECT_EQ(plain.metrics().prometheus_text().find("name="), std::string::npos);
}

// A name the constructor refuses takes no name label (the cap counts only
// names that are used).
TEST(Metrics, RefusedNamesTakeNoNameLabel) {
    RedisServer server;
    dlock::ClientOptions options;
    options.metrics = std::make_shared<dlock::Metrics>(dlock::MetricsOptions{.name_label_delimiter = ':', .max_name_labels = 2});
    dlock::Client client(server.uri(), options);
    EXPECT_THROW((void)client.lock(std::string(600, 'x')), dlock::Error);  // too long
    EXPECT_THROW((void)client.lock("y:1", {.lease = std::chrono::milliseconds(1)}), dlock::Error);  // lease too short
    EXPECT_THROW((void)client.rw_lock("z:1", {.lease = std::chrono::milliseconds(1)}), dlock::Error);
    auto orders = client.lock("orders:1");
    auto users = client.lock("users:1");
    for (auto* lock : {&orders, &users}) {
        lock->lock();
        lock->unlock();
    }
    auto& m = client.metrics();
    EXPECT_EQ(m.value("dlock_acquisitions_total", {{"kind", "lock"}, {"name", "orders"}, {"outcome", "acquired"}}), 1);
    EXPECT_EQ(m.value("dlock_acquisitions_total", {{"kind", "lock"}, {"name", "users"}, {"outcome", "acquired"}}), 1);
}

TEST(Metrics, TheSinkSeesEachObservation) {
    RedisServer server;
    dlock::Client client(server.uri());
    std::mutex mutex;
    std::vector<std::string> seen;
    client.metrics().set_sink([&](const dlock::Metrics::Observation& o) {
        std::lock_guard lock(mutex);
        std::string line(o.family);
        for (auto& [k, v] : o.labels) line += " " + std::string(k) + "=" + std::string(v);
        seen.push_back(line);
    });
    auto lock = client.lock("sunk");
    lock.lock();
    lock.unlock();
    client.metrics().set_sink({});
    lock.lock();
    lock.unlock();
    std::lock_guard guard(mutex);
    auto count = [&](const std::string& line) { return std::count(seen.begin(), seen.end(), line); };
    EXPECT_EQ(count("dlock_acquisitions_total kind=lock outcome=acquired"), 1);
    EXPECT_EQ(count("dlock_acquire_duration_seconds kind=lock outcome=acquired"), 1);
    EXPECT_EQ(count("dlock_hold_duration_seconds kind=lock"), 1);
    EXPECT_EQ(count("dlock_holds kind=lock"), 2);  // up, then down
}

TEST(Metrics, TheExpositionParsesBackAndAgreesWithTheCounts) {
    RedisServer server;
    auto metrics = std::make_shared<dlock::Metrics>(dlock::MetricsOptions{.name_label_delimiter = '/'});
    dlock::ClientOptions options;
    options.metrics = metrics;
    dlock::Client client(server.uri(), options);
    // A name whose label needs escaping.
    auto odd = client.lock("quo\"te\\back\nline/1");
    odd.lock();
    odd.unlock();
    auto lock = client.lock("plain/2");
    for (int i = 0; i < 5; ++i) {
        lock.lock();
        lock.unlock();
    }
    const auto text = metrics->prometheus_text();
    const auto parsed = parse_exposition(text);
    EXPECT_TRUE(parsed.errors.empty()) << parsed.errors.front();
    EXPECT_EQ(parsed.types.at("dlock_acquire_duration_seconds"), "histogram");
    EXPECT_EQ(parsed.types.at("dlock_acquisitions_total"), "counter");
    EXPECT_EQ(parsed.types.at("dlock_holds"), "gauge");
    EXPECT_EQ(parsed.samples.at(R"(dlock_acquisitions_total{kind="lock",name="plain",outcome="acquired"})"), 5);
    // Escaped (quote, backslash), and one line (the line feed as '?').
    EXPECT_EQ(parsed.samples.at(R"(dlock_acquisitions_total{kind="lock",name="quo\"te\\back?line",outcome="acquired"})"), 1);
    // A histogram's buckets are cumulative, +Inf is its count, and its sum
    // is positive.
    const std::string series = R"(kind="lock",name="plain",outcome="acquired")";
    double previous = 0;
    for (const char* le : {"0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1",
                           "2.5", "5", "10", "30", "60", "300", "1800", "+Inf"}) {
        const auto bucket = parsed.samples.at("dlock_acquire_duration_seconds_bucket{" + series + ",le=\"" + le + "\"}");
        EXPECT_GE(bucket, previous) << le;
        previous = bucket;
    }
    EXPECT_EQ(parsed.samples.at("dlock_acquire_duration_seconds_bucket{" + series + R"(,le="+Inf"})"), 5);
    EXPECT_EQ(parsed.samples.at("dlock_acquire_duration_seconds_count{" + series + "}"), 5);
    EXPECT_GT(parsed.samples.at("dlock_acquire_duration_seconds_sum{" + series + "}"), 0);
    EXPECT_EQ(parsed.samples.at("dlock_failovers_total"), 0);
}

TEST(Metrics, DisabledRecordsNothing) {
    RedisServer server;
    dlock::ClientOptions options;
    options.metrics = std::make_shared<dlock::Metrics>(dlock::MetricsOptions{.enabled = false});
    dlock::Client client(server.uri(), options);
    auto lock = client.lock("quiet");
    lock.lock();
    lock.unlock();
    EXPECT_EQ(acquisitions(client.metrics(), "lock", "acquired"), 0);
    EXPECT_EQ(client.metrics().prometheus_text().find("kind="), std::string::npos);
}
