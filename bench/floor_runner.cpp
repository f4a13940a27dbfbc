// The floor: the least a Redis lock costs its client, for dlock's figures to
// be read against (bench/compare.py runs both on the same servers, in the
// same run). A bare hiredis lock: SET name token NX PX, then an EVALSHA of a
// compare-and-delete (floor_unlock.lua), on one blocking connection per
// thread; a busy name is asked again at once. No renewal, no waiting line,
// no fencing: what any lock must at least send and read.
//
// Takes dlock_runner's flags and prints the same fields (cost.hpp):
//   --scenario cycles --url U --n N [--fresh 1 [--names K]] [--urls A,B,C,D,E]
//       N lock+unlock on one thread. --fresh 1: a name of K in turn each
//       cycle (the floor has no lock object; a new name is what a Lock made
//       per name sends). --urls: over those masters as Redlock does, each
//       step written to every master before any reply is read, granted on a
//       majority
//   --scenario many --url U --tasks T --names K --duration-ms D
//       T threads, each with its connection, locking random names of K
// The unlock script is read from --script (default bench/floor_unlock.lua,
// relative to the source tree the benchmark runs in).
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "cost.hpp"

using namespace dlock::bench;
using namespace std::chrono_literals;

namespace {

constexpr const char* lease_ms = "30000";

struct ContextFree {
    void operator()(redisContext* c) const { redisFree(c); }
};
using Connection = std::unique_ptr<redisContext, ContextFree>;

struct ReplyFree {
    void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

Connection connect(const std::string& url) {
    const std::string prefix = "redis://";
    if (url.rfind(prefix, 0) != 0) throw std::runtime_error("floor_runner: --url must be redis://host:port: " + url);
    const auto rest = url.substr(prefix.size());
    const auto colon = rest.rfind(':');
    if (colon == std::string::npos) throw std::runtime_error("floor_runner: no port in " + url);
    Connection c(redisConnect(rest.substr(0, colon).c_str(), std::stoi(rest.substr(colon + 1))));
    if (!c || c->err) throw std::runtime_error("floor_runner: cannot connect to " + url + (c ? ": " + std::string(c->errstr) : ""));
    return c;
}

Reply command(redisContext* c, const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& a : args) {
        argv.push_back(a.data());
        lengths.push_back(a.size());
    }
    Reply r(static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data())));
    if (!r) throw std::runtime_error(std::string("floor_runner: connection failed: ") + c->errstr);
    if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error("floor_runner: " + std::string(r->str, r->len));
    return r;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("floor_runner: cannot read " + path + " (run from the source tree, or give --script)");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

ServerUsage server_usage(redisContext* c) {
    const auto r = command(c, {"INFO", "cpu", "commandstats"});
    return ServerUsage::parse(std::string(r->str, r->len));
}

// One thread's lock: its connections (one, or one per master), the unlock
// script's SHA1, and a token per acquisition made from the thread's prefix
// and a counter, as a lock must (a token reused across acquisitions lets a
// late unlock free someone else's).
class FloorLock {
public:
    FloorLock(const std::vector<std::string>& urls, const std::string& script, int thread) {
        for (const auto& url : urls) masters_.push_back(connect(url));
        for (auto& m : masters_) sha_ = command(m.get(), {"SCRIPT", "LOAD", script})->str;
        std::snprintf(prefix_, sizeof prefix_, "%d:%d:", static_cast<int>(getpid()), thread);
    }

    // Until granted: SET NX PX on every master (a majority of them), then
    // the compare-and-delete on each.
    void lock_unlock(const char* key) {
        char token[64];
        std::snprintf(token, sizeof token, "%s%lu", prefix_, ++counter_);
        while (!all("SET %s %s NX PX %s", key, token, lease_ms)) {
        }
        all("EVALSHA %s 1 %s %s", sha_.c_str(), key, token);
    }

    redisContext* first() { return masters_.front().get(); }

private:
    // Each command written to every master first, then each reply read:
    // one wait for all of them, as a client with one event loop would. True
    // when a majority said OK (or freed the key).
    template <typename... Args>
    bool all(const char* format, Args... args) {
        for (auto& m : masters_) redisAppendCommand(m.get(), format, args...);
        for (auto& m : masters_) {
            int done = 0;
            while (!done)
                if (redisBufferWrite(m.get(), &done) != REDIS_OK) throw std::runtime_error("floor_runner: write failed");
        }
        std::size_t yes = 0;
        for (auto& m : masters_) {
            void* raw = nullptr;
            if (redisGetReply(m.get(), &raw) != REDIS_OK) throw std::runtime_error("floor_runner: read failed");
            Reply r(static_cast<redisReply*>(raw));
            if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error("floor_runner: " + std::string(r->str, r->len));
            yes += r->type == REDIS_REPLY_STATUS || (r->type == REDIS_REPLY_INTEGER && r->integer == 1);
        }
        return yes > masters_.size() / 2;
    }

    std::vector<Connection> masters_;
    std::string sha_;
    char prefix_[32] = {};
    unsigned long counter_ = 0;
};

std::string flag(int argc, char** argv, const std::string& name, const std::string& fallback = "") {
    return flag_value(argc, argv, "--" + name, fallback);
}

long number(int argc, char** argv, const std::string& name, long fallback) {
    const auto value = flag(argc, argv, name);
    return value.empty() ? fallback : std::stol(value);
}

int cycles(int argc, char** argv, const std::string& script) {
    const long n = number(argc, argv, "n", 20'000), names = number(argc, argv, "names", 10'000);
    const bool fresh = number(argc, argv, "fresh", 0) != 0;
    auto urls = split(flag(argc, argv, "urls"));
    if (urls.empty()) urls.push_back(flag(argc, argv, "url"));
    FloorLock lock(urls, script, 0);
    std::vector<Connection> servers;  // INFO alone goes through these
    for (const auto& url : urls) servers.push_back(connect(url));
    std::vector<std::string> keys;
    for (long i = 0; i < (fresh ? names : 1); ++i) keys.push_back("floor:{" + std::to_string(i) + "}");
    auto cycle = [&](long i) { lock.lock_unlock(keys[static_cast<std::size_t>(fresh ? i % names : 0)].c_str()); };
    return print_cycles(n, [&] {
        ServerUsage sum;
        for (auto& server : servers) sum += server_usage(server.get());
        return sum;
    }, cycle);
}

int many(int argc, char** argv, const std::string& script) {
    const int tasks = static_cast<int>(number(argc, argv, "tasks", 16));
    const long names = number(argc, argv, "names", 10'000);
    const auto duration = std::chrono::milliseconds(number(argc, argv, "duration-ms", 5000));
    const std::vector<std::string> urls{flag(argc, argv, "url")};
    std::vector<std::string> keys;
    for (long i = 0; i < names; ++i) keys.push_back("floor:many:{" + std::to_string(i) + "}");
    std::vector<std::unique_ptr<FloorLock>> locks;
    for (int t = 0; t < tasks; ++t) locks.push_back(std::make_unique<FloorLock>(urls, script, t));
    auto info = connect(urls.front());
    const auto server_before = server_usage(info.get());
    const auto [done, spent] = over_many_names(tasks, names, duration, [&](int t, std::size_t name) {
        locks[static_cast<std::size_t>(t)]->lock_unlock(keys[name].c_str());
    });
    const auto server = server_cost_json(server_before, server_usage(info.get()), done);
    std::printf("{\"ops\": %ld, \"ops_per_s\": %.1f, %s, %s}\n", done,
                static_cast<double>(done) / std::chrono::duration<double>(duration).count(),
                cost_json(spent, done).c_str(), server.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const auto scenario = flag(argc, argv, "scenario");
    try {
        const auto script = read_text(flag(argc, argv, "script", "bench/floor_unlock.lua"));
        if (scenario == "cycles") return cycles(argc, argv, script);
        if (scenario == "many") return many(argc, argv, script);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "floor_runner: unknown --scenario '%s' (cycles, many)\n", scenario.c_str());
    return 2;
}
