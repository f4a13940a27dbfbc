#include "json.hpp"

#include <cstdio>

namespace dlock::cli {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one
// (overlong forms, surrogates and code points past U+10FFFF are not).
std::size_t utf8_length(std::string_view s, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = byte(i);
    std::size_t n;
    unsigned long cp;
    if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
    else return 0;
    if (i + n > s.size()) return 0;
    for (std::size_t k = 1; k < n; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

void append_escaped(std::string& out, unsigned char c) {
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
    out += escaped;
}

// The one escaping of lock names, owners and labels, for JSON and for the
// lines people read alike; quote: whether '"' is escaped too.
std::string escape_bytes(std::string_view s, bool quote) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if ((c == '"' && quote) || c == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(c));
        } else if (c < 0x20 || c == 0x7F) {
            append_escaped(out, c);
        } else if (c >= 0x80) {
            if (std::size_t n = utf8_length(s, i)) {
                out.append(s.substr(i, n));
                i += n;
                continue;
            }
            append_escaped(out, c);
        } else {
            out.push_back(static_cast<char>(c));
        }
        ++i;
    }
    return out;
}

}  // namespace

std::string json_string(std::string_view bytes) { return "\"" + escape_bytes(bytes, true) + "\""; }

std::string text_line(std::string_view bytes) { return escape_bytes(bytes, false); }

}  // namespace dlock::cli
