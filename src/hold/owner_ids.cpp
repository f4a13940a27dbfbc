#include "owner_ids.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <random>

namespace dlock::detail {
namespace {

std::string random_id() {
    std::random_device device;
    std::string id;
    static constexpr char hex[] = "0123456789abcdef";
    for (int i = 0; i < 4; ++i) {
        auto word = device();
        for (int j = 0; j < 8; ++j, word >>= 4) id.push_back(hex[word & 0xf]);
    }
    return id;  // 128 random bits
}

std::uint64_t this_thread_number() {
    static std::atomic<std::uint64_t> next{1};
    thread_local const std::uint64_t number = next.fetch_add(1);
    return number;
}

}  // namespace

OwnerIds::OwnerIds() : id_(random_id()) {}

std::string OwnerIds::thread_owner() const { return with_thread(id_); }

std::string OwnerIds::with_thread(std::string base) {
    base += ":t";
    base += std::to_string(this_thread_number());
    return base;
}

std::string OwnerIds::new_handle_owner() { return id_ + ":h" + std::to_string(next_handle_.fetch_add(1)); }

std::string OwnerIds::next_operation_id() { return std::to_string(next_operation_.fetch_add(1)); }

std::string OwnerIds::holder_label() {
    // Asked at every fresh acquisition, not cached: a forked child is another
    // process, and the host name may change.
    char host[HOST_NAME_MAX + 1] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return std::string("host=") + (host[0] ? host : "?") + " pid=" + std::to_string(getpid()) +
           " thread=" + std::to_string(syscall(SYS_gettid));
}

}  // namespace dlock::detail
