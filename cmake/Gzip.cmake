# dlock_gzip(INPUT OUTPUT): OUTPUT is INPUT compressed with gzip -9n (no name,
# no time stamp: the same bytes every build), as Debian ships man pages and
# changelogs. Built with the target dlock_docs (part of `all`).
include_guard(GLOBAL)
add_custom_target(dlock_docs ALL)
function(dlock_gzip input output)
  add_custom_command(OUTPUT ${output} DEPENDS ${input}
    COMMAND gzip -9nc ${input} > ${output} VERBATIM)
  get_filename_component(name ${output} NAME)
  add_custom_target(dlock_docs_${name} DEPENDS ${output})
  add_dependencies(dlock_docs dlock_docs_${name})
endfunction()
