// The shortest useful dlock program: hold a lock while doing work, and hand
// the fencing token to the resource so it can reject a stale holder.
//
//   quickstart [URL]     (default redis://127.0.0.1:6379)
#include <dlock/client.hpp>
#include <dlock/error.hpp>

#include <iostream>
#include <mutex>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
    try {
        dlock::Client client(argc > 1 ? argv[1] : "redis://127.0.0.1:6379");
        auto lock = client.lock("orders:42");  // 30 s lease, renewed while held
        {
            std::unique_lock guard(lock);  // blocks; woken by pub/sub, no polling
            std::cout << "holding orders:42 with fencing token " << lock.fencing_token() << "\n";
            if (lock.lost_token().stop_requested()) {  // check before each irreversible step
                std::cerr << "lost orders:42: " << dlock::to_string(lock.lost_reason().value()) << "\n";
                return 1;
            }
        }
        if (lock.try_lock_for(2s)) {
            std::cout << "again, token " << lock.fencing_token() << "\n";
            lock.unlock();
        }
        auto report = client.lock("report", {.lease = 10s, .renew = false});  // a fixed lease
        if (report.try_lock()) report.unlock();
    } catch (const dlock::Error& e) {
        std::cerr << "quickstart: " << e.what() << "\n";
        return 1;
    }
}
