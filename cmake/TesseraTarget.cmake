# SPDX-License-Identifier: BSD-3-Clause
# tessera_add_area(NAME SOURCES ... HEADERS ... DEPENDS ...): one library target per area of src/, with
# its public headers installed under include/tessera/<area>/.
function(tessera_add_area name)
  cmake_parse_arguments(A "" "" "SOURCES;HEADERS;PUBLIC;PRIVATE" ${ARGN})
  set(target tessera_${name})
  add_library(${target} STATIC ${A_SOURCES})
  add_library(Tessera::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${TESSERA_BUILD_INCLUDE_DIR}> $<INSTALL_INTERFACE:include>)
  target_link_libraries(${target} PUBLIC ${A_PUBLIC} PRIVATE ${A_PRIVATE} $<BUILD_INTERFACE:tessera_warnings>)
  install(TARGETS ${target} EXPORT TesseraTargets ARCHIVE DESTINATION lib LIBRARY DESTINATION lib)
  install(FILES ${A_HEADERS} DESTINATION include/tessera/${name})
  # The public headers, for the API reference (scripts/docs.sh).
  foreach(header ${A_HEADERS})
    set_property(GLOBAL APPEND PROPERTY TESSERA_PUBLIC_HEADERS ${CMAKE_CURRENT_SOURCE_DIR}/${header})
  endforeach()
endfunction()
