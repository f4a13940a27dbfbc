// Redis Cluster's key -> slot mapping, and which key of a formatted command
// decides where it goes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace dlock::detail {

inline constexpr std::uint16_t cluster_slots = 16384;

// CRC16 (XMODEM) of the key's hash tag — the bytes between the first '{'
// and the first '}' after it, when there are any — or of the whole key.
std::uint16_t key_slot(std::string_view key) noexcept;

// The key a formatted (RESP) command is routed by: for EVAL, EVALSHA,
// EVAL_RO and EVALSHA_RO the first key (none when numkeys is 0), otherwise
// its first argument. Commands without one (PING, TIME, SCAN) may go to any
// node; a guess that is wrong costs a MOVED. nullopt when there is none or
// the bytes are not a command this client formatted.
std::optional<std::string_view> routing_key(std::string_view resp) noexcept;

}  // namespace dlock::detail
