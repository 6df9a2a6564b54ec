# Included from tests/CMakeLists.txt after the per-directory gtest binaries.
#
# deepinfer_test_serve: the serve command with --engine fake (the scripted engine of
#   fake_engine.h, to test the HTTP layer alone) or --engine real.
# server_e2e: tests/server/test_openai.py (pytest + the official openai client)
#   against the fake server and the real `deepinfer serve` on the tiny fixture.

add_executable(deepinfer_test_serve
  ${CMAKE_SOURCE_DIR}/tests/server/test_serve/main.cpp
  ${CMAKE_SOURCE_DIR}/tests/server/fake_engine.cpp)
target_link_libraries(deepinfer_test_serve PRIVATE deepinfer_core)

add_test(NAME server_e2e
  COMMAND python3 -m pytest -q ${CMAKE_SOURCE_DIR}/tests/server
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(server_e2e PROPERTIES TIMEOUT 900 ENVIRONMENT
  "DEEPINFER_TEST_SERVE=$<TARGET_FILE:deepinfer_test_serve>;DEEPINFER_BINARY=$<TARGET_FILE:deepinfer>;DEEPINFER_FIXTURES=${CMAKE_SOURCE_DIR}/tests/fixtures")
