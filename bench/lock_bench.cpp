// Lock benchmark, against a private server, in one run:
//
//   uncontended  lock+unlock p50/p99 next to PING and EVALSHA round trips
//   contended    P processes x T threads on one name: acquisitions/s, wait
//                p50/p99/max, Jain fairness over workers; exclusion checked
//                with a non-atomic counter in memory shared by the processes
//   watchdog     N held locks: renewal commands/s (server side), client CPU,
//                heap bytes per held lock, threads
//
// Usage: dlock_lock_bench [--quick] [--json FILE]
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "bench_support.hpp"
#include "dlock/client.hpp"
#include "redis_server.hpp"

using namespace dlock::bench;
using namespace std::chrono_literals;

namespace {

// What the contended workers share across processes (MAP_SHARED).
struct Shared {
    long counter;                // incremented non-atomically inside the lock
    long acquisitions[64];       // per worker
    double wait_us[64][4096];    // samples per worker (first 4096)
    long samples[64];
};

int thread_count() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
    return -1;
}

void contended(Report& report, const dlock::support::RedisServer& server, int processes, int threads,
               std::chrono::milliseconds duration, std::chrono::microseconds critical) {
    auto* shared = static_cast<Shared*>(
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    std::vector<pid_t> children;
    auto start_at = Clock::now() + 300ms;  // every process starts racing together
    for (int p = 0; p < processes; ++p) {
        pid_t pid = fork();
        if (pid == 0) {
            dlock::Client client(server.uri());
            auto lock = client.lock("contended");
            std::vector<std::thread> workers;
            for (int t = 0; t < threads; ++t) {
                int w = p * threads + t;
                workers.emplace_back([&, w] {
                    std::this_thread::sleep_until(start_at);
                    auto stop_at = start_at + duration;
                    while (Clock::now() < stop_at) {
                        auto asked = Clock::now();
                        lock.lock();
                        double waited = std::chrono::duration<double, std::micro>(Clock::now() - asked).count();
                        std::atomic_ref<long> counter(shared->counter);
                        long seen = counter.load(std::memory_order_relaxed);  // read ...
                        if (critical.count() > 0) {
                            auto until = Clock::now() + critical;
                            while (Clock::now() < until) {
                            }
                        }
                        counter.store(seen + 1, std::memory_order_relaxed);  // ... write: lost if two overlap
                        lock.unlock();
                        auto n = shared->samples[w];
                        if (n < 4096) shared->wait_us[w][n] = waited;
                        shared->samples[w] = n + 1;
                        ++shared->acquisitions[w];
                    }
                });
            }
            for (auto& w : workers) w.join();
            _exit(0);
        }
        children.push_back(pid);
    }
    for (auto pid : children) waitpid(pid, nullptr, 0);
    const int workers = processes * threads;
    long total = 0;
    double sum = 0, sum_sq = 0;
    Samples waits;
    for (int w = 0; w < workers; ++w) {
        total += shared->acquisitions[w];
        double x = static_cast<double>(shared->acquisitions[w]);
        sum += x;
        sum_sq += x * x;
        for (long i = 0; i < std::min(shared->samples[w], 4096L); ++i) waits.us.push_back(shared->wait_us[w][i]);
    }
    double jain = sum_sq > 0 ? (sum * sum) / (workers * sum_sq) : 0;
    double seconds = std::chrono::duration<double>(duration).count();
    std::string section = critical.count() ? "contended_cs100us" : "contended";
    report.set(section, "processes", processes);
    report.set(section, "threads_per_process", threads);
    report.set(section, "acquisitions_per_s", static_cast<double>(total) / seconds);
    report.set(section, "wait_p50_us", waits.percentile(50));
    report.set(section, "wait_p99_us", waits.percentile(99));
    report.set(section, "wait_max_us", waits.max());
    report.set(section, "jain_fairness", jain);
    report.set(section, "counter_exact", shared->counter == total ? 1 : 0);
    std::printf("  contended %dx%d, critical section %ld us: %.0f acq/s, wait p50 %.0f us p99 %.0f us max %.0f us, "
                "Jain %.3f, counter %s (%ld/%ld)\n",
                processes, threads, static_cast<long>(critical.count()), static_cast<double>(total) / seconds,
                waits.percentile(50), waits.percentile(99), waits.max(), jain,
                shared->counter == total ? "exact" : "WRONG", shared->counter, total);
    munmap(shared, sizeof(Shared));
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = has_flag(argc, argv, "--quick");
    const std::string json_path = flag_value(argc, argv, "--json", "");
    dlock::support::RedisServer server;
    Report report;
    report.set_text("meta", "machine", machine_description());
    report.set_text("meta", "mode", quick ? "quick" : "full");
    std::printf("lock benchmark (%s)\n", quick ? "quick" : "full");

    {  // Uncontended, and the round trips it is made of.
        dlock::Client client(server.uri());
        const long n = quick ? 2'000 : 20'000;
        auto lock = client.lock("uncontended");
        const dlock::Script script("return ARGV[1]");
        std::string_view ping[] = {"PING"};
        std::vector<std::string_view> no_keys, args{"x"};
        Samples ping_lat, eval_lat, lock_lat;
        for (long i = 0; i < n / 10; ++i) {  // warm-up: connections, scripts, caches
            client.command(ping);
            client.eval(script, no_keys, args);
            lock.lock();
            lock.unlock();
        }
        for (long i = 0; i < n; ++i) {
            auto t0 = Clock::now();
            client.command(ping);
            auto t1 = Clock::now();
            client.eval(script, no_keys, args);
            auto t2 = Clock::now();
            lock.lock();
            lock.unlock();
            auto t3 = Clock::now();
            ping_lat.add(t1 - t0);
            eval_lat.add(t2 - t1);
            lock_lat.add(t3 - t2);
        }
        double ratio = lock_lat.percentile(50) / ping_lat.percentile(50);
        report.set("uncontended", "ping_p50_us", ping_lat.percentile(50));
        report.set("uncontended", "evalsha_p50_us", eval_lat.percentile(50));
        report.set("uncontended", "lock_unlock_p50_us", lock_lat.percentile(50));
        report.set("uncontended", "lock_unlock_p99_us", lock_lat.percentile(99));
        report.set("uncontended", "lock_unlock_ops_per_s", 1e6 / lock_lat.mean());
        report.set("uncontended", "uncontended_p50_over_ping_p50", ratio);
        std::printf("  uncontended lock+unlock p50 %.1f us p99 %.1f us | PING p50 %.1f us | EVALSHA p50 %.1f us | "
                    "ratio to PING %.2f\n",
                    lock_lat.percentile(50), lock_lat.percentile(99), ping_lat.percentile(50), eval_lat.percentile(50),
                    ratio);
    }

    contended(report, server, 4, 8, quick ? 1s : 5s, 0us);
    contended(report, server, 4, 8, quick ? 1s : 5s, 100us);

    {  // Watchdog: N held locks, renewal traffic and cost.
        const int n = quick ? 2'000 : 10'000;
        const auto lease = 3s;  // renewed every second
        const auto window = quick ? 3s : 10s;
        dlock::Client client(server.uri());
        client.wait_connected();
        std::vector<dlock::Lock> locks;
        locks.reserve(n);
        auto heap_before = mallinfo2().uordblks;
        for (int i = 0; i < n; ++i) locks.push_back(client.lock("held:" + std::to_string(i), {.lease = lease}));
        auto heap_objects = mallinfo2().uordblks;
        for (auto& l : locks) l.lock();
        std::this_thread::sleep_for(1500ms);  // settle into the renewal rhythm
        long calls_before = server.command_calls("evalsha");
        double cpu_before = process_cpu_seconds();
        auto t0 = Clock::now();
        std::this_thread::sleep_for(window);
        double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
        long renewals = server.command_calls("evalsha") - calls_before;
        double cpu = process_cpu_seconds() - cpu_before;
        auto heap_after = mallinfo2().uordblks;  // everything a held, renewed lock costs
        int threads = thread_count();
        int held = 0;
        for (auto& l : locks) held += l.is_held();
        for (auto& l : locks) l.unlock();
        double per_second = static_cast<double>(renewals) / elapsed;
        double minimal = n / std::chrono::duration<double>(lease / 3).count();
        double bytes_per_lock = static_cast<double>(heap_after - heap_before) / n;
        double bytes_per_hold = static_cast<double>(heap_after - heap_objects) / n;
        report.set("watchdog", "held_locks", n);
        report.set("watchdog", "still_held", held);
        report.set("watchdog", "renewals_per_s", per_second);
        report.set("watchdog", "minimal_renewals_per_s", minimal);
        report.set("watchdog", "renewals_over_minimal", per_second / minimal);
        report.set("watchdog", "client_cpu_percent_of_core", 100.0 * cpu / elapsed);
        report.set("watchdog", "heap_bytes_per_held_lock", bytes_per_lock);
        report.set("watchdog", "heap_bytes_per_hold_without_lock_object", bytes_per_hold);
        report.set("watchdog", "process_threads", threads);
        std::printf("  watchdog %d locks (lease %llds): %.0f renewals/s (minimal %.0f, x%.2f), client CPU %.2f%% of a "
                    "core, %.0f heap bytes per held lock (%.0f of them for holding and renewing, the rest the Lock object), "
                    "%d threads, %d still held\n",
                    n, static_cast<long long>(lease.count()), per_second, minimal, per_second / minimal,
                    100.0 * cpu / elapsed, bytes_per_lock, bytes_per_hold, threads, held);
    }
    if (!json_path.empty()) report.write(json_path);
}
