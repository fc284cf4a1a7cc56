# bench/emit: cost per event of cmon_emit() next to an LTTng-UST tracepoint
# and fprintf() to a pipe. Run with bench/emit/run.sh BUILD_DIR.
if(NOT TARGET cmon)
  return()
endif()
set(BENCH_EMIT_DIR ${CMAKE_CURRENT_LIST_DIR})

add_executable(bench_emit ${BENCH_EMIT_DIR}/bench_emit.c)
target_link_libraries(bench_emit PRIVATE cmon)

# The LTTng side is its own binary, so liblttng-ust's threads are not
# running while the other modes are measured.
pkg_check_modules(LTTNG_UST IMPORTED_TARGET lttng-ust)
if(LTTNG_UST_FOUND)
  add_executable(bench_emit_lttng ${BENCH_EMIT_DIR}/bench_emit.c
                                  ${BENCH_EMIT_DIR}/tp.c)
  target_compile_definitions(bench_emit_lttng PRIVATE BENCH_LTTNG)
  target_include_directories(bench_emit_lttng PRIVATE ${BENCH_EMIT_DIR})
  target_link_libraries(bench_emit_lttng PRIVATE PkgConfig::LTTNG_UST ${CMAKE_DL_LIBS})
else()
  message(STATUS "bench/emit: lttng-ust not found, LTTng modes not built")
endif()
