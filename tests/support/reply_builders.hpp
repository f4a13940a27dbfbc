// Replies as a server would send them, for tests of reply readers.
#pragma once

#include <initializer_list>
#include <string>

#include "dlock/reply.hpp"

namespace dlock::support {

inline Reply array(std::initializer_list<Reply> elements) {
    Reply reply;
    reply.kind = Reply::Kind::array;
    reply.elements = elements;
    return reply;
}

inline Reply integer(long long value) { return Reply::make_integer(value); }
inline Reply text(std::string s) { return Reply::make_string(std::move(s)); }

}  // namespace dlock::support
