#include "reply_reader.hpp"

#include <hiredis/read.h>

#include <new>

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

// hiredis' object callbacks have no per-reader context in 0.14 (task
// privdata is not reliably set), so the limits of the reader being driven
// travel in a thread-local for the duration of one call.
thread_local ReplyReader::Limits* current_limits = nullptr;

void* attach(const redisReadTask* task, Reply&& value) {
    if (task->parent) {
        auto* parent = static_cast<Reply*>(task->parent->obj);
        Reply& slot = parent->elements[static_cast<std::size_t>(task->idx)];
        slot = std::move(value);
        return &slot;
    }
    auto* root = new (std::nothrow) Reply(std::move(value));
    current_limits->root = root;
    return root;
}

void* create_string(const redisReadTask* task, char* text, size_t length) {
    if (length > current_limits->max_string_bytes) {
        current_limits->exceeded = true;
        return nullptr;
    }
    Reply value;
    value.kind = task->type == REDIS_REPLY_ERROR    ? Reply::Kind::error
                 : task->type == REDIS_REPLY_STATUS ? Reply::Kind::status
                                                    : Reply::Kind::string;
    value.text.assign(text, length);
    return attach(task, std::move(value));
}

void* create_array(const redisReadTask* task, int elements) {
    if (elements < 0 || static_cast<std::size_t>(elements) > current_limits->max_array_elements) {
        current_limits->exceeded = true;
        return nullptr;
    }
    Reply value;
    value.kind = Reply::Kind::array;
    value.elements.resize(static_cast<std::size_t>(elements));
    return attach(task, std::move(value));
}

void* create_integer(const redisReadTask* task, long long number) {
    return attach(task, Reply::make_integer(number));
}

void* create_nil(const redisReadTask* task) { return attach(task, Reply{}); }

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
    : reader_(redisReaderCreateWithFunctions(&functions)), limits_{max_string_bytes, max_array_elements} {
    if (!reader_) throw std::bad_alloc();
}

ReplyReader::~ReplyReader() {
    LimitsScope scope(&limits_);
    redisReaderFree(reader_);
    delete limits_.root;
}

void ReplyReader::feed(const char* data, std::size_t size) {
    if (failed_) return;
    if (redisReaderFeed(reader_, data, size) != REDIS_OK) failed_ = errc::protocol_error;
}

bool ReplyReader::next(Reply& out, std::error_code& ec) {
    if (failed_) {
        ec = failed_;
        return false;
    }
    LimitsScope scope(&limits_);
    void* object = nullptr;
    if (redisReaderGetReply(reader_, &object) != REDIS_OK) {
        failed_ = limits_.exceeded ? errc::reply_too_large : errc::protocol_error;
        ec = failed_;
        return false;
    }
    if (!object) {
        // hiredis buffers a bulk string whole before handing it over; refuse
        // to buffer one that is already past the limit.
        std::size_t unparsed = reader_->len - reader_->pos;
        if (unparsed > limits_.max_string_bytes + 1024) {
            failed_ = errc::reply_too_large;
            ec = failed_;
        }
        return false;
    }
    auto* root = static_cast<Reply*>(object);
    limits_.root = nullptr;
    out = std::move(*root);
    delete root;
    return true;
}

}  // namespace dlock::detail
