// Redlock over five independent masters next to a lock on a single master,
// measured in one run, interleaved so both see the same machine.
//
// Usage: dlock_redlock_bench [--quick] [--json FILE]
#include <cstdio>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "dlock/client.hpp"
#include "dlock/redlock.hpp"
#include "redis_server.hpp"

using namespace dlock::bench;

namespace {

// used_cpu_sys + used_cpu_user from INFO cpu.
double server_cpu_seconds(const dlock::support::RedisServer& server) {
    std::istringstream info(server.cli({"INFO", "cpu"}));
    double total = 0;
    for (std::string line; std::getline(info, line);) {
        for (const char* field : {"used_cpu_sys:", "used_cpu_user:"})
            if (line.rfind(field, 0) == 0) total += std::stod(line.substr(std::string(field).size()));
    }
    return total;
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = has_flag(argc, argv, "--quick");
    const std::string json_path = flag_value(argc, argv, "--json", "");
    const long n = quick ? 1'000 : 10'000;
    std::vector<std::unique_ptr<dlock::support::RedisServer>> servers;
    std::vector<std::string> five, three;
    for (int i = 0; i < 5; ++i) {
        servers.push_back(std::make_unique<dlock::support::RedisServer>());
        five.push_back(servers.back()->uri());
        if (i < 3) three.push_back(servers.back()->uri());
    }
    dlock::support::RedisServer single_server;
    Report report;
    report.set_text("meta", "machine", machine_description());
    report.set_text("meta", "mode", quick ? "quick" : "full");
    std::printf("redlock benchmark (%s)\n", quick ? "quick" : "full");

    dlock::Client client(single_server.uri());
    auto single = client.lock("bench");
    dlock::Masters masters5(five);
    dlock::Masters masters3(three);
    dlock::Redlock redlock5(masters5, "bench5");
    dlock::Redlock redlock3(masters3, "bench3");
    Samples single_lat, five_lat, three_lat;
    auto measure = [](auto& lock, Samples* samples) {
        auto t0 = Clock::now();
        lock.lock();
        lock.unlock();
        if (samples) samples->add(Clock::now() - t0);
    };
    for (long i = 0; i < n / 10; ++i) {  // warm-up: connections, scripts
        measure(single, nullptr);
        measure(redlock5, nullptr);
        measure(redlock3, nullptr);
    }
    for (long i = 0; i < n; ++i) {
        measure(single, &single_lat);
        measure(redlock5, &five_lat);
        measure(redlock3, &three_lat);
    }
    // Where the time goes on a machine with fewer cores than processes: CPU
    // per operation, client and servers, each kind measured on its own.
    auto cpu_per_op = [&](auto& lock, std::vector<const dlock::support::RedisServer*> used) {
        double client0 = process_cpu_seconds(), servers0 = 0;
        for (auto* s : used) servers0 += server_cpu_seconds(*s);
        const long ops = n / 2;
        for (long i = 0; i < ops; ++i) measure(lock, nullptr);
        double servers1 = 0;
        for (auto* s : used) servers1 += server_cpu_seconds(*s);
        return std::make_pair((process_cpu_seconds() - client0) * 1e6 / ops, (servers1 - servers0) * 1e6 / ops);
    };
    std::vector<const dlock::support::RedisServer*> five_servers;
    for (auto& s : servers) five_servers.push_back(s.get());
    auto [single_client_cpu, single_server_cpu] = cpu_per_op(single, {&single_server});
    auto [five_client_cpu, five_server_cpu] = cpu_per_op(redlock5, five_servers);
    report.set("redlock", "single_master_client_cpu_us_per_op", single_client_cpu);
    report.set("redlock", "single_master_server_cpu_us_per_op", single_server_cpu);
    report.set("redlock", "five_masters_client_cpu_us_per_op", five_client_cpu);
    report.set("redlock", "five_masters_server_cpu_us_per_op", five_server_cpu);
    report.set("redlock", "cores", static_cast<double>(std::thread::hardware_concurrency()));
    std::printf("  CPU per lock+unlock (client + servers): single master %.0f + %.0f us | Redlock 5 masters %.0f + %.0f us "
                "on %u cores\n",
                single_client_cpu, single_server_cpu, five_client_cpu, five_server_cpu,
                std::thread::hardware_concurrency());

    const double ratio = five_lat.percentile(50) / single_lat.percentile(50);
    report.set("redlock", "single_master_p50_us", single_lat.percentile(50));
    report.set("redlock", "single_master_p99_us", single_lat.percentile(99));
    report.set("redlock", "three_masters_p50_us", three_lat.percentile(50));
    report.set("redlock", "three_masters_p99_us", three_lat.percentile(99));
    report.set("redlock", "five_masters_p50_us", five_lat.percentile(50));
    report.set("redlock", "five_masters_p99_us", five_lat.percentile(99));
    report.set("redlock", "five_masters_ops_per_s", 1e6 / five_lat.mean());
    report.set("redlock", "redlock5_p50_over_single_p50", ratio);
    std::printf("  lock+unlock p50/p99: single master %.1f/%.1f us | Redlock 3 masters %.1f/%.1f us | "
                "Redlock 5 masters %.1f/%.1f us | 5 masters over single p50 %.2f\n",
                single_lat.percentile(50), single_lat.percentile(99), three_lat.percentile(50),
                three_lat.percentile(99), five_lat.percentile(50), five_lat.percentile(99), ratio);
    if (!json_path.empty()) report.write(json_path);
}
