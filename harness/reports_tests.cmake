# reports_tests.cmake: CTest shell tests of the report commands (gate.c, coverage.c, merge.c)
# on the built `moects` binary.
# coverage_html_chromium renders coverage.html and reads it back with headless Chromium
# (Debian package `chromium`); skipped (exit 77) when Chromium is missing.
find_program(MOECTS_CHROMIUM NAMES chromium chromium-browser google-chrome)
if(NOT MOECTS_CHROMIUM)
  set(MOECTS_CHROMIUM "")
endif()
add_test(NAME coverage_html_chromium
         COMMAND sh ${PROJECT_SOURCE_DIR}/tests/cli/coverage_html.sh $<TARGET_FILE:moects> "${MOECTS_CHROMIUM}"
                 ${PROJECT_SOURCE_DIR}/tests/fixtures/data/coverage ${CMAKE_CURRENT_BINARY_DIR}/coverage_html)
set_tests_properties(coverage_html_chromium PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
# merge_equals_unsharded: ~20 cases run whole and in 3 shards; the merge must equal the whole run.
add_test(NAME merge_equals_unsharded
         COMMAND sh ${PROJECT_SOURCE_DIR}/tests/cli/merge_shards.sh $<TARGET_FILE:moects>
                 ${CMAKE_CURRENT_BINARY_DIR}/merge_shards)
set_tests_properties(merge_equals_unsharded PROPERTIES TIMEOUT 600)
# scale_out_examples: examples/scale-out/ (Slurm job array, Kubernetes Indexed Job) run on 3 local
# shards as the schedulers would; the merged verdicts must equal an unsharded run's.
add_test(NAME scale_out_examples
         COMMAND sh ${PROJECT_SOURCE_DIR}/tests/cli/scale_out.sh $<TARGET_FILE:moects> ${PROJECT_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/scale_out)
set_tests_properties(scale_out_examples PROPERTIES TIMEOUT 600)
