# Warning and sanitizer flags for project code. Generated code (protobuf/gRPC) gets no -Werror.
add_library(hccltune_project_options INTERFACE)
target_compile_options(hccltune_project_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers)
if(HCCL_TUNE_WERROR)
  target_compile_options(hccltune_project_options INTERFACE -Werror)
endif()

if(HCCL_TUNE_SANITIZE)
  if(HCCL_TUNE_SANITIZE STREQUAL "address")
    set(_san_flags -fsanitize=address -fno-omit-frame-pointer)
  elseif(HCCL_TUNE_SANITIZE STREQUAL "undefined")
    set(_san_flags -fsanitize=undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  elseif(HCCL_TUNE_SANITIZE STREQUAL "thread")
    set(_san_flags -fsanitize=thread)
  else()
    message(FATAL_ERROR "HCCL_TUNE_SANITIZE must be address, undefined or thread (got '${HCCL_TUNE_SANITIZE}')")
  endif()
  add_compile_options(${_san_flags})
  add_link_options(${_san_flags})
endif()

# Every project target calls this: warnings, include root, generated headers.
function(hccltune_target target)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:hccltune_project_options>)
endfunction()
