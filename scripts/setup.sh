#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The one place that installs: Debian packages, Kokkos (unless the user brings one through Kokkos_ROOT),
# then configures and builds Tessera. Idempotent: a second run only re-checks and rebuilds what changed.
#
#   scripts/setup.sh [--backend host|cuda|hip] [--cuda-arch 80|90] [--sanitize] [--with-bench] [--with-fuzz]
#                    [--with-slurm] [--no-python] [--build-type Release|Debug] [--deps-only] [-j N]
#                    [--target NAME ...] [--unity]
#                    [--kokkos-tarball FILE [--kokkos-sha256 HEX]]
#
#   host (default): Kokkos 3.4.01 with OpenMP+Serial into .deps/kokkos-host, Tessera into build/
#   cuda:           Kokkos 3.4.01 with CUDA into .deps/kokkos-cuda, Tessera into build-cuda/ (sm_80: A100);
#                   --cuda-arch 90 (H100/H200) uses .deps/kokkos-cuda-sm90 and build-cuda-sm90/
#   hip:            Kokkos 3.4.01 with HIP for gfx90a (MI250X) and rocSPARSE, Debian's hipcc, into
#                   .deps/kokkos-hip and build-hip/ (compile and link only here: no AMD GPU)
#   --kokkos-tarball FILE: build Kokkos from a release tarball (kokkos-X.Y.ZZ.tar.gz as the Kokkos release
#                   page or `git archive` makes it) into .deps/kokkos-X.Y.ZZ-host instead of Debian's 3.4; its
#                   sha256 is checked against --kokkos-sha256, else FILE.sha256 beside it (else printed, unchecked)
#   --sanitize:     host build with AddressSanitizer + UBSan into build-asan/
#   --with-bench:   also PyTorch and h5py (Debian's python3-torch), for the baseline in scripts/bench_fullgraph.sh
#   --with-fuzz:    also clang, libFuzzer and LLVM's OpenMP headers, for scripts/fuzz.sh
#   --with-slurm:   also Slurm and munge (slurm-wlm), for scripts/slurm/check_local.sh (a one-node cluster)
#   --no-python:    build without the Python bindings (host builds have them where pybind11 and mpi4py are
#                   installed: Debian's pybind11-dev, python3-mpi4py, python3-h5py-mpi, set up here)
#   --no-packages:  never call apt (a cluster login node, no root, not Debian): look for every dependency
#                   (CMAKE_PREFIX_PATH, CPATH, the usual prefixes, a Kokkos through Kokkos_ROOT) and name each
#                   missing one with the module, Spack spec or variable that provides it. Taken by itself
#                   when apt-get is absent or this user cannot use it.
#   --target NAME:  build only this target and what it needs (repeatable; default: everything)
#   --unity:        compile each target's sources in batches (CMAKE_UNITY_BUILD): fewer passes over the
#                   Kokkos headers, a much shorter device build (the CUDA compile check of scripts/test.sh)
#   --check:        only that look (with or without --no-packages); exit 1 if anything is missing
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
backend=host cuda_arch=80 sanitize=OFF build_type="" deps_only=0 with_bench=0 with_fuzz=0 with_slurm=0 jobs=$(nproc --all)
no_packages=0 check_only=0 with_python=1 kokkos_tarball="" kokkos_sha256="" targets=() unity=OFF
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) backend=$2; shift 2 ;;
    --cuda-arch) cuda_arch=$2; shift 2 ;;
    --kokkos-tarball) kokkos_tarball=$2; shift 2 ;;
    --kokkos-sha256) kokkos_sha256=$2; shift 2 ;;
    --sanitize) sanitize=ON; shift ;;
    --with-bench) with_bench=1; shift ;;
    --with-fuzz) with_fuzz=1; shift ;;
    --with-slurm) with_slurm=1; shift ;;
    --no-python) with_python=0; shift ;;
    --build-type) build_type=$2; shift 2 ;;
    --deps-only) deps_only=1; shift ;;
    --no-packages) no_packages=1; shift ;;
    --check) check_only=1; shift ;;
    -j) jobs=$2; shift 2 ;;
    --target) targets+=("$2"); shift 2 ;;
    --unity) unity=ON; shift ;;
    -h|--help) sed -n '3,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "setup.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$backend" in host|cuda|hip) ;; *) echo "setup.sh: --backend must be host, cuda or hip, not '$backend'" >&2; exit 2 ;; esac
case "$cuda_arch" in 80|90) ;; *) echo "setup.sh: --cuda-arch must be 80 (A100) or 90 (H100/H200), not '$cuda_arch'" >&2; exit 2 ;; esac
# The Kokkos flavour: its install prefix .deps/kokkos-$kind and Tessera's build directory build-$kind.
kind=$backend
[ "$backend" = cuda ] && [ "$cuda_arch" = 90 ] && kind=cuda-sm90

deps=$root/.deps
kokkos_version=3.4.01
sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
say() { echo "setup: $*"; }

# ---- 1. Debian packages -------------------------------------------------------------------------
packages=(build-essential cmake pkg-config dpkg-dev libopenmpi-dev openmpi-bin libhdf5-openmpi-dev
          libmetis-dev libopenblas-openmp-dev zlib1g-dev hdf5-tools python3 python3-h5py python3-matplotlib
          python3-numpy python3-scipy python3-pytest python3-setuptools python3-venv python3-wheel
          python3-dev pybind11-dev python3-mpi4py python3-h5py-mpi
          libgtest-dev libcli11-dev nlohmann-json3-dev doxygen libdnnl-dev)
[ "$with_bench" -eq 1 ] && packages+=(python3-torch)
[ "$with_fuzz" -eq 1 ] && packages+=(clang libclang-rt-14-dev libomp-dev)
[ "$with_slurm" -eq 1 ] && packages+=(slurm-wlm munge)
[ "$backend" = hip ] && packages+=(hipcc librocsparse-dev)
# Without apt (or without the right to use it) the packages step becomes a look for what they provide.
if [ "$no_packages" -eq 0 ]; then
  if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
    say "no apt-get here: looking for the dependencies instead (--no-packages)"; no_packages=1
  elif [ -n "$sudo" ] && ! sudo -n true 2>/dev/null; then
    say "not root and no password-less sudo: looking for the dependencies instead (--no-packages)"; no_packages=1
  fi
fi
if [ "$no_packages" -eq 1 ] || [ "$check_only" -eq 1 ]; then
  # shellcheck source=/dev/null
  source "$root/scripts/check_deps.sh"
  export TESSERA_KOKKOS_PREFIX=$deps/kokkos-$kind  # one setup.sh built before counts
  check_dependencies "$backend" "$((1 - no_packages))" || exit 1
  [ "$check_only" -eq 1 ] && exit 0
else
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

# ---- 2. Kokkos ----------------------------------------------------------------------------------
# Debian ships Kokkos only inside Trilinos 13.2 (a Serial-only binary package with a broken CMake
# config), so we build the Kokkos that Trilinos' source package carries.
kokkos_source() {  # prints the source directory on stdout: every message must go to stderr
  local src=$deps/src/kokkos-$kokkos_version
  if [ ! -f "$src/CMakeLists.txt" ]; then
    if ! apt-cache showsrc trilinos 2>/dev/null | grep -q '^Package: trilinos'; then
      say "adding a deb-src entry for bookworm (needed for 'apt-get source trilinos')" >&2
      printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        | $sudo tee /etc/apt/sources.list.d/tessera-src.sources >/dev/null
      $sudo apt-get update -q >&2
    fi
    mkdir -p "$deps/src/download"
    (cd "$deps/src/download" && ls trilinos_*.orig.tar.* >/dev/null 2>&1 || apt-get source --download-only trilinos) >&2
    local tarball; tarball=$(ls "$deps"/src/download/trilinos_*.orig.tar.* | head -n 1)
    rm -rf "$deps/src/extract" && mkdir -p "$deps/src/extract"
    tar -xf "$tarball" -C "$deps/src/extract" --wildcards '*/packages/kokkos/*'
    rm -rf "$src" && mv "$deps"/src/extract/*/packages/kokkos "$src"
    rm -rf "$deps/src/extract" "$deps/src/download"
    grep -q 'Kokkos_VERSION_MINOR 4' "$src/CMakeLists.txt" || { echo "setup: unexpected Kokkos version in $src" >&2; exit 1; }
  fi
  echo "$src"
}

# CUDA 13 needs small changes to Kokkos 3.4.01: nvcc_wrapper defaults to sm_35, which CUDA 13 dropped;
# Kokkos' __half wrapper no longer compiles against CUDA 13's cuda_fp16.h, so half_t falls back to float
# (Tessera never uses half_t: its bf16 packing is its own); cudaMemPrefetchAsync takes a cudaMemLocation.
patch_kokkos_for_cuda13() {
  local src=$1 pf=$1/core/src/Cuda/Kokkos_CudaSpace.cpp
  # nvcc_wrapper's default sm_35 no longer exists in CUDA 13; newer wrappers read this variable.
  sed -i 's/^default_arch="sm_35"/default_arch=${NVCC_WRAPPER_DEFAULT_ARCH:-"sm_80"}/' "$src/bin/nvcc_wrapper"
  sed -i 's/^#ifndef KOKKOS_IMPL_HALF_TYPE_DEFINED$/#if !defined(KOKKOS_IMPL_HALF_TYPE_DEFINED) \&\& CUDA_VERSION < 13000/' \
    "$src/core/src/Cuda/Kokkos_Cuda_Half.hpp"
  if ! grep -q 'TESSERA_CUDA13_PREFETCH' "$pf"; then
    perl -0pi -e 's/CUDA_SAFE_CALL\(cudaMemPrefetchAsync\(ptr, bytes, space.cuda_device\(\),\s*space.cuda_stream\(\)\)\);/\/\/ TESSERA_CUDA13_PREFETCH\n#if CUDA_VERSION >= 13000\n    CUDA_SAFE_CALL(cudaMemPrefetchAsync(ptr, bytes, cudaMemLocation{cudaMemLocationTypeDevice, space.cuda_device()}, 0, space.cuda_stream()));\n#else\n    CUDA_SAFE_CALL(cudaMemPrefetchAsync(ptr, bytes, space.cuda_device(), space.cuda_stream()));\n#endif/' "$pf"
    grep -q 'TESSERA_CUDA13_PREFETCH' "$pf" || { echo "setup: could not patch $pf for CUDA 13" >&2; exit 1; }
  fi
}

# Kokkos 3.4.01 predates Hopper (sm_90: H100, H200) and MI200 (gfx90a: Frontier's MI250X). Each is one
# architecture option, added as later Kokkos releases spell them. Without it an sm_80 build aborts on an
# H100 at initialization (Kokkos refuses a major compute capability other than the one compiled for).
patch_kokkos_archs() {
  local f=$1/cmake/kokkos_arch.cmake
  grep -q 'CHECK_CUDA_ARCH(HOPPER90' "$f" && return 0
  sed -i -e 's/^KOKKOS_ARCH_OPTION(AMPERE86 .*/&\nKOKKOS_ARCH_OPTION(HOPPER90        GPU  "NVIDIA Hopper generation CC 9.0")/' \
    -e 's/^KOKKOS_ARCH_OPTION(VEGA908 .*/&\nKOKKOS_ARCH_OPTION(VEGA90A         GPU  "AMD GPU MI200 GFX90A")/' \
    -e 's/^CHECK_CUDA_ARCH(AMPERE86  sm_86)/&\nCHECK_CUDA_ARCH(HOPPER90  sm_90)/' \
    -e 's/^CHECK_AMDGPU_ARCH(VEGA908 gfx908)/&\nCHECK_AMDGPU_ARCH(VEGA90A gfx90a)/' "$f"
  grep -q 'CHECK_CUDA_ARCH(HOPPER90' "$f" && grep -q 'CHECK_AMDGPU_ARCH(VEGA90A' "$f" \
    || { echo "setup: could not add sm_90 / gfx90a to $f" >&2; exit 1; }
}

build_kokkos() {  # $1 = host|cuda|cuda-sm90|hip, prints the install prefix
  local kind=$1 prefix=$deps/kokkos-$1
  if [ -f "$prefix/lib/cmake/Kokkos/KokkosConfig.cmake" ] || [ -f "$prefix/lib64/cmake/Kokkos/KokkosConfig.cmake" ]; then
    echo "$prefix"; return
  fi
  local src; src=$(kokkos_source)
  local opts=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib
              -DCMAKE_CXX_STANDARD=17 -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DKokkos_ENABLE_SERIAL=ON)
  if [ "$kind" = cuda ] || [ "$kind" = cuda-sm90 ]; then
    local csrc=$deps/src/kokkos-$kokkos_version-cuda
    [ -d "$csrc" ] || cp -r "$src" "$csrc"
    patch_kokkos_for_cuda13 "$csrc"; patch_kokkos_archs "$csrc"; src=$csrc
    local arch=AMPERE80; [ "$kind" = cuda-sm90 ] && arch=HOPPER90
    opts+=(-DCMAKE_CXX_COMPILER="$src/bin/nvcc_wrapper" -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON
           -DKokkos_ARCH_$arch=ON -DKokkos_ENABLE_OPENMP=OFF)
  elif [ "$kind" = hip ]; then
    local hsrc=$deps/src/kokkos-$kokkos_version-hip
    [ -d "$hsrc" ] || cp -r "$src" "$hsrc"
    patch_kokkos_archs "$hsrc"; src=$hsrc
    opts+=(-DCMAKE_CXX_COMPILER=hipcc -DKokkos_ENABLE_HIP=ON -DKokkos_ARCH_VEGA90A=ON -DKokkos_ENABLE_OPENMP=OFF)
  else
    opts+=(-DKokkos_ENABLE_OPENMP=ON)
  fi
  say "building Kokkos $kokkos_version ($kind) into $prefix" >&2
  cmake -S "$src" -B "$deps/build-kokkos-$kind" "${opts[@]}" >"$deps/kokkos-$kind.log" 2>&1 \
    && cmake --build "$deps/build-kokkos-$kind" -j "$jobs" >>"$deps/kokkos-$kind.log" 2>&1 \
    && cmake --install "$deps/build-kokkos-$kind" >>"$deps/kokkos-$kind.log" 2>&1 \
    || { echo "setup: Kokkos build failed, see $deps/kokkos-$kind.log" >&2; tail -n 30 "$deps/kokkos-$kind.log" >&2; exit 1; }
  rm -rf "$deps/build-kokkos-$kind"
  echo "$prefix"
}

# A Kokkos release tarball: its checksum checked, its sources extracted once, built for the host.
kokkos_from_tarball() {  # prints the install prefix on stdout: every message goes to stderr
  local file=$1 want=$2
  [ -f "$file" ] || { echo "setup: --kokkos-tarball $file: no such file" >&2; exit 1; }
  [ -n "$want" ] || { [ -f "$file.sha256" ] && want=$(awk '{print $1; exit}' "$file.sha256"); }
  local got; got=$(sha256sum "$file" | awk '{print $1}')
  if [ -z "$want" ]; then
    say "$file: sha256 $got (no --kokkos-sha256 or $file.sha256 to check it against)" >&2
  elif [ "$got" != "$want" ]; then
    echo "setup: $file: sha256 $got, expected $want; refusing to build from it" >&2; exit 1
  fi
  local top; top=$(tar -tzf "$file" | head -n 1 | cut -d/ -f1)
  [[ "$top" =~ ^kokkos-[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
    { echo "setup: $file: not a Kokkos release tarball (its top folder is '$top', expected kokkos-X.Y.Z)" >&2; exit 1; }
  local src=$deps/src/$top prefix=$deps/$top-host
  if [ -f "$prefix/lib/cmake/Kokkos/KokkosConfig.cmake" ]; then echo "$prefix"; return; fi
  if [ ! -f "$src/CMakeLists.txt" ]; then
    mkdir -p "$deps/src" && tar -xzf "$file" -C "$deps/src" >&2
  fi
  say "building $top (host: OpenMP + Serial) into $prefix" >&2
  cmake -S "$src" -B "$deps/build-$top" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_CXX_STANDARD=17 -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON >"$deps/$top.log" 2>&1 \
    && cmake --build "$deps/build-$top" -j "$jobs" >>"$deps/$top.log" 2>&1 \
    && cmake --install "$deps/build-$top" >>"$deps/$top.log" 2>&1 \
    || { echo "setup: $top build failed, see $deps/$top.log" >&2; tail -n 30 "$deps/$top.log" >&2; exit 1; }
  rm -rf "$deps/build-$top"
  echo "$prefix"
}

mkdir -p "$deps"
[ -z "$kokkos_tarball" ] || [ "$backend" = host ] ||
  { echo "setup: --kokkos-tarball builds a host Kokkos; GPU backends use their own (Kokkos_ROOT)" >&2; exit 2; }
if [ "$backend" = cuda ]; then
  # nvcc_wrapper defaults to sm_35, which CUDA 13 no longer knows.
  export PATH=/usr/local/cuda/bin:$PATH NVCC_WRAPPER_DEFAULT_ARCH=sm_$cuda_arch
fi
if [ -n "$kokkos_tarball" ]; then
  kokkos_root=$(kokkos_from_tarball "$kokkos_tarball" "$kokkos_sha256")
elif [ -n "${Kokkos_ROOT:-}" ]; then
  kokkos_root=$Kokkos_ROOT
  say "using the Kokkos at Kokkos_ROOT=$kokkos_root"
elif [ "$no_packages" -eq 1 ]; then
  # Kokkos' sources come from Debian's trilinos source package, which needs apt.
  kokkos_root=$deps/kokkos-$kind
  [ -f "$kokkos_root/lib/cmake/Kokkos/KokkosConfig.cmake" ] || [ -f "$kokkos_root/lib64/cmake/Kokkos/KokkosConfig.cmake" ] || {
    echo "setup: no Kokkos: set Kokkos_ROOT to an installed Kokkos 3.4 or later (module load kokkos, or spack install kokkos)" >&2
    exit 1; }
else
  kokkos_root=$(build_kokkos "$kind")
fi
[ "$deps_only" -eq 1 ] && exit 0

# ---- 3. Tessera ---------------------------------------------------------------------------------
if [ "$backend" = cuda ]; then
  build=$root/build-$kind
  compiler=(-DCMAKE_CXX_COMPILER="$(find "$kokkos_root" -name nvcc_wrapper -type f | head -n 1)")
  [ -n "${compiler[0]#-DCMAKE_CXX_COMPILER=}" ] || compiler=()
elif [ "$backend" = hip ]; then
  build=$root/build-hip; compiler=(-DCMAKE_CXX_COMPILER=hipcc)
elif [ "$sanitize" = ON ]; then
  build=$root/build-asan; compiler=()
else
  build=$root/build; compiler=()
fi
# The Python bindings (host builds, not sanitized: an ASan library cannot load into a plain interpreter):
# where pybind11's CMake package and mpi4py are there.
python_bindings=OFF
if [ "$with_python" -eq 1 ] && [ "$backend" = host ] && [ "$sanitize" = OFF ]; then
  py=/usr/bin/python3; [ -x "$py" ] || py=python3
  pybind11_config=""
  for f in /usr/lib/cmake/pybind11/pybind11Config.cmake /usr/share/cmake/pybind11/pybind11Config.cmake; do
    [ -f "$f" ] && pybind11_config=$f && break
  done
  [ -n "$pybind11_config" ] || pybind11_config=$("$py" -m pybind11 --cmakedir 2>/dev/null || true)
  if ! "$py" -c 'import mpi4py, numpy' 2>/dev/null; then
    say "no mpi4py or numpy for $py: building without the Python bindings"
  elif [ -z "$pybind11_config" ]; then
    say "no pybind11 CMake package (pybind11-dev) for $py: building without the Python bindings"
  else
    python_bindings=ON
  fi
fi
# The Kokkos found, named by its config folder: a build made against another Kokkos is pointed at this one.
kokkos_dir=$(dirname "$(ls "$kokkos_root"/lib/cmake/Kokkos/KokkosConfig.cmake "$kokkos_root"/lib64/cmake/Kokkos/KokkosConfig.cmake 2>/dev/null | head -n 1)")
chosen=(-DKokkos_ROOT="$kokkos_root" -DKokkos_DIR="$kokkos_dir" -DTESSERA_BUILD_PYTHON="$python_bindings"
        -DCMAKE_UNITY_BUILD="$unity")
if [ "$backend" = host ]; then
  # Host builds go through the presets the test command uses (CMakePresets.json), with this Kokkos and
  # the bindings as found: the README's two commands build the same thing.
  preset=host; [ "$sanitize" = ON ] && preset=asan
  [ -z "$build_type" ] || chosen+=(-DCMAKE_BUILD_TYPE="$build_type")  # else the preset's
  (cd "$root" && cmake --preset "$preset" "${chosen[@]}" >"$deps/configure-$preset.log" 2>&1) ||
    { tail -n 30 "$deps/configure-$preset.log"; echo "setup: configuring $build failed (full log: $deps/configure-$preset.log)"; exit 1; }
elif [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${build_type:-Release}" -DTESSERA_SANITIZE="$sanitize" "${chosen[@]}" "${compiler[@]}"
else  # configured before: only what this call chooses again (the compiler of a build cannot change)
  cmake -S "$root" -B "$build" "${chosen[@]}" >"$deps/configure-$kind.log" 2>&1 ||
    { tail -n 30 "$deps/configure-$kind.log"; echo "setup: configuring $build failed (full log: $deps/configure-$kind.log)"; exit 1; }
fi
cmake --build "$build" -j "$jobs" ${targets[@]+--target "${targets[@]}"}
say "built $build (tessera: $build/apps/tessera$([ "$python_bindings" = ON ] && echo "; Python: PYTHONPATH=$build/python"))"
