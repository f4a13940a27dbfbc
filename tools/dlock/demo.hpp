// dlock demo: the bonus-pool race.
#pragma once

#include <string>

#include "cli.hpp"

namespace dlock::cli {

struct DemoOptions {
    int processes = 4;
    int threads = 25;
    int bonuses = 10;
    std::string url;  // empty: start a private redis-server
    bool json = false;
    bool metrics = false;  // print the locked race's metrics (Prometheus text)
};

// Exit 0 when the locked race awarded exactly min(bonuses, clients) with
// strictly increasing fencing tokens.
int run_demo(DemoOptions options);

}  // namespace dlock::cli
