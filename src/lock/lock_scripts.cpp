#include "lock_scripts.hpp"

#include "dlock_scripts.hpp"
#include "dlock_semaphore_scripts.hpp"
#include "semaphore_scripts.hpp"

namespace dlock::detail {

#define DLOCK_SCRIPT(name)                                                         \
    const Script& name##_script() {                                                \
        static const Script script(scripts::name##_text, scripts::name##_sha1);    \
        return script;                                                             \
    }

DLOCK_SCRIPT(acquire)
DLOCK_SCRIPT(release)
DLOCK_SCRIPT(renew)
DLOCK_SCRIPT(force_release)
DLOCK_SCRIPT(inspect)
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
