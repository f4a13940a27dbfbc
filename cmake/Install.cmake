# cmake --install: headers, the shared and the static library, a CMake package
# (find_package(dlock) -> dlock::dlock, shared, or dlock::dlock_static), two
# pkg-config files (dlock, dlock-static), and the dlock tool with its man page
# and shell completions (installed by tools/dlock).
include(CMakePackageConfigHelpers)

set_target_properties(dlock_shared PROPERTIES EXPORT_NAME dlock)
set_target_properties(dlock PROPERTIES EXPORT_NAME dlock_static)
install(TARGETS dlock_shared dlock EXPORT dlockTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/dlock DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT dlockTargets NAMESPACE dlock:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)

configure_package_config_file(cmake/dlockConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/dlockConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dlockConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dlockConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/dlockConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)

# Relocatable: the prefix is found from where the .pc file is, so an
# install into any --prefix (or a .deb unpacked anywhere) works as it is.
file(RELATIVE_PATH DLOCK_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
foreach(pc dlock dlock-static)
  configure_file(cmake/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
install(FILES LICENSE README.md CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
