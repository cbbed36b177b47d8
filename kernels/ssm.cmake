# Mamba-2 selective-state kernel (kernels/ssm.h), its scalar reference twin and its tests.
target_sources(rewind_kernels PRIVATE ${CMAKE_CURRENT_LIST_DIR}/ssm.cc ${CMAKE_CURRENT_LIST_DIR}/ssm_avx2.cc
                                      ${CMAKE_CURRENT_LIST_DIR}/ref/ssm_ref.cc)
# Called only when HasAvx2Fma(); no FMA contraction so its values match the portable code exactly.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/ssm_avx2.cc PROPERTIES COMPILE_OPTIONS
                            "-mavx2;-mfma;-mf16c;-ffp-contract=off")
rewind_tests(ssm_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/ssm_test.cc DEPS rewind_kernels LABEL unit)
