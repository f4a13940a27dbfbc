# cmake --install: headers, the shared and the static library, a CMake package
# (find_package(dlock) -> dlock::dlock, shared, or dlock::dlock_static), two
# pkg-config files (dlock, dlock-static), and the dlock tool with its man page
# and shell completions (installed by tools/dlock).
#
# Every file belongs to one component, and each component is one Debian
# package (cmake/Package.cmake): runtime (libdlock0: the shared library),
# dev (libdlock-dev: headers, static library, CMake and pkg-config files),
# cli (dlock: the command, its man page and completions).
include(CMakePackageConfigHelpers)

set_target_properties(dlock_shared PROPERTIES EXPORT_NAME dlock)
set_target_properties(dlock PROPERTIES EXPORT_NAME dlock_static)
install(TARGETS dlock_shared dlock EXPORT dlockTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
install(DIRECTORY include/dlock DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT dlockTargets NAMESPACE dlock:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock COMPONENT dev)

configure_package_config_file(cmake/dlockConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/dlockConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dlockConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dlockConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/dlockConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock COMPONENT dev)

# The pkg-config files name the prefix they are installed under, absolute
# and normalised (prefix=/usr in the package, as Debian's own .pc files do),
# so they are written at install time, when the prefix (--prefix) is known.
# A tree unpacked elsewhere is used with PKG_CONFIG_SYSROOT_DIR.
set(DLOCK_PC_PREFIX "@DLOCK_INSTALL_PREFIX@")
foreach(pc dlock dlock-static)
  configure_file(cmake/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc.in @ONLY)
endforeach()
install(CODE "
  cmake_path(SET DLOCK_INSTALL_PREFIX NORMALIZE \"\${CMAKE_INSTALL_PREFIX}\")
  string(REGEX REPLACE \"(.)/$\" \"\\\\1\" DLOCK_INSTALL_PREFIX \"\${DLOCK_INSTALL_PREFIX}\")
  foreach(pc dlock dlock-static)
    set(pc_file \"\$ENV{DESTDIR}\${DLOCK_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/\${pc}.pc\")
    message(STATUS \"Installing: \${pc_file}\")
    configure_file(\"${CMAKE_CURRENT_BINARY_DIR}/\${pc}.pc.in\" \"\${pc_file}\" @ONLY)
  endforeach()" COMPONENT dev)
