# libcmon, instrumentation part: the library monitored programs link
# (public header cmon/emit.h, pkg-config module `cmon`). It hand-encodes the
# cmon-bin 1 wire format, so it needs nothing but libc at run time.
#   cmon         shared library libcmon.so (what tests and examples link)
#   cmon_static  the same code as libcmon.a, for programs linked statically
set(CMON_EMIT_SRC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/emit.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/emit_sink.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/emit_wire.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/emit_clock.c)

find_package(Threads REQUIRED)
foreach(kind SHARED STATIC)
  if(kind STREQUAL SHARED)
    set(tgt cmon)
  else()
    set(tgt cmon_static)
  endif()
  add_library(${tgt} ${kind} ${CMON_EMIT_SRC})
  target_include_directories(${tgt} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # Only the cmon_* API (CMON_API in the header) is exported.
  target_compile_options(${tgt} PRIVATE -fvisibility=hidden)
  # Installed for any compiler to link: plain objects, no link-time
  # optimisation (an archive of GCC's LTO objects has no code in it).
  set_target_properties(${tgt} PROPERTIES
    OUTPUT_NAME cmon
    POSITION_INDEPENDENT_CODE ON
    INTERPROCEDURAL_OPTIMIZATION OFF)
  target_link_libraries(${tgt} PUBLIC Threads::Threads)
endforeach()
# Never unloaded: its atexit, fork and thread-exit handlers must stay mapped.
target_link_options(cmon PRIVATE -Wl,-z,nodelete)
set_target_properties(cmon PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR})

add_library(cmon::cmon ALIAS cmon)
add_library(cmon::cmon_static ALIAS cmon_static)

# pkg-config module, relocatable by default: prefix=${pcfiledir}/../.. (as
# many .. as the pkgconfig folder is deep under the prefix), so the installed
# tree may be moved (cmake --install --prefix, DESTDIR) and still be found
# right. A system package turns it off: with prefix=/usr, pkg-config leaves
# out -I/usr/include and -L of the system's library folder.
option(CMON_PC_RELOCATABLE "cmon.pc finds its prefix from where it is installed" ON)
set(pcdir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(NOT CMON_PC_RELOCATABLE)
  set(CMON_PC_PREFIX ${CMAKE_INSTALL_PREFIX})
elseif(IS_ABSOLUTE ${pcdir})
  file(RELATIVE_PATH rel ${pcdir} ${CMAKE_INSTALL_PREFIX})
  set(CMON_PC_PREFIX "\${pcfiledir}/${rel}")
else()
  file(RELATIVE_PATH rel /p/${pcdir} /p)
  set(CMON_PC_PREFIX "\${pcfiledir}/${rel}")
endif()
string(REGEX REPLACE "/$" "" CMON_PC_PREFIX "${CMON_PC_PREFIX}")
foreach(v LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE ${CMAKE_INSTALL_${v}})
    set(CMON_PC_${v} ${CMAKE_INSTALL_${v}})
  else()
    set(CMON_PC_${v} "\${prefix}/${CMAKE_INSTALL_${v}}")
  endif()
endforeach()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmon.pc.in
               ${CMAKE_CURRENT_BINARY_DIR}/cmon.pc @ONLY)
install(TARGETS cmon cmon_static EXPORT cmon-targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/include/cmon/emit.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cmon)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/cmon.pc DESTINATION ${pcdir})

# CMake package: find_package(cmon) gives cmon::cmon (libcmon.so) and
# cmon::cmon_static (libcmon.a); relocatable like the .pc file.
include(CMakePackageConfigHelpers)
set(cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/cmon)
install(EXPORT cmon-targets NAMESPACE cmon:: DESTINATION ${cmakedir})
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmon-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/cmon-config.cmake INSTALL_DESTINATION ${cmakedir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/cmon-config-version.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/cmon-config.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/cmon-config-version.cmake
        DESTINATION ${cmakedir})
