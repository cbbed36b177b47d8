# Quantised dot products (owned by the quants engineer); included from kernels/CMakeLists.txt.
target_sources(rewind_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/vec_dot.cc
  ${CMAKE_CURRENT_LIST_DIR}/vec_dot_avx2.cc
  ${CMAKE_CURRENT_LIST_DIR}/ref/vec_dot_ref.cc
  ${CMAKE_CURRENT_LIST_DIR}/gemm.cc
  ${CMAKE_CURRENT_LIST_DIR}/gemm_avx2.cc
  ${CMAKE_CURRENT_LIST_DIR}/lowbit_avx2.cc)
if(TARGET rewind_gguf)
  target_link_libraries(rewind_kernels PUBLIC rewind_gguf)
endif()
# Only this file uses AVX2; the dispatcher checks the CPU first. No FMA contraction: I1 needs the exact
# instruction sequence written in the source.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/vec_dot_avx2.cc ${CMAKE_CURRENT_LIST_DIR}/gemm_avx2.cc
  ${CMAKE_CURRENT_LIST_DIR}/lowbit_avx2.cc PROPERTIES
  COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-ffp-contract=off")
if(NOT TARGET vec_dot_tests AND EXISTS ${CMAKE_CURRENT_LIST_DIR}/vec_dot_test.cc)
  rewind_tests(vec_dot_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/vec_dot_test.cc ${CMAKE_CURRENT_LIST_DIR}/gemm_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/lowbit_test.cc DEPS rewind_kernels LABEL unit)
endif()
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/vec_dot_bench.cc)
  add_executable(vec_dot_bench ${CMAKE_CURRENT_LIST_DIR}/vec_dot_bench.cc)
  target_link_libraries(vec_dot_bench PRIVATE rewind_kernels)
endif()
