// `dlock run --json-events`: one JSON object per line on stderr for each
// thing that happens to the lock and the command, for log shippers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dlock::cli {

class EventLog {
public:
    EventLog(bool enabled, std::vector<std::string> keys) : enabled_(enabled), keys_(std::move(keys)) {}
    bool enabled() const { return enabled_; }
    // {"time": "<UTC, ms>", "event": event, "key": key<, fields>}, with
    // "keys": [...] (in the order given) instead of "key" for several keys;
    // fields is a JSON member list ("\"a\": 1, \"b\": 2") or empty. Does
    // nothing when disabled.
    void emit(std::string_view event, const std::string& fields = {}) const;

private:
    bool enabled_;
    std::vector<std::string> keys_;
};

}  // namespace dlock::cli
