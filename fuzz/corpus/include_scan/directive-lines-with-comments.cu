#if X == "probed.h" // (comment)
#if defined(A) // G(1)
#define D 1 // __has_include(<in_comment.h>)
#if A /* a
 b */ (1)
#if C R"x(
)x" (2)
#define W(x) __has_include(x) // wrapper
#if W(<d.h>)
#define S a \
 b
#if __has_include("a.h") /* c */
