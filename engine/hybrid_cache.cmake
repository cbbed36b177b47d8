# HybridCache (memory/ bookkeeping executed on the model's storage) and its exactness test. Included from
# engine/CMakeLists.txt.
if(TARGET rewind_model AND TARGET rewind_memory)
  target_sources(rewind_engine PRIVATE ${CMAKE_CURRENT_LIST_DIR}/hybrid_cache.cc
                                       ${CMAKE_CURRENT_LIST_DIR}/hybrid_cache_persist.cc
                                       ${CMAKE_CURRENT_LIST_DIR}/hybrid_cache_store.cc
                                       ${CMAKE_CURRENT_LIST_DIR}/hybrid_cache_view.cc
                                       ${CMAKE_CURRENT_LIST_DIR}/hybrid_cache_metrics.cc
                                       ${CMAKE_CURRENT_LIST_DIR}/hybrid_cache_remote.cc
                                       ${CMAKE_CURRENT_LIST_DIR}/hybrid_cache_device.cc)
  target_link_libraries(rewind_engine PRIVATE nlohmann_json::nlohmann_json)  # hybrid_cache_view.cc
  target_link_libraries(rewind_engine PUBLIC rewind_remote)
  rewind_tests(remote_tier_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/hybrid_cache_remote_test.cc
               ${CMAKE_CURRENT_LIST_DIR}/hybrid_cache_cluster_test.cc DEPS rewind_engine
               LABEL exact)
  rewind_tests(exact_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/exact_test.cc DEPS rewind_engine LABEL exact)
  rewind_tests(cache_tier_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/hybrid_cache_tier_test.cc
               ${CMAKE_CURRENT_LIST_DIR}/hybrid_cache_view_test.cc ${CMAKE_CURRENT_LIST_DIR}/persist_ticket_test.cc
               DEPS rewind_engine
               LABEL exact)
endif()
if(TARGET rewind_model AND TARGET rewind_memory AND TARGET rewind_vision AND TARGET rewind_modelgen)
  rewind_tests(engine_images_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_images_test.cc
               DEPS rewind_engine rewind_vision rewind_modelgen LABEL exact)
endif()
