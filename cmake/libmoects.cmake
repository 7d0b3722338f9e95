# libmoects: the shared library of the public C API (include/moects/moects.h) built from the objects of the
# static libraries (ref, cases, gpu, harness), and the install: moects binary, libmoects, the public
# headers, a CMake package (find_package(moects): moects::moects) and a pkg-config file (moects.pc).
# OpenBLAS is linked statically into libmoects as into the binary. jansson's static archive is not
# position independent, so libmoects links libjansson.so.4 and carries a copy of it beside itself
# (build/lib, and PREFIX/lib/moects when installed; RPATH $ORIGIN), so that a build tree or an
# install copied to the GPU host needs nothing more there. The binary and the library find the registry
# installed beside them (PREFIX/share/moects, moects__bundled_root), so an install can be moved.

set(MOECTS_STATIC_LIBS moects_ref moects_cases moects_gpu moects_harness)
set_target_properties(${MOECTS_STATIC_LIBS} PROPERTIES C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
                      CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)

find_library(JANSSON_SHARED NAMES libjansson.so.4 jansson)
if(NOT JANSSON_SHARED)
  message(FATAL_ERROR "libjansson.so not found: apt-get install libjansson-dev")
endif()
get_filename_component(JANSSON_SHARED_REAL ${JANSSON_SHARED} REALPATH)

# The export list: every function declared MOECTS_API in include/moects/moects.h, nothing else.
file(STRINGS ${PROJECT_SOURCE_DIR}/include/moects/moects.h MOECTS_API_LINES REGEX "^MOECTS_API ")
set(MOECTS_EXPORTS "")
foreach(l ${MOECTS_API_LINES})
  string(REGEX MATCH "(moects_[a-z0-9_]+)\\(" m "${l}")
  if(m)
    string(APPEND MOECTS_EXPORTS "    ${CMAKE_MATCH_1};\n")
  endif()
endforeach()
set(MOECTS_MAP ${CMAKE_BINARY_DIR}/libmoects.map)
file(WRITE ${MOECTS_MAP}.in "MOECTS_0 {\n  global:\n${MOECTS_EXPORTS}  local: *;\n};\n")
configure_file(${MOECTS_MAP}.in ${MOECTS_MAP} COPYONLY)

set(MOECTS_LIB_OBJECTS)
foreach(t ${MOECTS_STATIC_LIBS})
  list(APPEND MOECTS_LIB_OBJECTS $<TARGET_OBJECTS:${t}>)
endforeach()
if(MOECTS_HAVE_CUDA)
  list(APPEND MOECTS_LIB_OBJECTS $<TARGET_OBJECTS:moects_gpu_ftz>)
endif()
add_library(moects_shared SHARED ${MOECTS_LIB_OBJECTS})
target_link_libraries(moects_shared PRIVATE ${OPENBLAS_STATIC} ${JANSSON_SHARED} Threads::Threads m
                      ${CMAKE_DL_LIBS})
if(MOECTS_HAVE_CUDA)
  target_link_libraries(moects_shared PRIVATE CUDA::cudart_static)
  set_target_properties(moects_shared PROPERTIES CUDA_RUNTIME_LIBRARY Static)
endif()
target_link_options(moects_shared PRIVATE "LINKER:--version-script=${MOECTS_MAP}" "LINKER:--no-undefined")
target_include_directories(moects_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include/moects> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/moects>)
set_target_properties(moects_shared PROPERTIES OUTPUT_NAME moects EXPORT_NAME moects
  VERSION ${PROJECT_VERSION}.0 SOVERSION 0 LINKER_LANGUAGE CXX LINK_DEPENDS ${MOECTS_MAP}
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib
  BUILD_RPATH "\$ORIGIN" INSTALL_RPATH "\$ORIGIN/moects")
get_filename_component(JANSSON_SONAME_FILE ${JANSSON_SHARED} NAME)
add_custom_command(TARGET moects_shared POST_BUILD
  COMMAND ${CMAKE_COMMAND} -E copy ${JANSSON_SHARED_REAL} ${CMAKE_BINARY_DIR}/lib/libjansson.so.4
  COMMENT "libjansson.so.4 beside libmoects (RPATH \$ORIGIN)")

# ---- install ----
install(TARGETS moects RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(MOECTS_PYTHON_PACKAGE)
  # A wheel stores symlinks as copies: one file, named as its soname (libmoects.so.0, what moects._lib
  # and the runner load), with no libmoects.so name link.
  set_target_properties(moects_shared PROPERTIES VERSION 0)
  install(TARGETS moects_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_SKIP)
else()
  install(TARGETS moects_shared EXPORT moectsTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(FILES ${JANSSON_SHARED_REAL} DESTINATION ${CMAKE_INSTALL_LIBDIR}/moects RENAME libjansson.so.4)
install(FILES ${PROJECT_SOURCE_DIR}/include/moects/moects.h ${PROJECT_SOURCE_DIR}/include/moects/moects_kernel.h
              ${PROJECT_SOURCE_DIR}/include/moects/moects_types.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/moects)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/cases/models ${PROJECT_SOURCE_DIR}/cases/regressions
                  ${PROJECT_SOURCE_DIR}/cases/mustpass DESTINATION ${CMAKE_INSTALL_DATADIR}/moects/cases)
install(FILES ${PROJECT_SOURCE_DIR}/cases/known-findings.txt DESTINATION ${CMAKE_INSTALL_DATADIR}/moects/cases)
if(MOECTS_PYTHON_PACKAGE)
  # The pip build (python/pyproject.toml) installs into the package (moects/_native): bin, lib and the
  # registry are all it needs; a pkg-config file there would name the build's temporary prefix.
  return()
endif()

include(CMakePackageConfigHelpers)
set(MOECTS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/moects)
install(EXPORT moectsTargets NAMESPACE moects:: DESTINATION ${MOECTS_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/moectsConfig.cmake.in
  ${CMAKE_BINARY_DIR}/moectsConfig.cmake INSTALL_DESTINATION ${MOECTS_CMAKE_DIR} PATH_VARS CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/moectsConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/moectsConfig.cmake ${CMAKE_BINARY_DIR}/moectsConfigVersion.cmake
        DESTINATION ${MOECTS_CMAKE_DIR})
configure_file(${PROJECT_SOURCE_DIR}/cmake/moects.pc.in ${CMAKE_BINARY_DIR}/moects.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/moects.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
