#include "dispatch.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace dlock::python {
namespace {

struct Dispatcher {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<Task> queue;
    bool stopping = false;
    bool stopped = false;
    std::thread thread;

    void run() {
        for (;;) {
            std::deque<Task> batch;
            {
                std::unique_lock lock(mutex);
                wake.wait(lock, [&] { return stopping || !queue.empty(); });
                if (queue.empty()) return;
                batch.swap(queue);
            }
            const PyGILState_STATE state = PyGILState_Ensure();
            for (auto& task : batch) {
                task();
                if (PyErr_Occurred()) PyErr_WriteUnraisable(nullptr);
            }
            batch.clear();  // what the tasks captured is released with the GIL held
            PyGILState_Release(state);
        }
    }
};

// Never destroyed: a thread may post while the process exits.
Dispatcher* dispatcher = new Dispatcher;

}  // namespace

void post(Task task) {
    Dispatcher& d = *dispatcher;
    std::unique_lock lock(d.mutex);
    if (d.stopping || d.stopped) {
        lock.unlock();
        new Task(std::move(task));  // leaked: dropping it here could release Python objects without the GIL
        return;
    }
    if (!d.thread.joinable()) d.thread = std::thread([&d] { d.run(); });
    d.queue.push_back(std::move(task));
    d.wake.notify_one();
}

void shutdown() {
    Dispatcher& d = *dispatcher;
    std::thread thread;
    {
        std::lock_guard lock(d.mutex);
        d.stopping = true;
        thread = std::move(d.thread);
        d.wake.notify_one();
    }
    if (thread.joinable()) {
        Py_BEGIN_ALLOW_THREADS thread.join();
        Py_END_ALLOW_THREADS
    }
    std::lock_guard lock(d.mutex);
    d.stopped = true;
}

void after_fork_in_child() {
    // The parent's queue, mutex and thread are not the child's to use; the
    // old state is left as it is (its thread does not exist here).
    dispatcher = new Dispatcher;
}

PyRef::~PyRef() {
    if (!object_) return;
    if (PyGILState_Check()) {
        Py_DECREF(object_);
        return;
    }
    PyObject* object = object_;
    post([object] { Py_DECREF(object); });
}

}  // namespace dlock::python
