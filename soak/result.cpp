#include "result.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace dlock::soak {
namespace {

std::string quoted(const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) < 0x20) {
            out += ' ';
            continue;
        }
        out += c;
    }
    return out + "\"";
}

std::string trend_json(const Trend& t) {
    std::ostringstream out;
    out << "{\"first\": " << t.first << ", \"last\": " << t.last << ", \"mean\": " << t.mean
        << ", \"slope_per_minute\": " << t.slope_per_minute << ", \"growth\": " << t.growth
        << ", \"rising\": " << (t.rising ? "true" : "false") << "}";
    return out.str();
}

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

std::string fixed(double value, int digits = 1) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
    return buffer;
}

}  // namespace

void write_json(const Result& r, const std::string& path) {
    std::ofstream out(path);
    out << "{\n  \"passed\": " << (r.failures.empty() ? "true" : "false") << ",\n"
        << "  \"minutes\": " << r.minutes << ", \"period_s\": " << r.period_s << ",\n"
        << "  \"held_locks\": " << r.held_locks << ", \"held_lease_ms\": " << r.held_lease_ms << ",\n"
        << "  \"cycler_threads\": " << r.cycler_threads << ", \"cycler_names\": " << r.cycler_names
        << ", \"cycler_lease_ms\": " << r.cycler_lease_ms << ",\n"
        << "  \"cycles\": " << r.cycles.cycles << ", \"cycles_busy\": " << r.cycles.busy
        << ", \"cycle_errors\": " << r.cycles.errors << ",\n"
        << "  \"held_acquisitions\": " << r.pool.acquisitions << ", \"losses_reported\": " << r.pool.losses_reported
        << ", \"audits\": " << r.pool.audits << ", \"holds_checked\": " << r.pool.holds_checked
        << ", \"mismatches\": " << r.pool.mismatches << ", \"removed_behind_back\": " << r.pool.removed << ", \"unreported\": " << r.pool.unreported
        << ", \"removed_notice_ms_vs_validity\": " << r.pool.removed_notice_ms << ", \"audit_errors\": " << r.pool.audit_errors
        << ", \"max_late_ms\": " << r.pool.max_late_ms << ",\n"
        << "  \"keys_after_retention\": " << r.keys_after_retention << ", \"unlock_failures\": " << r.unlock_failures
        << ",\n  \"restarts\": [";
    for (std::size_t i = 0; i < r.restarts.size(); ++i) {
        const auto& x = r.restarts[i];
        out << (i ? ", " : "") << "\n    {\"kind\": " << quoted(x.kind) << ", \"at_minutes\": " << x.at_minutes
            << ", \"downtime_ms\": " << x.downtime_ms << ", \"held_before\": " << x.held_before
            << ", \"losses_reported\": " << x.losses_reported << ", \"last_notice_ms\": " << x.last_notice_ms
            << ", \"all_held_again_ms\": " << x.all_held_again_ms << "}";
    }
    out << "],\n  \"trend\": {\"client_rss\": " << trend_json(r.rss) << ",\n            \"client_heap\": "
        << trend_json(r.heap) << ",\n            \"used_memory\": "
        << trend_json(r.used_memory) << ",\n            \"keys\": " << trend_json(r.keys) << "},\n  \"samples\": [";
    for (std::size_t i = 0; i < r.samples.size(); ++i) {
        const auto& s = r.samples[i];
        out << (i ? ", " : "") << "\n    {\"minutes\": " << s.minutes << ", \"client_rss\": " << s.client_rss
            << ", \"client_heap\": " << s.client_heap << ", \"used_memory\": " << s.used_memory
            << ", \"keys\": " << s.keys << ", \"held\": " << s.held
            << ", \"cycles\": " << s.cycles << ", \"busy\": " << s.busy << "}";
    }
    out << "],\n  \"failures\": [";
    for (std::size_t i = 0; i < r.failures.size(); ++i) out << (i ? ", " : "") << quoted(r.failures[i]);
    out << "]\n}\n";
}

std::string markdown_of(const Result& r) {
    std::ostringstream out;
    out << "| what | figure |\n|---|---|\n"
        << "| run | " << fixed(r.minutes) << " min, sampled every " << fixed(r.period_s) << " s |\n"
        << "| held locks (lease " << r.held_lease_ms << " ms) | " << r.held_locks << ", " << r.pool.acquisitions
        << " acquisitions, " << r.pool.losses_reported << " losses reported |\n"
        << "| cycling (" << r.cycler_threads << " threads, " << r.cycler_names << " names, lease "
        << r.cycler_lease_ms << " ms) | " << r.cycles.cycles << " lock/unlock cycles, " << r.cycles.errors
        << " errors (during restarts) |\n"
        << "| audits of every hold against Redis | " << r.pool.audits << " (" << r.pool.holds_checked
        << " holds compared, " << r.pool.mismatches << " not in Redis) |\n"
        << "| held locks deleted in Redis behind the client's back | " << r.pool.removed << " |\n"
        << "| holds missing in Redis (both rows above) not reported lost in time | " << r.pool.unreported
        << (r.pool.removed_notice_ms > -1e9 ? "; the latest notice came " + fixed(-r.pool.removed_notice_ms, 0) +
                                                  " ms before the validity ended"
                                            : std::string())
        << " |\n"
        << "| longest a hold looked held past its validity | " << fixed(r.pool.max_late_ms, 2) << " ms |\n";
    for (const auto& x : r.restarts)
        out << "| restart that " << x.kind << " (" << fixed(x.downtime_ms, 0) << " ms down) | " << x.held_before
            << " held before, " << x.losses_reported << " losses reported"
            << (x.losses_reported ? " (last " + fixed(x.last_notice_ms, 0) + " ms after the kill)" : "")
            << (x.all_held_again_ms >= 0 ? ", all taken again " + fixed(x.all_held_again_ms, 0) + " ms after the kill"
                                         : "")
            << " |\n";
    out << "| client RSS after warm-up | " << fixed(mib(r.rss.first)) << " → " << fixed(mib(r.rss.last))
        << " MiB (slope " << fixed(mib(r.rss.slope_per_minute), 2) << " MiB/min) |\n"
        << "| client heap in use after warm-up | " << fixed(mib(r.heap.first)) << " → " << fixed(mib(r.heap.last))
        << " MiB (slope " << fixed(mib(r.heap.slope_per_minute), 2) << " MiB/min) |\n"
        << "| server used_memory after warm-up | " << fixed(mib(r.used_memory.first)) << " → "
        << fixed(mib(r.used_memory.last)) << " MiB (slope " << fixed(mib(r.used_memory.slope_per_minute), 2)
        << " MiB/min) |\n"
        << "| keys after warm-up | " << fixed(r.keys.first, 0) << " → " << fixed(r.keys.last, 0) << " (slope "
        << fixed(r.keys.slope_per_minute, 1) << "/min) |\n"
        << "| keys left once released and the retention passed | " << r.keys_after_retention << " |\n"
        << "| verdict | " << (r.failures.empty() ? "passed" : "FAILED") << " |\n";
    return out.str();
}

void write_markdown(const Result& r, const std::string& path) { std::ofstream(path) << markdown_of(r); }

void print_summary(const Result& r) {
    std::printf("\n%s", markdown_of(r).c_str());
    for (const auto& failure : r.failures) std::printf("FAILED: %s\n", failure.c_str());
    std::printf("%s\n", r.failures.empty() ? "soak passed" : "soak FAILED");
}

}  // namespace dlock::soak
