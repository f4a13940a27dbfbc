#include "reply_limits.hpp"

#include <array>
#include <atomic>
#include <charconv>
#include <mutex>
#include <optional>

namespace dlock::detail {
namespace {

struct Entry {
    Script script;  // keeps the text and SHA1 the views below point into
    std::string_view sha1;
    std::string_view text;
    ReplyLimit limit;
};

// Written once per slot under the mutex, then published by count; read
// without a lock.
std::mutex registering;
std::array<std::optional<Entry>, max_limited_scripts> entries;
std::atomic<std::size_t> count{0};

// The next bulk string of a formatted command ("$<n>\r\n<bytes>\r\n"), or
// false when the bytes are not one.
bool take_bulk(std::string_view& rest, std::string_view& out) noexcept {
    if (rest.empty() || rest[0] != '$') return false;
    const auto end = rest.find("\r\n");
    if (end == std::string_view::npos) return false;
    std::size_t length = 0;
    auto [ptr, error] = std::from_chars(rest.data() + 1, rest.data() + end, length);
    if (error != std::errc{} || ptr != rest.data() + end || rest.size() < end + 2 + length + 2) return false;
    out = rest.substr(end + 2, length);
    rest.remove_prefix(end + 2 + length + 2);
    return true;
}

}  // namespace

void limit_script_replies(const Script& script, ReplyLimit limit) {
    if (&script.for_cluster() != &script) limit_script_replies(script.for_cluster(), limit);
    std::lock_guard lock(registering);
    const auto n = count.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < n; ++i)
        if (entries[i]->sha1 == script.sha1()) return;
    if (n == entries.size()) return;
    entries[n].emplace(Entry{script, {}, {}, limit});
    entries[n]->sha1 = entries[n]->script.sha1();
    entries[n]->text = entries[n]->script.text();
    count.store(n + 1, std::memory_order_release);
}

ReplyLimit reply_limit_of(std::string_view formatted) noexcept {
    // "*<argc>\r\n" then the verb.
    const auto first = formatted.find("\r\n");
    if (formatted.empty() || formatted[0] != '*' || first == std::string_view::npos) return {};
    std::string_view rest = formatted.substr(first + 2);
    std::string_view verb, body;
    if (!take_bulk(rest, verb)) return {};
    ReplyLimit named;
    verb.copy(named.command.data(), named.command.size() - 1);
    const auto n = count.load(std::memory_order_acquire);
    if (n == 0 || !take_bulk(rest, body)) return named;
    const bool by_sha = verb == "EVALSHA" || verb == "evalsha";
    if (!by_sha && verb != "EVAL" && verb != "eval") return named;
    for (std::size_t i = 0; i < n; ++i) {
        const auto& entry = *entries[i];
        if (by_sha ? body == entry.sha1 : body == entry.text) {
            auto limit = entry.limit;
            limit.command = named.command;
            return limit;
        }
    }
    return named;
}

}  // namespace dlock::detail
