#include "free_memory.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace dlock::detail {

void give_back_free_memory() noexcept {
#if defined(__GLIBC__)
    (void)malloc_trim(0);
#endif
}

}  // namespace dlock::detail
