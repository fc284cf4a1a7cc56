# cmon-sub: the small C telemonitor the integration tests and the transport
# benchmarks use. Included from tests/integration and bench/transport;
# whichever comes first defines it.
if(NOT TARGET cmon-sub)
  add_executable(cmon-sub ${CMAKE_CURRENT_LIST_DIR}/cmon-sub.c)
  target_link_libraries(cmon-sub PRIVATE cmoncommon)
endif()
