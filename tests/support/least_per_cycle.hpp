// A count per call of a cycle (allocations, system calls), as the least of a
// few rounds after a warm-up: the steady state, not a loaded machine's noise
// (a reply split over two reads, the I/O thread's work overlapping the
// caller's). `counter` reads the running total; `cycle` is called with the
// number of calls so far.
#pragma once

#include <cstdint>

namespace dlock::support {

struct RoundsOf {
    int warm_up = 300;
    int rounds = 5;
    int cycles = 400;  // per round
};

template <typename Counter, typename Cycle>
double least_per_cycle(Counter&& counter, Cycle&& cycle, RoundsOf shape = {}) {
    int calls = 0;
    for (; calls < shape.warm_up; ++calls) cycle(calls);
    double least = 0;
    for (int round = 0; round < shape.rounds; ++round) {
        const std::uint64_t before = counter();
        for (int i = 0; i < shape.cycles; ++i) cycle(calls++);
        const double per_cycle = static_cast<double>(counter() - before) / shape.cycles;
        if (round == 0 || per_cycle < least) least = per_cycle;
    }
    return least;
}

}  // namespace dlock::support
