# The layering test (ctest -R layering): the library's layers include only
# downwards, and the build refuses anything else.
#
#   cmake -DTABLE=<build>/layering/layers.cmake -DSOURCE_DIR=<source root>
#         -DCXX=<compiler> -DWORK=<scratch dir> -P cmake/CheckLayers.cmake
#
# TABLE (written at configure time) lists the layers, bottom first, with the
# layers each may see and its target's include directories and definitions.
# Three checks:
#   1. every directory of src/ with C++ in it is a layer;
#   2. every #include in a layer's files names its own layer or one it sees,
#      and none climbs out with "../";
#   3. with each layer target's own flags, including a header of any layer it
#      does not see fails (file not found), and including one of each layer
#      it sees goes through (the preprocessor finds every file).
cmake_minimum_required(VERSION 3.20)
include(${TABLE})
set(failures "")
file(MAKE_DIRECTORY ${WORK})

file(GLOB dirs LIST_DIRECTORIES true ${SOURCE_DIR}/src/*)
foreach(dir ${dirs})
  get_filename_component(name ${dir} NAME)
  file(GLOB code ${dir}/*.cpp ${dir}/*.hpp)
  if(code AND NOT name IN_LIST LAYERS)
    list(APPEND failures "src/${name} holds C++ but is no layer: add it with dlock_layer() in CMakeLists.txt")
  endif()
endforeach()

foreach(layer ${LAYERS})
  set(allowed ${layer} ${SEES_${layer}})
  file(GLOB files ${SOURCE_DIR}/src/${layer}/*.cpp ${SOURCE_DIR}/src/${layer}/*.hpp)
  foreach(file ${files})
    file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include")
    foreach(line ${lines})
      string(REPLACE "${SOURCE_DIR}/" "" where ${file})
      if(line MATCHES "\\.\\./")
        list(APPEND failures "${where}: '${line}' climbs out of its directory; name the layer (\"redis/x.hpp\")")
      elseif(line MATCHES "include[ \t]*[\"<]([A-Za-z0-9_]+)/")
        if(CMAKE_MATCH_1 IN_LIST LAYERS AND NOT CMAKE_MATCH_1 IN_LIST allowed)
          list(APPEND failures "${where}: '${line}' reaches up into ${CMAKE_MATCH_1}; layer ${layer} sees only: ${allowed}")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

# Each layer's smallest header stands for it (check 3 compiles it).
foreach(layer ${LAYERS})
  file(GLOB headers RELATIVE ${SOURCE_DIR}/src ${SOURCE_DIR}/src/${layer}/*.hpp)
  set(best "")
  foreach(header ${headers})
    file(SIZE ${SOURCE_DIR}/src/${header} size)
    if(best STREQUAL "" OR size LESS best_size)
      set(best ${header})
      set(best_size ${size})
    endif()
  endforeach()
  set(HEADER_${layer} "${best}")
endforeach()

function(compile layer text result output)
  set(probe ${WORK}/${layer}_probe.cpp)
  file(WRITE ${probe} "${text}")
  string(REPLACE "|" ";" includes "${INCLUDES_${layer}}")
  string(REPLACE "|" ";" defines "${DEFINES_${layer}}")
  list(TRANSFORM includes PREPEND "-I")
  list(TRANSFORM defines PREPEND "-D")
  execute_process(COMMAND ${CXX} -std=c++20 -E -o ${probe}.i ${includes} ${defines} ${probe}
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
  set(${result} ${code} PARENT_SCOPE)
  set(${output} "${out}" PARENT_SCOPE)
endfunction()

foreach(layer ${LAYERS})
  set(seen "")
  foreach(other ${LAYERS})
    if("${HEADER_${other}}" STREQUAL "")
      continue()
    endif()
    if(other STREQUAL layer OR other IN_LIST SEES_${layer})
      string(APPEND seen "#include \"${HEADER_${other}}\"\n")
      continue()
    endif()
    compile(${layer} "#include \"${HEADER_${other}}\"\n" code out)
    if(code EQUAL 0)
      list(APPEND failures "layer ${layer} compiled an include of ${HEADER_${other}}, a layer it must not see")
    elseif(NOT out MATCHES "${HEADER_${other}}.*(No such file|not found)")
      list(APPEND failures "layer ${layer} including ${HEADER_${other}} failed, but not for want of the file:\n${out}")
    else()
      message(STATUS "refused: ${layer} -> ${HEADER_${other}}")
    endif()
  endforeach()
  compile(${layer} "${seen}" code out)
  if(NOT code EQUAL 0)
    list(APPEND failures "layer ${layer} could not include the layers it sees:\n${seen}${out}")
  else()
    string(REPLACE "\n" " " seen_list "${seen}")
    message(STATUS "compiles: ${layer} -> ${seen_list}")
  endif()
endforeach()

if(failures)
  list(JOIN failures "\n" text)
  message(FATAL_ERROR "layering:\n${text}")
endif()
message(STATUS "layering: every include goes down")
