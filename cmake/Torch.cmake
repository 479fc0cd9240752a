# Detects Debian's torch 1.13 for the PyTorch backend (python/). Sets HCCL_TUNE_TORCH (option; default ON when
# found), HCCL_TUNE_TORCH_INCLUDES, HCCL_TUNE_TORCH_LIBDIRS, HCCL_TUNE_TORCH_USERBASE.
set(HCCL_TUNE_PYTHON "/usr/bin/python3" CACHE FILEPATH "Interpreter the PyTorch backend is built for")
set(_torch_found OFF)
if(EXISTS "${HCCL_TUNE_PYTHON}")
  execute_process(
    COMMAND "${HCCL_TUNE_PYTHON}" -c
      "from torch.utils import cpp_extension as c; print(';'.join(c.include_paths())); print(';'.join(c.library_paths()))"
    OUTPUT_VARIABLE _torch_out RESULT_VARIABLE _torch_rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_torch_rc EQUAL 0)
    string(REGEX REPLACE "\n.*" "" HCCL_TUNE_TORCH_INCLUDES "${_torch_out}")
    string(REGEX REPLACE ".*\n" "" HCCL_TUNE_TORCH_LIBDIRS "${_torch_out}")
    find_path(_pybind11_inc pybind11/pybind11.h)
    if(_pybind11_inc)
      set(_torch_found ON)
    endif()
  endif()
endif()
option(HCCL_TUNE_TORCH "Build the PyTorch backend (python/)" ${_torch_found})
if(HCCL_TUNE_TORCH)
  if(NOT _torch_found)
    message(FATAL_ERROR "HCCL_TUNE_TORCH is ON but ${HCCL_TUNE_PYTHON} has no torch or pybind11 headers are "
                        "missing (deploy/install-deps.sh installs python3-torch libtorch-dev pybind11-dev)")
  endif()
  set(Python3_EXECUTABLE "${HCCL_TUNE_PYTHON}")
  find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
  set(HCCL_TUNE_TORCH_USERBASE "${PROJECT_BINARY_DIR}/python/userbase")
  message(STATUS "PyTorch backend: ON (${HCCL_TUNE_PYTHON}, Python ${Python3_VERSION})")
else()
  message(STATUS "PyTorch backend: OFF (no torch for ${HCCL_TUNE_PYTHON})")
endif()
