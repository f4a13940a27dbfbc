#include "command_format.hpp"

#include <hiredis/hiredis.h>

#include <new>
#include <vector>

namespace dlock::detail {
namespace {

// Keep the argument pointers on the stack for every command dlock sends on
// its lock path (acquire.lua: EVALSHA, sha, numkeys, 8 keys, 10 arguments).
constexpr std::size_t inline_args = 32;

void append_argv(std::string& out, std::size_t count, const char** argv, const size_t* lengths) {
    char* formatted = nullptr;
    int length = redisFormatCommandArgv(&formatted, static_cast<int>(count), argv, lengths);
    if (length < 0 || !formatted) throw std::bad_alloc();
    out.append(formatted, static_cast<std::size_t>(length));
    redisFreeCommand(formatted);
}

template <typename Fill>
void with_argv(std::size_t count, Fill fill, std::string& out) {
    if (count <= inline_args) {
        const char* argv[inline_args];
        size_t lengths[inline_args];
        fill(argv, lengths);
        append_argv(out, count, argv, lengths);
    } else {
        std::vector<const char*> argv(count);
        std::vector<size_t> lengths(count);
        fill(argv.data(), lengths.data());
        append_argv(out, count, argv.data(), lengths.data());
    }
}

}  // namespace

void append_command(std::string& out, std::span<const std::string_view> args) {
    with_argv(
        args.size(),
        [&](const char** argv, size_t* lengths) {
            for (std::size_t i = 0; i < args.size(); ++i) {
                argv[i] = args[i].data();
                lengths[i] = args[i].size();
            }
        },
        out);
}

void append_eval(std::string& out, std::string_view verb, std::string_view body,
                 std::span<const std::string_view> keys, std::span<const std::string_view> argv) {
    std::string numkeys = std::to_string(keys.size());
    with_argv(
        3 + keys.size() + argv.size(),
        [&](const char** items, size_t* lengths) {
            std::size_t i = 0;
            auto put = [&](std::string_view s) {
                items[i] = s.data();
                lengths[i] = s.size();
                ++i;
            };
            put(verb);
            put(body);
            put(numkeys);
            for (auto k : keys) put(k);
            for (auto a : argv) put(a);
        },
        out);
}

std::string rewrite_evalsha_as_eval(std::string_view evalsha, std::string_view sha1, std::string_view text) {
    // "*N\r\n" "$7\r\nEVALSHA\r\n" "$40\r\n<sha1>\r\n" <rest>
    auto count_end = evalsha.find("\r\n") + 2;
    auto rest = count_end + std::string_view("$7\r\nEVALSHA\r\n").size() + 1 + std::to_string(sha1.size()).size() + 2 +
                sha1.size() + 2;
    std::string out(evalsha.substr(0, count_end));
    out += "$4\r\nEVAL\r\n$" + std::to_string(text.size()) + "\r\n";
    out += text;
    out += "\r\n";
    out += evalsha.substr(rest);
    return out;
}

}  // namespace dlock::detail
