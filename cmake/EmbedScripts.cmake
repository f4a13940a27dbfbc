# Embeds Lua scripts (each with the prelude helpers it uses) as C++ string
# constants with their SHA1, so the library
# can call them by EVALSHA without computing digests at run time. The header
# is regenerated at build time whenever a script changes.
# dlock_embed_scripts(target header PRELUDE files... SCRIPTS files...)
function(dlock_embed_scripts target header)
  cmake_parse_arguments(ARG "" "" "PRELUDE;SCRIPTS" ${ARGN})
  set(prelude)
  foreach(part IN LISTS ARG_PRELUDE)
    list(APPEND prelude ${CMAKE_CURRENT_SOURCE_DIR}/${part})
  endforeach()
  string(REPLACE ";" "," prelude_joined "${prelude}")
  set(sources)
  foreach(script IN LISTS ARG_SCRIPTS)
    list(APPEND sources ${CMAKE_CURRENT_SOURCE_DIR}/${script})
  endforeach()
  string(REPLACE ";" "," joined "${sources}")
  add_custom_command(
    OUTPUT ${header}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${header} "-DSCRIPTS=${joined}" "-DPRELUDE=${prelude_joined}" -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/GenerateScriptsHeader.cmake
    DEPENDS ${sources} ${prelude} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/GenerateScriptsHeader.cmake
    COMMENT "Embedding Lua scripts" VERBATIM)
  add_custom_target(${target} DEPENDS ${header})
  set(DLOCK_LOCK_SOURCES ${DLOCK_LOCK_SOURCES} ${header} PARENT_SCOPE)
endfunction()
