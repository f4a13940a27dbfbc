# cmake --install: headers, the library, a CMake package (find_package(dlock)
# -> dlock::dlock) and a pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS dlock dlock_warnings EXPORT dlockTargets
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
# install into any --prefix works without reconfiguring.
file(RELATIVE_PATH DLOCK_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(cmake/dlock.pc.in ${CMAKE_CURRENT_BINARY_DIR}/dlock.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dlock.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
