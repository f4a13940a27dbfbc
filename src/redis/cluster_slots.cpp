#include "cluster_slots.hpp"

#include <array>
#include <charconv>
#include <cstddef>

namespace dlock::detail {
namespace {

constexpr std::array<std::uint16_t, 256> make_crc_table() {
    std::array<std::uint16_t, 256> table{};
    for (unsigned i = 0; i < 256; ++i) {
        std::uint16_t crc = static_cast<std::uint16_t>(i << 8);
        for (int bit = 0; bit < 8; ++bit)
            crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
        table[i] = crc;
    }
    return table;
}

constexpr auto crc_table = make_crc_table();

std::uint16_t crc16(std::string_view bytes) noexcept {
    std::uint16_t crc = 0;
    for (unsigned char c : bytes)
        crc = static_cast<std::uint16_t>((crc << 8) ^ crc_table[((crc >> 8) ^ c) & 0xff]);
    return crc;
}

// Reads "<marker><decimal>\r\n" at pos; advances pos past it.
std::optional<std::size_t> read_header(std::string_view resp, std::size_t& pos, char marker) noexcept {
    if (pos >= resp.size() || resp[pos] != marker) return std::nullopt;
    const auto end = resp.find("\r\n", pos + 1);
    if (end == std::string_view::npos) return std::nullopt;
    std::size_t value = 0;
    auto [ptr, error] = std::from_chars(resp.data() + pos + 1, resp.data() + end, value);
    if (error != std::errc{} || ptr != resp.data() + end) return std::nullopt;
    pos = end + 2;
    return value;
}

std::optional<std::string_view> read_bulk(std::string_view resp, std::size_t& pos) noexcept {
    auto length = read_header(resp, pos, '$');
    if (!length || *length > resp.size() - pos || resp.size() - pos - *length < 2) return std::nullopt;
    auto value = resp.substr(pos, *length);
    pos += *length + 2;
    return value;
}

bool same_word(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        char c = a[i];
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
        if (c != b[i]) return false;
    }
    return true;
}

}  // namespace

std::uint16_t key_slot(std::string_view key) noexcept {
    if (const auto open = key.find('{'); open != std::string_view::npos) {
        const auto close = key.find('}', open + 1);
        if (close != std::string_view::npos && close != open + 1) key = key.substr(open + 1, close - open - 1);
    }
    return static_cast<std::uint16_t>(crc16(key) & (cluster_slots - 1));
}

std::optional<std::string_view> routing_key(std::string_view resp) noexcept {
    std::size_t pos = 0;
    auto count = read_header(resp, pos, '*');
    if (!count || *count < 2) return std::nullopt;
    auto verb = read_bulk(resp, pos);
    if (!verb) return std::nullopt;
    auto first = read_bulk(resp, pos);
    if (!first) return std::nullopt;
    if (!same_word(*verb, "EVAL") && !same_word(*verb, "EVALSHA") && !same_word(*verb, "EVAL_RO") &&
        !same_word(*verb, "EVALSHA_RO"))
        return first;
    auto numkeys = read_bulk(resp, pos);
    if (!numkeys || *numkeys == "0" || *count < 4) return std::nullopt;
    return read_bulk(resp, pos);
}

}  // namespace dlock::detail
