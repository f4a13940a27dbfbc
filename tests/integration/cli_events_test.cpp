// `dlock run --json-events`: the events a log shipper reads on stderr, one
// JSON object per line. Through the binary, against real servers.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <thread>

#include "cli_runner.hpp"
#include "dlock/client.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using namespace dlock::test::cli;
using dlock::support::eventually;
using dlock::support::RedisServer;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// The "event" of each line that is an event, in order.
std::vector<std::string> event_names(const std::string& err) {
    std::vector<std::string> events;
    for (const auto& line : lines_of(err)) {
        const auto at = line.find("\"event\": \"");
        if (line.empty() || line.front() != '{' || at == std::string::npos) continue;
        events.push_back(line.substr(at + 10, line.find('"', at + 10) - at - 10));
    }
    return events;
}

// The lines that are not one JSON object each.
std::string non_json_lines(const std::string& err) {
    std::string found;
    for (const auto& line : lines_of(err))
        if (line.empty() || line.front() != '{' || line.back() != '}') found += line + "\n";
    return found;
}

}  // namespace

TEST(CliEvents, OneLinePerEvent) {
    RedisServer server;
    auto f = dlock_cli({"--url", server.uri(), "run", "--json-events", "job", "--", "sh", "-c", "exit 3"});
    EXPECT_EQ(f.code, 3);
    EXPECT_EQ(non_json_lines(f.err), "");
    for (const auto& line : lines_of(f.err)) EXPECT_NE(line.find("\"key\": \"job\""), std::string::npos) << line;
    EXPECT_EQ(event_names(f.err), (std::vector<std::string>{"acquired", "exited", "released"})) << f.err;
    EXPECT_NE(f.err.find("\"fencing_token\": "), std::string::npos);
    EXPECT_NE(f.err.find("\"exit_code\": 3"), std::string::npos);

    // Renewals of a 300 ms lease during a one-second command.
    f = dlock_cli({"--url", server.uri(), "run", "--json-events", "--ttl", "300ms", "job", "--", "sleep", "1"});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_GE(lines_of(f.err).size(), 3u + 2u) << f.err;
    EXPECT_NE(f.err.find("\"event\": \"renewed\", \"key\": \"job\", \"valid_for_ms\": "), std::string::npos) << f.err;

    dlock::Client client(server.uri());
    auto lock = client.lock("job");
    lock.lock();
    auto running = start({"--url", server.uri(), "run", "--json-events", "--wait", "5s", "job", "--", "true"});
    std::this_thread::sleep_for(1500ms);
    lock.unlock();
    f = finish(running);
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_NE(f.err.find("\"event\": \"waiting\", \"key\": \"job\", \"holder\": \"held by host="), std::string::npos)
        << f.err;
}

// The loop sees the loss first; the release at the end fails with the same
// loss. One hold, one "lost".
TEST(CliEvents, ALostLeaseIsOneLostEvent) {
    RedisServer server;
    auto run = start({"--url", server.uri(), "run", "--json-events", "--ttl", "3s", "victim", "--", "sleep", "30"});
    ASSERT_TRUE(eventually([&] { return held(server, "victim"); }));
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "release", "--force", "victim"}).code, 0);
    auto f = finish(run);
    EXPECT_EQ(f.code, 79) << f.err;
    auto events = event_names(f.err);
    std::erase(events, "renewed");
    EXPECT_EQ(events, (std::vector<std::string>{"acquired", "lost", "exited"})) << f.err;
}
