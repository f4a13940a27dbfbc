// The lock's server-side steps (src/scripts/*.lua, embedded at build time).
#pragma once

#include "dlock/script.hpp"

namespace dlock::detail {

const Script& acquire_script();
const Script& release_script();
const Script& renew_script();
const Script& force_release_script();
const Script& inspect_script();
const Script& raise_fence_script();
const Script& hand_off_script();

}  // namespace dlock::detail
