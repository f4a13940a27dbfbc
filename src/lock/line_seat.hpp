// A place in a lock's line that a releasing thread's hand-off took for the
// waiter behind the one it handed the lock to (hand_off.lua, ARGV[7]), a
// waiter of the same process still asleep in the local queue
// (name_queue.hpp, "Seats"). From the hand-off's answer on it is that
// waiter's place as if its own first attempt had taken it: registered with
// LineWaiters (refreshed, its grant notice kept), its arrival known. The
// waiter's LinePlace takes it over (take()) when it becomes head; a seat
// never taken (the waiter left the queue first) gives its place back when
// it ends.
//
// Thread-safety: made by the releasing thread, handed over under the local
// queue's lock, taken by the waiting thread; never used by two at once.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "hold/line_waiters.hpp"
#include "hold/name_queue.hpp"
#include "lock_core.hpp"
#include "lock_service.hpp"

namespace dlock::detail {

class LineSeat {
public:
    LineSeat(std::shared_ptr<LockCore> core, std::string owner, const std::shared_ptr<NameQueue>& queue)
        : core_(std::move(core)),
          owner_(std::move(owner)),
          waiter_(core_->service->line_waiters().join(core_->identity, owner_,
                                                      [weak = std::weak_ptr<NameQueue>(queue)] {
                                                          if (auto queue = weak.lock()) queue->bump();
                                                      })) {}
    ~LineSeat() {
        if (!waiter_) return;  // taken over
        core_->service->line_waiters().leave(waiter_);
        // Placed (the hand-off's answer said where): that wait's place goes.
        if (const auto arrival = waiter_->arrival()) core_->give_back_place(owner_, arrival);
    }
    LineSeat(const LineSeat&) = delete;
    LineSeat& operator=(const LineSeat&) = delete;

    // The hand-off's answer: the wait's arrival, and the hand-off's send
    // time, which kept the place.
    void placed(std::uint64_t arrival, LockClock::time_point sent) { waiter_->placed(arrival, sent); }
    // The waiter's LinePlace takes the place over; the seat ends with nothing to give back.
    std::shared_ptr<LineWaiters::Waiter> take() { return std::move(waiter_); }

private:
    const std::shared_ptr<LockCore> core_;
    const std::string owner_;
    std::shared_ptr<LineWaiters::Waiter> waiter_;
};

}  // namespace dlock::detail
