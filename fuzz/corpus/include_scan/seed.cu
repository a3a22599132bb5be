#include "a.h"
#include <c.h>
// c
/* #include "x.h" */
const char *s = R"(#include "no.h")";
#if __has_include("opt.h") && _CCCL_HAS_INCLUDE(<cuda/std/x>)
#endif
#include MACRO
int x = 1'000;
