# cpack -G DEB: one Debian package per install component (cmake/Install.cmake),
# split as Debian splits a library:
#   libdlock0     the shared library, in the multiarch directory
#   libdlock-dev  headers, static library, CMake and pkg-config files
#   dlock         the command, its man page (gzipped) and shell completions
#   python3-dlock the Python module (when it is built: python/)
# Each has its copyright file and changelog in /usr/share/doc/PACKAGE.
# Built by `./run package`, checked by `./run package-check` (lintian, and an
# install into an empty root). A new package is one more dlock_deb_package().
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR "dlock")
set(CPACK_PACKAGE_CONTACT "dlock maintainers <dlock@dlock.invalid>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Installed with prefix /usr into a staging DESTDIR: the pkg-config files
# (written at install time) then say prefix=/usr.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
# Each package's Description is its own (summary line first, see
# dlock_deb_package); CPack prepends the project-wide summary unless it is
# CPack's own default, which it then leaves out.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_LICENSE MIT)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Dependencies on shared libraries come from dpkg-shlibdeps (dpkg-dev).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The Python module links libdlock.so.0, which is in another package of this
# build: dpkg-shlibdeps finds it in the build tree (its dependency on
# libdlock0 is stated with the exact version, see python3-dlock below).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
# A shlibs file for each package that ships a shared library (CPack knows
# this switch only for all packages: only libdlock0 has one).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/deb-triggers "activate-noawait ldconfig\n")
set(CPACK_COMPONENTS_ALL "")

include(${PROJECT_SOURCE_DIR}/cmake/Gzip.cmake)

# One changelog in Debian's format for every package (a native package's
# /usr/share/doc/PACKAGE/changelog.gz); the project's own is CHANGELOG.md.
if(DEFINED ENV{SOURCE_DATE_EPOCH})
  set(dlock_changelog_date "$ENV{SOURCE_DATE_EPOCH}")
else()
  set(dlock_changelog_date 1767225600)  # 2026-01-01: the bytes do not depend on the day of the build
endif()
execute_process(COMMAND date -u -R -d @${dlock_changelog_date} OUTPUT_VARIABLE dlock_changelog_date
  OUTPUT_STRIP_TRAILING_WHITESPACE)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/debian-changelog
  "dlock (${PROJECT_VERSION}) unstable; urgency=medium\n\n"
  "  * Release ${PROJECT_VERSION}: see /usr/share/doc/libdlock-dev/CHANGELOG.md.\n\n"
  " -- ${CPACK_PACKAGE_CONTACT}  ${dlock_changelog_date}\n")
dlock_gzip(${CMAKE_CURRENT_BINARY_DIR}/debian-changelog ${CMAKE_CURRENT_BINARY_DIR}/changelog.gz)

# dlock_deb_package(COMPONENT PACKAGE SECTION SUMMARY DESCRIPTION [DEPENDS d] [RECOMMENDS r] [SHLIBS])
# Makes install component COMPONENT the Debian package PACKAGE, with its
# copyright file and changelog. SHLIBS: it ships a shared library (shlibs
# file and ldconfig trigger; CPack's postinst and postrm also run ldconfig).
function(dlock_deb_package component package section summary description)
  cmake_parse_arguments(arg "SHLIBS" "DEPENDS;RECOMMENDS" "" ${ARGN})
  string(TOUPPER ${component} upper)
  set(CPACK_COMPONENTS_ALL ${CPACK_COMPONENTS_ALL} ${component} PARENT_SCOPE)
  set(CPACK_DEBIAN_${upper}_PACKAGE_NAME ${package} PARENT_SCOPE)
  set(CPACK_DEBIAN_${upper}_PACKAGE_SECTION ${section} PARENT_SCOPE)
  set(CPACK_DEBIAN_${upper}_DESCRIPTION "${summary}\n${description}" PARENT_SCOPE)
  set(CPACK_DEBIAN_${upper}_PACKAGE_DEPENDS "${arg_DEPENDS}" PARENT_SCOPE)
  set(CPACK_DEBIAN_${upper}_PACKAGE_RECOMMENDS "${arg_RECOMMENDS}" PARENT_SCOPE)
  if(arg_SHLIBS)
    # The loader's cache is refreshed by libc-bin's ldconfig trigger.
    configure_file(${CMAKE_CURRENT_BINARY_DIR}/deb-triggers ${CMAKE_CURRENT_BINARY_DIR}/deb-${component}/triggers
      COPYONLY)
    set(CPACK_DEBIAN_${upper}_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_BINARY_DIR}/deb-${component}/triggers PARENT_SCOPE)
  endif()
  install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package}
    RENAME copyright COMPONENT ${component})
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/changelog.gz DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package}
    COMPONENT ${component})
endfunction()

# Lines of the extended description (CPack indents them; an empty line
# separates paragraphs).
string(CONCAT dlock_about
  "dlock takes mutual-exclusion locks, fair locks, reader-writer locks and\n"
  "semaphores on Redis (one server, Sentinel, Cluster or a Redlock of\n"
  "independent masters), with leases renewed while held and fencing tokens.\n\n")
dlock_deb_package(runtime libdlock0 libs "distributed locks on Redis - shared library"
  "${dlock_about}This package holds the shared library." SHLIBS)
dlock_deb_package(dev libdlock-dev libdevel "distributed locks on Redis - development files"
  "${dlock_about}This package holds the C++20 headers, the static library, and the CMake\nand pkg-config files."
  DEPENDS "libdlock0 (= ${PROJECT_VERSION}), libhiredis-dev, libssl-dev, libasio-dev")
dlock_deb_package(cli dlock utils "distributed locks on Redis - command-line tool"
  "${dlock_about}This package holds the dlock command (run a command under a lock, hold,\ninspect and release locks), its manual page and shell completions."
  RECOMMENDS bash-completion)
if(TARGET dlock_python)
  # Built for one interpreter (its extension is cpython-3XY): that version only.
  string(REPLACE "." ";" dlock_python_parts "${DLOCK_PYTHON_VERSION}")
  list(GET dlock_python_parts 0 dlock_python_major)
  list(GET dlock_python_parts 1 dlock_python_minor)
  math(EXPR dlock_python_next "${dlock_python_minor} + 1")
  dlock_deb_package(python3-dlock python3-dlock python "distributed locks on Redis - Python 3 module"
    "${dlock_about}This package holds the dlock module for Python 3: the same locks, with
`with`, threading.Lock's methods and asyncio."
    DEPENDS "libdlock0 (= ${PROJECT_VERSION}), python3 (>= ${DLOCK_PYTHON_VERSION}), python3 (<< ${dlock_python_major}.${dlock_python_next})")
endif()
install(FILES README.md CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/libdlock-dev COMPONENT dev)
include(CPack)
