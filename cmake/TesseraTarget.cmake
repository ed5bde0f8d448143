# SPDX-License-Identifier: BSD-3-Clause
# tessera_add_area(NAME [DIR PATH] SOURCES ... HEADERS ... PUBLIC ... PRIVATE ...): one library target,
# tessera_NAME, per area of src/tessera/ (PATH: its folder below src/tessera/, default NAME), with its public
# headers installed under include/tessera/PATH/, where code includes them from: "tessera/PATH/x.hpp".
function(tessera_add_area name)
  cmake_parse_arguments(A "" "DIR" "SOURCES;HEADERS;PUBLIC;PRIVATE" ${ARGN})
  if(NOT A_DIR)
    set(A_DIR ${name})
  endif()
  set(target tessera_${name})
  add_library(${target} STATIC ${A_SOURCES})
  add_library(Tessera::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${TESSERA_INCLUDE_ROOT}> $<INSTALL_INTERFACE:include>)
  target_link_libraries(${target} PUBLIC ${A_PUBLIC} PRIVATE ${A_PRIVATE} $<BUILD_INTERFACE:tessera_warnings>)
  install(TARGETS ${target} EXPORT TesseraTargets ARCHIVE DESTINATION lib LIBRARY DESTINATION lib)
  install(FILES ${A_HEADERS} DESTINATION include/tessera/${A_DIR})
  # The public headers, for the API reference (scripts/docs.sh).
  foreach(header ${A_HEADERS})
    set_property(GLOBAL APPEND PROPERTY TESSERA_PUBLIC_HEADERS ${CMAKE_CURRENT_SOURCE_DIR}/${header})
  endforeach()
endfunction()
