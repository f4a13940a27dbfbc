// The server keys tests read and write directly, by the names the scripts
// give them (src/hold/lock_keys.hpp, src/lock/semaphore_keys.hpp), and the
// seconds figures tests print and bound. One definition for every test
// program, so that its sources can share a translation unit (unity builds).
#pragma once

#include <chrono>
#include <string>

namespace dlock::test {

// The lock hash of lock `name` (Lock, FairLock, RwLock, Redlock's copies).
inline std::string lock_key(const std::string& name) { return "dlock:{" + name + "}"; }

// The permit set of semaphore `name`.
inline std::string semaphore_key(const std::string& name) { return "dlock:sem:{" + name + "}"; }

inline double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

inline double seconds_since(std::chrono::steady_clock::time_point start) {
    return seconds(std::chrono::steady_clock::now() - start);
}

}  // namespace dlock::test
