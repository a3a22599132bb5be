# Debian packages, lintian-clean (scripts/package builds them with prefix /usr and runs lintian):
#   libprogcache1      the library (multiarch, Multi-Arch: same, an ldconfig trigger)
#   libprogcache-dev   header, CMake package, pkg-config file, the .so link, the Fortran module
#                      (Multi-Arch: same too); libprogcache1 ships a symbols file
#   progcache          the command and its manual, the drop-in NVRTC and run's helper (only
#                      progcache run uses them; <libdir>/progcache/nvrtc, off the loader's path)
#   python3-progcache  the Python package, in /usr/lib/python3/dist-packages
# Each carries /usr/share/doc/<package>/copyright (DEP-5) and changelog.gz (native package).
# CUDA is not a dependency: NVRTC and the driver are loaded at run time.

set(PCACHE_PACKAGE_CONTACT "progcache maintainers <progcache@example.org>"
    CACHE STRING "Maintainer of the Debian packages")

# Compressed manual page and changelog (lintian: uncompressed-manual-page, no-changelog);
# gzip -n, so the packages are reproducible.
set(PCACHE_DEB_DIR ${CMAKE_CURRENT_BINARY_DIR}/deb)
add_custom_command(OUTPUT ${PCACHE_DEB_DIR}/progcache.1.gz ${PCACHE_DEB_DIR}/changelog.gz
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PCACHE_DEB_DIR}
  COMMAND gzip -9nc ${CMAKE_CURRENT_SOURCE_DIR}/docs/progcache.1 > ${PCACHE_DEB_DIR}/progcache.1.gz
  COMMAND gzip -9nc ${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/changelog > ${PCACHE_DEB_DIR}/changelog.gz
  DEPENDS docs/progcache.1 packaging/debian/changelog VERBATIM)
add_custom_target(progcache_deb_docs ALL DEPENDS ${PCACHE_DEB_DIR}/progcache.1.gz
                                                 ${PCACHE_DEB_DIR}/changelog.gz)
install(FILES ${PCACHE_DEB_DIR}/progcache.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        COMPONENT bin)

foreach(pair lib:libprogcache${PCACHE_SOVERSION} dev:libprogcache-dev bin:progcache
        python:python3-progcache)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES packaging/debian/copyright ${PCACHE_DEB_DIR}/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${component})
endforeach()

# The examples the getting-started pages point to, with the development files.
install(DIRECTORY tests/consumers/cmake_cxx tests/consumers/cmake_fortran tests/consumers/cmake_bundle
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/libprogcache-dev/examples COMPONENT dev)
install(FILES tests/fortran/test_progcache.f90
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/libprogcache-dev/examples COMPONENT dev)

# Packaged binaries are stripped of their .comment too (packaging/debian/strip).
set(CMAKE_STRIP ${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/strip CACHE FILEPATH
    "strip, then drop .comment (packaging/debian/strip)" FORCE)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME progcache)
set(CPACK_PACKAGE_VENDOR "progcache")
set(CPACK_PACKAGE_CONTACT "${PCACHE_PACKAGE_CONTACT}")
# CPack puts this summary above every package's description unless it is CPack's default; each
# package's first description line is its own synopsis.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL lib dev bin python)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# The progcache command links libprogcache.so.1, which the build tree holds (dpkg-shlibdeps -l).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR})

set(CPACK_DEBIAN_LIB_PACKAGE_NAME libprogcache${PCACHE_SOVERSION})
# zstd, hiredis, libcrypto, SQLite and xxHash are opened with dlopen by the features that use
# them (src/util/system_library.hpp, src/util/libcrypto.hpp, src/backends/sqlite_library.hpp,
# src/util/xxhash.hpp), which dpkg-shlibdeps cannot see: the packages holding their SONAMEs are
# named here.
set(pcache_dlopen_depends "")
foreach(soname IN ITEMS ${PCACHE_ZSTD_SONAME} ${PCACHE_HIREDIS_SONAME} ${PCACHE_LIBCRYPTO_SONAME}
                        ${PCACHE_SQLITE_SONAME} ${PCACHE_XXHASH_SONAME})
  execute_process(COMMAND dpkg -S "*/${soname}" OUTPUT_VARIABLE owner RESULT_VARIABLE rc
                  ERROR_QUIET)
  if(rc EQUAL 0 AND owner MATCHES "^([^:,]+)")
    list(APPEND pcache_dlopen_depends ${CMAKE_MATCH_1})
  else()  # not a dpkg system: Debian's usual naming (libfoo.so.N -> libfooN)
    string(REGEX REPLACE "^(lib[^.]+)\\.so\\.(.*)$" "\\1\\2" package ${soname})
    list(APPEND pcache_dlopen_depends ${package})
  endif()
  # The oldest release with every function the table resolves and every statement the library
  # runs, where the SONAME's first release lacks some (dpkg-shlibdeps, for a linked library, saw
  # only the functions). SQLite: 3.35.0, the first with DELETE ... RETURNING (kMinSqliteVersion in
  # src/backends/sqlite_library.hpp, which the library also checks when it opens SQLite).
  if(soname STREQUAL PCACHE_SQLITE_SONAME)
    list(POP_BACK pcache_dlopen_depends package)
    list(APPEND pcache_dlopen_depends "${package} (>= 3.35.0)")
  endif()
  # xxHash: 0.8.0-2, the first Debian release with the run-time dispatched XXH3 entry points
  # (libxxhash0's symbols file; the library falls back to the plain ones without them).
  if(soname STREQUAL PCACHE_XXHASH_SONAME)
    list(POP_BACK pcache_dlopen_depends package)
    list(APPEND pcache_dlopen_depends "${package} (>= 0.8.0-2~)")
  endif()
endforeach()
list(JOIN pcache_dlopen_depends ", " CPACK_DEBIAN_LIB_PACKAGE_DEPENDS)
# Multi-Arch: same (CMake 3.25's CPack cannot say it; this script adds it to the built package).
set(CPACK_POST_BUILD_SCRIPTS ${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/multiarch.cmake)
# ldconfig by trigger, not by maintainer scripts (lintian: maintscript-calls-ldconfig); the
# scripts given here only keep CPack from writing its own.
# The symbols file: every exported function with the release it appeared in (capi/progcache.symbols
# names each one's version node; docs/ABI.md says which release each node came with).
file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/capi/progcache.symbols exported REGEX "^pcache_")
set(symbols "libprogcache.so.${PCACHE_SOVERSION} libprogcache${PCACHE_SOVERSION} #MINVER#\n")
string(APPEND symbols "* Build-Depends-Package: libprogcache-dev\n")
foreach(line IN LISTS exported)
  string(REGEX MATCH "@@(.*)$" node "${line}")
  set(node "${CMAKE_MATCH_1}")
  if(node STREQUAL "PCACHE_1")
    set(since 0.1.0)
  elseif(node STREQUAL "PCACHE_1.1")
    set(since 0.4.0)
  elseif(node STREQUAL "PCACHE_1.2")
    set(since 0.5.0)
  else()  # the unstable admin API: any release may change it (its node is renamed then)
    set(since ${PROJECT_VERSION})
  endif()
  string(REPLACE "@@" "@" symbol "${line}")
  string(APPEND symbols " ${symbol} ${since}\n")
endforeach()
file(WRITE ${CMAKE_BINARY_DIR}/packaging/symbols "${symbols}")
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/triggers
    ${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/postinst
    ${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/postrm ${CMAKE_BINARY_DIR}/packaging/symbols)
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_STRICT_PERMISSION ON)
install(FILES packaging/debian/progcache.lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides RENAME progcache COMPONENT bin)
install(FILES packaging/debian/libprogcache.lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
        RENAME libprogcache${PCACHE_SOVERSION} COMPONENT lib)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libprogcache-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libprogcache${PCACHE_SOVERSION} (= ${PROJECT_VERSION})")

set(CPACK_DEBIAN_BIN_PACKAGE_NAME progcache)
set(CPACK_DEBIAN_BIN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_BIN_PACKAGE_DEPENDS "libprogcache${PCACHE_SOVERSION} (= ${PROJECT_VERSION})")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-progcache)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
    "python3:any, libprogcache${PCACHE_SOVERSION} (>= ${PROJECT_VERSION})")

# Summary line, then the extended description (lines under 80 columns).
set(CPACK_COMPONENT_LIB_DESCRIPTION "cache for compiled CUDA programs (shared library)
progcache derives a key from everything that decides what NVRTC produces,
returns the cubin, PTX or LTO-IR from its cache in microseconds, or compiles
once and stores the result. SQLite, file-stream, in-memory and Redis storage.

This package holds the shared library. NVRTC and the CUDA driver are loaded
at run time: it loads and caches on machines without a GPU.")
set(CPACK_COMPONENT_DEV_DESCRIPTION "cache for compiled CUDA programs (development files)
progcache caches NVRTC compiles of CUDA programs behind a stable C ABI.

This package holds the C header, the CMake package, the pkg-config file, the
linker name of the library and the Fortran module source.")
set(CPACK_COMPONENT_BIN_DESCRIPTION "cache for compiled CUDA programs (command-line tool)
progcache caches NVRTC compiles of CUDA programs behind a stable C ABI.

This package holds the progcache command: compile through the cache, explain
a miss, statistics, verify, prune, export and import, and its manual page.")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION "cache for compiled CUDA programs (Python 3 module)
progcache caches NVRTC compiles of CUDA programs behind a stable C ABI.

This package holds the Python 3 module (ctypes over the shared library),
including a program cache for cuda.core.")
include(CPack)
