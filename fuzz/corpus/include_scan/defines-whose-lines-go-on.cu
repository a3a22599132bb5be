#define T /* x
 */ 1
#define U /* a */ __has_include(<u.h>)
#define A /* c */ 1
#if __has_include(<x.h>)
#endif
#define B /* c
 */ __has_include(<y.h>)
#define C /* d */ 2
#define W(x) __has_include(x)
#define X /* e */ W(<w.h>)
#define R R"(
)" __has_include("r.h")
