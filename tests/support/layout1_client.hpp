// The lock scripts of data layout 1 (tests/data/layout1/, kept as they were),
// run as that library sent them: its prelude in front of each script, with
// its keys and arguments. For the upgrade tests and for measuring the server
// work of the previous layout beside this one's.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "dlock/client.hpp"
#include "dlock/script.hpp"
#include "hold/lock_keys.hpp"

namespace dlock::support {

inline std::string layout1_text(const std::string& script) {
    std::string text;
    for (const auto* part : {"publish", "prelude"}) {
        std::ifstream in(std::string(DLOCK_SOURCE_DIR "/tests/data/layout1/") + part + ".lua");
        std::stringstream s;
        s << in.rdbuf();
        text += s.str();
    }
    std::ifstream in(std::string(DLOCK_SOURCE_DIR "/tests/data/layout1/") + script + ".lua");
    std::stringstream s;
    s << in.rdbuf();
    EXPECT_FALSE(s.str().empty()) << script;
    return text + s.str();
}

// A client of layout 1 on one name (acquire: try_lock's arguments, no place
// in line; release: all holds).
class Layout1Client {
public:
    Layout1Client(dlock::Client& client, const std::string& name, std::string owner)
        : client_(client), keys_(name), owner_(std::move(owner)), tombstone_(keys_.tombstone(owner_)) {}

    // {1, token, count}, {0, pttl}, {-1}, {-2}
    dlock::Reply acquire() {
        const auto op = std::to_string(++op_);
        std::string_view k[] = {keys_.lock,         keys_.fence(), tombstone_, keys_.readers(),
                                keys_.semaphore_permits(), keys_.semaphore_waiters(), keys_.line(), keys_.places()};
        std::string_view a[] = {owner_, "30000", op, "fresh", "600000", "1", "old host", "", "9000", ""};
        return client_.eval(acquire_, k, a);
    }
    long long release() {
        const auto op = std::to_string(++op_);
        std::string_view k[] = {keys_.lock, keys_.fence(), keys_.channel(), tombstone_, keys_.line(), keys_.places()};
        std::string_view a[] = {owner_, "30000", op, "all", "600000", "", "9000"};
        return client_.eval(release_, k, a).integer;
    }

    const dlock::Script& acquire_script() const { return acquire_; }
    const dlock::Script& release_script() const { return release_; }

private:
    dlock::Client& client_;
    dlock::detail::LockKeys keys_;
    std::string owner_, tombstone_;
    long op_ = 0;
    const dlock::Script acquire_{layout1_text("acquire")};
    const dlock::Script release_{layout1_text("release")};
};

}  // namespace dlock::support
