// `dlock run --json-events`: one JSON object per line on stderr for each
// thing that happens to the lock and the command, for log shippers. While
// events are on, everything dlock itself writes on stderr is an event: a
// shipper that parses each line as JSON must never meet a line for people.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dlock::cli {

class EventLog {
public:
    // No keys is written as "key": null: the key is not known yet (a usage error).
    EventLog(bool enabled, std::vector<std::string> keys) : enabled_(enabled), keys_(std::move(keys)) {}
    bool enabled() const { return enabled_; }
    // {"time": "<UTC, ms>", "event": event, "key": key<, fields>}, with
    // "keys": [...] (in the order given) instead of "key" for several keys;
    // fields is a JSON member list ("\"a\": 1, \"b\": 2") or empty. Does
    // nothing when disabled.
    void emit(std::string_view event, const std::string& fields = {}) const;
    // Says one thing once: as the event when events are on, else as a line
    // for people (complain) unless for_people is empty.
    void report(std::string_view event, const std::string& fields, const std::string& for_people) const;

private:
    bool enabled_;
    std::vector<std::string> keys_;
};

// While a log is set, complain() and warn() write their message as an
// "error" or "warning" event on it instead of a line for people. Set before
// any thread starts; the log must outlive every thread that may complain.
void send_messages_to(const EventLog* log);
const EventLog* messages_log();

}  // namespace dlock::cli
