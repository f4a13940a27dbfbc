// Shared pieces of dlock's benchmarks: percentiles, running redis-benchmark
// against the same private server, and a tiny JSON writer.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dlock::bench {

using Clock = std::chrono::steady_clock;

// Latency samples in microseconds.
struct Samples {
    std::vector<double> us;
    void add(Clock::duration d) { us.push_back(std::chrono::duration<double, std::micro>(d).count()); }
    double percentile(double q);  // q in [0, 100]
    double max();
    double mean() const;
};

struct RedisBenchmark {
    double requests_per_second = 0;
    double p50_us = 0;
    double p99_us = 0;
};

// redis-benchmark -p port -c clients -n requests -P pipeline --csv <command...>
RedisBenchmark run_redis_benchmark(std::uint16_t port, int clients, long requests, int pipeline,
                                   const std::vector<std::string>& command);

// Flat JSON objects of numbers and strings, nested one level by section.
class Report {
public:
    void set(const std::string& section, const std::string& key, double value);
    void set_text(const std::string& section, const std::string& key, const std::string& value);
    std::string json() const;
    void write(const std::string& path) const;

private:
    std::map<std::string, std::map<std::string, std::string>> sections_;
};

// Value of --name=VALUE or presence of --name in argv.
bool has_flag(int argc, char** argv, const std::string& name);
std::string flag_value(int argc, char** argv, const std::string& name, const std::string& fallback);

std::string machine_description();

// The items of a comma-separated list (--urls A,B,C), empty ones left out.
std::vector<std::string> split(const std::string& list);

// CPU time and context switches so far, of this process or of its waited-for children.
struct Usage {
    double cpu_seconds = 0;
    long context_switches = 0;
};
Usage usage_of(bool children);

}  // namespace dlock::bench
