#include "event_log.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "cli.hpp"
#include "json.hpp"

namespace dlock::cli {
namespace {

const EventLog* messages = nullptr;

}  // namespace

void send_messages_to(const EventLog* log) { messages = log; }

const EventLog* messages_log() { return messages; }

void EventLog::emit(std::string_view event, const std::string& fields) const {
    if (!enabled_) return;
    using namespace std::chrono;
    const auto now = system_clock::now();
    const std::time_t seconds = system_clock::to_time_t(now);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
    const auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
    std::string line = "{\"time\": \"" + std::string(stamp) + "." + std::to_string(1000 + ms).substr(1) +
                       "Z\", \"event\": " + json_string(event);
    if (keys_.empty()) {
        line += ", \"key\": null";
    } else if (keys_.size() == 1) {
        line += ", \"key\": " + json_string(keys_.front());
    } else {
        line += ", \"keys\": [";
        for (std::size_t i = 0; i < keys_.size(); ++i) line += (i ? ", " : "") + json_string(keys_[i]);
        line += "]";
    }
    if (!fields.empty()) line += ", " + fields;
    line += "}\n";
    // One write per line, so lines from dlock and the command do not interleave mid-line.
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
}

void EventLog::report(std::string_view event, const std::string& fields, const std::string& for_people) const {
    if (enabled_) emit(event, fields);
    else if (!for_people.empty()) complain(for_people);
}

}  // namespace dlock::cli
