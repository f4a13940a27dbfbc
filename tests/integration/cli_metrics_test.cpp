// The dlock tool's metrics: `run --metrics-file` writes the exposition for
// node_exporter's textfile collector when the command ends (however it
// ends), and `demo --metrics` prints the race's, every process added up.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "cli_runner.hpp"
#include "dlock/client.hpp"
#include "redis_server.hpp"

using namespace dlock::test::cli;

namespace {

// The value of one sample line "name{labels} value", or -1 when absent.
double sample(const std::string& text, const std::string& series) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
        if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    return -1;
}

// Every line is a comment or "name{labels} number", and each family's
// samples follow its TYPE line without another family in between.
void expect_well_formed(const std::string& text) {
    static const std::regex sample_line(R"(^([a-z_]+)(\{[^}]*\})? -?[0-9.e+]+$)");
    std::istringstream lines(text);
    std::string family;
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("# TYPE ", 0) == 0) {
            family = line.substr(7, line.find(' ', 7) - 7);
            continue;
        }
        if (line.rfind("# HELP ", 0) == 0) continue;
        std::smatch m;
        ASSERT_TRUE(std::regex_match(line, m, sample_line)) << line;
        EXPECT_EQ(m[1].str().rfind(family, 0), 0u) << line << " outside its family " << family;
    }
}

}  // namespace

TEST(CliMetrics, RunWritesTheExpositionWhenTheCommandEnds) {
    dlock::support::RedisServer server;
    const auto path = temp_path("dlock.prom");
    auto f = dlock_cli({"--url", server.uri(), "run", "--metrics-file", path, "nightly", "--", "sh", "-c", "exit 3"});
    EXPECT_EQ(f.code, 3) << f.err;
    const auto text = read_file(path);
    expect_well_formed(text);
    // run takes its key's write side (so that --shared runs exclude it).
    EXPECT_EQ(sample(text, R"(dlock_acquisitions_total{kind="write",outcome="acquired"})"), 1) << text;
    EXPECT_EQ(sample(text, R"(dlock_hold_duration_seconds_count{kind="write"})"), 1) << text;
    EXPECT_EQ(sample(text, R"(dlock_holds{kind="write"})"), 0) << text;
    // No temporary file is left beside it.
    struct stat info {};
    EXPECT_NE(::stat((path + ".tmp").c_str(), &info), 0);

    // Not acquired in time: written too, with the outcome.
    dlock::Client holder(server.uri());
    auto lock = holder.rw_lock("nightly");
    lock.lock();
    f = dlock_cli({"--url", server.uri(), "run", "--no-wait", "--metrics-file", path, "nightly", "--", "true"});
    EXPECT_EQ(f.code, 75) << f.err;
    EXPECT_EQ(sample(read_file(path), R"(dlock_acquisitions_total{kind="write",outcome="busy"})"), 1);
    lock.unlock();

    // A path that cannot be written: a warning, and the command's status stands.
    f = dlock_cli({"--url", server.uri(), "run", "--metrics-file", "/nonexistent-dir/x.prom", "nightly", "--", "true"});
    EXPECT_EQ(f.code, 0);
    EXPECT_NE(f.err.find("cannot write the metrics to /nonexistent-dir/x.prom"), std::string::npos) << f.err;
}

// A symlink planted where the file is written first (the old temporary
// name, PATH.<pid>.tmp, was predictable: exec keeps the pid) is not
// followed, and PATH ends up a regular file of its own.
TEST(CliMetrics, APlantedSymlinkIsNotFollowed) {
    dlock::support::RedisServer server;
    const auto victim = temp_path("victim"), path = temp_path("planted.prom");
    { std::ofstream(victim) << "precious\n"; }
    const std::string script = "ln -s '" + victim + "' '" + path + ".'$$'.tmp'; ln -s '" + victim + "' '" + path +
                               "'; exec '" DLOCK_CLI "' --url '" + server.uri() + "' run --metrics-file '" + path +
                               "' planted -- true";
    EXPECT_EQ(std::system(script.c_str()), 0);  // /bin/sh -c: $$ is the pid dlock keeps
    EXPECT_EQ(read_file(victim), "precious\n");
    struct stat info {};
    ASSERT_EQ(::lstat(path.c_str(), &info), 0);
    EXPECT_TRUE(S_ISREG(info.st_mode)) << "the metrics file is a symlink";
    EXPECT_NE(read_file(path).find("dlock_acquisitions_total"), std::string::npos);
}

TEST(CliMetrics, DemoPrintsTheRaceMetricsOfEveryProcessAddedUp) {
    auto f = dlock_cli({"demo", "--processes", "3", "--threads", "4", "--json", "--metrics"});
    EXPECT_EQ(f.code, 0) << f.err;
    const auto newline = f.out.find('\n');
    ASSERT_NE(newline, std::string::npos);
    const auto text = f.out.substr(newline + 1);  // after the JSON summary
    expect_well_formed(text);
    // 12 clients, one acquisition each, all 3 processes counted.
    EXPECT_EQ(sample(text, R"(dlock_acquisitions_total{kind="lock",outcome="acquired"})"), 12) << text;
    EXPECT_EQ(sample(text, R"(dlock_acquire_duration_seconds_count{kind="lock",outcome="acquired"})"), 12);
    EXPECT_EQ(sample(text, R"(dlock_hold_duration_seconds_count{kind="lock"})"), 12);
}
