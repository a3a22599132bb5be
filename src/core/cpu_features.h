/* The x86 vector extensions glibc found usable at its start-up, for the scan's kernels
   (core/scan_blocks.cpp). In C, as glibc's <sys/platform/x86.h> is (it does not compile as C++
   under clang). */
#ifndef PROGCACHE_CORE_CPU_FEATURES_H
#define PROGCACHE_CORE_CPU_FEATURES_H

#ifdef __cplusplus
extern "C" {
#endif

/* 2: AVX-512 F and BW, 1: AVX2, 0: neither ("usable": the CPU has it and the OS saves its
   registers); -1 when glibc does not say (before 2.33, another C library, not x86-64). */
int progcache_glibc_vector_level(void);

#ifdef __cplusplus
}
#endif

#endif
