# kjit_prebuild(): a library built on kjit prebuilds its own variant sets, as kjit's install does
# for the built-in ones (see kjit/templates/sets.hpp for the set format).
#
#   kjit_prebuild(NAME
#                 SETS file.json...            set files (their templates' sources beside them)
#                 [SOURCES file.hip...]        what the sets read, so that editing it rebuilds
#                 [TARGETS "gfx90a;sm_90"]     default: the GPU_ARCHS variable, else $ENV{GPU_ARCHS}
#                 [LEVEL 1|2|3]                default: PREBUILD_KERNELS, else every set given
#                 [DESTINATION dir])           installed there; default share/kjit/prebuilt
#
# Adds the target NAME (built by `all`), which runs `kjit prebuild` into
# ${CMAKE_CURRENT_BINARY_DIR}/NAME-prebuilt; sets KJIT_PREBUILD_DIR_<NAME> to that directory; and
# installs it as a prebuilt tier. With no targets, or PREBUILD_KERNELS=0, it adds nothing.
# Sets `out` to `given`, else the CMake variable `name`, else the environment variable `name`.
macro(_kjit_setting out given name)
  set(${out} "${given}")
  if("${${out}}" STREQUAL "")
    set(${out} "${${name}}")
  endif()
  if("${${out}}" STREQUAL "")
    set(${out} "$ENV{${name}}")
  endif()
endmacro()

function(kjit_prebuild name)
  cmake_parse_arguments(ARG "" "LEVEL;DESTINATION" "SETS;SOURCES;TARGETS" ${ARGN})
  if(NOT ARG_SETS)
    message(FATAL_ERROR "kjit_prebuild(${name}): give SETS file.json...")
  endif()
  _kjit_setting(targets "${ARG_TARGETS}" GPU_ARCHS)
  _kjit_setting(level "${ARG_LEVEL}" PREBUILD_KERNELS)
  if(NOT targets OR "${level}" STREQUAL "0")
    message(STATUS "kjit_prebuild(${name}): no GPU_ARCHS (or PREBUILD_KERNELS=0): nothing prebuilt")
    return()
  endif()
  if(NOT ARG_DESTINATION)
    include(GNUInstallDirs)
    set(ARG_DESTINATION ${CMAKE_INSTALL_DATADIR}/kjit/prebuilt)
  endif()

  set(out ${CMAKE_CURRENT_BINARY_DIR}/${name}-prebuilt)
  set(stamp ${CMAKE_CURRENT_BINARY_DIR}/${name}-prebuilt.stamp)
  set(command $<TARGET_FILE:kjit::cli> prebuild --targets "${targets}" --out ${out})
  if(level)
    list(APPEND command --level ${level})
  endif()
  set(depends "")
  foreach(file IN LISTS ARG_SETS ARG_SOURCES)
    get_filename_component(file "${file}" ABSOLUTE)
    list(APPEND depends ${file})
  endforeach()
  foreach(file IN LISTS ARG_SETS)
    get_filename_component(file "${file}" ABSOLUTE)
    list(APPEND command --sets ${file})
  endforeach()
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${command}
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    DEPENDS ${depends} $<TARGET_FILE:kjit::cli>
    COMMENT "kjit prebuild: ${name} for ${targets}"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${stamp})
  set(KJIT_PREBUILD_DIR_${name} ${out} PARENT_SCOPE)
  install(DIRECTORY ${out}/ DESTINATION ${ARG_DESTINATION} USE_SOURCE_PERMISSIONS)
endfunction()
