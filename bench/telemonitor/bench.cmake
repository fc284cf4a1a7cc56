# bench/telemonitor: the telemonitor's store, failure latency, and 200
# instances at once (run.sh). bench_tm_store compiles the service's store
# module; bench_tm_writer is the monitored program.
if(TARGET telemonitor)
  set(tmdir ${PROJECT_SOURCE_DIR}/daemons/telemonitor)
  add_executable(bench_tm_store ${CMAKE_CURRENT_LIST_DIR}/bench_tm_store.c ${tmdir}/store.c ${tmdir}/backlog.c
                 ${tmdir}/report.c ${tmdir}/json.c)
  target_include_directories(bench_tm_store PRIVATE ${tmdir})
  target_link_libraries(bench_tm_store PRIVATE tmdb pspec)
  add_executable(bench_tm_writer ${CMAKE_CURRENT_LIST_DIR}/bench_tm_writer.c)
  # bench_tm_ledger: an instance's ledgers made and dropped, with the pool
  # of files and without it (ledger.h)
  add_executable(bench_tm_ledger ${CMAKE_CURRENT_LIST_DIR}/bench_tm_ledger.c ${tmdir}/ledger.c)
  target_include_directories(bench_tm_ledger PRIVATE ${tmdir})
  target_link_libraries(bench_tm_ledger PRIVATE cmoncommon)
endif()
