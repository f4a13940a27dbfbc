// What the reply reader allocates, measured by replacing operator new in
// this test binary (its own executable, so no other test is affected): the
// memory a server can make it hold, and what happens when an allocation
// fails while a reply is being built.
#include <malloc.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <string>

#include "dlock/error.hpp"
#include "redis/reply_reader.hpp"

namespace {

std::size_t live_bytes = 0;
std::size_t peak_bytes = 0;
long allocations_until_failure = -1;  // -1: never fail

// A regression that reserves by the announced count fails here, not by
// exhausting the machine's memory.
constexpr std::size_t ceiling = std::size_t{256} << 20;

void* allocate(std::size_t size) {
    if (allocations_until_failure == 0 || size > ceiling) throw std::bad_alloc();
    if (allocations_until_failure > 0) --allocations_until_failure;
    void* p = std::malloc(size ? size : 1);
    if (!p) throw std::bad_alloc();
    live_bytes += malloc_usable_size(p);
    peak_bytes = std::max(peak_bytes, live_bytes);
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
    peak_bytes = live_bytes;
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
