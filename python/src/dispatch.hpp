// The module's own thread for Python work that dlock's threads hand over: a
// loss notice (on_lost), an asynchronous completion, the last reference to a
// Python object dropped where the GIL is not held. dlock's I/O and fiber
// threads must never wait for the GIL (they carry every lock's renewals), so
// they only queue here; this thread takes the GIL and runs the work.
#pragma once

#include <Python.h>

#include <functional>
#include <utility>

namespace dlock::python {

// Runs with the GIL held, on the dispatch thread. Must not block for long:
// every other notice waits behind it.
using Task = std::function<void()>;

// From any thread; never waits for the GIL. After shutdown() (the
// interpreter is exiting) the task is dropped without running, and what it
// holds is leaked rather than released without the GIL.
void post(Task task);
// With the GIL held (atexit): runs what is queued, then stops the thread.
void shutdown();
// In a child after fork(): the parent's thread is not there; start afresh.
void after_fork_in_child();

// A strong reference to a Python object that may be dropped on any thread:
// where the GIL is not held, the decref is posted to the dispatch thread.
class PyRef {
public:
    PyRef() noexcept = default;
    // Takes a new reference to object (GIL held).
    explicit PyRef(PyObject* object) noexcept : object_(object) { Py_XINCREF(object_); }
    // Not copyable: a copy could be made on a thread without the GIL. Share
    // one through std::shared_ptr instead.
    PyRef(const PyRef&) = delete;
    PyRef& operator=(const PyRef&) = delete;
    ~PyRef();
    PyObject* get() const noexcept { return object_; }

private:
    PyObject* object_ = nullptr;
};

}  // namespace dlock::python
