# kjit_prebuild(): a library built on kjit prebuilds its own variant sets, as kjit's install does
# for the built-in ones (see kjit/templates/sets.hpp for the set format).
#
#   kjit_prebuild(NAME
#                 SETS file.json...            set files (their templates' sources beside them)
#                 [SOURCES file.hip...]        what the sets read, so that editing it rebuilds
#                 [TARGETS gfx942 gfx90a]      a CMake list; default: the GPU_ARCHS variable, else
#                                              $ENV{GPU_ARCHS}
#                 [LEVEL 1|2|3]                only the sets of this level; default every set given
#                                              (kjit's own PREBUILD_KERNELS applies only when the
#                                              library passes it: LEVEL ${PREBUILD_KERNELS})
#                 [SKIP_UNSUPPORTED]           build for the targets the installed compiler
#                                              supports, warn about the others
#                 [DESTINATION dir])           installed there, under the library's own prefix;
#                                              default ${CMAKE_INSTALL_DATADIR}/${PROJECT_NAME}/prebuilt
#
# Adds the target NAME (built by `all`), which runs `kjit prebuild` into
# ${CMAKE_CURRENT_BINARY_DIR}/NAME-prebuilt; sets KJIT_PREBUILD_DIR_<NAME> to that directory and
# KJIT_PREBUILD_DESTINATION_<NAME> to where it is installed (relative to the install prefix); and
# installs it as a prebuilt tier, which the library adds to its Config::prebuilt_dirs (or users to
# KJIT_PREBUILT_PATH). With no targets, or LEVEL 0, it adds nothing.
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
  cmake_parse_arguments(ARG "SKIP_UNSUPPORTED" "LEVEL;DESTINATION" "SETS;SOURCES;TARGETS" ${ARGN})
  if(NOT ARG_SETS)
    message(FATAL_ERROR "kjit_prebuild(${name}): give SETS file.json...")
  endif()
  _kjit_setting(targets "${ARG_TARGETS}" GPU_ARCHS)
  if(NOT targets OR "${ARG_LEVEL}" STREQUAL "0")
    message(STATUS "kjit_prebuild(${name}): no TARGETS or GPU_ARCHS (or LEVEL 0): nothing prebuilt")
    return()
  endif()
  if(NOT ARG_DESTINATION)
    include(GNUInstallDirs)
    set(ARG_DESTINATION ${CMAKE_INSTALL_DATADIR}/${PROJECT_NAME}/prebuilt)
  endif()

  set(out ${CMAKE_CURRENT_BINARY_DIR}/${name}-prebuilt)
  set(stamp ${CMAKE_CURRENT_BINARY_DIR}/${name}-prebuilt.stamp)
  # One argument "gfx942;gfx90a": a list in a COMMAND would become one argument per target.
  list(JOIN targets "$<SEMICOLON>" target_argument)
  set(command $<TARGET_FILE:kjit::cli> prebuild --targets "${target_argument}" --out ${out})
  if(ARG_LEVEL)
    list(APPEND command --level ${ARG_LEVEL})
  endif()
  if(ARG_SKIP_UNSUPPORTED)
    list(APPEND command --skip-unsupported)
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
  set(KJIT_PREBUILD_DESTINATION_${name} ${ARG_DESTINATION} PARENT_SCOPE)
  # The tier is made at build time, so it exists when installed (empty where SKIP_UNSUPPORTED
  # left no target).
  install(DIRECTORY ${out}/ DESTINATION ${ARG_DESTINATION} USE_SOURCE_PERMISSIONS)
endfunction()
