# cmake -DOUTPUT=header -DSCRIPTS="a.lua,b.lua" [-DPRELUDE="p.lua,q.lua"] -P GenerateScriptsHeader.cmake
# Each script is embedded with the helpers of the prelude that it uses, directly
# or through another helper, in front of it: Redis scripts cannot include one
# another, and every helper a script carries is defined anew on each call
# (a closure per `local function`), so a script carries only its own.
#
# The prelude is read as blocks separated by blank lines; a block that defines
# a top-level local (`local function name(` or `local name =`) is that name's
# helper, with the comment above it. A helper is used where its name stands as
# a word in code (comments stripped). Blocks of comments alone are left out.
#
# A script may put its common paths first and a line `--@helpers` after them:
# only the helpers those paths use (and theirs) are placed in front of it, the
# others at that line, so a call that returns on a common path never creates
# the closures of the rest.
#
# Each script comes in two texts, NAME_text and NAME_cluster_text: where it
# carries publish.lua's `local sharded_pubsub = false`, the cluster text has
# it true (the client of a Redis Cluster sends that one); otherwise both are
# the same text.
cmake_policy(SET CMP0057 NEW)
string(REPLACE "," ";" SCRIPTS "${SCRIPTS}")
string(REPLACE "," ";" PRELUDE "${PRELUDE}")
set(prelude "")
foreach(part IN LISTS PRELUDE)
  file(READ ${part} part_text)
  string(APPEND prelude "${part_text}\n\n")
endforeach()

# The code of a text without its comments, for finding names in it.
function(code_of text out)
  string(REGEX REPLACE "--[^\n]*" "" code "${text}")
  set(${out} "${code}" PARENT_SCOPE)
endfunction()

# Whether `name` stands as a word in `code`.
function(uses code name out)
  string(REGEX MATCH "(^|[^A-Za-z0-9_])${name}([^A-Za-z0-9_]|$)" found "${code}")
  if(found STREQUAL "")
    set(${out} FALSE PARENT_SCOPE)
  else()
    set(${out} TRUE PARENT_SCOPE)
  endif()
endfunction()

# Split the prelude into blocks: helper_names (in prelude order), and for each
# name its text (helper_text_<name>) and its code (helper_code_<name>).
set(helper_names "")
set(rest "${prelude}")
while(NOT rest STREQUAL "")
  string(FIND "${rest}" "\n\n" cut)
  if(cut EQUAL -1)
    set(block "${rest}")
    set(rest "")
  else()
    string(SUBSTRING "${rest}" 0 ${cut} block)
    math(EXPR after "${cut} + 2")
    string(SUBSTRING "${rest}" ${after} -1 rest)
  endif()
  code_of("${block}" code)
  string(REGEX MATCH "(^|\n)local function ([A-Za-z_][A-Za-z0-9_]*)" defines "${code}")
  if(defines STREQUAL "")
    string(REGEX MATCH "(^|\n)local ([A-Za-z_][A-Za-z0-9_]*) *=" defines "${code}")
  endif()
  if(defines STREQUAL "")
    string(STRIP "${code}" leftover)
    if(NOT leftover STREQUAL "")
      message(FATAL_ERROR "a prelude block defines no top-level local and is not only comments:\n${block}")
    endif()
    continue()
  endif()
  set(name "${CMAKE_MATCH_2}")
  if(DEFINED helper_text_${name})
    message(FATAL_ERROR "the prelude defines '${name}' twice")
  endif()
  list(APPEND helper_names ${name})
  set(helper_text_${name} "${block}\n\n")
  set(helper_code_${name} "${code}")
endwhile()

# Each helper's own uses of the others.
foreach(name IN LISTS helper_names)
  set(helper_uses_${name} "")
  string(REGEX REPLACE "(^|\n)local (function )?${name}" "\\1" own_code "${helper_code_${name}}")
  foreach(other IN LISTS helper_names)
    if(NOT other STREQUAL name)
      uses("${own_code}" ${other} used)
      if(used)
        list(APPEND helper_uses_${name} ${other})
      endif()
    endif()
  endforeach()
endforeach()

# The helpers `code` uses, then theirs, until nothing is added.
function(needed_by code out)
  set(needed "")
  foreach(helper IN LISTS helper_names)
    uses("${code}" ${helper} used)
    if(used)
      list(APPEND needed ${helper})
    endif()
  endforeach()
  set(added TRUE)
  while(added)
    set(added FALSE)
    foreach(helper IN LISTS needed)
      foreach(used IN LISTS helper_uses_${helper})
        if(NOT used IN_LIST needed)
          list(APPEND needed ${used})
          set(added TRUE)
        endif()
      endforeach()
    endforeach()
  endwhile()
  set(${out} "${needed}" PARENT_SCOPE)
endfunction()

# The text of the helpers in `names` and not in `except`, in prelude order.
function(helpers_text names except out)
  set(text "")
  foreach(helper IN LISTS helper_names)
    if(helper IN_LIST names AND NOT helper IN_LIST except)
      string(APPEND text "${helper_text_${helper}}")
    endif()
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# publish.lua's switch between plain and sharded pub/sub, as it stands in
# the prelude and as the cluster text of a script has it.
set(sharded_line_false "local sharded_pubsub = false")
set(sharded_line_true "local sharded_pubsub = true")
if(DEFINED helper_text_sharded_pubsub)
  string(FIND "${helper_text_sharded_pubsub}" "\n${sharded_line_false}\n" found)
  if(found EQUAL -1)
    message(FATAL_ERROR "publish.lua must define sharded_pubsub as the line '${sharded_line_false}'")
  endif()
endif()

set(body "// Generated from src/scripts/*.lua by cmake/GenerateScriptsHeader.cmake. Do not edit.\n#pragma once\n\nnamespace dlock::detail::scripts {\n\n")
foreach(script IN LISTS SCRIPTS)
  get_filename_component(name ${script} NAME_WE)
  file(READ ${script} own_text)
  code_of("${own_text}" own_code)
  needed_by("${own_code}" needed)
  string(FIND "${own_text}" "\n--@helpers\n" marker)
  if(marker EQUAL -1)
    helpers_text("${needed}" "" helpers_text)
    set(text "${helpers_text}${own_text}")
  else()
    string(SUBSTRING "${own_text}" 0 ${marker} hot_text)
    math(EXPR after "${marker} + 12")
    string(SUBSTRING "${own_text}" ${after} -1 cold_text)
    code_of("${hot_text}" hot_code)
    needed_by("${hot_code}" hot_needed)
    helpers_text("${hot_needed}" "" hot_helpers)
    helpers_text("${needed}" "${hot_needed}" cold_helpers)
    set(text "${hot_helpers}${hot_text}\n--@helpers\n${cold_helpers}${cold_text}")
  endif()
  string(SHA1 digest "${text}")
  string(FIND "${text}" ")lua\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${script} contains the raw-string delimiter )lua\"")
  endif()
  string(APPEND body "inline constexpr const char ${name}_text[] = R\"lua(${text})lua\";\n")
  string(APPEND body "inline constexpr const char ${name}_sha1[] = \"${digest}\";\n")
  # The text for clients of a Redis Cluster (publish.lua): the same script
  # with sharded pub/sub, where it carries the helper that chooses.
  string(FIND "${text}" "\n${sharded_line_false}\n" sharded_at)
  if(sharded_at EQUAL -1)
    string(APPEND body "inline constexpr const char* ${name}_cluster_text = ${name}_text;\n")
    string(APPEND body "inline constexpr const char* ${name}_cluster_sha1 = ${name}_sha1;\n\n")
  else()
    string(REPLACE "\n${sharded_line_false}\n" "\n${sharded_line_true}\n" cluster_text "${text}")
    string(SHA1 cluster_digest "${cluster_text}")
    string(APPEND body "inline constexpr const char ${name}_cluster_text[] = R\"lua(${cluster_text})lua\";\n")
    string(APPEND body "inline constexpr const char ${name}_cluster_sha1[] = \"${cluster_digest}\";\n\n")
  endif()
endforeach()
string(APPEND body "}  // namespace dlock::detail::scripts\n")
file(WRITE ${OUTPUT}.tmp "${body}")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)
