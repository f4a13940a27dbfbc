#include "reply_reader.hpp"

#include <hiredis/read.h>

#include <algorithm>
#include <new>

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

// hiredis' object callbacks have no per-reader context in 0.14 (task
// privdata is not reliably set), so the limits of the reader being driven
// travel in a thread-local for the duration of one call.
thread_local ReplyReader::Limits* current_limits = nullptr;

// An array announces its count before its elements arrive; reserving that
// many would let a few header bytes cost gigabytes. Elements are appended as
// they arrive (hiredis hands them over in order), after a small first
// reservation.
constexpr std::size_t first_reservation = 64;

// A callback's failure: hiredis sees a null object and stops with an error;
// next() reports this code.
void* refuse(std::error_code ec) noexcept {
    current_limits->error = ec;
    return nullptr;
}

void* attach(const redisReadTask* task, Reply&& value) {
    if (task->parent) {
        auto& siblings = static_cast<Reply*>(task->parent->obj)->elements;
        if (static_cast<std::size_t>(task->idx) != siblings.size()) return refuse(errc::protocol_error);
        // Earlier siblings are complete: hiredis keeps pointers only to the
        // last element of each open array, which a reallocation here does
        // not move (it lives in another vector).
        return &siblings.emplace_back(std::move(value));
    }
    auto* root = new Reply(std::move(value));
    current_limits->root = root;
    return root;
}

// hiredis is C: an exception must not unwind through it. Whatever a callback
// throws (bad_alloc while building a reply) ends the reply with an error.
template <typename Build>
void* guarded(Build build) noexcept {
    try {
        return build();
    } catch (const std::bad_alloc&) {
        return refuse(std::make_error_code(std::errc::not_enough_memory));
    } catch (...) {
        return refuse(errc::protocol_error);
    }
}

void* create_string(const redisReadTask* task, char* text, size_t length) {
    if (length > current_limits->max_string_bytes) return refuse(errc::reply_too_large);
    return guarded([&] {
        Reply value;
        value.kind = task->type == REDIS_REPLY_ERROR    ? Reply::Kind::error
                     : task->type == REDIS_REPLY_STATUS ? Reply::Kind::status
                                                        : Reply::Kind::string;
        value.text.assign(text, length);
        return attach(task, std::move(value));
    });
}

void* create_array(const redisReadTask* task, int elements) {
    if (elements < 0 || static_cast<std::size_t>(elements) > current_limits->max_array_elements)
        return refuse(errc::reply_too_large);
    return guarded([&] {
        Reply value;
        value.kind = Reply::Kind::array;
        value.elements.reserve(std::min(static_cast<std::size_t>(elements), first_reservation));
        return attach(task, std::move(value));
    });
}

void* create_integer(const redisReadTask* task, long long number) {
    return guarded([&] { return attach(task, Reply::make_integer(number)); });
}

void* create_nil(const redisReadTask* task) {
    return guarded([&] { return attach(task, Reply{}); });
}

// hiredis only ever frees the root of a partial reply; children live inside it.
void free_object(void* object) {
    if (current_limits && object == current_limits->root) {
        delete current_limits->root;
        current_limits->root = nullptr;
    }
}

redisReplyObjectFunctions functions = {create_string, create_array, create_integer, create_nil, free_object};

struct LimitsScope {
    explicit LimitsScope(ReplyReader::Limits* limits) { current_limits = limits; }
    ~LimitsScope() { current_limits = nullptr; }
};

}  // namespace

ReplyReader::ReplyReader(std::size_t max_string_bytes, std::size_t max_array_elements)
    : reader_(redisReaderCreateWithFunctions(&functions)),
      limits_{max_string_bytes, max_array_elements},
      frames_(max_string_bytes, max_array_elements) {
    if (!reader_) throw std::bad_alloc();
}

ReplyReader::~ReplyReader() {
    LimitsScope scope(&limits_);
    redisReaderFree(reader_);
    delete limits_.root;
}

void ReplyReader::feed(const char* data, std::size_t size) {
    if (failed_) return;
    // Only checked bytes reach hiredis; replies complete before a bad byte
    // are still handed out, then next() reports the framing error.
    const std::size_t good = frames_.scan(data, size);
    if (good > 0 && redisReaderFeed(reader_, data, good) != REDIS_OK)
        failed_ = reader_->err == REDIS_ERR_OOM ? std::make_error_code(std::errc::not_enough_memory)
                                                : make_error_code(errc::protocol_error);
}

bool ReplyReader::next(Reply& out, std::error_code& ec) {
    if (failed_) {
        ec = failed_;
        return false;
    }
    LimitsScope scope(&limits_);
    void* object = nullptr;
    if (redisReaderGetReply(reader_, &object) != REDIS_OK) {
        failed_ = limits_.error                    ? limits_.error
                  : reader_->err == REDIS_ERR_OOM ? std::make_error_code(std::errc::not_enough_memory)
                                                  : make_error_code(errc::protocol_error);
        ec = failed_;
        return false;
    }
    if (!object) {
        if ((failed_ = frames_.error())) ec = failed_;
        return false;
    }
    auto* root = static_cast<Reply*>(object);
    limits_.root = nullptr;
    out = std::move(*root);
    delete root;
    return true;
}

}  // namespace dlock::detail
