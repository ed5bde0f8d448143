# SPDX-License-Identifier: BSD-3-Clause
# Sourced by setup.sh (--no-packages, --check): looks for each of Tessera's dependencies without a package
# manager and names every missing one with what provides it (a site module, a Spack spec, a Debian package,
# a variable). Where it looks: CMAKE_PREFIX_PATH, CPATH / CPLUS_INCLUDE_PATH, the *_ROOT variables CMake
# honours, Cray's CRAY_*_PREFIX, then TESSERA_DEPS_PREFIXES (default "/usr/local /usr").

# Include directories to search, one per line.
dep_include_dirs() {
  local prefix
  local IFS=:
  for prefix in ${CMAKE_PREFIX_PATH:-} ${HDF5_ROOT:-} ${HDF5_DIR:-} ${METIS_ROOT:-} ${CRAY_HDF5_PARALLEL_PREFIX:-} \
                ${CRAY_LIBSCI_PREFIX_DIR:-}; do
    [ -n "$prefix" ] && echo "$prefix/include"
  done
  for prefix in ${CPATH:-} ${CPLUS_INCLUDE_PATH:-} ${C_INCLUDE_PATH:-}; do [ -n "$prefix" ] && echo "$prefix"; done
  IFS=' '
  for prefix in ${TESSERA_DEPS_PREFIXES:-/usr/local /usr}; do
    echo "$prefix/include"
    # Debian's layouts of parallel HDF5 and OpenBLAS.
    for sub in hdf5/openmpi hdf5/mpich x86_64-linux-gnu/openblas-openmp x86_64-linux-gnu/openblas-pthread \
               x86_64-linux-gnu openblas; do echo "$prefix/include/$sub"; done
  done
}

# dep_header FILE [GREP]: the first include directory holding FILE (whose text matches GREP, if given).
dep_header() {
  local dir
  while read -r dir; do
    [ -f "$dir/$1" ] || continue
    if [ -z "${2:-}" ] || grep -q "$2" "$dir/$1"; then echo "$dir"; return 0; fi
  done < <(dep_include_dirs)
  return 1
}

# The Kokkos install CMake would find (its KokkosConfig.cmake's directory), and its version.
dep_kokkos() {
  local prefix config
  local IFS=:
  for prefix in ${Kokkos_ROOT:-} ${Kokkos_DIR:-} ${CMAKE_PREFIX_PATH:-} ${TESSERA_KOKKOS_PREFIX:-}; do
    for config in "$prefix"/lib*/cmake/Kokkos/KokkosConfigVersion.cmake "$prefix"/KokkosConfigVersion.cmake; do
      [ -f "$config" ] || continue
      echo "$(dirname "$config") $(sed -nE 's/^set\(PACKAGE_VERSION "([0-9.]+)"\).*/\1/p' "$config")"
      return 0
    done
  done
  return 1
}

# check_dependencies BACKEND [KOKKOS_BUILDABLE]: one line per dependency (found where, or missing and how to
# get it); returns 1 when a required one is missing. KOKKOS_BUILDABLE=1: a missing Kokkos is not missing
# (setup.sh builds one from Debian's sources).
check_dependencies() {
  local backend=$1 buildable=${2:-0} missing=0 found where
  report() {  # NAME STATUS HOW
    if [ "$2" = missing ]; then
      echo "setup: MISSING $1 - $3" >&2
      missing=1
    else
      echo "setup: found $1: $2"
    fi
  }
  # Tools
  if command -v cmake >/dev/null; then
    found=$(cmake --version | sed -nE '1s/.* ([0-9]+\.[0-9]+)(\.[0-9]+)?.*/\1/p')
    if [ "$(printf '%s\n3.18\n' "$found" | sort -V | head -n 1)" = 3.18 ]; then report "CMake >= 3.18" "$found"
    else report "CMake >= 3.18" missing "found $found; module load cmake, spack install cmake, or Debian's cmake"; fi
  else report "CMake >= 3.18" missing "module load cmake, spack install cmake, or Debian's cmake"; fi
  where=$(command -v mpicxx || command -v mpicc || command -v CC || true)
  if [ -n "$where" ]; then report "MPI" "$where"
  else report "MPI" missing "module load cray-mpich (PrgEnv-gnu), spack install openmpi or mpich, or Debian's libopenmpi-dev"; fi
  # Libraries, by their headers
  local spec
  while IFS='|' read -r name header pattern spec; do
    if where=$(dep_header "$header" "$pattern"); then report "$name" "$where"
    else report "$name" missing "$spec; or add its prefix to CMAKE_PREFIX_PATH"; fi
  done <<'LIST'
parallel HDF5 >= 1.10|H5pubconf.h|define H5_HAVE_PARALLEL 1|module load cray-hdf5-parallel, spack install hdf5+mpi, or Debian's libhdf5-openmpi-dev
METIS 5|metis.h||spack install metis, or Debian's libmetis-dev (METIS_ROOT=PREFIX)
zlib|zlib.h||spack install zlib-ng, or Debian's zlib1g-dev
nlohmann_json >= 3|nlohmann/json.hpp||spack install nlohmann-json, or Debian's nlohmann-json3-dev
CLI11|CLI/CLI.hpp||spack install cli11, or Debian's libcli11-dev
CBLAS|cblas.h||module load cray-libsci, spack install openblas, or Debian's libopenblas-openmp-dev
GoogleTest (the test suite; -DTESSERA_BUILD_TESTS=OFF builds without)|gtest/gtest.h||spack install googletest, or Debian's libgtest-dev
LIST
  if where=$(dep_header oneapi/dnnl/dnnl.hpp); then report "oneDNN (optional: faster host GEMMs)" "$where"
  else echo "setup: optional oneDNN not found (host GEMMs through CBLAS): spack install onednn, or Debian's libdnnl-dev"; fi
  # Kokkos, and the device toolchain
  if found=$(dep_kokkos); then
    local version=${found##* }
    if [ "$(printf '%s\n3.4\n' "$version" | sort -V | head -n 1)" = 3.4 ]; then report "Kokkos >= 3.4" "$found"
    else report "Kokkos >= 3.4" missing "found $version at ${found% *}"; fi
  elif [ "$buildable" -eq 1 ]; then
    echo "setup: Kokkos: none installed; setup.sh builds one from Debian's trilinos source package"
  else
    local kokkos_spec="kokkos@4 +openmp"
    [ "$backend" = cuda ] && kokkos_spec="kokkos@4 +cuda +wrapper cuda_arch=80"
    [ "$backend" = hip ] && kokkos_spec="kokkos@4 +rocm amdgpu_target=gfx90a"
    report "Kokkos >= 3.4 ($backend)" missing "module load kokkos, or spack install $kokkos_spec; then Kokkos_ROOT=PREFIX"
  fi
  if [ "$backend" = cuda ]; then
    where=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
    if [ -n "$where" ]; then report "CUDA (nvcc)" "$where"; else report "CUDA (nvcc)" missing "module load cudatoolkit, or spack install cuda"; fi
  fi
  if [ "$backend" = hip ]; then
    where=$(command -v hipcc || true)
    if [ -n "$where" ]; then report "HIP (hipcc)" "$where"; else report "HIP (hipcc)" missing "module load rocm, or Debian's hipcc"; fi
    if where=$(dep_header rocsparse/rocsparse.h); then report "rocSPARSE" "$where"
    else report "rocSPARSE" missing "module load rocm, or Debian's librocsparse-dev"; fi
  fi
  [ "$missing" -eq 0 ] || echo "setup: install what is missing (or load its module) and run again; nothing was built" >&2
  return "$missing"
}
