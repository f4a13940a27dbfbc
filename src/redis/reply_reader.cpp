#include "reply_reader.hpp"

#include <utility>
#include <hiredis/read.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <string>

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

std::size_t add(std::size_t a, std::size_t b) noexcept { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

// Bytes of a number as Redis writes it.
std::size_t digits(unsigned long long v) noexcept {
    std::size_t n = 1;
    for (; v >= 10; v /= 10) ++n;
    return n;
}
std::size_t digits(long long v) noexcept {
    return v < 0 ? 1 + digits(0ULL - static_cast<unsigned long long>(v)) : digits(static_cast<unsigned long long>(v));
}

// A string this long or shorter lives inside its Reply; a longer one is
// allocated (libstdc++ takes at least twice the inner buffer when it first
// leaves it).
const std::size_t inner_string = std::string().capacity();
std::size_t string_heap(std::size_t length) noexcept {
    return length <= inner_string ? 0 : std::max(length, 2 * inner_string) + 1;
}

// Room for the elements of an array that holds `size` of its `announced`,
// once one more arrives: as much as now, or more by `step` (never past the
// count announced, so a complete array has no spare room).
std::size_t grown(std::size_t size, std::size_t capacity, std::size_t announced, std::size_t step) noexcept {
    if (size < capacity) return capacity;
    return std::max(size + 1, std::min(announced, capacity + step));
}

// Charges one item to the reply under construction before anything is
// allocated for it: `wire` bytes received, `heap` bytes of its own, and the
// room it takes (its parent's element storage growing, or the root Reply).
// False, with reply_too_large, when the reply would cost more than the
// bytes received justify, counting the moment element storage moves to a
// larger block (both blocks are held then). The storage doubles when the
// budget allows, else grows by an eighth, so an array whose elements pay
// for themselves is not refused for the room doubling would reserve ahead
// of them.
bool admit(const redisReadTask* task, std::size_t wire, std::size_t heap) noexcept {
    auto& limits = *current_limits;
    if (limits.max_overhead == SIZE_MAX) return true;
    limits.wire = add(limits.wire, wire);
    const auto budget = add(limits.wire > SIZE_MAX / reply_memory_factor ? SIZE_MAX : limits.wire * reply_memory_factor,
                            limits.max_overhead);
    // `room` more bytes held from now on, `moving` more only while storage moves.
    const auto within = [&](std::size_t room, std::size_t moving) {
        const auto cost = add(limits.built, add(heap, room));
        if (add(cost, moving) > budget) {
            limits.refused_built = std::max(limits.refused_built, add(cost, moving));
            return false;
        }
        limits.built = cost;
        limits.refused_built = 0;
        return true;
    };
    if (!task->parent) {
        if (within(sizeof(Reply), 0)) return true;
    } else {
        const auto& siblings = static_cast<const Reply*>(task->parent->obj)->elements;
        const auto size = siblings.size(), capacity = siblings.capacity();
        const auto announced = static_cast<std::size_t>(std::max(task->parent->elements, 0));
        for (auto step : {std::max(first_reservation, capacity), std::max(first_reservation, capacity / 8)}) {
            limits.grow_to = grown(size, capacity, announced, step);
            const auto moving = limits.grow_to > capacity ? capacity * sizeof(Reply) : 0;
            if (within((limits.grow_to - capacity) * sizeof(Reply), moving)) return true;
        }
    }
    refuse(errc::reply_too_large);
    return false;
}

void* attach(const redisReadTask* task, Reply&& value) {
    if (task->parent) {
        auto& siblings = static_cast<Reply*>(task->parent->obj)->elements;
        if (static_cast<std::size_t>(task->idx) != siblings.size()) return refuse(errc::protocol_error);
        // Earlier siblings are complete: hiredis keeps pointers only to the
        // last element of each open array, which a reallocation here does
        // not move (it lives in another vector).
        if (current_limits->max_overhead == SIZE_MAX) {
            const auto announced = static_cast<std::size_t>(std::max(task->parent->elements, 0));
            current_limits->grow_to =
                grown(siblings.size(), siblings.capacity(), announced, std::max(first_reservation, siblings.capacity()));
        }
        siblings.reserve(current_limits->grow_to);  // as admit() charged
        return &siblings.emplace_back(std::move(value));
    }
    Reply* root = std::exchange(current_limits->spare, nullptr);
    if (root) *root = std::move(value);
    else root = new Reply(std::move(value));
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
    const bool bulk = task->type == REDIS_REPLY_STRING;
    const auto wire = (bulk ? 1 + digits(static_cast<unsigned long long>(length)) + 2 : 1) + length + 2;
    if (!admit(task, wire, string_heap(length))) return nullptr;
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
    const auto reserved = std::min(static_cast<std::size_t>(elements), first_reservation);
    if (!admit(task, 1 + digits(static_cast<long long>(elements)) + 2, reserved * sizeof(Reply))) return nullptr;
    return guarded([&] {
        Reply value;
        value.kind = Reply::Kind::array;
        value.elements.reserve(reserved);
        return attach(task, std::move(value));
    });
}

void* create_integer(const redisReadTask* task, long long number) {
    if (!admit(task, 1 + digits(number) + 2, 0)) return nullptr;
    return guarded([&] { return attach(task, Reply::make_integer(number)); });
}

void* create_nil(const redisReadTask* task) {
    if (!admit(task, 5, 0)) return nullptr;  // $-1 or *-1
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

ReplyReader::ReplyReader(std::size_t max_string_bytes, std::size_t max_array_elements, std::size_t max_overhead)
    : reader_(redisReaderCreateWithFunctions(&functions)),
      limits_{max_string_bytes, max_array_elements, max_overhead},
      frames_(max_string_bytes, max_array_elements) {
    if (!reader_) throw std::bad_alloc();
}

ReplyReader::~ReplyReader() {
    LimitsScope scope(&limits_);
    redisReaderFree(reader_);
    delete limits_.root;
    delete limits_.spare;
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
    limits_.built = limits_.wire = 0;
    out = std::move(*root);
    *root = Reply{};  // keeps nothing of the reply handed out
    limits_.spare = root;
    return true;
}

std::string ReplyReader::memory_detail() const {
    if (!limits_.refused_built) return {};
    return "would take at least " + std::to_string(limits_.refused_built) + " bytes of client memory for the " +
           std::to_string(limits_.wire) + " bytes received, more than " + std::to_string(reply_memory_factor) +
           " times those plus " + std::to_string(limits_.max_overhead) + " (ClientOptions::max_reply_overhead)";
}

}  // namespace dlock::detail
