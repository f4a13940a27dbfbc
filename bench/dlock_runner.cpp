// dlock's side of the side-by-side benchmark: one scenario against servers
// that bench/compare.py started, the result as one JSON object on stdout.
// The peers' runners (bench/peers/) take the same flags and print the same
// fields, so the orchestrator treats every library alike.
//
// Besides times, every scenario reports what a lock operation costs the
// process (all threads): client CPU, context switches and heap allocations
// per operation (cost_json), figures a busy machine does not move the way it
// moves latencies.
//
//   --kind lock (default) | fair
//       the exclusive lock type that uncontended, contended, many and watchdog
//       drive (exclusive_scenario below)
//   --scenario uncontended  --url U --n N [--metrics off]
//       lock+unlock latency, with PING and EVALSHA round trips in the same loop;
//       then N lock+unlock alone for their cost. --metrics off: with the
//       client's metrics disabled (bench/metrics_ab.py: what they cost)
//   --scenario contended    --url U --processes P --tasks T --duration-ms D --cs-us C [--permits N]
//       P processes x T threads on one name; a non-atomic GET/SET counter on
//       the server checks exclusion. With --permits N: a semaphore of N
//       permits instead, and the holders count themselves in and out on the
//       server (INCR/DECR): max_inside <= N checks the limit
//   --scenario many         --url U --tasks T --names K --duration-ms D
//       T threads locking random names out of K
//   --scenario watchdog     --url U --locks L --lease-ms M --duration-ms D
//       L held locks: renewal commands/s (server side), client CPU, heap per lock
//   --scenario redlock      --url U --urls A,B,C,D,E --n N
//       lock+unlock over five masters next to one master (latencies in turns,
//       then N of each alone for their cost)
//   --scenario cycles       --url U --n N [--fresh 1 [--names K]] [--urls A,B,C,D,E]
//       N lock+unlock alone on one thread (the floor's scenario, beside
//       bench/floor_runner.cpp): client cost, and the server's CPU and time
//       inside commands (INFO before and after). --fresh 1: a Lock made per
//       name; --urls: a Redlock over those masters
//   --scenario multi        --url U --n N
//       a 3-name MultiLock's lock+unlock next to one Lock's
//   --scenario multi_contended --url U --processes P --tasks T --duration-ms D
//       as contended, on a 3-name MultiLock whose names half the processes
//       list in the opposite order
//   --scenario rwlock       --url U --processes P --tasks T --duration-ms D --cs-us C --read-percent R
//                           [--exclusive 1]
//       P processes x T threads on one read-write lock, R % of acquisitions for
//       reading (each holding it C µs), the others for writing (a non-atomic
//       GET/SET counter on the server checks exclusion); acquisitions/s and the
//       writers' waits. --exclusive 1 takes the write side for every one: the
//       same work under an exclusive lock, for comparison
#include <malloc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <cstdio>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "bench_support.hpp"
#include "cost.hpp"
#include "dlock/client.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/semaphore.hpp"

using namespace dlock::bench;
using namespace std::chrono_literals;

namespace {

struct Flags {
    int argc;
    char** argv;
    std::string text(const std::string& name, const std::string& fallback = "") const {
        return flag_value(argc, argv, "--" + name, fallback);
    }
    long number(const std::string& name, long fallback) const {
        auto value = text(name);
        return value.empty() ? fallback : std::stol(value);
    }
};

// Sorted quantiles 0..100 in steps of 0.5: enough for a distribution chart.
std::string quantiles_json(Samples& samples) {
    std::string out = "[";
    for (int i = 0; i <= 200; ++i) {
        if (i) out += ",";
        out += std::to_string(samples.percentile(i / 2.0));
    }
    return out + "]";
}

// The cost of n lock+unlock in a row, with nothing else in the loop.
template <typename L>
Cost cost_of_cycles(long n, L& lock) {
    const auto before = Cost::now();
    for (long i = 0; i < n; ++i) {
        lock.lock();
        lock.unlock();
    }
    return Cost::now() - before;
}

void busy_wait(std::chrono::microseconds d) {
    auto until = Clock::now() + d;
    while (Clock::now() < until) {
    }
}

// The server's CPU and commands so far (a call outside any measured phase).
ServerUsage server_usage(dlock::Client& client) {
    return ServerUsage::parse(client.command({"INFO", "cpu", "commandstats"}).text);
}

// Renewal-like commands the server ran so far (EVALSHA and EVAL).
long script_calls(dlock::Client& client) {
    std::istringstream info(client.command({"INFO", "commandstats"}).text);
    long total = 0;
    for (std::string line; std::getline(info, line);) {
        for (const char* prefix : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="})
            if (line.rfind(prefix, 0) == 0) total += std::stol(line.substr(std::string(prefix).size()));
    }
    return total;
}

template <typename L>
int uncontended(const Flags& f) {
    const long n = f.number("n", 10'000);
    dlock::ClientOptions options;
    if (f.text("metrics", "on") == "off")
        options.metrics = std::make_shared<dlock::Metrics>(dlock::MetricsOptions{.enabled = false});
    dlock::Client client(f.text("url"), options);
    L lock(client, "bench:uncontended");
    const dlock::Script script("return ARGV[1]");
    std::string_view ping[] = {"PING"};
    std::vector<std::string_view> no_keys, args{"x"};
    Samples ping_lat, eval_lat, lock_lat, nowait_lat;
    for (long i = 0; i < n / 10 + 10; ++i) {  // warm-up: connections, scripts, caches
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
        // lock + unlock_nowait: the release's answer is read while the next
        // lock is on its way, so one cycle costs about one round trip.
        lock.lock();
        lock.unlock_nowait();
        auto t4 = Clock::now();
        ping_lat.add(t1 - t0);
        eval_lat.add(t2 - t1);
        lock_lat.add(t3 - t2);
        nowait_lat.add(t4 - t3);
    }
    const auto cost = cost_json(cost_of_cycles(n, lock), n);
    std::printf("{\"p50_us\": %.2f, \"p99_us\": %.2f, \"ops_per_s\": %.1f, \"ping_p50_us\": %.2f, "
                "\"evalsha_p50_us\": %.2f, \"nowait_p50_us\": %.2f, %s, \"quantiles_us\": %s}\n",
                lock_lat.percentile(50), lock_lat.percentile(99), 1e6 / lock_lat.mean(), ping_lat.percentile(50),
                eval_lat.percentile(50), nowait_lat.percentile(50), cost.c_str(), quantiles_json(lock_lat).c_str());
    return 0;
}

// What the contended workers share across processes (MAP_SHARED).
struct Shared {
    long acquisitions[256];
    double wait_us[256][2048];  // first samples of each worker
    long samples[256];
    int failures;
    long max_inside;  // semaphore: the most holders the server counted at once
    Cost cost[256];   // each process's, over the measured phase
    double handoffs_local[256], handoffs_direct[256];  // each process's client's
};

// P processes x T threads on one lock that make_lock(client, process) gives.
template <typename MakeLock>
int contended_on(const Flags& f, MakeLock make_lock) {
    const int processes = static_cast<int>(f.number("processes", 4));
    const int tasks = static_cast<int>(f.number("tasks", 8));
    const auto duration = std::chrono::milliseconds(f.number("duration-ms", 5000));
    const auto critical = std::chrono::microseconds(f.number("cs-us", 0));
    // --permits N: a semaphore of N permits instead of a lock; holders count
    // themselves in and out on the server (INCR/DECR) instead of the counter.
    const auto permits = static_cast<unsigned>(f.number("permits", 0));
    const std::string url = f.text("url"), counter_key = "bench:counter", inside_key = "bench:inside";
    if (processes * tasks > 256) return 2;
    {
        dlock::Client client(url);
        client.command({"DEL", counter_key, inside_key});
    }
    auto* shared = static_cast<Shared*>(
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    std::vector<pid_t> children;
    const auto start_at = Clock::now() + 500ms;  // every process starts racing together
    for (int p = 0; p < processes; ++p) {
        pid_t pid = fork();
        if (pid == 0) {
            dlock::Client client(url);
            auto lock = make_lock(client, p);
            std::optional<dlock::Semaphore> semaphore;
            if (permits > 0) semaphore.emplace(client, "bench:semaphore", dlock::SemaphoreOptions{.limit = permits});
            std::vector<std::thread> workers;
            auto record = [shared](int w, double waited) {
                auto n = shared->samples[w];
                if (n < 2048) shared->wait_us[w][n] = waited;
                shared->samples[w] = n + 1;
                ++shared->acquisitions[w];
            };
            for (int t = 0; t < tasks; ++t) {
                int w = p * tasks + t;
                workers.emplace_back([&, w] {
                    std::this_thread::sleep_until(start_at);
                    const auto stop_at = start_at + duration;
                    while (Clock::now() < stop_at) {
                        auto asked = Clock::now();
                        if (semaphore) {
                            auto permit = semaphore->acquire();
                            const double waited = std::chrono::duration<double, std::micro>(Clock::now() - asked).count();
                            const long inside = static_cast<long>(client.command({"INCR", inside_key}).integer);
                            long seen_max = __atomic_load_n(&shared->max_inside, __ATOMIC_RELAXED);
                            while (inside > seen_max && !__atomic_compare_exchange_n(&shared->max_inside, &seen_max, inside,
                                                                                      false, __ATOMIC_RELAXED,
                                                                                      __ATOMIC_RELAXED)) {
                            }
                            if (critical.count() > 0) busy_wait(critical);
                            client.command({"DECR", inside_key});
                            permit.release();
                            record(w, waited);
                            continue;
                        }
                        lock.lock();
                        double waited = std::chrono::duration<double, std::micro>(Clock::now() - asked).count();
                        // Deliberately not atomic: GET, then SET. Lost updates show overlap.
                        auto value = client.command({"GET", counter_key});
                        long seen = value.is_nil() ? 0 : std::stol(value.text);
                        if (critical.count() > 0) busy_wait(critical);
                        client.command({"SET", counter_key, std::to_string(seen + 1)});
                        lock.unlock();
                        record(w, waited);
                    }
                });
            }
            // The measured phase of this process, all its threads: from the
            // start of the race until its last worker is done (set-up before
            // and teardown after stay out).
            std::this_thread::sleep_until(start_at);
            const auto before = Cost::now();
            for (auto& w : workers) w.join();
            shared->cost[p] = Cost::now() - before;
            shared->handoffs_local[p] = client.metrics().value("dlock_handoffs_total", {{"how", "local"}});
            shared->handoffs_direct[p] = client.metrics().value("dlock_handoffs_total", {{"how", "direct"}});
            _exit(0);
        }
        children.push_back(pid);
    }
    for (auto pid : children) waitpid(pid, nullptr, 0);
    const int workers = processes * tasks;
    Cost spent;
    double handoffs_local = 0, handoffs_direct = 0;
    for (int p = 0; p < processes; ++p) {
        spent += shared->cost[p];
        handoffs_local += shared->handoffs_local[p];
        handoffs_direct += shared->handoffs_direct[p];
    }
    long total = 0;
    double sum = 0, sum_sq = 0;
    Samples waits;
    for (int w = 0; w < workers; ++w) {
        total += shared->acquisitions[w];
        double x = static_cast<double>(shared->acquisitions[w]);
        sum += x;
        sum_sq += x * x;
        for (long i = 0; i < std::min(shared->samples[w], 2048L); ++i) waits.us.push_back(shared->wait_us[w][i]);
    }
    dlock::Client client(url);
    auto counter = client.command({"GET", counter_key});
    long counted = counter.is_nil() ? 0 : std::stol(counter.text);
    double jain = sum_sq > 0 ? (sum * sum) / (workers * sum_sq) : 0;
    const auto cost = cost_json(spent, total);
    if (permits > 0) {
        // No shared counter here: at most `permits` holders at once, as the server counted them.
        counted = shared->max_inside > static_cast<long>(permits) ? -1 : total;
        std::printf("{\"permits\": %u, \"max_inside\": %ld, \"over_limit\": %s, ", permits, shared->max_inside,
                    shared->max_inside > static_cast<long>(permits) ? "true" : "false");
    } else {
        std::printf("{");
    }
    std::printf("\"acquisitions\": %ld, \"acq_per_s\": %.1f, \"wait_p50_us\": %.1f, \"wait_p99_us\": %.1f, "
                "\"wait_max_us\": %.1f, \"jain\": %.4f, \"counter\": %ld, \"counter_exact\": %s, "
                "\"handoffs_local_per_op\": %.3f, \"handoffs_direct_per_op\": %.3f, %s}\n",
                total, static_cast<double>(total) / std::chrono::duration<double>(duration).count(),
                waits.percentile(50), waits.percentile(99), waits.max(), jain, counted,
                counted == total ? "true" : "false", total ? handoffs_local / static_cast<double>(total) : 0.0,
                total ? handoffs_direct / static_cast<double>(total) : 0.0, cost.c_str());
    munmap(shared, sizeof(Shared));
    return 0;
}

template <typename L>
int contended(const Flags& f) {
    return contended_on(f, [](dlock::Client& client, int) { return L(client, "bench:contended"); });
}

int multi_contended(const Flags& f) {
    return contended_on(f, [](dlock::Client& client, int process) {
        std::vector<std::string> names{"bench:multi:a", "bench:multi:b", "bench:multi:c"};
        if (process % 2 == 1) std::reverse(names.begin(), names.end());
        return dlock::MultiLock(client, names);
    });
}

// What the read-write workers share across processes (MAP_SHARED).
struct RwShared {
    long reads[256];
    long writes[256];
    double read_wait_us[256][1024];
    double write_wait_us[256][1024];
    long read_samples[256];
    long write_samples[256];
};

int rwlock(const Flags& f) {
    const int processes = static_cast<int>(f.number("processes", 4));
    const int tasks = static_cast<int>(f.number("tasks", 8));
    const auto duration = std::chrono::milliseconds(f.number("duration-ms", 5000));
    const auto critical = std::chrono::microseconds(f.number("cs-us", 100));
    const long read_percent = f.number("read-percent", 90);
    const bool exclusive = f.number("exclusive", 0) != 0;
    const std::string url = f.text("url"), counter_key = "bench:rw:counter";
    if (processes * tasks > 256) return 2;
    {
        dlock::Client client(url);
        client.command({"DEL", counter_key});
    }
    auto* shared = static_cast<RwShared*>(
        mmap(nullptr, sizeof(RwShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    std::vector<pid_t> children;
    const auto start_at = Clock::now() + 500ms;
    for (int p = 0; p < processes; ++p) {
        pid_t pid = fork();
        if (pid == 0) {
            dlock::Client client(url);
            auto lock = client.rw_lock("bench:rwlock");
            std::vector<std::thread> workers;
            for (int t = 0; t < tasks; ++t) {
                const int w = p * tasks + t;
                workers.emplace_back([&, w] {
                    std::minstd_rand random(static_cast<unsigned>(w + 1));
                    std::uniform_int_distribution<long> percent(0, 99);
                    std::this_thread::sleep_until(start_at);
                    const auto stop_at = start_at + duration;
                    auto record = [](double (*samples)[1024], long* counts, int worker, double waited) {
                        if (counts[worker] < 1024) samples[worker][counts[worker]] = waited;
                        ++counts[worker];
                    };
                    while (Clock::now() < stop_at) {
                        const bool reading = percent(random) < read_percent;
                        const auto asked = Clock::now();
                        if (reading && !exclusive) lock.lock_shared();
                        else lock.lock();
                        const double waited = std::chrono::duration<double, std::micro>(Clock::now() - asked).count();
                        if (reading) {
                            busy_wait(critical);
                        } else {
                            // Deliberately not atomic: lost updates show a writer overlapping another.
                            auto value = client.command({"GET", counter_key});
                            long seen = value.is_nil() ? 0 : std::stol(value.text);
                            busy_wait(critical);
                            client.command({"SET", counter_key, std::to_string(seen + 1)});
                        }
                        if (reading && !exclusive) lock.unlock_shared();
                        else lock.unlock();
                        if (reading) {
                            record(shared->read_wait_us, shared->read_samples, w, waited);
                            ++shared->reads[w];
                        } else {
                            record(shared->write_wait_us, shared->write_samples, w, waited);
                            ++shared->writes[w];
                        }
                    }
                });
            }
            for (auto& w : workers) w.join();
            _exit(0);
        }
        children.push_back(pid);
    }
    for (auto pid : children) waitpid(pid, nullptr, 0);
    long reads = 0, writes = 0;
    Samples read_waits, write_waits;
    for (int w = 0; w < processes * tasks; ++w) {
        reads += shared->reads[w];
        writes += shared->writes[w];
        for (long i = 0; i < std::min(shared->read_samples[w], 1024L); ++i)
            read_waits.us.push_back(shared->read_wait_us[w][i]);
        for (long i = 0; i < std::min(shared->write_samples[w], 1024L); ++i)
            write_waits.us.push_back(shared->write_wait_us[w][i]);
    }
    dlock::Client client(url);
    auto counter = client.command({"GET", counter_key});
    const long counted = counter.is_nil() ? 0 : std::stol(counter.text);
    const double seconds = std::chrono::duration<double>(duration).count();
    std::printf("{\"acquisitions\": %ld, \"acq_per_s\": %.1f, \"reads\": %ld, \"writes\": %ld, "
                "\"read_wait_p50_us\": %.1f, \"read_wait_p99_us\": %.1f, \"write_wait_p50_us\": %.1f, "
                "\"write_wait_p99_us\": %.1f, \"write_wait_max_us\": %.1f, \"counter_exact\": %s}\n",
                reads + writes, static_cast<double>(reads + writes) / seconds, reads, writes,
                read_waits.us.empty() ? 0.0 : read_waits.percentile(50),
                read_waits.us.empty() ? 0.0 : read_waits.percentile(99),
                write_waits.us.empty() ? 0.0 : write_waits.percentile(50),
                write_waits.us.empty() ? 0.0 : write_waits.percentile(99),
                write_waits.us.empty() ? 0.0 : write_waits.max(), counted == writes ? "true" : "false");
    munmap(shared, sizeof(RwShared));
    return 0;
}

template <typename L>
int many(const Flags& f) {
    const int tasks = static_cast<int>(f.number("tasks", 64));
    const long names = f.number("names", 10'000);
    const auto duration = std::chrono::milliseconds(f.number("duration-ms", 5000));
    dlock::Client client(f.text("url"));
    client.wait_connected();
    std::vector<L> locks;
    locks.reserve(static_cast<std::size_t>(names));
    for (long i = 0; i < names; ++i) locks.emplace_back(client, "bench:many:" + std::to_string(i));
    const auto server_before = server_usage(client);
    const auto [done, spent] = over_many_names(tasks, names, duration, [&](int, std::size_t name) {
        locks[name].lock();
        locks[name].unlock();
    });
    const auto server = server_cost_json(server_before, server_usage(client), done);
    std::printf("{\"ops\": %ld, \"ops_per_s\": %.1f, %s, %s}\n", done,
                static_cast<double>(done) / std::chrono::duration<double>(duration).count(),
                cost_json(spent, done).c_str(), server.c_str());
    return 0;
}

template <typename L>
int watchdog(const Flags& f) {
    const long n = f.number("locks", 10'000);
    const auto lease = std::chrono::milliseconds(f.number("lease-ms", 3000));
    const auto window = std::chrono::milliseconds(f.number("duration-ms", 10'000));
    dlock::Client client(f.text("url"));
    client.wait_connected();
    std::vector<L> locks;
    locks.reserve(static_cast<std::size_t>(n));
    auto heap_before = mallinfo2().uordblks;
    for (long i = 0; i < n; ++i) locks.push_back(L(client, "bench:held:" + std::to_string(i), {.lease = lease}));
    for (auto& l : locks) l.lock();
    std::this_thread::sleep_for(lease / 2);  // settle into the renewal rhythm
    long calls_before = script_calls(client);
    double cpu_before = usage_of(false).cpu_seconds;
    auto t0 = Clock::now();
    std::this_thread::sleep_for(window);
    double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    double cpu = usage_of(false).cpu_seconds - cpu_before;
    long renewals = script_calls(client) - calls_before;
    auto heap_after = mallinfo2().uordblks;
    long held = 0;
    for (auto& l : locks) held += l.is_held();
    for (auto& l : locks) l.unlock();
    double per_second = static_cast<double>(renewals) / elapsed;
    double minimal = static_cast<double>(n) / std::chrono::duration<double>(lease / 3).count();
    std::printf("{\"locks\": %ld, \"still_held\": %ld, \"renewals_per_s\": %.1f, \"minimal_renewals_per_s\": %.1f, "
                "\"renewals_over_minimal\": %.3f, \"client_cpu_percent\": %.3f, \"bytes_per_lock\": %.1f}\n",
                n, held, per_second, minimal, per_second / minimal, 100.0 * cpu / elapsed,
                static_cast<double>(heap_after - heap_before) / static_cast<double>(n));
    return 0;
}

// lock+unlock latencies of two locks, measured in turns so that both see
// the same machine.
template <typename A, typename B>
void interleaved_latencies(long n, A& a, Samples& a_lat, B& b, Samples& b_lat) {
    auto measure = [](auto& lock, Samples* samples) {
        auto t0 = Clock::now();
        lock.lock();
        lock.unlock();
        if (samples) samples->add(Clock::now() - t0);
    };
    for (long i = 0; i < n / 10 + 10; ++i) {  // warm-up
        measure(a, nullptr);
        measure(b, nullptr);
    }
    for (long i = 0; i < n; ++i) {
        measure(a, &a_lat);
        measure(b, &b_lat);
    }
}

int redlock(const Flags& f) {
    const long n = f.number("n", 5'000);
    dlock::Client client(f.text("url"));
    auto single = client.lock("bench:redlock1");
    dlock::Masters masters(split(f.text("urls")));
    dlock::Redlock five(masters, "bench:redlock5");
    Samples single_lat, five_lat;
    interleaved_latencies(n, single, single_lat, five, five_lat);
    const auto single_cost = cost_of_cycles(n, single), five_cost = cost_of_cycles(n, five);
    std::printf("{\"single_p50_us\": %.2f, \"single_p99_us\": %.2f, \"five_p50_us\": %.2f, \"five_p99_us\": %.2f, "
                "\"five_over_single_p50\": %.3f, %s, %s, \"five_over_single_cpu\": %.3f}\n",
                single_lat.percentile(50), single_lat.percentile(99), five_lat.percentile(50),
                five_lat.percentile(99), five_lat.percentile(50) / single_lat.percentile(50),
                cost_json(single_cost, n, "single_").c_str(), cost_json(five_cost, n, "five_").c_str(),
                five_cost.cpu_seconds / std::max(single_cost.cpu_seconds, 1e-9));
    return 0;
}

int multi(const Flags& f) {
    const long n = f.number("n", 5'000);
    dlock::Client client(f.text("url"));
    auto single = client.lock("bench:multi1");
    dlock::MultiLock three(client, {"bench:multi3:c", "bench:multi3:a", "bench:multi3:b"});
    Samples single_lat, three_lat;
    interleaved_latencies(n, single, single_lat, three, three_lat);
    std::printf("{\"single_p50_us\": %.2f, \"single_p99_us\": %.2f, \"three_p50_us\": %.2f, \"three_p99_us\": %.2f, "
                "\"three_ops_per_s\": %.1f, \"three_over_single_p50\": %.3f}\n",
                single_lat.percentile(50), single_lat.percentile(99), three_lat.percentile(50),
                three_lat.percentile(99), 1e6 / three_lat.mean(), three_lat.percentile(50) / single_lat.percentile(50));
    return 0;
}

// The INFO of every server, summed.
ServerUsage servers_usage(std::vector<std::unique_ptr<dlock::Client>>& servers) {
    ServerUsage sum;
    for (auto& server : servers) sum += server_usage(*server);
    return sum;
}

// The floor's scenario (bench/floor_runner.cpp takes the same flags): n
// lock+unlock on one thread, with nothing else in the loop.
//   --fresh 1: a Lock made for each cycle, its name one of --names in turn
//   --urls A,B,...: a Redlock over those masters instead of one server
int cycles(const Flags& f) {
    const long n = f.number("n", 20'000), names = f.number("names", 10'000);
    const auto urls = split(f.text("urls"));
    std::vector<std::unique_ptr<dlock::Client>> servers;  // INFO alone goes through these
    for (const auto& url : urls.empty() ? std::vector<std::string>{f.text("url")} : urls)
        servers.push_back(std::make_unique<dlock::Client>(url));
    if (!urls.empty()) {
        dlock::Masters masters(urls);
        dlock::Redlock lock(masters, "bench:cycles");
        return print_cycles(n, [&] { return servers_usage(servers); }, [&](long) {
            lock.lock();
            lock.unlock();
        });
    }
    dlock::Client client(f.text("url"));
    if (f.number("fresh", 0) != 0)
        return print_cycles(n, [&] { return servers_usage(servers); }, [&](long i) {
            dlock::Lock lock(client, "bench:cycles:" + std::to_string(i % names));
            lock.lock();
            lock.unlock();
        });
    dlock::Lock lock(client, "bench:cycles");
    return print_cycles(n, [&] { return servers_usage(servers); }, [&](long) {
        lock.lock();
        lock.unlock();
    });
}

// The scenarios over one exclusive lock, written once for any type L with
// Lock's API: made as L(client, name) or L(client, name, {.lease = ...}),
// moved into a vector, driven by lock() and unlock() alone. nullopt: the
// scenario is not one of them.
template <typename L>
std::optional<int> exclusive_scenario(const Flags& f, const std::string& scenario) {
    if (scenario == "uncontended") return uncontended<L>(f);
    if (scenario == "contended") return contended<L>(f);
    if (scenario == "many") return many<L>(f);
    if (scenario == "watchdog") return watchdog<L>(f);
    return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
    Flags f{argc, argv};
    const auto scenario = f.text("scenario"), kind = f.text("kind", "lock");
    try {
        // --kind: another exclusive lock type with Lock's API is one more line
        // here (and a label for it in compare.py's DLOCK_KINDS).
        std::optional<int> result;
        if (kind == "lock") result = exclusive_scenario<dlock::Lock>(f, scenario);
        else if (kind == "fair") result = exclusive_scenario<dlock::FairLock>(f, scenario);
        else {
            std::fprintf(stderr, "dlock_runner: unknown --kind '%s'\n", kind.c_str());
            return 2;
        }
        if (result) return *result;
        if (scenario == "redlock") return redlock(f);
        if (scenario == "cycles") return cycles(f);
        if (scenario == "multi") return multi(f);
        if (scenario == "multi_contended") return multi_contended(f);
        if (scenario == "rwlock") return rwlock(f);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dlock_runner: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "dlock_runner: unknown --scenario '%s'\n", scenario.c_str());
    return 2;
}
