// dlock's CLI puts a password from a file or the environment into the URLs,
// where the URI parser must read it back exactly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "cli.hpp"
#include "dlock/server_address.hpp"

using dlock::cli::apply_credentials;
using dlock::cli::Credentials;

namespace {

// The variables apply_credentials reads, unset before and after each test.
void clear_environment() {
    for (const char* name : {"DLOCK_USER", "DLOCK_PASSWORD", "REDISCLI_AUTH"}) unsetenv(name);
}
struct CleanEnvironment {
    CleanEnvironment() { clear_environment(); }
    ~CleanEnvironment() { clear_environment(); }
};

}  // namespace

TEST(Credentials, PasswordFromTheEnvironmentGoesIntoEveryUrlWithoutOne) {
    CleanEnvironment clean;
    setenv("REDISCLI_AUTH", "second", 1);
    setenv("DLOCK_PASSWORD", "p@ss:w/rd %", 1);
    std::vector<std::string> urls{"redis://h1:6380/2", "rediss://h2", "unix:///run/redis.sock?db=1",
                                  "redis://:own@h3"};
    apply_credentials(urls, {.user = "al ice"});
    auto first = dlock::ServerAddress::parse(urls[0]);
    EXPECT_EQ(first.password, "p@ss:w/rd %");
    EXPECT_EQ(first.username, "al ice");
    EXPECT_EQ(first.host, "h1");
    EXPECT_EQ(first.port, 6380);
    EXPECT_EQ(first.database, 2);
    EXPECT_EQ(dlock::ServerAddress::parse(urls[1]).password, "p@ss:w/rd %");
    auto unix_socket = dlock::ServerAddress::parse(urls[2]);
    EXPECT_EQ(unix_socket.socket_path, "/run/redis.sock");
    EXPECT_EQ(unix_socket.password, "p@ss:w/rd %");
    EXPECT_EQ(unix_socket.database, 1);
    EXPECT_EQ(urls[3], "redis://:own@h3") << "a URL's own credentials win";
}

TEST(Credentials, TheFileWinsAndMistakesAreUsageErrors) {
    CleanEnvironment clean;
    setenv("DLOCK_PASSWORD", "from-env", 1);
    const std::string file = testing::TempDir() + "dlock-password";
    std::ofstream(file) << "from-file\r\nsecond line\n";
    std::vector<std::string> urls{"redis://h"};
    apply_credentials(urls, {.password_file = file});
    EXPECT_EQ(dlock::ServerAddress::parse(urls[0]).password, "from-file");
    EXPECT_THROW(apply_credentials(urls, {.password_file = "/no/such/file"}), dlock::cli::UsageError);
    unsetenv("DLOCK_PASSWORD");
    std::vector<std::string> plain{"redis://h"};
    EXPECT_THROW(apply_credentials(plain, {.user = "alice"}), dlock::cli::UsageError);
    apply_credentials(plain, {});
    EXPECT_EQ(plain[0], "redis://h") << "nothing to add";
}

TEST(UrlLists, ACommaEndsAUrlOnlyWhereASchemeFollows) {
    using dlock::cli::split_urls;
    using V = std::vector<std::string>;
    EXPECT_EQ(split_urls({"redis://a:1,redis://b:2,rediss://c:3"}), (V{"redis://a:1", "redis://b:2", "rediss://c:3"}));
    // The hosts of one Sentinel or Cluster address stay together.
    EXPECT_EQ(split_urls({"redis-sentinel://s1:26379,s2:26379,s3#m"}), (V{"redis-sentinel://s1:26379,s2:26379,s3#m"}));
    EXPECT_EQ(split_urls({"redis-cluster://n1:7000,n2:7001,redis://x:1"}),
              (V{"redis-cluster://n1:7000,n2:7001", "redis://x:1"}));
    EXPECT_THROW(split_urls({"redis://a:1,,redis://b:2"}), dlock::cli::UsageError);
    EXPECT_THROW(split_urls({"redis://a:1,"}), dlock::cli::UsageError);
}

TEST(Credentials, SentinelsHaveTheirOwn) {
    CleanEnvironment clean;
    unsetenv("DLOCK_SENTINEL_PASSWORD");
    dlock::cli::GlobalOptions global;
    Credentials credentials;
    credentials.sentinel_user = "watcher";
    EXPECT_THROW(dlock::cli::apply_sentinel_credentials(global, credentials), dlock::cli::UsageError);
    setenv("DLOCK_SENTINEL_PASSWORD", "s3nt", 1);
    dlock::cli::apply_sentinel_credentials(global, credentials);
    unsetenv("DLOCK_SENTINEL_PASSWORD");
    EXPECT_EQ(global.sentinel_user, "watcher");
    EXPECT_EQ(global.sentinel_password, "s3nt");
    const auto options = dlock::cli::client_options(global);
    EXPECT_EQ(options.sentinel_username, "watcher");
    EXPECT_EQ(options.sentinel_password, "s3nt");
}
