// Per-thread state that a call from any thread_local destructor can still use.
//
// C++ destroys a thread's thread_local objects at its exit in the reverse order of their
// construction. A host's thread_local made before the library's first use in that thread is
// destroyed after the library's, and its destructor may call the C API (a per-thread cache of
// kernels that saves or frees what it holds): a plain thread_local would then be used after its
// destruction. ThreadState<T> keeps T in a trivially destructible thread-local slot, constructs it
// in place on first use and registers its destruction with the C++ runtime's thread-exit list
// (__cxa_thread_atexit, what the compiler itself uses for thread_locals). After that destruction a
// later call constructs it again and registers again; the runtime runs entries registered while
// it runs the list, so that one is destroyed too. A thread that exits never leaks its T, and no
// call ever sees a destroyed one.
#pragma once

#include <cxxabi.h>

#include <new>
#include <type_traits>

// This object's (the library's or a program's), for the runtime's dlclose accounting.
extern "C" __attribute__((visibility("hidden"))) void *__dso_handle;

namespace progcache {

// The calling thread's address of variable, a thread_local, for a function to use throughout.
// In a library opened with dlopen each such address is a __tls_get_addr call, and GCC makes the
// call again at each use rather than keep the first result (to it the address is a constant to
// recompute): the empty asm hides where the pointer came from, so the first call is kept.
template <typename T>
inline T *this_thread(T &variable) noexcept {
  T *address = &variable;
  asm("" : "+r"(address));
  return address;
}

template <typename T>
class ThreadState {
  static_assert(std::is_nothrow_default_constructible_v<T>,
                "constructed on first use, where a failure has nowhere to go");

 public:
  // This thread's T, constructed on first use. Not inlined: GCC would otherwise compute the
  // thread-local's address again (a __tls_get_addr call) at every use in an inlining caller.
  [[gnu::noinline]] static T &get() noexcept {
    Slot &slot = *this_thread(t_slot);
    if (!slot.live) {
      new (slot.storage) T();
      slot.live = true;
      // Fails only without memory for the runtime's list entry: T then lives until the process
      // ends (its heap memory, if any, leaks with the thread), which is still never a use after
      // destruction.
      (void)__cxxabiv1::__cxa_thread_atexit(&release, nullptr, &__dso_handle);
    }
    return *std::launder(reinterpret_cast<T *>(slot.storage));
  }

 private:
  struct Slot {
    alignas(T) unsigned char storage[sizeof(T)];
    bool live;
  };
  // T's destructor must not call get() (it would find the T being destroyed).
  static void release(void *) noexcept {
    Slot &slot = t_slot;
    std::launder(reinterpret_cast<T *>(slot.storage))->~T();
    slot.live = false;
  }
  static thread_local Slot t_slot;  // zero-initialised, trivially destructible: no TLS wrapper
};

template <typename T>
thread_local typename ThreadState<T>::Slot ThreadState<T>::t_slot;

}  // namespace progcache
