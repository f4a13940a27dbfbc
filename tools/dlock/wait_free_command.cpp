// dlock wait-free: wait for a lock to be free without taking it ("wait for
// that job to finish, then go on").
#include <optional>

#include "cli.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock/redlock.hpp"

namespace dlock::cli {

int run_wait_free(const GlobalOptions& global, const WaitFreeOptions& options) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = options.timeout ? Clock::now() + *options.timeout : Clock::time_point::max();
    Servers servers(global);
    for (auto* server : servers.all) {
        bool free = false;
        try {
            free = wait_until_free(*server, options.key, deadline);
        } catch (const Error& e) {
            if (servers.all.size() == 1) throw;
            complain(about_master(*server, e.what()));  // which of the masters
            return exit_code_for(e.code());
        }
        if (free) continue;
        if (!global.quiet)
            complain(options.key + " is still held after " + std::to_string(options.timeout->count()) + " ms");
        return exit_not_held;
    }
    return exit_ok;
}

}  // namespace dlock::cli
