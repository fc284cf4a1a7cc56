# bench/pspec: pcheck against a hand-written mawk script (Figure 3).
add_executable(gen_fsread ${CMAKE_CURRENT_LIST_DIR}/gen_fsread.c)
target_include_directories(gen_fsread PRIVATE ${PSPEC_PRIVATE_INCLUDE})
target_link_libraries(gen_fsread PRIVATE pspec)
# CPU time of a command to the microsecond (run.sh; /usr/bin/time rounds to 10 ms).
add_executable(cputime ${CMAKE_CURRENT_LIST_DIR}/cputime.c)
# Figure 3 by hand in C over pcheck's reader: the floor under pcheck (threads.sh).
add_executable(fig3_floor ${CMAKE_CURRENT_LIST_DIR}/fig3_floor.c)
target_include_directories(fig3_floor PRIVATE ${PSPEC_PRIVATE_INCLUDE})
target_link_libraries(fig3_floor PRIVATE pspec)
