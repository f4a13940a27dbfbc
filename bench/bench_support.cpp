#include "bench_support.hpp"

#include <sys/resource.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dlock::bench {

std::vector<std::string> split(const std::string& list) {
    std::vector<std::string> out;
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

double Samples::percentile(double q) {
    if (us.empty()) return 0;
    std::sort(us.begin(), us.end());
    auto index = static_cast<std::size_t>(q / 100.0 * static_cast<double>(us.size() - 1) + 0.5);
    return us[std::min(index, us.size() - 1)];
}

double Samples::max() { return us.empty() ? 0 : *std::max_element(us.begin(), us.end()); }

double Samples::mean() const {
    return us.empty() ? 0 : std::accumulate(us.begin(), us.end(), 0.0) / static_cast<double>(us.size());
}

namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
    std::vector<std::string> fields;
    std::string field;
    bool quoted = false;
    for (char c : line) {
        if (c == '"') quoted = !quoted;
        else if (c == ',' && !quoted) {
            fields.push_back(field);
            field.clear();
        } else {
            field.push_back(c);
        }
    }
    fields.push_back(field);
    return fields;
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'') out += "'\\''";
        else out.push_back(c);
    }
    return out + "'";
}

}  // namespace

RedisBenchmark run_redis_benchmark(std::uint16_t port, int clients, long requests, int pipeline,
                                   const std::vector<std::string>& command) {
    std::string cmd = "redis-benchmark -h 127.0.0.1 -p " + std::to_string(port) + " -c " + std::to_string(clients) +
                      " -n " + std::to_string(requests) + " -P " + std::to_string(pipeline) + " --csv";
    for (const auto& c : command) cmd += " " + shell_quote(c);
    FILE* pipe = popen((cmd + " 2>/dev/null").c_str(), "r");
    if (!pipe) throw std::runtime_error("cannot run redis-benchmark");
    std::string out;
    char buffer[4096];
    while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    pclose(pipe);
    std::istringstream lines(out);
    std::string header, values;
    std::getline(lines, header);
    std::getline(lines, values);
    auto names = split_csv_line(header);
    auto fields = split_csv_line(values);
    RedisBenchmark result;
    for (std::size_t i = 0; i < names.size() && i < fields.size(); ++i) {
        if (names[i] == "rps") result.requests_per_second = std::stod(fields[i]);
        if (names[i] == "p50_latency_ms") result.p50_us = std::stod(fields[i]) * 1000;
        if (names[i] == "p99_latency_ms") result.p99_us = std::stod(fields[i]) * 1000;
    }
    if (result.requests_per_second == 0) throw std::runtime_error("unexpected redis-benchmark output: " + out);
    return result;
}

void Report::set(const std::string& section, const std::string& key, double value) {
    std::ostringstream s;
    s.precision(6);
    s << value;
    sections_[section][key] = s.str();
}

void Report::set_text(const std::string& section, const std::string& key, const std::string& value) {
    std::string escaped = "\"";
    for (char c : value) {
        if (c == '"' || c == '\\') escaped.push_back('\\');
        if (c == '\n') {
            escaped += "\\n";
            continue;
        }
        escaped.push_back(c);
    }
    sections_[section][key] = escaped + "\"";
}

std::string Report::json() const {
    std::string out = "{\n";
    bool first_section = true;
    for (const auto& [section, values] : sections_) {
        if (!first_section) out += ",\n";
        first_section = false;
        out += "  \"" + section + "\": {";
        bool first = true;
        for (const auto& [key, value] : values) {
            out += first ? "\n" : ",\n";
            first = false;
            out += "    \"" + key + "\": " + value;
        }
        out += "\n  }";
    }
    return out + "\n}\n";
}

void Report::write(const std::string& path) const {
    std::ofstream(path) << json();
}

bool has_flag(int argc, char** argv, const std::string& name) {
    for (int i = 1; i < argc; ++i)
        if (argv[i] == name) return true;
    return false;
}

std::string flag_value(int argc, char** argv, const std::string& name, const std::string& fallback) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind(name + "=", 0) == 0) return a.substr(name.size() + 1);
        if (a == name && i + 1 < argc) return argv[i + 1];
    }
    return fallback;
}

std::string machine_description() {
    utsname u{};
    uname(&u);
    return std::string(u.sysname) + " " + u.release + " " + u.machine + ", " +
           std::to_string(std::thread::hardware_concurrency()) + " cores";
}

Usage usage_of(bool children) {
    rusage u{};
    getrusage(children ? RUSAGE_CHILDREN : RUSAGE_SELF, &u);
    return {static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6,
            u.ru_nvcsw + u.ru_nivcsw};
}

}  // namespace dlock::bench
