# Transport benchmarks (bench/transport/run.sh): the generator and sink used
# in the side-by-side runs, the registry load generator, and cmon-sub.
include(${PROJECT_SOURCE_DIR}/tests/integration/cmon-sub.cmake)
add_executable(transport-gen ${CMAKE_CURRENT_LIST_DIR}/gen.c)
add_executable(transport-sink ${CMAKE_CURRENT_LIST_DIR}/sink.c)
add_executable(transport-regbench ${CMAKE_CURRENT_LIST_DIR}/regbench.c)
target_link_libraries(transport-regbench PRIVATE cmoncommon)
# cat that also finds every record's end: the floor under snarflog's reading side.
add_executable(transport-walk ${CMAKE_CURRENT_LIST_DIR}/walk.c)
