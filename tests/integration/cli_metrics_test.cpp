// The dlock tool's metrics: `run --metrics-file` writes the exposition for
// node_exporter's textfile collector when the command ends (however it
// ends), and `demo --metrics` prints the race's, every process added up.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
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

// As node_exporter's textfile conventions ask of a batch job: gauges of the
// last run, labelled by job and key, one file per job, replaced whole.
TEST(CliMetrics, RunWritesTheLastRunsGaugesLabelledByJobAndKey) {
    dlock::support::RedisServer server;
    const auto path = temp_path("dlock-nightly.prom");
    const double before = static_cast<double>(std::time(nullptr));
    auto f = dlock_cli({"--url", server.uri(), "run", "--metrics-file", path, "--metrics-job", "nightly-backup",
                        "nightly", "--", "sh", "-c", "sleep 0.3; exit 3"});
    EXPECT_EQ(f.code, 3) << f.err;
    auto text = read_file(path);
    expect_well_formed(text);
    const std::string labels = R"({job="nightly-backup",key="nightly"})";
    EXPECT_EQ(sample(text, "dlock_run_last_exit_code" + labels), 3) << text;
    EXPECT_EQ(sample(text, "dlock_run_last_acquired" + labels), 1) << text;
    EXPECT_GE(sample(text, "dlock_run_last_duration_seconds" + labels), 0.3) << text;
    EXPECT_GE(sample(text, "dlock_run_last_wait_seconds" + labels), 0) << text;
    const double start = sample(text, "dlock_run_last_start_timestamp_seconds" + labels);
    const double end = sample(text, "dlock_run_last_end_timestamp_seconds" + labels);
    EXPECT_GE(start, before - 1) << text;
    EXPECT_GE(end - start, 0.3) << text;
    // Gauges only: no counter restarts at every run.
    EXPECT_EQ(text.find("counter"), std::string::npos) << text;
    EXPECT_EQ(text.find("_total"), std::string::npos) << text;
    // No temporary file is left beside it.
    const auto dir = path.substr(0, path.rfind('/'));
    f = dlock_cli_script("ls " + dir + " | grep -c 'dlock-nightly.prom.tmp' || true");
    EXPECT_EQ(f.out, "0\n");

    // Not acquired in time: written too, acquired 0, the wait it gave, the
    // job defaulting to the key.
    dlock::Client holder(server.uri());
    auto lock = holder.rw_lock("nightly");
    lock.lock();
    // A wait long enough for the run's first answer on a loaded machine
    // under a sanitizer: one that ends before the server has answered is
    // "command timed out" (69), not "not acquired in time" (seen at 300 ms).
    f = dlock_cli({"--url", server.uri(), "run", "--wait", "1500ms", "--metrics-file", path, "nightly", "--", "true"});
    EXPECT_EQ(f.code, 75) << f.err;
    text = read_file(path);
    const std::string own = R"({job="nightly",key="nightly"})";
    EXPECT_EQ(sample(text, "dlock_run_last_acquired" + own), 0) << text;
    EXPECT_EQ(sample(text, "dlock_run_last_exit_code" + own), 75) << text;
    // At least the wait given: it counts from when the wait's deadline does.
    EXPECT_GE(sample(text, "dlock_run_last_wait_seconds" + own), 1.5) << text;
    // One start for both: the run took at least the time it waited.
    EXPECT_GE(sample(text, "dlock_run_last_duration_seconds" + own), sample(text, "dlock_run_last_wait_seconds" + own))
        << text;
    EXPECT_EQ(text.find("nightly-backup"), std::string::npos) << "the file is replaced whole";
    lock.unlock();

    // A directory that does not exist: an error before anything runs.
    const auto marker = temp_path("ran");
    f = dlock_cli({"--url", server.uri(), "run", "--metrics-file", "/nonexistent-dir/x.prom", "nightly", "--", "sh",
                   "-c", "echo ran > " + marker});
    EXPECT_EQ(f.code, 64) << f.err;
    EXPECT_NE(f.err.find("--metrics-file /nonexistent-dir/x.prom: its directory /nonexistent-dir cannot be used"),
              std::string::npos)
        << f.err;
    EXPECT_EQ(read_file(marker), "") << "the command ran";
    // A directory given as the file: the same, with what to name.
    f = dlock_cli({"--url", server.uri(), "run", "--metrics-file", dir, "nightly", "--", "true"});
    EXPECT_EQ(f.code, 64) << f.err;
    EXPECT_NE(f.err.find("is a directory; name a file in it, one per job"), std::string::npos) << f.err;
}

// A file name near the longest the file system allows is written (its
// temporary name was the path plus a suffix, too long to make: the run
// ended 0 with no file written); one longer than allowed is refused before
// the command runs.
TEST(CliMetrics, ALongFileNameIsWrittenAndATooLongOneRefusedBeforeTheRun) {
    dlock::support::RedisServer server;
    const auto path = temp_path(std::string(240, 'm') + ".prom");
    const auto dir = path.substr(0, path.rfind('/'));
    ASSERT_LE(path.size() - dir.size() - 1, 255u);
    auto f = dlock_cli({"--url", server.uri(), "run", "--metrics-file", path, "long-name", "--", "true"});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(f.err, "");
    EXPECT_NE(read_file(path).find("dlock_run_last_acquired"), std::string::npos) << "no metrics file written";
    for (const auto& entry : std::filesystem::directory_iterator(dir))
        EXPECT_EQ(entry.path().filename().string().find(".dlock-metrics."), std::string::npos)
            << "a temporary file is left: " << entry.path();

    const auto marker = temp_path("ran-long");
    const auto too_long = dir + "/" + std::string(300, 'm') + ".prom";
    f = dlock_cli({"--url", server.uri(), "run", "--metrics-file", too_long, "long-name", "--", "sh", "-c",
                   "echo ran > " + marker});
    EXPECT_EQ(f.code, 64) << f.err;
    EXPECT_NE(f.err.find("the file name is 305 bytes, more than the 255 a name may have"), std::string::npos) << f.err;
    EXPECT_EQ(read_file(marker), "") << "the command ran";
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
    EXPECT_NE(read_file(path).find("dlock_run_last_acquired"), std::string::npos);
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
    // Grants taken from the server's line need no confirmation (renewed
    // leases): none is sent, so none is counted.
    const double direct = sample(text, R"(dlock_handoffs_total{how="direct"})");
    ASSERT_GT(direct, 0) << "no direct hand-off in the race: the check below says nothing\n" << text;
    EXPECT_EQ(sample(text, R"(dlock_grant_confirmations_total{result="confirmed"})"), 0) << text;
}
