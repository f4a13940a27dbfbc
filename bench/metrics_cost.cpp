// What recording metrics costs one uncontended lock+unlock, on the CPU,
// without the network: the same calls the lock makes (an acquisition's
// meter, a hold from grant to release), timed in a tight loop with the
// client's metrics on and off. The difference is the metrics' cost per
// lock+unlock; bench/metrics_ab.py shows it against the whole operation.
//
// Usage: dlock_metrics_cost [--n N]   (default 5,000,000)
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <memory>
#include <stop_token>

#include "bench_support.hpp"
#include "hold/hold.hpp"
#include "metrics/acquisition_meter.hpp"

namespace {

double thread_cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

// ns of thread CPU per cycle: an acquisition metered, a hold made from its
// grant and released.
double ns_per_cycle(const std::shared_ptr<dlock::Metrics>& metrics, long n) {
    using namespace dlock::detail;
    auto tag = metrics ? MetricsTag::of(metrics, LockKind::lock, "bench") : MetricsTag{};
    auto identity = std::make_shared<const LockIdentity>("bench", dlock::LockOptions{}, tag);
    const std::stop_token no_stop;
    const auto start = thread_cpu_seconds();
    for (long i = 0; i < n; ++i) {
        {
            AcquisitionMeter meter(identity->metrics, false, no_stop);
            meter.finish(true, {});
        }
        Hold hold(identity, "owner", Grant{1, 1, LockClock::now(), LockClock::now()});
        hold.begin_final_release();
        hold.release_answered(0, LockClock::now());
    }
    return (thread_cpu_seconds() - start) * 1e9 / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
    const long n = std::stol(dlock::bench::flag_value(argc, argv, "--n", "5000000"));
    auto on = std::make_shared<dlock::Metrics>();
    auto off = std::make_shared<dlock::Metrics>(dlock::MetricsOptions{.enabled = false});
    // Alternated, three times each; the medians.
    double on_ns[3], off_ns[3];
    for (int round = 0; round < 3; ++round) {
        on_ns[round] = ns_per_cycle(on, n);
        off_ns[round] = ns_per_cycle(off, n);
    }
    std::sort(on_ns, on_ns + 3);
    std::sort(off_ns, off_ns + 3);
    std::printf("{\"metrics_on_ns_per_cycle\": %.1f, \"metrics_off_ns_per_cycle\": %.1f, "
                "\"metrics_cost_ns_per_lock_unlock\": %.1f}\n",
                on_ns[1], off_ns[1], on_ns[1] - off_ns[1]);
    return 0;
}
