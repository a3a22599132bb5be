# CPACK_POST_BUILD_SCRIPTS: adds "Multi-Arch: same" to the library's and the development package's
# control files (CMake 3.25's CPack DEB has no field for it; every file of both is either under
# the multiarch library directory or the same on every architecture). The package is unpacked with dpkg-deb -R and rebuilt with
# dpkg-deb -b: the files and their md5sums stay as CPack made them.
foreach(deb IN LISTS CPACK_PACKAGE_FILES)
  get_filename_component(name "${deb}" NAME)
  if(NOT name MATCHES "^libprogcache([0-9]+|-dev)_")
    continue()
  endif()
  set(dir "${deb}.unpacked")
  file(REMOVE_RECURSE "${dir}")
  execute_process(COMMAND dpkg-deb -R "${deb}" "${dir}" COMMAND_ERROR_IS_FATAL ANY)
  file(READ "${dir}/DEBIAN/control" control)
  if(NOT control MATCHES "\nMulti-Arch:")
    string(REGEX REPLACE "Architecture: ([^\n]*)\n" "Architecture: \\1\nMulti-Arch: same\n"
           control "${control}")
    file(WRITE "${dir}/DEBIAN/control" "${control}")
  endif()
  execute_process(COMMAND dpkg-deb --root-owner-group -b "${dir}" "${deb}" OUTPUT_QUIET
                  COMMAND_ERROR_IS_FATAL ANY)
  file(REMOVE_RECURSE "${dir}")
endforeach()
