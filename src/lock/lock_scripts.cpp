#include "lock_scripts.hpp"

#include "dlock_scripts.hpp"
#include "dlock_semaphore_scripts.hpp"
#include "semaphore_scripts.hpp"
#include "redis/reply_limits.hpp"

namespace dlock::detail {
namespace {

// The scripts a hold runs answer with a few numbers: a reply to one of them
// that announces more is refused from its header, so a hostile server cannot
// make a lock call build a large reply. The inspect and force-release
// scripts list waiters, readers and permits (three elements per hold broken):
// they keep the client's limits only.
constexpr std::string_view small_reply_scripts[] = {
    "acquire",          "release",           "renew",           "raise_fence",
    "hand_off",         "line_refresh",      "line_leave",      "confirm_grant",     "semaphore_acquire",
    "semaphore_release", "semaphore_renew",  "semaphore_set_limit", "rw_write_acquire", "rw_write_withdraw",
    "rw_read_acquire",  "rw_read_release",   "rw_read_renew"};
constexpr std::size_t small_reply_elements = 16;
constexpr std::size_t small_reply_bytes = 64 * 1024;

Script registered(Script script, std::string_view name, std::string_view what) {
    for (auto small : small_reply_scripts)
        if (small == name) limit_script_replies(script, {small_reply_elements, small_reply_bytes, what});
    return script;
}

}  // namespace

#define DLOCK_SCRIPT(name)                                                                          \
    const Script& name##_script() {                                                                 \
        static const Script script =                                                                \
            registered(Script(scripts::name##_text, scripts::name##_sha1, scripts::name##_cluster_text,   \
                              scripts::name##_cluster_sha1),                                                  \
                       #name, "lock script '" #name "'");                                                     \
        return script;                                                                              \
    }

DLOCK_SCRIPT(acquire)
DLOCK_SCRIPT(release)
DLOCK_SCRIPT(renew)
DLOCK_SCRIPT(force_release)
DLOCK_SCRIPT(inspect)
DLOCK_SCRIPT(mark_waited)
DLOCK_SCRIPT(raise_fence)
DLOCK_SCRIPT(hand_off)
DLOCK_SCRIPT(line_refresh)
DLOCK_SCRIPT(line_leave)
DLOCK_SCRIPT(confirm_grant)
DLOCK_SCRIPT(semaphore_acquire)
DLOCK_SCRIPT(semaphore_release)
DLOCK_SCRIPT(semaphore_renew)
DLOCK_SCRIPT(semaphore_set_limit)
DLOCK_SCRIPT(semaphore_inspect)
DLOCK_SCRIPT(semaphore_force_release)
DLOCK_SCRIPT(rw_write_acquire)
DLOCK_SCRIPT(rw_write_withdraw)
DLOCK_SCRIPT(rw_read_acquire)
DLOCK_SCRIPT(rw_read_release)
DLOCK_SCRIPT(rw_read_renew)

#undef DLOCK_SCRIPT

}  // namespace dlock::detail
