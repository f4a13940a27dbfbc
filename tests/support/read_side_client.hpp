// An RwLock reader that sends the read side's scripts by hand, with the
// keys and arguments the library sends: this version's scripts, or those of
// the previous version (tests/data/rw1/, kept exactly as that library sent
// them, helpers included). For the rolling-upgrade tests and for measuring
// the server work of both versions in one run.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/script.hpp"
#include "hold/lock_keys.hpp"
#include "lock/lock_scripts.hpp"

namespace dlock::support {

inline std::string rw1_file(const std::string& file) {
    std::ifstream in(std::string(DLOCK_SOURCE_DIR "/tests/data/rw1/") + file + ".lua");
    std::stringstream s;
    s << in.rdbuf();
    EXPECT_FALSE(s.str().empty()) << file;
    return s.str();
}

// A script of the previous version, as it sent it (its helpers in front).
inline dlock::Script rw1_script(const std::string& name) { return dlock::Script(rw1_file(name)); }

class ReadSideClient {
public:
    enum class Version { previous, current };

    ReadSideClient(dlock::Client& client, const std::string& name, std::string owner, Version version,
                   std::string lease_ms = "30000")
        : client_(client), keys_(name), owner_(std::move(owner)), lease_(std::move(lease_ms)), version_(version),
          tombstone_(keys_.read_tombstone(owner_)), state_(keys_.reader_state()), waiting_(keys_.waiting_writers()),
          acquire_(script("rw_read_acquire", detail::rw_read_acquire_script())),
          release_(script("rw_read_release", detail::rw_read_release_script())),
          renew_(script("rw_read_renew", detail::rw_read_renew_script())) {}

    // mode 'fresh' or 'reenter': {1, token, count}, {0, ms}, {-1}, {-2}
    dlock::Reply acquire(const char* mode = "fresh") { return acquire_with(next_op(), mode); }
    dlock::Reply acquire_with(const std::string& op, const char* mode) {
        std::string_view k[] = {keys_.lock,   keys_.fence(),     keys_.readers(),
                                state_,       waiting_,          tombstone_,
                                keys_.semaphore_permits(), keys_.semaphore_waiters(), keys_.places()};
        std::string_view a[] = {owner_, lease_, op, mode, "600000", readers_first_ ? "1" : "0"};
        return client_.eval(acquire_, k, a);
    }
    // The holds left, -1, -2, -3 (rw_read_release.lua).
    long long release(const std::string& how_many = "1", const std::string& undoing = "") {
        return release_with(next_op(), how_many, undoing);
    }
    long long release_with(const std::string& op, const std::string& how_many, const std::string& undoing = "") {
        std::vector<std::string_view> k = {keys_.readers(), state_, keys_.fence(), keys_.channel(), tombstone_, keys_.lock};
        if (version_ == Version::current) k.push_back(waiting_);
        std::vector<std::string_view> a = {owner_, lease_, op, how_many, "600000"};
        if (!undoing.empty()) a.push_back(undoing);
        return client_.eval(release_, k, a).integer;
    }
    // 1 renewed, 0 lost.
    long long renew() {
        std::string_view k[] = {keys_.readers(), state_, keys_.fence()};
        std::string_view a[] = {owner_, lease_, "600000"};
        return client_.eval(renew_, k, a).integer;
    }

    // RwLockOptions::prefer_readers.
    void readers_first(bool on) { readers_first_ = on; }
    std::string next_op() { return std::to_string(++op_); }
    const dlock::Script& acquire_script() const { return acquire_; }
    const dlock::Script& release_script() const { return release_; }
    const dlock::Script& renew_script() const { return renew_; }

private:
    dlock::Script script(const std::string& name, const dlock::Script& current) const {
        return version_ == Version::previous ? rw1_script(name) : current;
    }

    dlock::Client& client_;
    detail::LockKeys keys_;
    std::string owner_, lease_;
    Version version_;
    std::string tombstone_, state_, waiting_;
    long op_ = 0;
    bool readers_first_ = false;
    dlock::Script acquire_, release_, renew_;
};

}  // namespace dlock::support
