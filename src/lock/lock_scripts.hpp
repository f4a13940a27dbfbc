// The lock's server-side steps (src/scripts/*.lua, embedded at build time).
#pragma once

#include "dlock/script.hpp"

namespace dlock::detail {

const Script& acquire_script();
const Script& release_script();
const Script& renew_script();
const Script& force_release_script();
const Script& inspect_script();
const Script& mark_waited_script();
const Script& raise_fence_script();
const Script& hand_off_script();
// The line of queued locks (prelude.lua, "The line").
const Script& line_refresh_script();
const Script& line_leave_script();
const Script& confirm_grant_script();
// The read-write lock's own (its write side also uses release and renew).
const Script& rw_write_acquire_script();
const Script& rw_write_withdraw_script();
const Script& rw_read_acquire_script();
const Script& rw_read_release_script();
const Script& rw_read_renew_script();

}  // namespace dlock::detail
