// dlock status / dlock release --force: look at a lock, break a lock.
#include <cstdio>

#include "cli.hpp"
#include "dlock/error.hpp"

namespace dlock::cli {
namespace {

std::string json_string(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(c));
        } else if (c < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
            out += escaped;
        } else {
            out.push_back(static_cast<char>(c));
        }
    }
    return out + "\"";
}

}  // namespace

int run_status(const GlobalOptions& global, const std::string& key, bool json) {
    Client client(global.url, client_options(global));
    LockInfo info = inspect_lock(client, key);
    auto or_null = [](bool present, auto value) { return present ? std::to_string(value) : std::string("null"); };
    if (json) {
        std::printf("{\"key\": %s, \"held\": %s, \"owner\": %s, \"hold_count\": %s, \"ttl_ms\": %s, \"fencing_token\": %s}\n",
                    json_string(key).c_str(), info.held ? "true" : "false",
                    info.held ? json_string(info.owner).c_str() : "null", or_null(info.held, info.hold_count).c_str(),
                    or_null(info.held, info.ttl.count()).c_str(),
                    or_null(info.last_fencing_token > 0, info.last_fencing_token).c_str());
        return exit_ok;
    }
    if (info.held)
        std::printf("%s: held by %s (hold count %u), lease %lld ms left, fencing token %llu\n", key.c_str(),
                    info.owner.c_str(), info.hold_count, static_cast<long long>(info.ttl.count()),
                    static_cast<unsigned long long>(info.last_fencing_token));
    else if (info.last_fencing_token > 0)
        std::printf("%s: free; last fencing token %llu\n", key.c_str(),
                    static_cast<unsigned long long>(info.last_fencing_token));
    else
        std::printf("%s: free; never locked\n", key.c_str());
    return exit_ok;
}

int run_release(const GlobalOptions& global, const std::string& key, bool force) {
    if (!force) {
        complain("release breaks a lock someone else holds; say --force to do it");
        return exit_usage;
    }
    Client client(global.url, client_options(global));
    auto previous = force_release(client, key);
    if (!previous) {
        if (!global.quiet) std::printf("%s was not held\n", key.c_str());
        return exit_not_held;
    }
    std::printf("released %s, held by %s\n", key.c_str(), previous->c_str());
    return exit_ok;
}

}  // namespace dlock::cli
