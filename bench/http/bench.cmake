# bench/http: the telemonitor's HTTP API under 1,000 instances and 100,000
# stored failures (run.sh). bench_http_fill fills a store through the
# service's store module.
if(TARGET telemonitor)
  set(tmdir ${PROJECT_SOURCE_DIR}/daemons/telemonitor)
  add_executable(bench_http_fill ${CMAKE_CURRENT_LIST_DIR}/bench_http_fill.c ${tmdir}/store.c ${tmdir}/backlog.c)
  target_include_directories(bench_http_fill PRIVATE ${tmdir})
  target_link_libraries(bench_http_fill PRIVATE tmdb)
endif()
