# Quantised block formats (owned by the quants engineer). Idempotent: gguf/CMakeLists.txt may already list
# these sources and the test target itself.
get_target_property(_rw_quants_srcs rewind_gguf SOURCES)
foreach(_src quants.cc quants_k.cc quants_lowbit.cc quants_iq.cc quant_grids.cc quant_grids_iq1s.cc)
  if(NOT _src IN_LIST _rw_quants_srcs AND NOT "${CMAKE_CURRENT_LIST_DIR}/${_src}" IN_LIST _rw_quants_srcs)
    target_sources(rewind_gguf PRIVATE ${CMAKE_CURRENT_LIST_DIR}/${_src})
  endif()
endforeach()
if(NOT TARGET quants_tests)
  rewind_tests(quants_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/quants_test.cc ${CMAKE_CURRENT_LIST_DIR}/quants_lowbit_test.cc
               DEPS rewind_gguf LABEL unit)
endif()
