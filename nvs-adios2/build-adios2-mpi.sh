#!/bin/sh
# Build an MPI-enabled ADIOS2 (BP5, MPI and plugins only; no Python, Fortran or
# compressors) from the adios2 source distribution on PyPI, once: the install is cached
# outside the clone and reused while its version matches. Prints the install prefix.
#   NVS_CACHE  the cache directory (default: ~/.cache/nvs)
# Needs cmake, a C++ compiler, mpicc/mpicxx (MPICH) and curl. 7-10 min on 2 cores.
set -eu
# Only the prefix goes to stdout (callers take it with $(...)); the rest to stderr.
exec 3>&1 1>&2
version=2.12.1.1001
prefix=${NVS_CACHE:-$HOME/.cache/nvs}/adios2-mpi-$version
if [ -x "$prefix/bin/adios2-config" ] && [ -f "$prefix/.complete" ]; then
    echo "$prefix" >&3
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
url=https://files.pythonhosted.org/packages/58/d9/254e366559bf9a3f7cb21fb4e516852d5b89466ea5f7864005765404ed33/adios2-$version.tar.gz
sha256=f3bf3a6e64b800351a091d4fc70cc8437041c36c81f90f01697b81f168b6adb0
curl -fsSL --retry 3 -o "$work/adios2.tar.gz" "$url"
echo "$sha256  $work/adios2.tar.gz" | sha256sum -c --quiet - >&2
tar -xzf "$work/adios2.tar.gz" -C "$work"
off=""
for f in Fortran Python HDF5 SST DataMan DataSpaces ZeroMQ Blosc2 BZip2 ZFP SZ SZ3 MGARD PNG \
    Sodium Catalyst CUDA Kokkos DAOS AWSSDK Campaign UCX LIBFABRIC IME XRootD Profiling; do
    off="$off -DADIOS2_USE_$f=OFF"
done
# shellcheck disable=SC2086
cmake -S "$work/adios2-$version" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DADIOS2_USE_MPI=ON $off \
    -DBUILD_TESTING=OFF -DADIOS2_BUILD_EXAMPLES=OFF >"$work/cmake.log" 2>&1 ||
    { tail -30 "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/build" -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log" >&2; exit 1; }
cmake --install "$work/build" >/dev/null
touch "$prefix/.complete"
echo "$prefix" >&3
