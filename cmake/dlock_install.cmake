# What `cmake --install` puts where, and the Debian package (cpack -G DEB).
#
#   include/dlock/*.h                    the public API (nothing else is needed to compile against it)
#   lib/<arch>/libdlock.so.X.Y.Z         the shared library (SONAME libdlock.so.X.Y; public API exported only)
#   lib/<arch>/libdlock.a                every static library of the build merged into one archive
#   lib/<arch>/cmake/dlock/              dlockConfig.cmake + version file: find_package(dlock 0.2 CONFIG
#                                        [COMPONENTS file sqlite postgres mysql redis zookeeper etcd]) -> dlock::dlock
#                                        (shared) and dlock::dlock_static
#   lib/<arch>/pkgconfig/dlock.pc        pkg-config --cflags --libs [--static] dlock (relocatable: its
#                                        prefix is found from where dlock.pc is)
#   bin/dlock                            the command-line tool (dlock --help)
#   share/man/man1/dlock.1               its man page   } generated from the tool's own option
#   share/bash-completion/completions/dlock            } definitions (tools/dlock/docs.h)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# libdlock.a: one archive made of every static library the shared one is
# made of, so a static user links one dlock library plus the store clients.
set(merged_archive ${PROJECT_BINARY_DIR}/libdlock.a)
set(mri "create ${merged_archive}\n")
set(archive_deps "")
foreach(lib IN LISTS DLOCK_LIBRARY_TARGETS)
  string(APPEND mri "addlib $<TARGET_FILE:${lib}>\n")
  list(APPEND archive_deps ${lib})
endforeach()
string(APPEND mri "save\nend\n")
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/libdlock.mri CONTENT "${mri}")
add_custom_command(OUTPUT ${merged_archive}
  COMMAND ${CMAKE_COMMAND} -E rm -f ${merged_archive}
  COMMAND ${CMAKE_AR} -M < ${PROJECT_BINARY_DIR}/libdlock.mri
  DEPENDS ${archive_deps} ${PROJECT_BINARY_DIR}/libdlock.mri
  COMMENT "Merging the static libraries into libdlock.a"
  VERBATIM)
add_custom_target(dlock_static_archive ALL DEPENDS ${merged_archive})

# What a static user must link besides libdlock.a, for the config file and
# dlock.pc: the store client libraries of the enabled backends.
set(DLOCK_BACKENDS "")
set(DLOCK_PC_REQUIRES_PRIVATE "")
set(DLOCK_PC_LIBS_PRIVATE "-pthread")
set(DLOCK_DEB_DEPENDS "")
if(DLOCK_WITH_FILE)
  list(APPEND DLOCK_BACKENDS file)
endif()
if(DLOCK_WITH_SQLITE)
  list(APPEND DLOCK_BACKENDS sqlite)
  string(APPEND DLOCK_PC_REQUIRES_PRIVATE " sqlite3")
endif()
if(DLOCK_WITH_REDIS)
  list(APPEND DLOCK_BACKENDS redis)
  string(APPEND DLOCK_PC_REQUIRES_PRIVATE " hiredis")
endif()
if(DLOCK_WITH_POSTGRES)
  list(APPEND DLOCK_BACKENDS postgres)
  string(APPEND DLOCK_PC_REQUIRES_PRIVATE " libpq")
endif()
if(DLOCK_WITH_MYSQL)
  list(APPEND DLOCK_BACKENDS mysql)
  string(APPEND DLOCK_PC_REQUIRES_PRIVATE " libmariadb")
endif()
if(DLOCK_WITH_ZOOKEEPER)
  list(APPEND DLOCK_BACKENDS zookeeper)
  string(APPEND DLOCK_PC_LIBS_PRIVATE " -lzookeeper_mt")
endif()
if(DLOCK_WITH_ETCD)
  list(APPEND DLOCK_BACKENDS etcd)
  string(APPEND DLOCK_PC_REQUIRES_PRIVATE " grpc++ protobuf")
endif()
string(STRIP "${DLOCK_PC_REQUIRES_PRIVATE}" DLOCK_PC_REQUIRES_PRIVATE)

set(DLOCK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dlockConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dlockConfig.cmake
  INSTALL_DESTINATION ${DLOCK_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
# dlock.pc finds its prefix from where it is (${pcfiledir}), so a tree
# installed with --prefix /opt/dlock, or a package unpacked elsewhere, needs
# no --define-prefix: the way up from <libdir>/pkgconfig to the prefix.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(DLOCK_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH DLOCK_PC_UP "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" DLOCK_PC_UP "${DLOCK_PC_UP}")
  set(DLOCK_PC_PREFIX "\${pcfiledir}/${DLOCK_PC_UP}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/dlock.pc.in ${PROJECT_BINARY_DIR}/dlock.pc @ONLY)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dlock DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(TARGETS dlock_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${merged_archive} DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_BINARY_DIR}/dlockConfig.cmake ${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
  DESTINATION ${DLOCK_CMAKE_DIR})
install(FILES ${PROJECT_BINARY_DIR}/dlock.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(DLOCK_BUILD_TOOLS)
  install(TARGETS dlock_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${PROJECT_BINARY_DIR}/tools/dlock/dlock.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  install(FILES ${PROJECT_BINARY_DIR}/tools/dlock/dlock.bash
    DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME dlock)
endif()

# cpack -G DEB (from the build directory): one package with the library,
# headers, CMake/pkg-config files and the tool. Runtime dependencies are
# read off the binaries by dpkg-shlibdeps, so they follow the enabled backends.
set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR "dlock")
set(CPACK_PACKAGE_CONTACT "dlock maintainers <dlock@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Distributed locks and coordination primitives for C++")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libstdc++-12-dev")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
include(CPack)
