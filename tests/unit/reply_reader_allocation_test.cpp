// What the reply reader allocates, measured by replacing operator new in
// this test binary (its own executable, so no other test is affected): the
// memory a server can make it hold, and what happens when an allocation
// fails while a reply is being built.
#include <malloc.h>

#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "redis/reply_reader.hpp"
#include "redis_server.hpp"
#include "scripted_server.hpp"
#include "thrown.hpp"

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
    const auto [ec, what] = dlock::support::thrown_by([&] { return lock.try_lock(); });
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

namespace {

// n copies of one item in an array, as a server would send them.
std::string array_of(std::size_t n, const std::string& item) {
    std::string bytes = "*" + std::to_string(n) + "\r\n";
    bytes.reserve(bytes.size() + n * item.size());
    for (std::size_t i = 0; i < n; ++i) bytes += item;
    return bytes;
}

struct Read {
    bool complete = false;
    std::error_code ec;
    std::size_t elements = 0;
    std::size_t fed = 0;   // bytes fed until the reply completed or failed
    std::size_t grew = 0;  // peak bytes held by the reader meanwhile
    std::string detail;
};

// Feeds bytes in 16 KiB reads as a connection does, taking replies out
// after each, until the reply completes or fails.
Read read_one(const std::string& bytes, std::size_t max_overhead) {
    Read out;
    const std::size_t before = live_bytes;
    peak_bytes = before;
    {
        ReplyReader reader(std::size_t{512} << 20, std::size_t{16} << 20, max_overhead);
        Reply r;
        while (out.fed < bytes.size() && !out.complete && !out.ec) {
            const auto n = std::min<std::size_t>(16 << 10, bytes.size() - out.fed);
            reader.feed(bytes.data() + out.fed, n);
            out.fed += n;
            out.complete = reader.next(r, out.ec);
        }
        out.elements = r.elements.size();
        out.grew = peak_bytes - before;
        out.detail = reader.memory_detail();
    }
    EXPECT_LE(live_bytes, before + 1024);  // all but the detail freed
    return out;
}

}  // namespace

// 2 Mi items of 3 to 6 bytes (6 to 12 MB on the wire): each would be a
// whole Reply of 72 bytes, 150 MB and more for the array. The reply is
// refused once it would cost more than 8 times the bytes received plus the
// overhead (16 MiB), long before its end: the reader holds a few tens of MB
// at most, whatever the count.
TEST(ReplyReaderAllocation, AHugeArrayOfTinyItemsIsRefusedBeforeItCostsMoreThanItsBytesJustify) {
    constexpr std::size_t items = std::size_t{2} << 20;
    constexpr std::size_t overhead = std::size_t{16} << 20;
    for (const std::string item : {"$-1\r\n", ":1\r\n", "$0\r\n\r\n", "+\r\n"}) {
        const auto bytes = array_of(items, item);
        const auto read = read_one(bytes, overhead);
        EXPECT_FALSE(read.complete) << "items " << item.substr(0, 2) << ": built " << read.elements
                                    << " elements, holding " << read.grew << " bytes for " << bytes.size() << " sent";
        EXPECT_EQ(read.ec, dlock::errc::reply_too_large) << read.ec.message();
        EXPECT_NE(read.detail.find("bytes of client memory for the"), std::string::npos) << read.detail;
        // The budget, the moment storage moves to a larger block included
        // (and a little for this test's own strings).
        EXPECT_LE(read.grew, 8 * read.fed + overhead + 4096)
            << "items " << item.substr(0, 2) << ": " << read.grew << " bytes held for " << read.fed << " fed";
        std::printf("items %s x %zu (%zu bytes): refused after %zu bytes fed, peak %zu bytes\n",
                    item.substr(0, 2).c_str(), items, bytes.size(), read.fed, read.grew);
    }
}

// What a reply may cost is a budget, not a ban on large replies: items that
// pay for themselves (bulk strings of 13 bytes, 20 on the wire) are built
// however many there are, tiny items up to the overhead (100 000 nils), and
// with the overhead at SIZE_MAX nothing is charged.
TEST(ReplyReaderAllocation, RepliesWithinTheirBudgetAreBuiltWhateverTheirSize) {
    constexpr std::size_t overhead = std::size_t{16} << 20;
    auto strings = read_one(array_of(std::size_t{1} << 20, "$13\r\ndlock:{name1}\r\n"), overhead);
    EXPECT_TRUE(strings.complete) << strings.ec.message() << " " << strings.detail;
    EXPECT_EQ(strings.elements, std::size_t{1} << 20);
    auto nils = read_one(array_of(100000, "$-1\r\n"), overhead);
    EXPECT_TRUE(nils.complete) << nils.ec.message() << " " << nils.detail;
    EXPECT_EQ(nils.elements, 100000u);
    auto uncharged = read_one(array_of(std::size_t{1} << 20, ":1\r\n"), SIZE_MAX);
    EXPECT_TRUE(uncharged.complete) << uncharged.ec.message();
    EXPECT_EQ(uncharged.elements, std::size_t{1} << 20);
}

// The same through a Client: an ordinary command (MGET) answered with 2 Mi
// nils fails with reply_too_large naming the command, the server and the
// option; the connection is reset and the next command succeeds. The client
// held a few tens of MB for it (it used to build every nil: 150 MB and more).
TEST(ReplyReaderAllocation, AHugeReplyToAnyCommandFailsNamingTheCommandAndTheServer) {
    using dlock::support::ScriptedServer;
    constexpr std::size_t nils = std::size_t{2} << 20;
    const std::string hostile = array_of(nils, "$-1\r\n");
    ScriptedServer server([&](const std::vector<std::string>& command) -> std::string {
        if (command.empty()) return "-ERR empty\r\n";
        if (command[0] == "PING") return "+PONG\r\n";
        if (command[0] == "CLIENT") return "+OK\r\n";
        if (command[0] == "MGET") return hostile;
        return "-ERR unknown command\r\n";
    });
    const auto address = "127.0.0.1:" + std::to_string(server.port());
    dlock::Client client("redis://" + address, {.command_timeout = std::chrono::seconds(10)});
    client.wait_connected();
    const std::size_t before = live_bytes;
    peak_bytes = before;
    std::error_code ec;
    std::string what;
    try {
        static_cast<void>(client.command({"MGET", "a", "b"}));
    } catch (const dlock::Error& e) {
        ec = e.code();
        what = e.what();
    }
    const std::size_t grew = peak_bytes - before;
    EXPECT_EQ(ec, dlock::errc::reply_too_large) << what;
    EXPECT_NE(what.find("'MGET'"), std::string::npos) << what;
    EXPECT_NE(what.find(address), std::string::npos) << what;
    EXPECT_NE(what.find("max_reply_overhead"), std::string::npos) << what;
    // The server's own copy of its reply (it runs in this process), its
    // send buffer, and the client's budget.
    EXPECT_LT(grew, 2 * hostile.size() + (std::size_t{40} << 20)) << "bytes held for a reply of " << hostile.size();
    std::printf("MGET answered with %zu nils (%zu bytes): peak %zu bytes in this process\n", nils, hostile.size(), grew);
    EXPECT_TRUE(client.command({"PING"}).is_text());
}

// Too small an overhead would refuse the smallest replies.
TEST(ReplyReaderAllocation, AnOverheadBelow64KiBIsRefused) {
    EXPECT_THROW(dlock::Client("redis://127.0.0.1:1", {.max_reply_overhead = 1000}), dlock::Error);
}

// A burst of output (here one 8 MiB command; after a restart, a thousand
// renewals at once) is freed once written: neither the connection's buffer
// nor the writing thread's keeps it. Both used to keep its capacity for
// good, and buffers swapped between connections and threads, so each burst
// could leave another one allocated (the soak's heap stepping up after
// restarts).
TEST(ConnectionAllocation, ABurstOfOutputIsFreedOnceWritten) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    client.wait_connected();
    static_cast<void>(client.command({"PING"}));
    const std::string value(std::size_t{8} << 20, 'v');
    const std::size_t before = live_bytes;
    EXPECT_TRUE(client.command({"SET", "big", value}).is_text());
    static_cast<void>(client.command({"PING"}));
    const std::size_t kept = live_bytes > before ? live_bytes - before : 0;
    EXPECT_LT(kept, std::size_t{1} << 20) << "bytes kept after writing " << value.size();
    std::printf("after writing an 8 MiB command: %zu bytes kept\n", kept);
}

// Two commands pipelined, the first answered over its limit. Replies are
// matched to callers in order (client.hpp), and their completions run in
// that order: the offender first (its reason), then the one after it (lost
// with the connection).
TEST(ReplyReaderAllocation, PipelinedAfterAnOverLimitReplyTheOffenderHearsFirst) {
    using dlock::support::ScriptedServer;
    const std::string hostile = array_of(std::size_t{2} << 20, "$-1\r\n");
    ScriptedServer server([&](const std::vector<std::string>& command) -> std::string {
        if (command.empty()) return "-ERR empty\r\n";
        if (command[0] == "PING") return "+PONG\r\n";
        if (command[0] == "CLIENT") return "+OK\r\n";
        if (command[0] == "MGET") return hostile;
        return "-ERR unknown command\r\n";
    });
    dlock::Client client("redis://127.0.0.1:" + std::to_string(server.port()),
                         {.command_timeout = std::chrono::seconds(10)});
    client.wait_connected();
    std::mutex mutex;
    std::vector<std::pair<std::string, std::error_code>> heard;
    std::atomic<int> left{2};
    const std::string_view mget[] = {"MGET", "a", "b"};
    const std::string_view ping[] = {"PING"};
    client.submit(mget, [&](std::error_code ec, Reply&&) {
        std::lock_guard lock(mutex);
        heard.emplace_back("MGET", ec);
        --left;
    });
    client.submit(ping, [&](std::error_code ec, Reply&&) {
        std::lock_guard lock(mutex);
        heard.emplace_back("PING", ec);
        --left;
    });
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (left > 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::lock_guard lock(mutex);
    ASSERT_EQ(heard.size(), 2u);
    for (const auto& [what, ec] : heard) std::printf("completion: %s %s\n", what.c_str(), ec.message().c_str());
    EXPECT_EQ(heard[0].first, "MGET");
    EXPECT_EQ(heard[0].second, dlock::errc::reply_too_large);
}
