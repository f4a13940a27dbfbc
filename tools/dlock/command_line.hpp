// The command line's words, checked before CLI11 reads them, so that a
// mistake is told as what is wrong and what to do: an unknown command or
// option with the nearest one ("did you mean '--no-wait'?"), a lock name
// that begins with '-' pointed to --key=NAME, and each command's usage line
// saying exactly what it takes.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

namespace dlock::cli {

// The nearest of `candidates` to `word` (a typo, a missing or extra dash,
// two letters swapped), or "" when none is near.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

// Throws UsageError for the first word before "--" that is an option
// neither dlock nor its command knows, or a command word dlock does not
// know, or when no command is given (and neither --help nor --version).
void check_words(CLI::App& app, const std::vector<std::string>& args);

// Usage lines by command name ("" for dlock itself), instead of CLI11's
// "[OPTIONS] [key...]": set on the app before its commands are added (they
// take the parent's formatter).
class UsageFormatter : public CLI::Formatter {
public:
    explicit UsageFormatter(std::map<std::string, std::string> usage) : usage_(std::move(usage)) {}
    std::string make_usage(const CLI::App* app, std::string name) const override;

private:
    std::map<std::string, std::string> usage_;
};

}  // namespace dlock::cli
