# progcache_add_bundle: compile CUDA kernels at build time into a progcache bundle (the file
# `progcache export` writes), which an application, a package or a container image imports at
# install or first start (`progcache import FILE`, pcache_admin_import), so that a fresh machine
# never pays NVRTC for the kernels it ships.
#
#   progcache_add_bundle(kernels
#     SOURCES src/scale.cu src/reduce.cu      # each compiled for each arch
#     ARCHS sm_80 sm_90
#     OPTIONS --std=c++17 -DUSE_FAST=1        # NVRTC options, as the application passes them
#     NAME_EXPRESSIONS "scale<float>" "reduce<double>"
#     OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/kernels.pcb)
#
# adds a target `kernels` (built by default) that makes OUTPUT. A hit later needs the same key:
# the program name is each source's file name (scale.cu: compiled in its own directory, so its
# quoted includes are found beside it), and the same options, name expressions, architecture and
# NVRTC build (the bundle is made with the toolkit this machine has; docs/keys.md). Needs the
# progcache command (the `progcache` package, or `bin/` of the install prefix).
function(progcache_add_bundle name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "OUTPUT" "SOURCES;ARCHS;OPTIONS;NAME_EXPRESSIONS")
  if(NOT arg_SOURCES OR NOT arg_ARCHS OR NOT arg_OUTPUT)
    message(FATAL_ERROR "progcache_add_bundle(${name}): SOURCES, ARCHS and OUTPUT are required")
  endif()
  find_program(PROGCACHE_EXECUTABLE progcache HINTS "${_progcache_prefix}/bin")
  if(NOT PROGCACHE_EXECUTABLE)
    message(FATAL_ERROR "progcache_add_bundle(${name}): the progcache command is not installed")
  endif()
  set(db "${CMAKE_CURRENT_BINARY_DIR}/${name}.bundle.db")
  set(cache --cache "sqlite:${db}")
  set(expressions)
  foreach(e IN LISTS arg_NAME_EXPRESSIONS)
    list(APPEND expressions --name-expression "${e}")
  endforeach()
  set(commands COMMAND ${CMAKE_COMMAND} -E rm -f "${db}" "${db}-wal" "${db}-shm")
  set(depends)
  foreach(source IN LISTS arg_SOURCES)
    get_filename_component(source "${source}" ABSOLUTE)
    get_filename_component(dir "${source}" DIRECTORY)
    get_filename_component(file "${source}" NAME)
    list(APPEND depends "${source}")
    foreach(arch IN LISTS arg_ARCHS)
      # cd into the source's directory: the program name is the file name, as applications
      # usually give it.
      list(APPEND commands COMMAND ${CMAKE_COMMAND} -E chdir "${dir}"
           "${PROGCACHE_EXECUTABLE}" ${cache} compile "${file}" --arch "${arch}" ${expressions}
           -- ${arg_OPTIONS})
    endforeach()
  endforeach()
  list(APPEND commands COMMAND "${PROGCACHE_EXECUTABLE}" ${cache} export "${arg_OUTPUT}")
  add_custom_command(OUTPUT "${arg_OUTPUT}" ${commands} DEPENDS ${depends}
                     COMMENT "progcache: compiling ${name} into ${arg_OUTPUT}" VERBATIM)
  add_custom_target(${name} ALL DEPENDS "${arg_OUTPUT}")
endfunction()
