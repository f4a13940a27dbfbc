// How many scripts a test's private server has run (EVALSHA and EVAL calls
// of every client, from INFO commandstats): what a path asks of the server,
// counted where timing would be noise.
#pragma once

#include <string>

#include "redis_server.hpp"

namespace dlock::test {

inline long scripts_run(const dlock::support::RedisServer& server) {
    const auto stats = server.cli({"INFO", "commandstats"});
    long calls = 0;
    for (const std::string command : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="})
        if (const auto at = stats.find(command); at != std::string::npos)
            calls += std::stol(stats.substr(at + command.size()));
    return calls;
}

}  // namespace dlock::test
