# cpack -G DEB: one Debian package with everything `cmake --install` puts in
# place (library, headers, CMake package, pkg-config files, the dlock tool,
# its man page and completions). Built by `./run package`.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR "dlock")
set(CPACK_PACKAGE_CONTACT "dlock maintainers <dlock@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}: C++20 library and the dlock command")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_LICENSE MIT)
# What the binaries load (Debian 12 names) and what a user building against
# the headers and the static library needs (dlock/async.hpp includes Asio).
set(CPACK_DEBIAN_PACKAGE_DEPENDS
  "libc6, libstdc++6, libhiredis0.14 | libhiredis1.1.0, libssl3, libhiredis-dev, libssl-dev, libasio-dev")
include(CPack)
