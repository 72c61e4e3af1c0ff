# Install rules: the libraries, their headers, the kjit command line, the CMake package
# (find_package(kjit CONFIG) -> kjit::kjit, kjit_prebuild()), and the install-time prebuild.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GPU_ARCHS "$ENV{GPU_ARCHS}" CACHE STRING "targets cmake --install prebuilds for (';'-separated, native: the GPUs found)")
set(PREBUILD_KERNELS "$ENV{PREBUILD_KERNELS}" CACHE STRING "0 none, 1 core, 2 inference, 3 minimal set at install")

set(kjit_libraries kjit_base kjit_jit kjit_cache kjit_templates kjit_runtime kjit_ops)
foreach(library IN LISTS kjit_libraries)
  string(REPLACE "kjit_" "" folder ${library})
  set_target_properties(${library} PROPERTIES EXPORT_NAME ${folder})
  target_include_directories(${library} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
set_target_properties(kjit_cli PROPERTIES EXPORT_NAME cli)
add_executable(kjit::cli ALIAS kjit_cli)
# The C ABI: libkjit_c.so and kjit/c.h (kjit::c), for callers in other languages.
set_target_properties(kjit_c PROPERTIES EXPORT_NAME c)
target_include_directories(kjit_c INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/capi/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ${kjit_libraries} kjit kjit_c kjit_cli EXPORT kjitTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kjit)
install(EXPORT kjitTargets NAMESPACE kjit:: DESTINATION ${package_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kjitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kjitConfig.cmake INSTALL_DESTINATION ${package_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kjitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kjitConfig.cmake ${PROJECT_BINARY_DIR}/kjitConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/KjitPrebuild.cmake ${PROJECT_SOURCE_DIR}/cmake/KjitEmbed.cmake
  DESTINATION ${package_dir})

# Last: it runs the kjit just installed.
configure_file(${PROJECT_SOURCE_DIR}/cmake/InstallPrebuild.cmake.in
  ${PROJECT_BINARY_DIR}/InstallPrebuild.cmake @ONLY)
install(SCRIPT ${PROJECT_BINARY_DIR}/InstallPrebuild.cmake)
