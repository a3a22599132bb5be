// Exports of a real library that no header declares, whose signatures are unknown (libnvvm's
// __nvvmHandle, nvJitLink's __nvJitLinkAPI, ...): each is a trampoline that asks `resolver` for
// the function on every call and jumps to it with every argument register, and the stack, as the
// caller left them, so the real function runs as if called directly. x86-64 only: elsewhere
// PCACHE_DROPIN_FORWARDS is 0 and the drop-ins do not export them.
#pragma once

#if defined(__x86_64__)
#define PCACHE_DROPIN_FORWARDS 1
// symbol: the exported name; resolver: a function `void *resolver(const char *name)` that
// returns the real function (it may not return null).
#define PCACHE_DROPIN_FORWARD(symbol, resolver)                                                  \
  extern "C" __attribute__((visibility("hidden"))) void *pcache_forward_##symbol();              \
  extern "C" __attribute__((visibility("hidden"), used)) void *pcache_forward_##symbol() {       \
    return resolver(#symbol);                                                                    \
  }                                                                                              \
  asm(".text\n"                                                                                  \
      ".globl " #symbol                                                                          \
      "\n"                                                                                       \
      ".type " #symbol ", @function\n" #symbol                                                   \
      ":\n"                                                                                      \
      "  endbr64\n" /* the integer argument registers, and %rax (the vector count of a variadic  \
                       call) */                                                                  \
      "  push %rdi\n  push %rsi\n  push %rdx\n  push %rcx\n  push %r8\n  push %r9\n"             \
      "  push %rax\n" /* 7 pushes after the return address: %rsp is 16-byte aligned, as the call \
                         needs */                                                                \
      "  sub $128, %rsp\n"                                                                       \
      "  movdqu %xmm0, 0(%rsp)\n  movdqu %xmm1, 16(%rsp)\n  movdqu %xmm2, 32(%rsp)\n"            \
      "  movdqu %xmm3, 48(%rsp)\n  movdqu %xmm4, 64(%rsp)\n  movdqu %xmm5, 80(%rsp)\n"           \
      "  movdqu %xmm6, 96(%rsp)\n  movdqu %xmm7, 112(%rsp)\n"                                    \
      "  call pcache_forward_" #symbol                                                           \
      "\n"                                                                                       \
      "  mov %rax, %r11\n"                                                                       \
      "  movdqu 0(%rsp), %xmm0\n  movdqu 16(%rsp), %xmm1\n  movdqu 32(%rsp), %xmm2\n"            \
      "  movdqu 48(%rsp), %xmm3\n  movdqu 64(%rsp), %xmm4\n  movdqu 80(%rsp), %xmm5\n"           \
      "  movdqu 96(%rsp), %xmm6\n  movdqu 112(%rsp), %xmm7\n"                                    \
      "  add $128, %rsp\n"                                                                       \
      "  pop %rax\n  pop %r9\n  pop %r8\n  pop %rcx\n  pop %rdx\n  pop %rsi\n  pop %rdi\n"       \
      "  jmp *%r11\n"                                                                            \
      ".size " #symbol ", .-" #symbol "\n")
#else
#define PCACHE_DROPIN_FORWARDS 0
#define PCACHE_DROPIN_FORWARD(symbol, resolver)
#endif
