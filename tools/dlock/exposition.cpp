#include "exposition.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include "cli.hpp"

namespace dlock::cli {

namespace {

// How many bytes the UTF-8 sequence at s[i] takes, or 0 when it is not one
// (a stray continuation byte, a truncated or overlong sequence, a surrogate,
// past U+10FFFF).
std::size_t utf8_length(const std::string& s, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char lead = byte(i);
    if (lead < 0x80) return 1;
    std::size_t length = lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3 : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
    if (length == 0 || i + length > s.size()) return 0;
    for (std::size_t k = 1; k < length; ++k)
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
    const unsigned char second = byte(i + 1);
    if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) || (lead == 0xF0 && second < 0x90) ||
        (lead == 0xF4 && second > 0x8F))
        return 0;
    return length;
}

// A label value as the text format writes it: backslash, quote and newline
// escaped, and bytes that are not UTF-8 (a lock name may be any bytes; the
// format is UTF-8) written as U+FFFD, so that a collector never refuses the file.
std::string label_value(const std::string& value) {
    std::string out;
    for (std::size_t i = 0; i < value.size();) {
        const char c = value[i];
        const std::size_t length = utf8_length(value, i);
        if (length == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
            continue;
        }
        if (c == '\\' || c == '"') out.push_back('\\');
        if (c == '\n') out += "\\n";
        else out.append(value, i, length);
        i += length;
    }
    return out;
}

std::string number(double value) {
    char text[64];
    std::snprintf(text, sizeof text, "%.3f", value);
    return text;
}

double unix_seconds(std::chrono::system_clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace

std::string run_exposition(const RunRecord& run) {
    const std::string labels = "{job=\"" + label_value(run.job) + "\",key=\"" + label_value(run.key) + "\"}";
    std::string out;
    auto gauge = [&](const char* name, const char* help, const std::string& value) {
        out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + labels + " " +
               value + "\n";
    };
    gauge("dlock_run_last_start_timestamp_seconds", "When the job's last dlock run started (Unix time).",
          number(unix_seconds(run.start)));
    gauge("dlock_run_last_end_timestamp_seconds", "When the job's last dlock run ended (Unix time).",
          number(unix_seconds(run.start) + std::chrono::duration<double>(run.took).count()));
    gauge("dlock_run_last_duration_seconds", "How long the job's last dlock run took, waiting included.",
          number(std::chrono::duration<double>(run.took).count()));
    gauge("dlock_run_last_exit_code", "The exit status of the job's last dlock run.", std::to_string(run.exit_code));
    gauge("dlock_run_last_wait_seconds", "How long the job's last dlock run waited for its lock.",
          number(std::chrono::duration<double>(run.waited).count()));
    gauge("dlock_run_last_acquired", "1 if the job's last dlock run took its lock, 0 if not.",
          run.acquired ? "1" : "0");
    return out;
}

namespace {

std::string directory_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void check_metrics_path(const std::string& path) {
    const std::string directory = directory_of(path);
    const std::string name = path.substr(path.rfind('/') + 1);  // npos + 1 == 0: no slash
    const long most = ::pathconf(directory.c_str(), _PC_NAME_MAX);
    if (most > 0 && name.size() > static_cast<std::size_t>(most))
        throw UsageError("--metrics-file " + path + ": the file name is " + std::to_string(name.size()) +
                         " bytes, more than the " + std::to_string(most) + " a name may have in " + directory);
    struct stat info {};
    if (::stat(directory.c_str(), &info) != 0)
        throw UsageError("--metrics-file " + path + ": its directory " + directory + " cannot be used (" +
                         std::strerror(errno) + "); create it, or name a file in one that exists");
    if (!S_ISDIR(info.st_mode))
        throw UsageError("--metrics-file " + path + ": " + directory + " is not a directory");
    if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
        throw UsageError("--metrics-file " + path + " is a directory; name a file in it, one per job "
                         "(e.g. " + path + (path.ends_with("/") ? "" : "/") + "JOB.prom)");
}

bool write_metrics_file(const std::string& path, const std::string& text) {
    // A fresh name made with O_EXCL (mkstemp): a file or symlink planted
    // under a predictable name is never opened or followed. A short name of
    // its own in the same directory (the rename stays atomic): PATH plus a
    // suffix was too long to make for a name near the longest allowed.
    std::string temporary = directory_of(path) + "/.dlock-metrics.XXXXXX";
    bool made = false;
    auto failed = [&](const char* step) {
        complain("cannot write the metrics to " + path + " (" + step + "): " + std::strerror(errno));
        if (made) ::unlink(temporary.c_str());
        return false;
    };
    const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
    if (fd < 0) return failed("open");
    made = true;
    if (::fchmod(fd, 0644) != 0) {
        const int saved = errno;
        ::close(fd);
        errno = saved;
        return failed("chmod");
    }
    std::size_t written = 0;
    while (written < text.size()) {
        const auto n = ::write(fd, text.data() + written, text.size() - written);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int saved = errno;
            ::close(fd);
            errno = saved;
            return failed("write");
        }
        written += static_cast<std::size_t>(n);
    }
    // On disk before it is renamed into place: a crash leaves the old file
    // or the new one, never an empty one.
    if (::fsync(fd) != 0) {
        const int saved = errno;
        ::close(fd);
        errno = saved;
        return failed("fsync");
    }
    if (::close(fd) != 0) return failed("close");
    if (std::rename(temporary.c_str(), path.c_str()) != 0) return failed("rename");
    return true;
}

std::string sum_expositions(const std::vector<std::string>& texts) {
    // One block per family: its comment lines, then its samples by
    // "name{labels}" in first-seen order, so that a family's samples stay
    // together whichever process had them.
    struct Block {
        std::vector<std::string> comments, keys;
    };
    std::vector<Block> blocks;
    std::map<std::string, std::size_t> block_of;  // family name -> block
    std::map<std::string, double> sums;
    auto block_for = [&](const std::string& family) -> Block& {
        auto [it, fresh] = block_of.emplace(family, blocks.size());
        if (fresh) blocks.emplace_back();
        return blocks[it->second];
    };
    for (const auto& text : texts) {
        std::istringstream lines(text);
        std::string line;
        while (std::getline(lines, line)) {
            if (line.empty()) continue;
            if (line.front() == '#') {
                // "# HELP name ..." / "# TYPE name ...": the third word names the family.
                std::istringstream words(line);
                std::string hash, kind, family;
                words >> hash >> kind >> family;
                auto& block = block_for(family);
                if (std::find(block.comments.begin(), block.comments.end(), line) == block.comments.end())
                    block.comments.push_back(line);
                continue;
            }
            const auto space = line.rfind(' ');
            if (space == std::string::npos) continue;
            const auto key = line.substr(0, space);
            double value = 0;
            try {
                value = std::stod(line.substr(space + 1));
            } catch (const std::exception&) {
                continue;
            }
            auto [it, fresh] = sums.emplace(key, 0.0);
            it->second += value;
            if (!fresh) continue;
            // A histogram's samples are named with a suffix of its family's name.
            std::string family = key.substr(0, key.find('{'));
            if (!block_of.count(family))
                for (std::string_view suffix : {"_bucket", "_sum", "_count"})
                    if (family.size() > suffix.size() && family.ends_with(suffix) &&
                        block_of.count(family.substr(0, family.size() - suffix.size()))) {
                        family.resize(family.size() - suffix.size());
                        break;
                    }
            block_for(family).keys.push_back(key);
        }
    }
    std::string out;
    for (const auto& block : blocks) {
        for (const auto& comment : block.comments) out += comment + "\n";
        for (const auto& key : block.keys) {
            char number[64];
            std::snprintf(number, sizeof number, "%.12g", sums[key]);
            out += key + " " + number + "\n";
        }
    }
    return out;
}

}  // namespace dlock::cli
