// dlock's soak: hours of ordinary use squeezed into minutes, against a
// private redis-server it starts (append-only file, fsync always).
//
//   dlock_soak [--minutes N] [--restart-every M] [--held N] [--threads N] [--names N] [--out DIR]
//
// A thousand locks are held and renewed for the whole run while threads
// cycle locks on many names with short leases (timeline.hpp). At 40 % of
// the run the server is killed and restarted keeping its data, at 70 %
// killed and restarted without it; with --restart-every M (the default for
// runs of 30 minutes or more: 5), every M minutes instead, alternating the
// two kinds, and the client's heap in use and RSS at the end must be
// within 10 % of what they were a restart window after the second restart. Every period (30 s, or a twentieth of a
// shorter run) it samples the client's RSS and heap in use, and the
// server's used_memory and key count. It fails (exit 1, a line per failure)
// when memory or keys trend upward after the warm-up (the first fifth),
// when a loss goes unreported, when a hold or a thread is stuck, or when
// keys outlive the retention. Writes DIR/soak.json and DIR/soak.md
// (default soak/results).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "timeline.hpp"

using namespace std::chrono_literals;
using namespace dlock::soak;

namespace {

struct Options {
    double minutes = 10;
    double restart_every = -1;  // minutes; -1: by the run's length
    int held = 1000;
    int threads = 4;
    int names = 500;
    std::string out = "soak/results";
};

[[noreturn]] void usage(const char* problem) {
    std::fprintf(stderr, "dlock_soak: %s\nusage: dlock_soak [--minutes N] [--restart-every M] [--held N] [--threads N] [--names N] [--out DIR]\n",
                 problem);
    std::exit(64);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (i + 1 >= argc) usage(("missing value after " + flag).c_str());
        const std::string value = argv[++i];
        if (flag == "--minutes") o.minutes = std::atof(value.c_str());
        else if (flag == "--restart-every") o.restart_every = std::atof(value.c_str());
        else if (flag == "--held") o.held = std::atoi(value.c_str());
        else if (flag == "--threads") o.threads = std::atoi(value.c_str());
        else if (flag == "--names") o.names = std::atoi(value.c_str());
        else if (flag == "--out") o.out = value;
        else usage(("unknown option " + flag).c_str());
    }
    if (o.minutes < 0.5 || o.minutes > 24 * 60) usage("--minutes must be 0.5 .. 1440");
    if (o.restart_every < 0) o.restart_every = o.minutes >= 30 ? 5 : 0;
    if (o.restart_every != 0 && (o.restart_every < 0.25 || o.restart_every > o.minutes))
        usage("--restart-every must be 0 (two restarts) or 0.25 .. the run's minutes");
    if (o.held < 1 || o.held > 100000 || o.threads < 1 || o.threads > 64 || o.names < 1) usage("bad counts");
    return o;
}

void judge(Result& result, const Series& series) {
    auto& f = result.failures;
    // The allocator keeps what a burst (a restart) took: RSS may step up
    // once and stay. Heap in use is the sharper signal of a leak.
    result.rss = trend_of(series.rss, 0.2, 8.0 * (1 << 20));
    result.heap = trend_of(series.heap, 0.2, 4.0 * (1 << 20));
    result.used_memory = trend_of(series.used_memory, 0.2, 4.0 * (1 << 20));
    // Keys swing with the cycling rate (each release leaves keys for the
    // retention); a leak of keys would add thousands a minute.
    result.keys = trend_of(series.keys, 0.25, 1000);
    if (result.rss.rising) f.push_back("client RSS trends upward after the warm-up");
    if (result.heap.rising) f.push_back("the client's heap in use trends upward after the warm-up");
    if (result.used_memory.rising) f.push_back("server used_memory trends upward after the warm-up");
    if (result.keys.rising) f.push_back("the key count trends upward after the warm-up");
    for (const auto& r : result.restarts) {
        // Whatever was held when the data went must be reported lost.
        if (r.kind == "loses data" && r.losses_reported < r.held_before)
            f.push_back("restart losing data: " + std::to_string(r.held_before) + " holds, only " +
                        std::to_string(r.losses_reported) + " losses reported");
        // A short outage with the data kept costs no hold: renewals retry.
        if (r.kind == "keeps data" && r.losses_reported > 0 && r.downtime_ms < ms(held_lease / 3))
            f.push_back("restart keeping data (" + std::to_string(static_cast<int>(r.downtime_ms)) + " ms) lost " +
                        std::to_string(r.losses_reported) + " holds");
        if (r.losses_reported > 0 && r.all_held_again_ms < 0)
            f.push_back("after the restart that " + r.kind + " the lost locks were not all taken again within " +
                        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(restart_window).count()) + " s");
    }
    // Restarts every few minutes: what the client holds after many of them
    // is what it held after the second.
    if (result.restarts.size() > 2) {
        const auto& base = result.after_second_restart;
        const auto& last = result.samples.back();
        auto within = [](long now, long then) { return then <= 0 || now <= then + then / 10; };
        if (!result.after_second_restart_seen)
            f.push_back("no sample a restart window after the second restart");
        else if (!within(last.client_heap, base.client_heap) || !within(last.client_rss, base.client_rss))
            f.push_back("after " + std::to_string(result.restarts.size()) + " restarts the client holds heap " +
                        std::to_string(last.client_heap >> 10) + " KiB, RSS " + std::to_string(last.client_rss >> 10) +
                        " KiB: more than 10 % over heap " + std::to_string(base.client_heap >> 10) + " KiB, RSS " +
                        std::to_string(base.client_rss >> 10) + " KiB after the second restart");
    }
    if (result.keys_after_retention != 0)
        f.push_back(std::to_string(result.keys_after_retention) + " keys left in Redis after release and retention");
}

}  // namespace

int main(int argc, char** argv) {
    const auto options = parse(argc, argv);
    const auto total =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::ratio<60>>(options.minutes));
    const Settings settings{total, std::min<Clock::duration>(30s, total / 20), options.held, options.threads,
                            options.names,
                            std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double, std::ratio<60>>(options.restart_every))};
    Result result;
    result.minutes = options.minutes;
    result.period_s = std::chrono::duration<double>(settings.period).count();
    result.held_locks = options.held;
    result.held_lease_ms = static_cast<int>(std::chrono::milliseconds(held_lease).count());
    result.cycler_threads = options.threads;
    result.cycler_names = options.names;
    result.cycler_lease_ms = static_cast<int>(cycle_lease.count());

    dlock::support::RedisServer server({.extra_args = {"--appendonly", "yes", "--appendfsync", "always"}});
    std::printf("dlock soak: %.1f min against %s; %d held locks, %d cycling threads on %d names\n", options.minutes,
                server.uri().c_str(), options.held, options.threads, options.names);
    std::fflush(stdout);
    Series series;
    run_timeline(server, settings, result, series);
    judge(result, series);
    std::filesystem::create_directories(options.out);
    write_json(result, options.out + "/soak.json");
    write_markdown(result, options.out + "/soak.md");
    print_summary(result);
    std::printf("wrote %s/soak.json and %s/soak.md\n", options.out.c_str(), options.out.c_str());
    return result.failures.empty() ? 0 : 1;
}
