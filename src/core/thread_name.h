// thread_name.h — every thread dlock starts names itself "dlock-…", so that
// top -H, gdb and /proc show whose it is (and tests can tell dlock's
// threads from a client library's).
#pragma once

#include <pthread.h>

namespace dlock::detail {

// Names the calling thread; `name` has at most 15 characters (the kernel's
// limit), longer ones are left unnamed.
inline void name_this_thread(const char* name) noexcept { (void)::pthread_setname_np(::pthread_self(), name); }

}  // namespace dlock::detail
