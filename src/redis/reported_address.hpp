// Reading a host and a port that a server reported (a sentinel naming the
// master, a cluster's slot map or redirection): checked before anything
// connects to them or prints them.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dlock::detail {

inline std::optional<std::uint16_t> reported_port(std::string_view text) {
    unsigned value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535) return std::nullopt;
    return static_cast<std::uint16_t>(value);
}

// An address or a host name: nothing that could smuggle other bytes into an
// error message or a connect call.
inline bool plausible_host(std::string_view host) {
    if (host.empty() || host.size() > 255) return false;
    for (char c : host) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                  c == '.' || c == '_' || c == ':';
        if (!ok) return false;
    }
    return true;
}

}  // namespace dlock::detail
