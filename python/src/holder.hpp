// How Python owns a lock object: its destructor releases what the object
// still holds and waits for the server's answer, so it runs without the GIL.
#pragma once

#include <Python.h>

#include <memory>

namespace dlock::python {

template <typename T>
struct DeleteWithoutGil {
    void operator()(T* object) const noexcept {
        if (PyGILState_Check()) {
            Py_BEGIN_ALLOW_THREADS delete object;
            Py_END_ALLOW_THREADS
        } else {
            delete object;
        }
    }
};

template <typename T>
using Holder = std::unique_ptr<T, DeleteWithoutGil<T>>;

}  // namespace dlock::python
