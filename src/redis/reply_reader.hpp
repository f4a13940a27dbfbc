// Turns bytes from the server into Reply values. No I/O: feed it bytes in
// any split, take complete replies out. Built on hiredis's reader, which
// limits nesting to 7 levels; the string and array limits are ours.
#pragma once

#include <cstddef>
#include <memory>
#include <system_error>

#include "dlock/reply.hpp"

struct redisReader;

namespace dlock::detail {

class ReplyReader {
public:
    ReplyReader(std::size_t max_string_bytes, std::size_t max_array_elements);
    ~ReplyReader();
    ReplyReader(const ReplyReader&) = delete;
    ReplyReader& operator=(const ReplyReader&) = delete;

    void feed(const char* data, std::size_t size);

    // True with a reply in out; false when more bytes are needed or on error.
    // After an error (protocol_error, reply_too_large) the reader is spent:
    // the connection it reads must be reset.
    bool next(Reply& out, std::error_code& ec);

    struct Limits {
        std::size_t max_string_bytes;
        std::size_t max_array_elements;
        bool exceeded = false;
        Reply* root = nullptr;  // the reply under construction, owned here
    };

private:
    redisReader* reader_;
    Limits limits_;
    std::error_code failed_;
};

}  // namespace dlock::detail
