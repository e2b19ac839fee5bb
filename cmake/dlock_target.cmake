# dlock_target(NAME <name> KIND <library|interface|executable|test> SOURCES ... [DEPS ...] [PRIVATE_DEPS ...]
#              [INCLUDES ...] [LABELS ...] [FIXTURES ...] [SERIAL pattern] [OUTPUT_NAME name])
# FIXTURES (tests): CTest fixtures every test of the executable needs (servers).
# SERIAL (tests): a gtest filter (A.B:C.*) of the tests that assert how long
# something takes against a tight bound; ctest runs each of them alone
# (RUN_SERIAL), the others side by side (scripts/test.sh runs ctest -j).
# KIND interface: no sources (headers, generated files); DEPS and INCLUDES reach its users.
# The one way every target of the project is declared: same warnings, same
# sanitizers, and a dlock::<name> alias for libraries so targets are always
# referred to by their namespaced name.
function(dlock_target)
  cmake_parse_arguments(T "" "NAME;KIND;OUTPUT_NAME;SERIAL" "SOURCES;DEPS;PRIVATE_DEPS;INCLUDES;LABELS;FIXTURES" ${ARGN})
  if(T_KIND STREQUAL "library")
    add_library(dlock_${T_NAME} STATIC ${T_SOURCES})
    add_library(dlock::${T_NAME} ALIAS dlock_${T_NAME})
    set(tgt dlock_${T_NAME})
    set_target_properties(${tgt} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  elseif(T_KIND STREQUAL "interface")
    add_library(dlock_${T_NAME} INTERFACE)
    add_library(dlock::${T_NAME} ALIAS dlock_${T_NAME})
    if(T_DEPS)
      target_link_libraries(dlock_${T_NAME} INTERFACE ${T_DEPS})
    endif()
    if(T_INCLUDES)
      target_include_directories(dlock_${T_NAME} INTERFACE ${T_INCLUDES})
    endif()
    return()
  elseif(T_KIND STREQUAL "executable" OR T_KIND STREQUAL "test")
    add_executable(${T_NAME} ${T_SOURCES})
    set(tgt ${T_NAME})
  else()
    message(FATAL_ERROR "dlock_target: unknown KIND '${T_KIND}'")
  endif()
  if(T_OUTPUT_NAME)
    set_target_properties(${tgt} PROPERTIES OUTPUT_NAME ${T_OUTPUT_NAME})
  endif()
  target_compile_options(${tgt} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
  if(DLOCK_WERROR)
    target_compile_options(${tgt} PRIVATE -Werror)
  endif()
  if(DLOCK_SANITIZE)
    target_compile_options(${tgt} PRIVATE -fsanitize=${DLOCK_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    target_link_options(${tgt} PRIVATE -fsanitize=${DLOCK_SANITIZE})
    # (GCC's TSan runtime is a shared library; clang links its own into the
    # executable, which must then export its malloc and the rest.)
    if(DLOCK_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT T_KIND STREQUAL "library")
      target_link_options(${tgt} PRIVATE -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/tsan-executable.map)
      set_property(TARGET ${tgt} APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/tsan-executable.map)
    endif()
  endif()
  if(DLOCK_BUILD_FUZZERS)
    # Coverage for libFuzzer in everything a fuzzer calls (tests/fuzz links the driver).
    target_compile_options(${tgt} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
  if(T_DEPS)
    target_link_libraries(${tgt} PUBLIC ${T_DEPS})
  endif()
  if(T_PRIVATE_DEPS)
    target_link_libraries(${tgt} PRIVATE ${T_PRIVATE_DEPS})
  endif()
  if(T_INCLUDES)
    target_include_directories(${tgt} PRIVATE ${T_INCLUDES})
  endif()
  if(T_KIND STREQUAL "test")
    # gtest_discover_tests flattens its PROPERTIES: a second fixture name would be read as a
    # property name and silently drop the ones after it (ENVIRONMENT included).
    list(LENGTH T_FIXTURES fixture_count)
    if(fixture_count GREATER 1)
      message(FATAL_ERROR "dlock_target(${T_NAME}): one FIXTURES name at most (got ${T_FIXTURES}); "
                          "use a fixture that groups them, like \"servers\" in tests/CMakeLists.txt")
    endif()
    include(GoogleTest)
    # Tests find the servers the fixtures started under DLOCK_TEST_SERVERS.
    # (FIXTURES_REQUIRED only with a fixture: an empty value would take the
    # next property's name as its value, and drop the rest, RUN_SERIAL too.)
    set(properties LABELS "${T_LABELS}" ENVIRONMENT "DLOCK_TEST_SERVERS=${DLOCK_TEST_SERVERS}")
    if(T_FIXTURES)
      list(APPEND properties FIXTURES_REQUIRED "${T_FIXTURES}")
    endif()
    if(T_SERIAL)
      gtest_discover_tests(${tgt} TEST_FILTER "-${T_SERIAL}" PROPERTIES ${properties} DISCOVERY_TIMEOUT 60)
      gtest_discover_tests(${tgt} TEST_FILTER "${T_SERIAL}" PROPERTIES ${properties} RUN_SERIAL TRUE
                           DISCOVERY_TIMEOUT 60)
    else()
      gtest_discover_tests(${tgt} PROPERTIES ${properties} DISCOVERY_TIMEOUT 60)
    endif()
  endif()
endfunction()
