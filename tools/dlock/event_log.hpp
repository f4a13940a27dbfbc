// `dlock run --json-events`: one JSON object per line on stderr for each
// thing that happens to the lock and the command, for log shippers.
#pragma once

#include <string>
#include <string_view>

namespace dlock::cli {

class EventLog {
public:
    EventLog(bool enabled, std::string key) : enabled_(enabled), key_(std::move(key)) {}
    bool enabled() const { return enabled_; }
    // {"time": "<UTC, ms>", "event": event, "key": key<, fields>}; fields is
    // a JSON member list ("\"a\": 1, \"b\": 2") or empty. Does nothing when
    // disabled.
    void emit(std::string_view event, const std::string& fields = {}) const;

private:
    bool enabled_;
    std::string key_;
};

}  // namespace dlock::cli
