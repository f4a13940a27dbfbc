// The semaphore scripts of an earlier version (tests/data/semaphore1/:
// before direct grant; tests/data/semaphore2/: before the common paths came
// first), kept as they were and run as that library sent them: publish.lua
// and semaphore_prelude.lua in front of each script, with its keys and
// arguments. For the upgrade tests and for measuring the server work of the
// previous scripts beside this version's.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/script.hpp"
#include "lock/semaphore_keys.hpp"

namespace dlock::support {

inline std::string old_semaphore_file(const std::string& version, const std::string& file) {
    std::ifstream in(std::string(DLOCK_SOURCE_DIR "/tests/data/") + version + "/" + file);
    std::stringstream s;
    s << in.rdbuf();
    EXPECT_FALSE(s.str().empty()) << version << "/" << file;
    return s.str();
}

inline dlock::Script old_semaphore_script(const std::string& version, const std::string& name) {
    return dlock::Script(old_semaphore_file(version, "publish.lua") + "\n" +
                         old_semaphore_file(version, "semaphore_prelude.lua") + "\n" +
                         old_semaphore_file(version, name + ".lua"));
}

// A client of an earlier version on one semaphore: its requests, with the
// arguments that version sent (lease 30 s unless given, waiter lease 30 s,
// retention 60 s). Given this version's scripts, it sends them the same way.
class OldSemaphoreClient {
public:
    OldSemaphoreClient(dlock::Client& client, const std::string& name, const std::string& version = "semaphore1",
                       std::string lease = "30000")
        : OldSemaphoreClient(client, name, old_semaphore_script(version, "semaphore_acquire"),
                             old_semaphore_script(version, "semaphore_release"),
                             old_semaphore_script(version, "semaphore_renew"), std::move(lease)) {}
    OldSemaphoreClient(dlock::Client& client, const std::string& name, dlock::Script acquire, dlock::Script release,
                       dlock::Script renew, std::string lease = "30000")
        : client_(client),
          keys_(name),
          lease_(std::move(lease)),
          acquire_(std::move(acquire)),
          release_(std::move(release)),
          renew_(std::move(renew)) {}

    // {1, limit} granted, {0, wake ms} in line ('wait') or busy ('try').
    dlock::Reply acquire(const std::string& id, const char* mode, const std::string& limit) {
        std::string_view k[] = {keys_.all[0], keys_.all[1], keys_.all[2], keys_.all[3], keys_.all[4],
                                keys_.all[5], keys_.other_kinds[0], keys_.other_kinds[1], keys_.other_kinds[2]};
        const auto weight = id.substr(id.rfind('#') + 1);
        std::string_view a[] = {id, weight, lease_, limit, mode, waiter_lease_, "60000", ""};
        return client_.eval(acquire_, k, a);
    }
    long long release(const std::string& id) {
        std::string_view a[] = {id, "60000", "release"};
        return client_.eval(release_, keys(), a).integer;
    }
    long long renew(const std::string& id) {
        std::string_view a[] = {id, lease_, "60000"};
        return client_.eval(renew_, keys(), a).integer;
    }

    // The waiter lease its next requests send (ms); 30 s unless set.
    void set_waiter_lease(std::string ms) { waiter_lease_ = std::move(ms); }

    const dlock::Script& acquire_script() const { return acquire_; }
    const dlock::Script& release_script() const { return release_; }
    const dlock::Script& renew_script() const { return renew_; }

private:
    dlock::Client::Args keys() {
        views_.assign(keys_.all.begin(), keys_.all.end());
        return {views_.data(), views_.size()};
    }
    dlock::Client& client_;
    dlock::detail::SemaphoreKeys keys_;
    std::string lease_;
    std::string waiter_lease_ = "30000";
    std::vector<std::string_view> views_;
    const dlock::Script acquire_, release_, renew_;
};

}  // namespace dlock::support
