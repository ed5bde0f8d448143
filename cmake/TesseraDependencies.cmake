# SPDX-License-Identifier: BSD-3-Clause
# Finds everything Tessera links against. Shared by the build and by TesseraConfig.cmake (through
# find_dependency), so a consumer sees the same targets the library was built with.
# Any Kokkos from 3.4 on: Kokkos installs its version file as SameMajorVersion, so asking for 3.4 would refuse
# every 4.x and 5.x; the version is checked here instead. Tessera uses only the API 3.4, 4.x and 5.x share.
find_package(Kokkos REQUIRED)
if(Kokkos_VERSION VERSION_LESS 3.4)
  message(FATAL_ERROR "Tessera needs Kokkos 3.4 or later; found ${Kokkos_VERSION} at ${Kokkos_DIR}")
endif()
# MPI and HDF5 are found through their C interfaces (Tessera calls MPI's C API): a project that enabled C++
# only (project(app CXX)) gets C enabled here, which FindMPI's C component and FindHDF5 need.
get_property(tessera_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
if(NOT "C" IN_LIST tessera_languages)
  enable_language(C)
endif()
find_package(MPI REQUIRED COMPONENTS C)
set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "Tessera needs a parallel (MPI) HDF5; found a serial one at ${HDF5_INCLUDE_DIRS}. "
                      "On Debian: apt-get install libhdf5-openmpi-dev")
endif()
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(METIS REQUIRED)
if(NOT TARGET tessera_hdf5)
  # FindHDF5's imported target differs between CMake versions; wrap its variables in one target.
  add_library(tessera_hdf5 INTERFACE IMPORTED)
  set_target_properties(tessera_hdf5 PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${HDF5_C_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${HDF5_C_LIBRARIES};MPI::MPI_C"
    INTERFACE_COMPILE_DEFINITIONS "${HDF5_C_DEFINITIONS}")
endif()

# Vendor libraries of device builds (TESSERA_VENDOR=OFF keeps the portable kernels only):
#   CUDA: cuSPARSE + cuBLAS (kernels' vendor path) and NCCL (device collectives, when nccl.h is found);
#   HIP:  rocSPARSE (SpMM's vendor path); RCCL is not packaged on Debian, so MPI carries the collectives.
option(TESSERA_VENDOR "Use the vendor libraries of a CUDA or HIP Kokkos" ON)
if(TESSERA_VENDOR AND Kokkos_ENABLE_CUDA AND NOT TARGET tessera_vendor)
  find_package(CUDAToolkit REQUIRED)
  find_path(TESSERA_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME PATH_SUFFIXES include)
  find_library(TESSERA_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME PATH_SUFFIXES lib lib64)
  add_library(tessera_vendor INTERFACE IMPORTED)
  set_target_properties(tessera_vendor PROPERTIES
    INTERFACE_LINK_LIBRARIES "CUDA::cusparse;CUDA::cublas;CUDA::cudart"
    INTERFACE_COMPILE_DEFINITIONS "TESSERA_VENDOR_CUDA;TESSERA_VENDOR_SPMM;TESSERA_VENDOR_GEMM")
  if(TESSERA_NCCL_INCLUDE AND TESSERA_NCCL_LIBRARY)
    set_property(TARGET tessera_vendor APPEND PROPERTY INTERFACE_LINK_LIBRARIES "${TESSERA_NCCL_LIBRARY}")
    set_property(TARGET tessera_vendor APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${TESSERA_NCCL_INCLUDE}")
    set_property(TARGET tessera_vendor APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS TESSERA_HAVE_NCCL)
  endif()
elseif(TESSERA_VENDOR AND Kokkos_ENABLE_HIP AND NOT TARGET tessera_vendor)
  find_package(rocsparse REQUIRED)
  add_library(tessera_vendor INTERFACE IMPORTED)
  set_target_properties(tessera_vendor PROPERTIES
    INTERFACE_LINK_LIBRARIES "roc::rocsparse"
    INTERFACE_COMPILE_DEFINITIONS "TESSERA_VENDOR_HIP;TESSERA_VENDOR_SPMM")
endif()
