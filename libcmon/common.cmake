# cmoncommon — code shared by the daemons and clients of the transport
# (telemonreg, snarflog, telemonitor, cmon-sub): wire framing and message
# helpers, log-format record scanning, name validation, addresses and
# connections, TLS, systemd integration, logging. Internal static library;
# headers under include/cmon/ (all but emit.h, which belongs to emit.cmake).
#
# cmoncmdline — the command-line front end of every program (cmon/cmdline.h)
# and the times users give (cmon/when.h), a library of its own so that the
# PSpec tools and telemonctl get it without the transport's dependencies;
# cmoncommon includes it.
add_library(cmoncmdline STATIC ${CMAKE_CURRENT_SOURCE_DIR}/src/cmdline.c
            ${CMAKE_CURRENT_SOURCE_DIR}/src/when.c)
target_include_directories(cmoncmdline PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
set_target_properties(cmoncmdline PROPERTIES POSITION_INDEPENDENT_CODE ON)

set(CMONCOMMON_SRC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/backoff.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/log.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/names.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/net.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/peercred.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/connect.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/peer.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/tls.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/token.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/proto.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/logfmt.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/service.c)
add_library(cmoncommon STATIC ${CMONCOMMON_SRC})
target_include_directories(cmoncommon PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(cmoncommon PUBLIC cmoncmdline cmon_pb cmonlog_pb PkgConfig::LIBEVENT
                      PkgConfig::OPENSSL PkgConfig::SYSTEMD PkgConfig::PROTOBUFC)
set_target_properties(cmoncommon PROPERTIES POSITION_INDEPENDENT_CODE ON)
