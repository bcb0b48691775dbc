# Finds libtorch inside an installed PyTorch package and defines the imported target d2k::torch.
#
# d2k links only libtorch_cpu and libc10: the CPU parts, which CI has. On the cuda device the
# orchestrator loads libtorch_cuda at run time (src/reference/torch_device.cpp), so one build works on
# a machine with or without the CUDA half of the wheel.
#
# Where the package is: D2K_TORCH_DIR (the folder holding lib/ and include/), else the project's own
# install under .deps/ (scripts/setup), else whatever `python3 -c "import torch"` finds.
set(D2K_TORCH_DIR "" CACHE PATH "PyTorch package folder (holds lib/ and include/)")
if(NOT D2K_TORCH_DIR)
  if(EXISTS "${PROJECT_SOURCE_DIR}/.deps/python/torch/lib/libtorch_cpu.so")
    set(D2K_TORCH_DIR "${PROJECT_SOURCE_DIR}/.deps/python/torch" CACHE PATH "" FORCE)
  else()
    find_package(Python3 COMPONENTS Interpreter)
    if(Python3_Interpreter_FOUND)
      execute_process(
        COMMAND "${Python3_EXECUTABLE}" -c "import os, torch; print(os.path.dirname(torch.__file__))"
        OUTPUT_VARIABLE _d2k_torch OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(_d2k_torch)
        set(D2K_TORCH_DIR "${_d2k_torch}" CACHE PATH "" FORCE)
      endif()
    endif()
  endif()
endif()
if(NOT EXISTS "${D2K_TORCH_DIR}/lib/libtorch_cpu.so")
  message(FATAL_ERROR "libtorch not found (D2K_TORCH_DIR='${D2K_TORCH_DIR}'). "
                      "Run scripts/setup, or pass -DD2K_TORCH_DIR=<site-packages>/torch.")
endif()
message(STATUS "d2k: libtorch from ${D2K_TORCH_DIR}")

add_library(d2k_torch INTERFACE)
add_library(d2k::torch ALIAS d2k_torch)
target_include_directories(d2k_torch SYSTEM INTERFACE
  "${D2K_TORCH_DIR}/include" "${D2K_TORCH_DIR}/include/torch/csrc/api/include")
# torch ships fmt 12 in its include folder, which shadows the system fmt (9) in every target that sees
# torch: use that copy header-only there (fmt's versioned namespaces keep the two apart).
target_compile_definitions(d2k_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1 FMT_HEADER_ONLY=1)
target_link_libraries(d2k_torch INTERFACE
  "${D2K_TORCH_DIR}/lib/libtorch_cpu.so" "${D2K_TORCH_DIR}/lib/libc10.so")
# ATen's at::parallel_for is a template in its headers: compiled without -fopenmp, its `#pragma omp parallel`
# is dropped and every at::parallel_for of ours (the inputs' drawing, the comparisons) runs on one thread,
# with torch's own operations inside it held to one thread too. With -fopenmp it runs on torch's OpenMP
# runtime: the libgomp torch ships beside itself where it has one (one runtime in the process: the
# loader keeps a single libgomp.so.1), else the compiler's.
find_file(_d2k_gomp libgomp.so.1 PATHS "${D2K_TORCH_DIR}/lib" NO_DEFAULT_PATH NO_CACHE)
target_compile_options(d2k_torch INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fopenmp>)
if(_d2k_gomp)
  target_link_libraries(d2k_torch INTERFACE "${_d2k_gomp}")
  message(STATUS "d2k: OpenMP for at::parallel_for from ${_d2k_gomp}")
else()
  find_package(OpenMP REQUIRED COMPONENTS CXX)
  target_link_libraries(d2k_torch INTERFACE OpenMP::OpenMP_CXX)
  message(STATUS "d2k: OpenMP for at::parallel_for from the compiler (${OpenMP_CXX_LIBRARIES})")
endif()
unset(_d2k_gomp)
# libtorch_cpu.so needs libcudart.so.13 and libcupti.so.13 even on the cpu device. Both the linker (for
# libtorch_cpu's own dependencies) and the loader must find them, so their folder goes on the build RPATH:
# the pip packages beside torch (the GPU machine's venv; scripts/setup where no CUDA toolkit has them),
# else the CUDA toolkit's.
set(D2K_TORCH_RPATH "${D2K_TORCH_DIR}/lib")
set(_d2k_cuda_dirs "${D2K_TORCH_DIR}/../nvidia/cu13/lib")
if(CUDAToolkit_FOUND)
  list(APPEND _d2k_cuda_dirs "${CUDAToolkit_LIBRARY_DIR}" "${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/lib64")
endif()
list(APPEND _d2k_cuda_dirs /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64)
foreach(_d2k_lib libcudart.so.13 libcupti.so.13)
  find_file(_d2k_found "${_d2k_lib}" PATHS ${_d2k_cuda_dirs} NO_DEFAULT_PATH NO_CACHE)
  if(_d2k_found)
    get_filename_component(_d2k_dir "${_d2k_found}" DIRECTORY)
    get_filename_component(_d2k_dir "${_d2k_dir}" REALPATH)
    list(APPEND D2K_TORCH_RPATH "${_d2k_dir}")
    message(STATUS "d2k: ${_d2k_lib} for libtorch from ${_d2k_dir}")
  else()
    message(WARNING "d2k: ${_d2k_lib} (needed by libtorch_cpu.so) is neither beside torch nor in a CUDA "
                    "toolkit; linking works only if the system loader knows it. scripts/setup installs it.")
  endif()
  unset(_d2k_found)
endforeach()
list(REMOVE_DUPLICATES D2K_TORCH_RPATH)
