#include "redis/reply_reader.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "dlock/error.hpp"

using dlock::Reply;
using dlock::detail::ReplyReader;

namespace {

std::vector<Reply> read_all(ReplyReader& reader, std::error_code& ec) {
    std::vector<Reply> out;
    Reply r;
    while (reader.next(r, ec)) out.push_back(std::move(r));
    return out;
}

constexpr std::size_t big = 1 << 20;

// Every reply in bytes, fed at once, until the first error (in ec).
std::vector<Reply> read_bytes(const std::string& bytes, std::error_code& ec) {
    ReplyReader reader(big, big);
    reader.feed(bytes.data(), bytes.size());
    return read_all(reader, ec);
}

}  // namespace

TEST(ReplyReader, EveryKind) {
    ReplyReader reader(big, big);
    std::string bytes = "+OK\r\n-ERR bad\r\n:42\r\n$5\r\nhello\r\n$-1\r\n*2\r\n:1\r\n*1\r\n$0\r\n\r\n*-1\r\n";
    reader.feed(bytes.data(), bytes.size());
    std::error_code ec;
    auto replies = read_all(reader, ec);
    ASSERT_FALSE(ec);
    ASSERT_EQ(replies.size(), 7u);
    EXPECT_EQ(replies[0].kind, Reply::Kind::status);
    EXPECT_EQ(replies[0].text, "OK");
    EXPECT_TRUE(replies[1].is_error());
    EXPECT_EQ(replies[1].text, "ERR bad");
    EXPECT_EQ(replies[2].integer, 42);
    EXPECT_EQ(replies[3].kind, Reply::Kind::string);
    EXPECT_EQ(replies[3].text, "hello");
    EXPECT_TRUE(replies[4].is_nil());
    ASSERT_TRUE(replies[5].is_array());
    ASSERT_EQ(replies[5].elements.size(), 2u);
    EXPECT_EQ(replies[5].elements[0].integer, 1);
    ASSERT_EQ(replies[5].elements[1].elements.size(), 1u);
    EXPECT_EQ(replies[5].elements[1].elements[0].text, "");
    EXPECT_TRUE(replies[6].is_nil());
}

TEST(ReplyReader, ByteByByteSplitGivesTheSameReplies) {
    std::string bytes = "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$11\r\nhello world\r\n:-7\r\n+PONG\r\n";
    ReplyReader reader(big, big);
    std::vector<Reply> replies;
    std::error_code ec;
    for (char c : bytes) {
        reader.feed(&c, 1);
        for (auto& r : read_all(reader, ec)) replies.push_back(std::move(r));
        ASSERT_FALSE(ec);
    }
    ASSERT_EQ(replies.size(), 3u);
    EXPECT_EQ(replies[0].elements[2].text, "hello world");
    EXPECT_EQ(replies[1].integer, -7);
    EXPECT_EQ(replies[2].text, "PONG");
}

TEST(ReplyReader, BinarySafeStrings) {
    std::string payload("a\0b\r\nc", 6);
    std::string bytes = "$6\r\n" + payload + "\r\n";
    ReplyReader reader(big, big);
    reader.feed(bytes.data(), bytes.size());
    std::error_code ec;
    auto replies = read_all(reader, ec);
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(replies[0].text, payload);
}

TEST(ReplyReader, ErrorCodesFromPrefixes) {
    ReplyReader reader(big, big);
    std::string bytes = "-WRONGTYPE Operation against a key\r\n-NOPERM no\r\n-WRONGPASS invalid\r\n-NOSCRIPT x\r\n-ERR y\r\n";
    reader.feed(bytes.data(), bytes.size());
    std::error_code ec;
    auto replies = read_all(reader, ec);
    ASSERT_EQ(replies.size(), 5u);
    EXPECT_EQ(replies[0].error_code(), dlock::errc::wrong_type);
    EXPECT_EQ(replies[1].error_code(), dlock::errc::permission_denied);
    EXPECT_EQ(replies[2].error_code(), dlock::errc::auth_failed);
    EXPECT_EQ(replies[3].error_code(), dlock::errc::no_script);
    EXPECT_EQ(replies[4].error_code(), dlock::errc::server_error);
    EXPECT_FALSE(Reply::make_integer(1).error_code());
}

TEST(ReplyReader, MalformedInputIsAProtocolError) {
    for (std::string bytes : {"?what\r\n", ":12a\r\n", "$abc\r\n", "*x\r\n"}) {
        ReplyReader reader(big, big);
        reader.feed(bytes.data(), bytes.size());
        std::error_code ec;
        Reply r;
        EXPECT_FALSE(reader.next(r, ec)) << bytes;
        EXPECT_EQ(ec, dlock::errc::protocol_error) << bytes;
        // The reader stays failed: the connection must be reset.
        EXPECT_FALSE(reader.next(r, ec));
        EXPECT_EQ(ec, dlock::errc::protocol_error);
    }
}

TEST(ReplyReader, NestingDeeperThanSevenIsRefused) {
    std::string bytes;
    for (int i = 0; i < 9; ++i) bytes += "*1\r\n";
    bytes += ":1\r\n";
    ReplyReader reader(big, big);
    reader.feed(bytes.data(), bytes.size());
    std::error_code ec;
    Reply r;
    EXPECT_FALSE(reader.next(r, ec));
    EXPECT_EQ(ec, dlock::errc::protocol_error);
}

TEST(ReplyReader, StringOverTheLimitIsRefused) {
    ReplyReader reader(8, big);
    std::string bytes = "$9\r\n123456789\r\n";
    reader.feed(bytes.data(), bytes.size());
    std::error_code ec;
    Reply r;
    EXPECT_FALSE(reader.next(r, ec));
    EXPECT_EQ(ec, dlock::errc::reply_too_large);
}

TEST(ReplyReader, HugeAnnouncedStringIsRefusedBeforeItIsBuffered) {
    ReplyReader reader(1024, big);
    std::string header = "$1000000000\r\n";
    reader.feed(header.data(), header.size());
    std::string chunk(4096, 'x');
    std::error_code ec;
    Reply r;
    for (int i = 0; i < 4 && !ec; ++i) {
        reader.feed(chunk.data(), chunk.size());
        EXPECT_FALSE(reader.next(r, ec));
    }
    EXPECT_EQ(ec, dlock::errc::reply_too_large);
}

TEST(ReplyReader, ArrayOverTheLimitIsRefused) {
    ReplyReader reader(big, 3);
    std::string bytes = "*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n";
    reader.feed(bytes.data(), bytes.size());
    std::error_code ec;
    Reply r;
    EXPECT_FALSE(reader.next(r, ec));
    EXPECT_EQ(ec, dlock::errc::reply_too_large);
}

TEST(ReplyReader, PartialReplyIsFreedWithTheReader) {
    // Runs under AddressSanitizer in CI: a leak here would fail the build.
    ReplyReader reader(big, big);
    std::string bytes = "*3\r\n$3\r\nabc\r\n*2\r\n:1\r\n";
    reader.feed(bytes.data(), bytes.size());
    std::error_code ec;
    Reply r;
    EXPECT_FALSE(reader.next(r, ec));
    EXPECT_FALSE(ec);
}

TEST(ReplyReader, NoStringLimitStillReadsLongStrings) {
    // SIZE_MAX means "no limit": the limit arithmetic must not wrap.
    ReplyReader reader(SIZE_MAX, SIZE_MAX);
    const std::string payload(2048, 'x');
    const std::string bytes = "$2048\r\n" + payload + "\r\n+OK\r\n";
    std::vector<Reply> replies;
    std::error_code ec;
    for (std::size_t at = 0; at < bytes.size(); at += 500) {
        reader.feed(bytes.data() + at, std::min<std::size_t>(500, bytes.size() - at));
        for (auto& r : read_all(reader, ec)) replies.push_back(std::move(r));
        ASSERT_FALSE(ec) << ec.message();
    }
    ASSERT_EQ(replies.size(), 2u);
    EXPECT_EQ(replies[0].text, payload);
    EXPECT_EQ(replies[1].text, "OK");
}

TEST(ReplyReader, HugeLengthsFailFromTheHeaderAlone) {
    struct Case {
        std::string header;
        dlock::errc expected;
    };
    const Case cases[] = {
        {"$9223372036854775807\r\n", dlock::errc::reply_too_large},  // hiredis would add 2 to it
        {"$9223372036854775808\r\n", dlock::errc::protocol_error},   // not a long long
        {"$99999999999999999999999\r\n", dlock::errc::protocol_error},
        {"$-2\r\n", dlock::errc::protocol_error},
        {"*4294967297\r\n", dlock::errc::reply_too_large},  // hiredis passes the count as an int
        {":9223372036854775808\r\n", dlock::errc::protocol_error},
        {"$" + std::string(40, '0') + "1\r\n", dlock::errc::protocol_error},
    };
    for (const auto& c : cases) {
        ReplyReader reader(SIZE_MAX, SIZE_MAX);
        reader.feed(c.header.data(), c.header.size());
        std::error_code ec;
        Reply r;
        EXPECT_FALSE(reader.next(r, ec)) << c.header;
        EXPECT_EQ(ec, c.expected) << c.header;
    }
}

TEST(ReplyReader, ExtremeIntegersAndNilsAreRead) {
    std::error_code ec;
    auto replies = read_bytes(":-9223372036854775808\r\n:9223372036854775807\r\n$-1\r\n*-1\r\n$0\r\n\r\n", ec);
    ASSERT_FALSE(ec);
    ASSERT_EQ(replies.size(), 5u);
    EXPECT_EQ(replies[0].integer, LLONG_MIN);
    EXPECT_EQ(replies[1].integer, LLONG_MAX);
    EXPECT_TRUE(replies[2].is_nil());
    EXPECT_TRUE(replies[3].is_nil());
    EXPECT_EQ(replies[4].kind, Reply::Kind::string);
}

TEST(ReplyReader, RepliesBeforeABadByteAreStillHandedOut) {
    std::error_code ec;
    auto replies = read_bytes("+OK\r\n:1\r\n?bad\r\n", ec);
    EXPECT_EQ(replies.size(), 2u);
    EXPECT_EQ(ec, dlock::errc::protocol_error);
}

TEST(ReplyReader, SimpleStringOverTheLimitIsRefusedBeforeItEnds) {
    ReplyReader reader(16, big);
    std::string bytes = "+" + std::string(17, 'a');
    reader.feed(bytes.data(), bytes.size());
    std::error_code ec;
    Reply r;
    EXPECT_FALSE(reader.next(r, ec));
    EXPECT_EQ(ec, dlock::errc::reply_too_large);
}

TEST(ReplyReader, LimitsNearSizeMaxNeitherWrapNorOverflow) {
    // Limits a caller may give meaning "no limit", and just below: the
    // checks against them must not wrap, and hiredis's own arithmetic on a
    // length (it adds 2 in a long long) must stay out of reach.
    for (std::size_t limit : {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 2, std::size_t{LLONG_MAX}, std::size_t{LLONG_MAX} - 2}) {
        for (const std::string header : {"$9223372036854775807\r\n", "$9223372036854775806\r\n", "*2147483648\r\n"}) {
            ReplyReader reader(limit, limit);
            reader.feed(header.data(), header.size());
            std::error_code ec;
            Reply r;
            EXPECT_FALSE(reader.next(r, ec)) << header << " limit " << limit;
            EXPECT_EQ(ec, dlock::errc::reply_too_large) << header << " limit " << limit;
        }
        // The largest length hiredis can take is accepted from its header and
        // costs nothing until its bytes arrive.
        ReplyReader reader(limit, limit);
        const std::string bytes = "$9223372036854775805\r\nabc";
        reader.feed(bytes.data(), bytes.size());
        std::error_code ec;
        Reply r;
        EXPECT_FALSE(reader.next(r, ec));
        EXPECT_FALSE(ec) << ec.message() << " limit " << limit;
        // And ordinary replies still read.
        ReplyReader plain(limit, limit);
        const std::string ok = "$3\r\nabc\r\n*1\r\n:5\r\n";
        plain.feed(ok.data(), ok.size());
        ASSERT_TRUE(plain.next(r, ec)) << ec.message();
        EXPECT_EQ(r.text, "abc");
        ASSERT_TRUE(plain.next(r, ec)) << ec.message();
        EXPECT_EQ(r.elements.at(0).integer, 5);
    }
}

// Per-reply limits follow reply boundaries through nesting, strings and
// nils: the limit asked for reply N is applied to reply N only, and a reply
// past its limit fails from the header that crossed it, after the replies
// before it were handed out.
TEST(ReplyReader, EachReplyIsHeldToItsOwnLimit) {
    const std::string bytes = "*2\r\n$3\r\nabc\r\n*1\r\n$-1\r\n"  // reply 0: 3 elements at two depths
                              "+OK\r\n"                         // reply 1
                              "*2\r\n:1\r\n*-1\r\n"             // reply 2: 2 elements
                              "*2\r\n*2\r\n:1\r\n:2\r\n:3\r\n"; // reply 3: 4 elements
    std::vector<std::size_t> asked;
    auto limit_of = [&](std::size_t index) {
        asked.push_back(index);
        dlock::detail::ReplyLimit limit;
        if (index != 1) limit.max_elements = 3;
        limit.what = "test";
        return limit;
    };
    for (std::size_t chunk : {bytes.size(), std::size_t{1}}) {  // at once, and byte by byte
        asked.clear();
        ReplyReader reader(big, big);
        reader.limit_replies(limit_of);
        for (std::size_t at = 0; at < bytes.size(); at += chunk)
            reader.feed(bytes.data() + at, std::min(chunk, bytes.size() - at));
        std::error_code ec;
        auto replies = read_all(reader, ec);
        ASSERT_EQ(replies.size(), 3u) << chunk;
        EXPECT_EQ(replies[0].elements[1].elements.size(), 1u);
        EXPECT_EQ(replies[1].text, "OK");
        EXPECT_EQ(replies[2].elements.size(), 2u);
        EXPECT_EQ(ec, dlock::errc::reply_too_large) << chunk;
        EXPECT_EQ(asked, (std::vector<std::size_t>{0, 1, 2, 3})) << chunk;
        EXPECT_NE(reader.limit_detail().find("the reply to test holds at least 4 elements, more than its limit of 3"),
                  std::string::npos)
            << reader.limit_detail();
    }
    // Bytes: a string is refused from its header when its payload would
    // take the reply past the limit.
    ReplyReader reader(big, big);
    reader.limit_replies([](std::size_t) { return dlock::detail::ReplyLimit{SIZE_MAX, 64, "bytes test"}; });
    const std::string strings = "$10\r\n0123456789\r\n$100\r\n";
    reader.feed(strings.data(), strings.size());
    std::error_code ec;
    auto replies = read_all(reader, ec);
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(ec, dlock::errc::reply_too_large);
    EXPECT_NE(reader.limit_detail().find("108 bytes, more than its limit of 64"), std::string::npos)
        << reader.limit_detail();
}
