#include "owner_ids.hpp"

#include "fork_generation.hpp"
#include "thread_kept.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <algorithm>
#include <climits>
#include <cstring>
#include <type_traits>
#include <string_view>
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

// How often a thread's holder label looks at the host's name again.
constexpr auto host_recheck = std::chrono::seconds(1);

// Threads and asynchronous operations draw their numbers from one counter:
// no operation is ever mistaken for a thread.
std::atomic<std::uint64_t> next_owner_number{1};
thread_local std::uint64_t scoped_owner_number = 0;  // OwnerScope; 0: none

std::uint64_t this_thread_number() noexcept {
    if (scoped_owner_number != 0) return scoped_owner_number;
    thread_local const std::uint64_t number = next_owner_number.fetch_add(1);
    return number;
}

}  // namespace

OwnerIds::OwnerIds() : id_(random_id()) {}

std::string OwnerIds::thread_owner() const {
    // Made on every acquire and release: one allocation, not one per piece.
    std::string owner;
    owner.reserve(id_.size() + 2 + 20);
    owner += id_;
    return with_thread(std::move(owner));
}

std::shared_ptr<const std::string> OwnerIds::shared_thread_owner() const {
    struct Last {
        std::shared_ptr<const std::string> name;
        std::uint64_t number = 0;
    };
    Last fallback;  // asked while the thread ends (thread_kept.hpp)
    auto& last = thread_kept_or<Last>(fallback);
    const auto number = this_thread_number();
    // The name is id_ + ":t" + number: the same number and id, the same name.
    if (last.name && last.number == number && last.name->size() > id_.size() && last.name->starts_with(id_) &&
        (*last.name)[id_.size()] == ':')
        return last.name;
    last.name = std::make_shared<const std::string>(thread_owner());
    last.number = number;
    return last.name;
}

std::string OwnerIds::with_thread(std::string base) {
    char number[24];
    const auto end = std::to_chars(number, number + sizeof number, this_thread_number()).ptr;
    base += ":t";
    base.append(number, end);
    return base;
}

std::uint64_t OwnerIds::calling_number() noexcept { return this_thread_number(); }

std::uint64_t OwnerIds::new_owner_number() { return next_owner_number.fetch_add(1); }

OwnerScope::OwnerScope(std::uint64_t number) : previous_(scoped_owner_number) { scoped_owner_number = number; }
OwnerScope::~OwnerScope() { scoped_owner_number = previous_; }
bool OwnerScope::active() noexcept { return scoped_owner_number != 0; }

std::string OwnerIds::new_handle_owner() { return id_ + ":h" + std::to_string(next_handle_.fetch_add(1)); }

std::string OwnerIds::next_operation_id() { return std::to_string(next_operation_.fetch_add(1)); }

std::string_view OwnerIds::holder_label() {
    // Asked at every fresh acquisition, so it is made once per thread and
    // made again only when it may read differently: in a forked child
    // (another process, whose thread has another id), or when the host's
    // name may have changed (looked at again at most once a second). Three
    // system calls and a format per acquisition before. Kept in plain
    // arrays, never destroyed: a lock taken by a thread_local object's
    // destructor at the thread's exit still reads it (thread_kept.hpp).
    struct Kept {
        char label[sizeof "host= pid= thread=" + HOST_NAME_MAX + 2 * 20];
        std::size_t size = 0;
        unsigned fork_generation = 0;
        std::chrono::steady_clock::time_point host_read;
        char host[HOST_NAME_MAX + 1];
    };
    static_assert(std::is_trivially_destructible_v<Kept>);
    thread_local Kept kept{};
    const auto now = std::chrono::steady_clock::now();
    const bool forked = kept.fork_generation != current_fork_generation();
    const bool made = kept.size != 0;
    if (made && !forked && now - kept.host_read < host_recheck) return {kept.label, kept.size};
    char host[HOST_NAME_MAX + 1] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    kept.host_read = now;
    if (made && !forked && std::strcmp(kept.host, host) == 0) return {kept.label, kept.size};
    std::memcpy(kept.host, host, sizeof host);
    kept.fork_generation = current_fork_generation();
    char* out = kept.label;
    char* const last = kept.label + sizeof kept.label;
    const auto put = [&](std::string_view text) {
        const auto n = std::min<std::size_t>(text.size(), static_cast<std::size_t>(last - out));
        std::memcpy(out, text.data(), n);
        out += n;
    };
    put("host=");
    put(host[0] ? std::string_view(host) : std::string_view("?"));
    put(" pid=");
    out = std::to_chars(out, last, getpid()).ptr;
    put(" thread=");
    out = std::to_chars(out, last, syscall(SYS_gettid)).ptr;
    kept.size = static_cast<std::size_t>(out - kept.label);
    return {kept.label, kept.size};
}

}  // namespace dlock::detail
