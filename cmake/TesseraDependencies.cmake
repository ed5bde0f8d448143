# SPDX-License-Identifier: BSD-3-Clause
# Finds everything Tessera links against. Shared by the build and by TesseraConfig.cmake (through
# find_dependency), so a consumer sees the same targets the library was built with.
find_package(Kokkos 3.4 REQUIRED)
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
