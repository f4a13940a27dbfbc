// What an operation costs, as the benchmark runners report it (dlock's,
// bench/dlock_runner.cpp, and the floor's, bench/floor_runner.cpp): the
// client's CPU, context switches and heap allocations (all threads of the
// process), and the server's CPU and time inside commands (INFO). Both
// runners link allocation_count.cpp; the figures are differences of two
// snapshots around a measured phase.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "allocation_count.hpp"
#include "bench_support.hpp"

namespace dlock::bench {

// Trivially copyable, so forked workers hand theirs back through shared memory.
struct Cost {
    double cpu_seconds = 0;
    long context_switches = 0;
    std::uint64_t allocations = 0;       // operator new
    std::uint64_t frees = 0;             // operator delete
    std::uint64_t heap_allocations = 0;  // malloc, calloc, realloc, aligned: every heap allocation

    static Cost now() {
        const auto usage = usage_of(false);
        const auto heap = allocation_count();
        return {usage.cpu_seconds, usage.context_switches, heap.allocations, heap.frees, heap.heap_allocations};
    }
    Cost operator-(const Cost& before) const {
        return {cpu_seconds - before.cpu_seconds, context_switches - before.context_switches,
                allocations - before.allocations, frees - before.frees, heap_allocations - before.heap_allocations};
    }
    Cost& operator+=(const Cost& other) {
        cpu_seconds += other.cpu_seconds;
        context_switches += other.context_switches;
        allocations += other.allocations;
        frees += other.frees;
        heap_allocations += other.heap_allocations;
        return *this;
    }
};

// A phase's cost per operation as JSON fields, each name after prefix.
// frees_per_op below allocations_per_op means memory kept per operation.
// heap_allocations_per_op counts C's malloc family too (what hiredis and
// operator new call): absent when the build cannot count it (sanitizers).
inline std::string cost_json(const Cost& spent, long ops, const std::string& prefix = "") {
    const double n = static_cast<double>(std::max(ops, 1L));
    const char* p = prefix.c_str();
    char out[512];
    int used = std::snprintf(out, sizeof out,
                             "\"%sclient_cpu_us_per_op\": %.2f, \"%scontext_switches_per_op\": %.3f, "
                             "\"%sallocations_per_op\": %.2f, \"%sfrees_per_op\": %.2f",
                             p, spent.cpu_seconds * 1e6 / n, p, static_cast<double>(spent.context_switches) / n, p,
                             static_cast<double>(spent.allocations) / n, p, static_cast<double>(spent.frees) / n);
    if (heap_allocations_counted() && used > 0 && static_cast<std::size_t>(used) < sizeof out)
        std::snprintf(out + used, sizeof out - static_cast<std::size_t>(used), ", \"%sheap_allocations_per_op\": %.2f",
                      p, static_cast<double>(spent.heap_allocations) / n);
    return out;
}

// The server's CPU so far (used_cpu_sys + used_cpu_user) and each command's
// calls and microseconds inside it, from the text of INFO cpu commandstats.
struct ServerUsage {
    double cpu_seconds = 0;
    std::map<std::string, std::pair<long, long>> commands;  // name: (calls, usec)

    static ServerUsage parse(const std::string& info) {
        ServerUsage usage;
        std::istringstream in(info);
        for (std::string line; std::getline(in, line);) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            const auto colon = line.find(':');
            if (colon == std::string::npos) continue;
            const auto key = line.substr(0, colon), value = line.substr(colon + 1);
            if (key == "used_cpu_sys" || key == "used_cpu_user") usage.cpu_seconds += std::stod(value);
            if (key.rfind("cmdstat_", 0) != 0) continue;
            long calls = 0, usec = 0;
            if (std::sscanf(value.c_str(), "calls=%ld,usec=%ld", &calls, &usec) == 2)
                usage.commands[key.substr(8)] = {calls, usec};
        }
        return usage;
    }
    ServerUsage& operator+=(const ServerUsage& other) {
        cpu_seconds += other.cpu_seconds;
        for (const auto& [name, figures] : other.commands) {
            auto& mine = commands[name];
            mine.first += figures.first;
            mine.second += figures.second;
        }
        return *this;
    }
};

// "server": {...}: the server's CPU and its time inside commands per
// operation between two snapshots, and each command's calls per operation
// (a script's own calls count under their names too; INFO's left out).
inline std::string server_cost_json(const ServerUsage& before, const ServerUsage& after, long ops) {
    const double n = static_cast<double>(std::max(ops, 1L));
    long usec = 0;
    std::string calls;
    for (const auto& [name, figures] : after.commands) {
        if (name == "info") continue;
        const auto it = before.commands.find(name);
        const auto was = it == before.commands.end() ? std::pair<long, long>{0, 0} : it->second;
        if (figures.first <= was.first) continue;
        usec += figures.second - was.second;
        char entry[128];
        std::snprintf(entry, sizeof entry, "%s\"%s\": %.4f", calls.empty() ? "" : ", ", name.c_str(),
                      static_cast<double>(figures.first - was.first) / n);
        calls += entry;
    }
    char out[256];
    std::snprintf(out, sizeof out, "\"server\": {\"cpu_us_per_op\": %.3f, \"command_us_per_op\": %.3f, \"calls_per_op\": {",
                  (after.cpu_seconds - before.cpu_seconds) * 1e6 / n, static_cast<double>(usec) / n);
    return out + calls + "}}";
}

// The cycles scenario both runners measure: n cycles of cycle(i) on this
// thread alone after a warm-up, printed as one JSON line: their rate, the
// client's cost and the servers' (servers() sums their INFO) per cycle.
template <typename Servers, typename Cycle>
int print_cycles(long n, Servers servers, Cycle cycle) {
    for (long i = 0; i < n / 10 + 10; ++i) cycle(i);
    const ServerUsage server_before = servers();
    const auto before = Cost::now();
    const auto t0 = Clock::now();
    for (long i = 0; i < n; ++i) cycle(i);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto spent = Cost::now() - before;
    const ServerUsage server_after = servers();
    std::printf("{\"ops\": %ld, \"ops_per_s\": %.1f, %s, %s}\n", n, static_cast<double>(n) / seconds,
                cost_json(spent, n).c_str(), server_cost_json(server_before, server_after, n).c_str());
    return 0;
}

// The many-names phase both runners measure: `tasks` threads, each calling
// op(thread, name) for random names of 0..names-1 (its own random sequence),
// from a common start until `duration` has passed. The lock+unlocks done,
// and what the process spent over the phase.
template <typename Op>
std::pair<long, Cost> over_many_names(int tasks, long names, std::chrono::milliseconds duration, Op op) {
    std::atomic<long> done{0};
    const auto start_at = Clock::now() + std::chrono::milliseconds(100), stop_at = start_at + duration;
    std::vector<std::thread> workers;
    for (int t = 0; t < tasks; ++t)
        workers.emplace_back([&, t] {
            std::minstd_rand random(static_cast<unsigned>(t + 1));
            std::uniform_int_distribution<long> pick(0, names - 1);
            long mine = 0;
            std::this_thread::sleep_until(start_at);
            while (Clock::now() < stop_at) {
                op(t, static_cast<std::size_t>(pick(random)));
                ++mine;
            }
            done += mine;
        });
    std::this_thread::sleep_until(start_at);
    const auto before = Cost::now();
    for (auto& w : workers) w.join();
    return {done.load(), Cost::now() - before};
}

}  // namespace dlock::bench
