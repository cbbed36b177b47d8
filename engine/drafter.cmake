# The model-based speculative drafters (MTP head, draft model), their tests and a cost benchmark. Included from
# engine/CMakeLists.txt (which builds drafter_fallback.cc only while this file is absent).
if(TARGET rewind_model)
  target_sources(rewind_engine PRIVATE ${CMAKE_CURRENT_LIST_DIR}/drafter_mtp.cc
                                       ${CMAKE_CURRENT_LIST_DIR}/drafter_model.cc)
  rewind_tests(drafter_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/drafter_test.cc DEPS rewind_engine LABEL unit)
  if(TARGET rewind_memory AND EXISTS ${CMAKE_CURRENT_LIST_DIR}/hybrid_cache.cc)
    rewind_tests(drafter_engine_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/drafter_engine_test.cc DEPS rewind_engine
                 LABEL exact)
  endif()
  add_executable(drafter_bench ${CMAKE_CURRENT_LIST_DIR}/drafter_bench.cc)
  target_link_libraries(drafter_bench PRIVATE rewind_engine)
  target_compile_definitions(drafter_bench PRIVATE REWIND_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
else()
  target_sources(rewind_engine PRIVATE ${CMAKE_CURRENT_LIST_DIR}/drafter_fallback.cc)
endif()
