#include "metrics.hpp"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "dlock/error.hpp"

namespace dlock::soak {

long resident_bytes() {
    // statm: size resident shared ... in pages.
    std::ifstream statm("/proc/self/statm");
    long size = 0, resident = -1;
    if (!(statm >> size >> resident)) return -1;
    return resident * sysconf(_SC_PAGESIZE);
}

long heap_in_use_bytes() {
    // glibc keeps freed memory in its arenas: RSS can rise from a burst and
    // stay, while the bytes in use fall back. A leak raises both.
    const auto info = mallinfo2();
    return static_cast<long>(info.uordblks + info.hblkhd);
}

void sample_server(Client& checker, Sample& sample) {
    std::error_code ec;
    const std::string_view info_args[] = {"INFO", "memory"};
    auto info = checker.command(info_args, ec);
    if (!ec && info.is_text()) {
        constexpr std::string_view field = "used_memory:";
        if (auto at = info.text.find(field); at != std::string::npos)
            sample.used_memory = std::atol(info.text.c_str() + at + field.size());
    }
    const std::string_view dbsize_args[] = {"DBSIZE"};
    auto keys = checker.command(dbsize_args, ec);
    if (!ec && keys.is_integer()) sample.keys = keys.integer;
}

}  // namespace dlock::soak
