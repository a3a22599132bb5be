// The trampoline a drop-in exports for a real library's undeclared function
// (dropin_common/forward.hpp): the real function must see every argument as the caller passed it
// (six integer registers, eight vector registers, the stack) and its result must reach the caller.
#include <gtest/gtest.h>

#include <cstdarg>
#include <string>

#include "dropin_common/forward.hpp"

#if PCACHE_DROPIN_FORWARDS
namespace {

int g_resolutions = 0;

extern "C" double forward_test_real(long a, long b, long c, long d, long e, long f, double x0,
                                    double x1, double x2, double x3, double x4, double x5,
                                    double x6, double x7, long on_stack1, double on_stack2) {
  return double(a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * on_stack1) + x0 + 2 * x1 + 3 * x2 +
         4 * x3 + 5 * x4 + 6 * x5 + 7 * x6 + 8 * x7 + 9 * on_stack2;
}

extern "C" int forward_test_variadic(int n, ...) {
  va_list ap;
  va_start(ap, n);
  int sum = 0;
  for (int i = 0; i < n; ++i) sum += int(va_arg(ap, double) * (i + 1));
  va_end(ap);
  return sum;
}

void *resolve_for_test(const char *name) {
  ++g_resolutions;
  const std::string n(name);
  if (n == "forward_test_trampoline") return reinterpret_cast<void *>(&forward_test_real);
  return reinterpret_cast<void *>(&forward_test_variadic);
}

}  // namespace

PCACHE_DROPIN_FORWARD(forward_test_trampoline, resolve_for_test);
PCACHE_DROPIN_FORWARD(forward_test_variadic_trampoline, resolve_for_test);
extern "C" double forward_test_trampoline(long, long, long, long, long, long, double, double,
                                          double, double, double, double, double, double, long,
                                          double);
extern "C" int forward_test_variadic_trampoline(int n, ...);

TEST(DropinForward, TheRealFunctionGetsEveryArgumentAndItsResultComesBack) {
  const double direct =
      forward_test_real(1, 2, 3, 4, 5, 6, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8, 9.25);
  const double forwarded =
      forward_test_trampoline(1, 2, 3, 4, 5, 6, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8, 9.25);
  EXPECT_EQ(forwarded, direct);
  EXPECT_EQ(g_resolutions, 1);
  EXPECT_EQ(forward_test_variadic_trampoline(3, 1.0, 2.0, 3.0),
            forward_test_variadic(3, 1.0, 2.0, 3.0));  // %al: the vector registers used
}
#endif
