# bench/perturb: intervals of known true duration instrumented with libcmon,
# to check pcheck --compensate. Run with bench/perturb/run.sh BUILD_DIR.
if(NOT TARGET cmon)
  return()
endif()
add_executable(bench_perturb ${CMAKE_CURRENT_LIST_DIR}/perturb.c)
target_link_libraries(bench_perturb PRIVATE cmon)
