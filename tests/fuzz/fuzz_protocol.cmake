# fuzz_protocol needs the transport library (cmon/proto.h and friends).
target_link_libraries(${target} PRIVATE cmoncommon)
