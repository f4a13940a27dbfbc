// What the reply reader allocates, measured by replacing operator new in
// this test binary (its own executable, so no other test is affected): the
// memory a server can make it hold, and what happens when an allocation
// fails while a reply is being built.
#include <malloc.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <string>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "redis/reply_reader.hpp"
#include "scripted_server.hpp"

namespace {

// Atomic: the client test below allocates on its own threads too.
std::atomic<std::size_t> live_bytes{0};
std::atomic<std::size_t> peak_bytes{0};
std::atomic<long> allocations_until_failure{-1};  // -1: never fail

// A regression that reserves by the announced count fails here, not by
// exhausting the machine's memory.
constexpr std::size_t ceiling = std::size_t{256} << 20;

void* allocate(std::size_t size) {
    if (allocations_until_failure == 0 || size > ceiling) throw std::bad_alloc();
    if (allocations_until_failure > 0) --allocations_until_failure;
    void* p = std::malloc(size ? size : 1);
    if (!p) throw std::bad_alloc();
    const auto now = live_bytes += malloc_usable_size(p);
    for (auto peak = peak_bytes.load(); now > peak && !peak_bytes.compare_exchange_weak(peak, now);) {
    }
    return p;
}

void release(void* p) noexcept {
    if (!p) return;
    live_bytes -= malloc_usable_size(p);
    std::free(p);
}

}  // namespace

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }

using dlock::Reply;
using dlock::detail::ReplyReader;

TEST(ReplyReaderAllocation, AnnouncedArrayCountsCostNothingUntilElementsArrive) {
    const std::size_t limit = std::size_t{16} << 20;  // the default max_array_elements
    std::string bytes;
    for (int level = 0; level < 7; ++level) bytes += "*16777216\r\n";
    bytes += ":1\r\n:2\r\n";
    const std::size_t before = live_bytes;
    peak_bytes = before;
    {
        ReplyReader reader(std::size_t{512} << 20, limit);
        reader.feed(bytes.data(), bytes.size());
        std::error_code ec;
        Reply r;
        EXPECT_FALSE(reader.next(r, ec));  // far from complete
        EXPECT_FALSE(ec) << ec.message();
    }
    EXPECT_LT(peak_bytes - before, std::size_t{1} << 20) << "bytes held for " << bytes.size() << " bytes received";
    EXPECT_EQ(live_bytes, before);
}

TEST(ReplyReaderAllocation, FailedAllocationWhileBuildingAReplyIsAnError) {
    const std::string bytes = "*3\r\n$40\r\n" + std::string(40, 's') + "\r\n*2\r\n:1\r\n+OK\r\n-ERR " +
                              std::string(40, 'e') + "\r\n";
    // Fail the first allocation, then the second, ... until the reply is
    // built without reaching the failure: every allocation point is hit once.
    bool completed = false;
    for (long n = 0; !completed && n < 100; ++n) {
        ReplyReader reader(1 << 20, 1 << 20);
        reader.feed(bytes.data(), bytes.size());
        std::error_code ec;
        Reply r;
        allocations_until_failure = n;
        bool got = false;
        EXPECT_NO_THROW(got = reader.next(r, ec)) << "failing allocation " << n;
        const bool failure_reached = allocations_until_failure == 0;
        allocations_until_failure = -1;
        if (got) {
            completed = true;
            ASSERT_EQ(r.elements.size(), 3u);
            EXPECT_EQ(r.elements[2].text, "ERR " + std::string(40, 'e'));
        } else {
            ASSERT_TRUE(failure_reached) << "failing allocation " << n;
            EXPECT_EQ(ec, std::errc::not_enough_memory) << "failing allocation " << n;
            // The reader is spent, and says so again.
            EXPECT_FALSE(reader.next(r, ec));
            EXPECT_EQ(ec, std::errc::not_enough_memory);
        }
    }
    EXPECT_TRUE(completed);
}

// A server that answers a lock script with 2 Mi nils (10 MB on the wire,
// within the client's max_array_elements): a lock script's reply is a few
// numbers, so the reply is refused from its header. The call fails with
// reply_too_large naming the script, the connection is reset, and the
// client holds next to nothing for it (it used to build every nil: about
// 150 MB and more).
TEST(ReplyReaderAllocation, AHugeReplyToALockScriptIsRefusedFromItsHeader) {
    using dlock::support::ScriptedServer;
    constexpr std::size_t nils = std::size_t{2} << 20;
    std::atomic<int> scripts_answered{0};
    // Made before the count starts: the server runs in this process.
    std::string hostile = "*" + std::to_string(nils) + "\r\n";
    for (std::size_t i = 0; i < nils; ++i) hostile += "$-1\r\n";
    ScriptedServer server([&](const std::vector<std::string>& command) -> std::string {
        if (command.empty()) return "-ERR empty\r\n";
        if (command[0] == "PING") return "+PONG\r\n";
        if (command[0] == "CLIENT" || command[0] == "SUBSCRIBE") return "+OK\r\n";
        if (command[0] == "EVALSHA" || command[0] == "EVAL") {
            ++scripts_answered;
            return hostile;
        }
        return "-ERR unknown command\r\n";
    });
    dlock::Client client("redis://127.0.0.1:" + std::to_string(server.port()),
                         {.command_timeout = std::chrono::seconds(5)});
    client.wait_connected();
    auto lock = client.lock("hostile");
    const std::size_t before = live_bytes;
    peak_bytes = before;
    std::error_code ec;
    std::string what;
    try {
        static_cast<void>(lock.try_lock());
    } catch (const dlock::Error& e) {
        ec = e.code();
        what = e.what();
    }
    const std::size_t grew = peak_bytes - before;
    EXPECT_EQ(ec, dlock::errc::reply_too_large) << what;
    EXPECT_NE(what.find("lock script 'acquire'"), std::string::npos) << what;
    EXPECT_NE(what.find("more than its limit of 16"), std::string::npos) << what;
    EXPECT_GE(scripts_answered, 1);
    // What the call cost, whatever the server sent: the server's own copy
    // of its reply (it runs in this process), and for the client far below
    // one element per nil (72 bytes x 2 Mi = 150 MB).
    EXPECT_LT(grew, hostile.size() + (std::size_t{4} << 20))
        << "bytes held for a reply of " << hostile.size() << " bytes sent";
}
