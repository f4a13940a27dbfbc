// The dlock command's duration parser on arbitrary text: it either refuses
// with std::invalid_argument (and a reason naming the text) or returns a
// duration within 0 .. 366 days that reads back the same in milliseconds.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "duration.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace std::chrono;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    milliseconds parsed{};
    try {
        parsed = dlock::cli::parse_duration(text);
    } catch (const std::invalid_argument& e) {
        // The reason quotes the text; what() ends at a NUL the text may hold
        // (command-line arguments never do).
        const std::string_view reason = e.what();
        const auto nul = text.find('\0');
        const std::string visible = "'" + std::string(text.substr(0, nul));
        if (nul == std::string_view::npos) FUZZ_CHECK(reason.starts_with(visible + "'"));
        else FUZZ_CHECK(reason == visible);
        return 0;
    }
    FUZZ_CHECK(parsed >= milliseconds::zero() && parsed <= hours(366 * 24));
    FUZZ_CHECK(dlock::cli::parse_duration(std::to_string(parsed.count()) + "ms") == parsed);
    return 0;
}
