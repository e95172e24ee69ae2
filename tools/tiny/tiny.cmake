# The embedded base's recipe (tools/tiny): a hidden build tool, not a dlm
# command. Included from the top CMakeLists.txt; builds
#   tinyrecipe   static library (BPE trainer, vocabulary files, pretraining, SFT, GGUF)
#   tiny-recipe  the program tools/tiny/make-tiny.sh drives
# and links the unit tests that exercise it (tests/unit/test_bpe*.c).
file(GLOB TINY_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/tiny/*.c)
list(REMOVE_ITEM TINY_SRC ${CMAKE_SOURCE_DIR}/tools/tiny/main.c)
add_library(tinyrecipe STATIC ${TINY_SRC})
target_include_directories(tinyrecipe PUBLIC ${CMAKE_SOURCE_DIR}/tools/tiny)
target_link_libraries(tinyrecipe PUBLIC dlmcore)

add_executable(tiny-recipe ${CMAKE_SOURCE_DIR}/tools/tiny/main.c)
target_link_libraries(tiny-recipe PRIVATE tinyrecipe)

foreach(t ${DLM_UNIT_TESTS})
  get_filename_component(name ${t} NAME_WE)
  if(name MATCHES "^test_bpe")
    target_link_libraries(${name} PRIVATE tinyrecipe)
  endif()
endforeach()

# CLI scripts named tNNNN-slow-*.sh (the embedded base's quality checks,
# which train on it) carry the ctest label `slow`: `ctest -LE slow` skips
# them (the ASan run in .ci/run does).
foreach(t ${DLM_CLI_TESTS})
  get_filename_component(name ${t} NAME_WE)
  if(name MATCHES "^t[0-9]+-slow-")
    set_tests_properties(cli/${name} PROPERTIES LABELS slow)
  endif()
endforeach()
