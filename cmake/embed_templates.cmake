# Embeds the kernel templates (templates/**/*.cuh) into a generated C++ table {name, contents} that is handed to
# NVRTC as its header list, so no file system access is needed at run time.
set(JITUNE_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_templates_script.cmake)

function(jitune_embed_templates out_cpp root)
  file(GLOB_RECURSE cuh_files RELATIVE ${root} CONFIGURE_DEPENDS ${root}/*.cuh)
  list(SORT cuh_files)
  set(abs_files)
  foreach(f IN LISTS cuh_files)
    list(APPEND abs_files ${root}/${f})
  endforeach()
  string(REPLACE ";" "|" files_arg "${cuh_files}")
  add_custom_command(
    OUTPUT ${out_cpp}
    COMMAND ${CMAKE_COMMAND} -DROOT=${root} -DFILES=${files_arg} -DOUT=${out_cpp} -P ${JITUNE_EMBED_SCRIPT}
    DEPENDS ${abs_files} ${JITUNE_EMBED_SCRIPT}
    COMMENT "Embedding kernel templates"
    VERBATIM)
endfunction()
