# fuzz_protocol needs the transport library (cmon/proto.h and friends).
target_link_libraries(${target} PRIVATE cmoncommon)
# ...and compiles the registry's endpoint rules (daemons/registry/endpoint.c).
target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}/daemons/registry)
