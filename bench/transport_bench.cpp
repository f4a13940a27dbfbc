// Transport benchmark: dlock's Client against redis-benchmark on the same
// private server, in one run.
//
//   single thread: PING and EVALSHA round trip p50/p99  vs  redis-benchmark -c 1
//   64 threads:    blocking PING throughput             vs  redis-benchmark -c 64, and -c 64 -P 16 (ceiling)
//
// Usage: dlock_transport_bench [--quick] [--json FILE]
#include <atomic>
#include <cstdio>
#include <iostream>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "dlock/client.hpp"
#include "redis_server.hpp"

using namespace dlock::bench;

namespace {

Samples measure(long n, const std::function<void()>& op) {
    Samples s;
    s.us.reserve(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) {
        auto start = Clock::now();
        op();
        s.add(Clock::now() - start);
    }
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = has_flag(argc, argv, "--quick");
    const std::string json_path = flag_value(argc, argv, "--json", "");
    const long latency_n = quick ? 3'000 : 50'000;
    const int threads = 64;
    const long per_thread = quick ? 300 : 5'000;

    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    const dlock::Script script("return ARGV[1]");
    std::string_view ping[] = {"PING"};
    std::vector<std::string_view> no_keys, script_args{"x"};

    auto do_ping = [&] { client.command(ping); };
    auto do_eval = [&] { client.eval(script, no_keys, script_args); };
    measure(latency_n / 10, do_ping);  // warm-up, loads nothing
    measure(latency_n / 10, do_eval);  // warm-up, loads the script
    auto ping_lat = measure(latency_n, do_ping);
    auto eval_lat = measure(latency_n, do_eval);
    auto rb_ping = run_redis_benchmark(server.port(), 1, latency_n, 1, {"PING"});
    auto rb_eval = run_redis_benchmark(server.port(), 1, latency_n, 1, {"EVALSHA", script.sha1(), "0", "x"});

    std::atomic<bool> go{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
        workers.emplace_back([&] {
            while (!go.load()) std::this_thread::yield();
            for (long i = 0; i < per_thread; ++i) client.command(ping);
        });
    auto start = Clock::now();
    go = true;
    for (auto& w : workers) w.join();
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    double dlock_64 = static_cast<double>(threads * per_thread) / seconds;
    auto rb_64 = run_redis_benchmark(server.port(), 64, threads * per_thread, 1, {"PING"});
    auto rb_64_p16 = run_redis_benchmark(server.port(), 64, threads * per_thread * 4, 16, {"PING"});

    Report report;
    report.set_text("meta", "machine", machine_description());
    report.set_text("meta", "mode", quick ? "quick" : "full");
    report.set("single_thread", "dlock_ping_p50_us", ping_lat.percentile(50));
    report.set("single_thread", "dlock_ping_p99_us", ping_lat.percentile(99));
    report.set("single_thread", "dlock_evalsha_p50_us", eval_lat.percentile(50));
    report.set("single_thread", "dlock_evalsha_p99_us", eval_lat.percentile(99));
    report.set("single_thread", "redis_benchmark_ping_p50_us", rb_ping.p50_us);
    report.set("single_thread", "redis_benchmark_ping_p99_us", rb_ping.p99_us);
    report.set("single_thread", "redis_benchmark_evalsha_p50_us", rb_eval.p50_us);
    report.set("single_thread", "redis_benchmark_evalsha_p99_us", rb_eval.p99_us);
    report.set("single_thread", "ping_p50_ratio", ping_lat.percentile(50) / rb_ping.p50_us);
    report.set("single_thread", "evalsha_p50_ratio", eval_lat.percentile(50) / rb_eval.p50_us);
    report.set("threads_64", "dlock_ping_ops_per_s", dlock_64);
    report.set("threads_64", "redis_benchmark_c64_ops_per_s", rb_64.requests_per_second);
    report.set("threads_64", "redis_benchmark_c64_p16_ops_per_s", rb_64_p16.requests_per_second);
    report.set("threads_64", "ratio_vs_c64", dlock_64 / rb_64.requests_per_second);

    std::printf("transport benchmark (%s)\n", quick ? "quick" : "full");
    std::printf("  single thread        p50 us   p99 us    | redis-benchmark -c 1 p50  p99   | p50 ratio\n");
    std::printf("  PING              %8.1f %8.1f    | %24.1f %5.1f | %5.2f\n", ping_lat.percentile(50),
                ping_lat.percentile(99), rb_ping.p50_us, rb_ping.p99_us, ping_lat.percentile(50) / rb_ping.p50_us);
    std::printf("  EVALSHA           %8.1f %8.1f    | %24.1f %5.1f | %5.2f\n", eval_lat.percentile(50),
                eval_lat.percentile(99), rb_eval.p50_us, rb_eval.p99_us, eval_lat.percentile(50) / rb_eval.p50_us);
    std::printf("  64 threads PING      dlock %.0f/s | redis-benchmark -c 64 %.0f/s | -c 64 -P 16 %.0f/s | ratio %.2f\n",
                dlock_64, rb_64.requests_per_second, rb_64_p16.requests_per_second,
                dlock_64 / rb_64.requests_per_second);
    if (!json_path.empty()) report.write(json_path);
    return 0;
}
