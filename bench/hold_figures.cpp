// The figures behind the lock's contract, measured against private servers:
//   1. how long after the end of a hold's validity the holder is told of the
//      loss when the network turns into a black hole (the TCP proxy), with
//      the library's default command timeout (5 s);
//   2. what stays in Redis after many distinct names were each locked once:
//      keys and used_memory right after, and once the retention is over;
//   3. fencing tokens across a restart without persistence.
// Prints one JSON object.
//
//   dlock_hold_figures [--names N] [--runs N]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// Milliseconds from the end of validity (the last valid_until() the holder
// saw) to on_lost, one black-holed hold per run; negative: told before.
std::vector<double> loss_notice_ms(int runs) {
    std::vector<double> out;
    dlock::support::RedisServer server;
    for (int i = 0; i < runs; ++i) {
        dlock::support::TcpProxy proxy(server.port());
        dlock::Client client(proxy.uri());
        std::atomic<Clock::rep> told{0};
        auto lock = client.lock("black-holed:" + std::to_string(i),
                                {.lease = 1s, .on_lost = [&](std::string_view, std::error_code) {
                                     told = Clock::now().time_since_epoch().count();
                                 }});
        lock.lock();
        std::this_thread::sleep_for(400ms);  // a renewal on the way
        proxy.black_hole(true);
        Clock::time_point last_valid{};
        const auto give_up = Clock::now() + 10s;
        while (told.load() == 0 && Clock::now() < give_up) {
            if (auto v = lock.valid_until(); v != Clock::time_point{}) last_valid = v;
            std::this_thread::sleep_for(1ms);
        }
        if (told.load() == 0) {
            out.push_back(1e9);  // never told
            continue;
        }
        const Clock::time_point at{Clock::duration(told.load())};
        out.push_back(std::chrono::duration<double, std::milli>(at - last_valid).count());
    }
    return out;
}

struct Leftovers {
    long keys_after = 0, memory_growth_after = 0;    // right after the last release, default retention
    long keys_later = 0, memory_growth_later = 0;    // once the retention is over
};

long used_memory(const dlock::support::RedisServer& server) {
    auto info = server.cli({"MEMORY", "STATS"});
    // "dataset.bytes" is the data alone, without the server's own overhead.
    auto at = info.find("dataset.bytes");
    if (at == std::string::npos) return -1;
    return std::atol(info.c_str() + info.find('\n', at) + 1);
}

// Locks and releases `names` distinct names; returns the server's growth.
void lock_each(dlock::support::RedisServer& server, int names, std::chrono::milliseconds retention) {
    dlock::Client client(server.uri());
    for (int i = 0; i < names; ++i) {
        auto lock = client.lock("order:" + std::to_string(i), {.retention = retention});
        lock.lock();
        lock.unlock();
    }
}

// Right after: with the default retention (nothing has expired yet). Later:
// with a short one, once it is over.
Leftovers names_left(int names, std::chrono::milliseconds retention) {
    Leftovers out;
    {
        dlock::support::RedisServer server;
        const long base = used_memory(server);
        lock_each(server, names, dlock::default_retention);
        out.keys_after = std::atol(server.cli({"DBSIZE"}).c_str());
        out.memory_growth_after = used_memory(server) - base;
    }
    dlock::support::RedisServer server;
    const long base = used_memory(server);
    lock_each(server, names, retention);
    std::this_thread::sleep_for(retention + 1s);
    // Expired keys go when touched or when the server's sampling finds them.
    for (int i = 0; i < 100 && std::atol(server.cli({"DBSIZE"}).c_str()) > 0; ++i) std::this_thread::sleep_for(100ms);
    out.keys_later = std::atol(server.cli({"DBSIZE"}).c_str());
    out.memory_growth_later = used_memory(server) - base;
    return out;
}

// Tokens of three acquisitions, with a restart without persistence between
// the second and the third.
std::vector<std::uint64_t> tokens_across_restart() {
    dlock::support::RedisServer server;
    std::vector<std::uint64_t> tokens;
    for (int i = 0; i < 3; ++i) {
        if (i == 2) server.restart();
        dlock::Client client(server.uri());
        auto lock = client.lock("fenced");
        lock.lock();
        tokens.push_back(lock.fencing_token());
        lock.unlock();
    }
    return tokens;
}

}  // namespace

int main(int argc, char** argv) {
    int names = 100'000, runs = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--names")) names = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    }
    auto notices = loss_notice_ms(runs);
    const auto retention = 2s;  // short, so the run ends soon; the default is 10 min
    auto left = names_left(names, retention);
    auto tokens = tokens_across_restart();
    std::printf("{\"loss_notice_after_validity_ms\": [");
    for (std::size_t i = 0; i < notices.size(); ++i) std::printf("%s%.2f", i ? ", " : "", notices[i]);
    std::printf("], \"names\": %d, \"retention_ms\": %lld, \"keys_right_after\": %ld, \"dataset_bytes_right_after\": %ld, "
                "\"keys_after_retention\": %ld, \"dataset_bytes_after_retention\": %ld, \"tokens_across_restart\": [%llu, "
                "%llu, %llu], \"increasing\": %s}\n",
                names, static_cast<long long>(std::chrono::milliseconds(retention).count()), left.keys_after,
                left.memory_growth_after, left.keys_later, left.memory_growth_later,
                static_cast<unsigned long long>(tokens[0]), static_cast<unsigned long long>(tokens[1]),
                static_cast<unsigned long long>(tokens[2]),
                tokens[0] < tokens[1] && tokens[1] < tokens[2] ? "true" : "false");
    bool ok = left.keys_later == 0 && tokens[1] < tokens[2] &&
              std::all_of(notices.begin(), notices.end(), [](double ms) { return ms <= 2.0; });
    return ok ? 0 : 1;
}
