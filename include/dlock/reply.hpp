// dlock/reply.hpp — one RESP2 reply as a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock {

struct Reply {
    enum class Kind : std::uint8_t { nil, status, error, integer, string, array };

    Kind kind = Kind::nil;
    long long integer = 0;         // Kind::integer
    std::string text;              // Kind::status, Kind::error, Kind::string
    std::vector<Reply> elements;   // Kind::array

    bool is_nil() const noexcept { return kind == Kind::nil; }
    bool is_error() const noexcept { return kind == Kind::error; }
    bool is_integer() const noexcept { return kind == Kind::integer; }
    bool is_array() const noexcept { return kind == Kind::array; }
    // Status or bulk string.
    bool is_text() const noexcept { return kind == Kind::status || kind == Kind::string; }

    // For an error reply: the errc its prefix stands for (WRONGTYPE ->
    // wrong_type, NOPERM -> permission_denied, WRONGPASS -> auth_failed,
    // NOSCRIPT -> no_script, anything else -> server_error). Empty otherwise.
    std::error_code error_code() const noexcept;

    static Reply make_status(std::string s) { return Reply{Kind::status, 0, std::move(s), {}}; }
    static Reply make_error(std::string s) { return Reply{Kind::error, 0, std::move(s), {}}; }
    static Reply make_integer(long long v) { return Reply{Kind::integer, v, {}, {}}; }
    static Reply make_string(std::string s) { return Reply{Kind::string, 0, std::move(s), {}}; }
};

// Maps a Redis error text ("WRONGTYPE Operation against ...") to its errc.
std::error_code error_code_of_server_error(std::string_view text) noexcept;

}  // namespace dlock
