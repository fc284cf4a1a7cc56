# fuzz_rcfile compiles the telemonitor's rcfile.c and window.c; they use the
# transport's name checks and headers.
if(TARGET cmoncommon)
  target_link_libraries(${target} PRIVATE cmoncommon)
endif()
target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}/daemons/telemonitor ${CMAKE_SOURCE_DIR}/libcmon/include)
