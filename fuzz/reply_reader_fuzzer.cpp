// The reply reader on arbitrary bytes, split into arbitrary chunks, with
// limits chosen by the input (tiny, the defaults, near SIZE_MAX).
//
// Input: 6 bytes of set-up, then the stream.
//   [0..1] max_string_bytes   [2..3] max_array_elements   [4..5] chunking seed
// Each limit is two bytes: a kind (small, default, near SIZE_MAX, a power
// of two) and a value.
//
// Checked: no crash, leak or undefined behaviour; every reply within the
// limits and arrays nested at most 7 deep; the same replies and the same error
// whatever the split; a spent reader stays spent; and the reader never
// hands out more text than the bytes it was fed.
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "fuzz_check.hpp"
#include "redis/reply_reader.hpp"

using dlock::Reply;
using dlock::detail::ReplyReader;

namespace {

std::size_t limit_of(std::uint8_t kind, std::uint8_t value, std::size_t default_limit) {
    switch (kind % 4) {
        case 0: return value;  // 0 .. 255
        case 1: return default_limit;
        case 2: return SIZE_MAX - value;
        default: return std::size_t{1} << (value % 64);
    }
}

struct Outcome {
    std::vector<Reply> replies;
    std::error_code error;
};

// Reads replies as a connection does: feed a chunk, take every reply out.
Outcome read(const std::uint8_t* data, std::size_t size, std::size_t max_string, std::size_t max_array,
             std::uint32_t chunk_seed) {
    ReplyReader reader(max_string, max_array);
    Outcome out;
    std::size_t at = 0;
    std::uint32_t state = chunk_seed;
    while (at < size) {
        std::size_t chunk = size - at;
        if (chunk_seed != 0) {
            state = state * 1103515245u + 12345u;  // small, deterministic chunk sizes
            chunk = std::min<std::size_t>(chunk, 1 + (state >> 16) % 17);
        }
        reader.feed(reinterpret_cast<const char*>(data + at), chunk);
        at += chunk;
        Reply reply;
        while (reader.next(reply, out.error)) out.replies.push_back(std::move(reply));
        if (out.error) break;
    }
    if (out.error) {
        // Spent: the same error again, and nothing more.
        Reply reply;
        std::error_code again;
        FUZZ_CHECK(!reader.next(reply, again));
        FUZZ_CHECK(again == out.error);
    }
    return out;
}

// The text bytes a reply holds; checks the limits. depth: arrays around
// this one; hiredis takes 7 levels of arrays inside the outermost.
std::size_t check(const Reply& reply, std::size_t max_string, std::size_t max_array, int depth) {
    if (reply.is_array()) FUZZ_CHECK(depth <= 7);
    FUZZ_CHECK(reply.text.size() <= max_string);
    FUZZ_CHECK(reply.elements.size() <= max_array);
    if (reply.kind != Reply::Kind::array) FUZZ_CHECK(reply.elements.empty());
    std::size_t bytes = reply.text.size();
    for (const auto& element : reply.elements) bytes += check(element, max_string, max_array, depth + 1);
    return bytes;
}

bool same(const Reply& a, const Reply& b) {
    if (a.kind != b.kind || a.integer != b.integer || a.text != b.text || a.elements.size() != b.elements.size())
        return false;
    for (std::size_t i = 0; i < a.elements.size(); ++i)
        if (!same(a.elements[i], b.elements[i])) return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 6) return 0;
    const auto max_string = limit_of(data[0], data[1], std::size_t{512} << 20);
    const auto max_array = limit_of(data[2], data[3], std::size_t{16} << 20);
    const auto seed = static_cast<std::uint32_t>(data[4] << 8 | data[5]);
    data += 6;
    size -= 6;

    const auto split = read(data, size, max_string, max_array, seed | 1);
    const auto whole = read(data, size, max_string, max_array, 0);
    std::size_t text_bytes = 0;
    for (const auto& reply : split.replies) text_bytes += check(reply, max_string, max_array, 0);
    FUZZ_CHECK(text_bytes <= size);
    FUZZ_CHECK(split.error == whole.error);
    FUZZ_CHECK(split.replies.size() == whole.replies.size());
    for (std::size_t i = 0; i < split.replies.size(); ++i) FUZZ_CHECK(same(split.replies[i], whole.replies[i]));
    return 0;
}
