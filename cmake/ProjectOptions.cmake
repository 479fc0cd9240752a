# Warning and sanitizer flags for project code. Generated code (protobuf/gRPC) gets no -Werror.
add_library(hccltune_project_options INTERFACE)
target_compile_options(hccltune_project_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers)
if(HCCL_TUNE_WERROR)
  target_compile_options(hccltune_project_options INTERFACE -Werror)
endif()

# HCCL_TUNE_SANITIZE: a comma-separated list of address, undefined, thread (thread excludes address).
if(HCCL_TUNE_SANITIZE)
  string(REPLACE "," ";" _sanitizers "${HCCL_TUNE_SANITIZE}")
  set(_san_flags -fno-omit-frame-pointer)
  foreach(_s IN LISTS _sanitizers)
    if(_s STREQUAL "address")
      list(APPEND _san_flags -fsanitize=address)
    elseif(_s STREQUAL "undefined")
      list(APPEND _san_flags -fsanitize=undefined -fno-sanitize-recover=undefined)
    elseif(_s STREQUAL "thread")
      list(APPEND _san_flags -fsanitize=thread)
    else()
      message(FATAL_ERROR "HCCL_TUNE_SANITIZE: '${_s}' is not one of address, undefined, thread")
    endif()
  endforeach()
  if("address" IN_LIST _sanitizers AND "thread" IN_LIST _sanitizers)
    message(FATAL_ERROR "HCCL_TUNE_SANITIZE: address and thread cannot be combined")
  endif()
  add_compile_options(${_san_flags})
  add_link_options(${_san_flags})
endif()

# HCCL_TUNE_FUZZ (clang): every library is built with libFuzzer's coverage instrumentation and ASan+UBSan, so the
# fuzzers (tests/fuzz/) see the edges of the code they reach, not only of their own file.
if(HCCL_TUNE_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# Every project target calls this: warnings, include root, generated headers.
function(hccltune_target target)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:hccltune_project_options>)
endfunction()
