# The Python package's tests (python/moects, examples/), run with pytest by CTest. The interpreter is
# the one Debian's python3-pytest and python3-numpy install for (/usr/bin/python3), or MOECTS_PYTHON.
# The package runs from the checkout (PYTHONPATH) against this build's libmoects (MOECTS_LIB);
# py_pip_install (label pip) installs it with pip into a fresh venv instead, building the library it
# bundles, and uses it from a folder outside the checkout with none of those variables. Tests needing
# torch, triton or a GPU are skipped where those are missing (CI).
if(NOT MOECTS_PYTHON)
  find_program(MOECTS_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
endif()
if(NOT MOECTS_PYTHON)
  find_program(MOECTS_PYTHON NAMES python3)
endif()
execute_process(COMMAND ${MOECTS_PYTHON} -c "import numpy, pytest" RESULT_VARIABLE _py_ok OUTPUT_QUIET ERROR_QUIET)
if(NOT _py_ok EQUAL 0)
  message(FATAL_ERROR "${MOECTS_PYTHON}: numpy and pytest not importable: apt-get install python3-pytest python3-numpy "
                      "(or -DMOECTS_PYTHON=an interpreter that has them)")
endif()
set(_py_dir ${PROJECT_SOURCE_DIR}/tests/python)
set(_py_env "PYTHONPATH=${PROJECT_SOURCE_DIR}/python" "MOECTS_LIB=$<TARGET_FILE:moects_shared>"
    "MOECTS_BUILD=${CMAKE_BINARY_DIR}" "MOECTS_PYTHON=${MOECTS_PYTHON}" "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1")
set(_pytest ${MOECTS_PYTHON} -m pytest -q -p moects.pytest_plugin -p no:cacheprovider)

add_test(NAME py_unit COMMAND ${_pytest} ${_py_dir}/test_fma.py ${_py_dir}/test_api.py ${_py_dir}/test_export.py
         ${_py_dir}/test_kernel_py.py ${_py_dir}/test_plugin.py ${_py_dir}/test_torch_examples.py
         ${_py_dir}/test_gpu_examples.py ${_py_dir}/test_gpu_moe_examples.py
         ${_py_dir}/test_descriptions.py ${_py_dir}/test_saxpy_overflow.py ${_py_dir}/test_capture.py)
# The three routes of test_equivalence.py, each in two shards of the cases, side by side.
foreach(_route pytest_plugin kernel_py export_verify)
  foreach(_part 0 1)
    add_test(NAME py_equivalence_${_route}_${_part}
             COMMAND ${_pytest} ${_py_dir}/test_equivalence.py -k test_${_route}_route)
    set_tests_properties(py_equivalence_${_route}_${_part} PROPERTIES
                         ENVIRONMENT "${_py_env};MOECTS_EQ_SHARD=${_part}/2" TIMEOUT 3600)
  endforeach()
endforeach()
add_test(NAME py_moe_gemm COMMAND ${_pytest} ${_py_dir}/test_moe_examples.py)
add_test(NAME py_fused_moe COMMAND ${_pytest} ${_py_dir}/test_fused_examples.py)
add_test(NAME py_route COMMAND ${_pytest} ${_py_dir}/test_route_examples.py)
add_test(NAME py_adapters COMMAND ${_pytest} ${_py_dir}/test_adapters.py)
add_test(NAME py_pip_install COMMAND sh ${_py_dir}/pip_install.sh ${MOECTS_PYTHON} ${PROJECT_SOURCE_DIR}
         ${CMAKE_BINARY_DIR}/py_pip_install)
set_tests_properties(py_pip_install PROPERTIES LABELS "python;pip" TIMEOUT 1800)
set_tests_properties(py_unit py_moe_gemm py_fused_moe py_route py_adapters PROPERTIES ENVIRONMENT "${_py_env}")
set_tests_properties(py_unit py_moe_gemm py_fused_moe py_route py_adapters PROPERTIES TIMEOUT 1200)
# The Triton layer example (examples/triton_fused_moe.py) through the pytest plugin and --kernel-py:
# on CUDA, or on CPU under Triton's interpreter with MOECTS_TRITON_INTERPRET=1 in ctest's environment
# (about 4 minutes on 2 cores; MOECTS_PYTHON must have torch and triton); skipped otherwise, in
# seconds, so the default run keeps it:  MOECTS_TRITON_INTERPRET=1 ctest -L triton
add_test(NAME py_triton_fused_moe COMMAND ${_pytest} ${_py_dir}/test_triton_fused_moe.py)
set_tests_properties(py_triton_fused_moe PROPERTIES LABELS "python;triton" ENVIRONMENT "${_py_env}" TIMEOUT 1800)
