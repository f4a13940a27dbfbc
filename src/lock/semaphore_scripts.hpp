// The semaphore's server-side steps (src/scripts/semaphore_*.lua, embedded
// at build time with semaphore_prelude.lua in front).
#pragma once

#include "dlock/script.hpp"

namespace dlock::detail {

const Script& semaphore_acquire_script();
const Script& semaphore_release_script();
const Script& semaphore_renew_script();
const Script& semaphore_set_limit_script();
const Script& semaphore_inspect_script();
const Script& semaphore_force_release_script();

}  // namespace dlock::detail
