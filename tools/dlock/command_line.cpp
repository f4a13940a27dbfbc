#include "command_line.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>

#include "cli.hpp"

namespace dlock::cli {
namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
    // Optimal string alignment: insertions, deletions, substitutions and
    // swaps of two neighbours each cost one.
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i)
        for (std::size_t j = 1; j <= b.size(); ++j) {
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}

// The words --help lists for an app: its commands, or its options.
std::vector<std::string> option_names(const CLI::App& app) {
    std::vector<std::string> names;
    for (const auto* option : app.get_options()) {
        for (const auto& l : option->get_lnames()) names.push_back("--" + l);
        for (const auto& s : option->get_snames()) names.push_back("-" + s);
    }
    return names;
}

// Flags expect no items (CLI11's expected(0)); options one or more.
bool takes_value(const CLI::Option* option) {
    return option->get_expected_max() > 0 && option->get_type_size_max() > 0;
}

// -w and -E take numbers: "-weird" is no -w with "eird" but a word.
bool numeric_option(const CLI::Option* option) {
    const auto& names = option->get_snames();
    return std::find(names.begin(), names.end(), "w") != names.end() ||
           std::find(names.begin(), names.end(), "E") != names.end();
}

const CLI::Option* known_option(const CLI::App& app, const CLI::App* command, const std::string& name) {
    if (command)
        if (const auto* option = command->get_option_no_throw(name)) return option;
    return app.get_option_no_throw(name);
}

CLI::App* find_command(CLI::App& app, const std::string& word) {
    for (auto* command : app.get_subcommands([](CLI::App*) { return true; }))
        if (command->get_name() == word) return command;
    return nullptr;
}

std::string see_help(const CLI::App* command) {
    return command ? "See 'dlock " + command->get_name() + " --help'" : std::string("See 'dlock --help'");
}

[[noreturn]] void unknown_option(const CLI::App& app, const CLI::App* command, const std::string& word) {
    const std::string name = word.substr(0, word.find('='));
    auto candidates = option_names(app);
    if (command) {
        auto more = option_names(*command);
        candidates.insert(candidates.end(), more.begin(), more.end());
    }
    std::string message = "unrecognised option '" + name + "'";
    // A long option's typo has a nearest. A single letter is near every
    // other (-x to -h means nothing), and -xyz is more likely a lock name
    // than a cluster of short options: neither gets a guess.
    const bool near_possible = name.rfind("--", 0) == 0;
    std::string guess = name == "-V" ? "--version" : near_possible ? nearest(name, candidates) : std::string();
    if (!guess.empty()) message += "; did you mean '" + guess + "'?";
    else if (command && command->get_option_no_throw("--key"))
        message += "; a lock name that begins with '-' goes in --key=" + word + ".";
    else message += ".";
    throw UsageError(message + " " + see_help(command));
}

}  // namespace

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
    auto bare = [](const std::string& s) {
        std::string out;
        for (char c : s)
            if (c != '-' && c != '_') out.push_back(c);
        return out;
    };
    std::string best;
    std::size_t best_distance = 0;
    for (const auto& candidate : candidates) {
        // The same word with other dashes (--nowait for --no-wait) is nearest of all.
        const std::size_t distance = bare(candidate) == bare(word) ? 0 : edit_distance(word, candidate);
        if (best.empty() || distance < best_distance) {
            best = candidate;
            best_distance = distance;
        }
    }
    const std::size_t allowed = word.size() >= 5 ? 2 : 1;
    return !best.empty() && best_distance <= allowed ? best : std::string();
}

void check_words(CLI::App& app, const std::vector<std::string>& args) {
    CLI::App* command = nullptr;
    bool help_or_version = false;
    for (std::size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
        const auto& word = args[i];
        if (word.size() < 2 || word.front() != '-') {
            if (command) continue;  // a key, a pattern: the command judges those
            command = find_command(app, word);
            if (command) continue;
            std::vector<std::string> names;
            for (const auto* c : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(c->get_name());
            const auto guess = nearest(word, names);
            std::string all;
            for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
            throw UsageError("unknown command '" + word + "'" +
                             (guess.empty() ? "; the commands are " + all + "."
                                            : "; did you mean '" + guess + "'?") +
                             " See 'dlock --help'");
        }
        if (word == "-h" || word == "--help" || word == "--version") help_or_version = true;
        const bool long_form = word.rfind("--", 0) == 0;
        const std::string name = long_form ? word.substr(0, word.find('=')) : word.substr(0, 2);
        const auto* option = known_option(app, command, name);
        if (!option) unknown_option(app, command, word);
        if (long_form) {
            if (word.find('=') == std::string::npos && takes_value(option)) ++i;  // its value
            continue;
        }
        if (word.size() == 2) {
            if (takes_value(option)) ++i;
            continue;
        }
        // -w10 is -w 10; -ns is -n -s. Letters that are not all flags
        // (-nightly) are a word that only looks like options, most likely a
        // lock name: -h inside it would print help and run nothing.
        if (takes_value(option)) {
            if (numeric_option(option) && !std::isdigit(static_cast<unsigned char>(word[2])) && word[2] != '.')
                unknown_option(app, command, word);
            continue;
        }
        for (std::size_t k = 1; k < word.size(); ++k) {
            const auto* letter = known_option(app, command, std::string("-") + word[k]);
            if (!letter || takes_value(letter) || word[k] == 'h') unknown_option(app, command, word);
        }
    }
    if (!command && !help_or_version)
        throw UsageError("a command is required: dlock COMMAND [OPTIONS] ...; the commands are run, hold, status, "
                         "wait-free, list, release, demo. See 'dlock --help'");
}

std::string UsageFormatter::make_usage(const CLI::App* app, std::string name) const {
    const auto found = usage_.find(app->get_parent() ? app->get_name() : std::string());
    if (found == usage_.end()) return CLI::Formatter::make_usage(app, std::move(name));
    return get_label("Usage") + ": " + found->second + "\n";
}

}  // namespace dlock::cli
