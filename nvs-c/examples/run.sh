#!/usr/bin/env bash
# Build libnvs (release) and run the Fortran example and the MPI example (two ranks
# writing through the NVStream API, then an analytics job checking every byte).
# Needs gfortran and an MPI (Debian: gfortran mpich libmpich-dev). Usage:
#   nvs-c/examples/run.sh [steps]
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-10}
cargo build --release -q -p nvs-c
lib=${CARGO_TARGET_DIR:-target}/release
lib=$(cd "$lib" && pwd)
inc=nvs-c/include
work=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== Fortran (gfortran, libnvs.a)"
mkdir -p "$work/fortran"
gfortran -Wall -J "$work" "$inc/nvs.f90" nvs-c/examples/fortran/sim.f90 "$lib/libnvs.a" -lpthread -ldl -lm \
  -o "$work/fsim"
NVS_DIR="$work/fortran" "$work/fsim"
# Legacy code: implicit interfaces and Cray pointers link to alloc_ (and nvs_init_ ...).
gfortran -Wall -fcray-pointer -J "$work" nvs-c/examples/fortran/legacy.f90 "$lib/libnvs.a" -lpthread -ldl -lm \
  -o "$work/flegacy"
NVS_DIR="$work/fortran" "$work/flegacy"
# NVStream's applications by their shapes (GTC, CM1, miniAMR: blank-padded names without
# a NUL, a snapshot call with no argument, 120 objects, a read before an array, frees
# after finalize), compiled file by file as the apps are, with each delta mode.
gfortran -Wall -c -J "$work" "$inc/nvs.f90" -o "$work/nvs_mod.o"
for f in apps apps_check; do
  gfortran -Wall -c -J "$work" -I "$work" "nvs-c/examples/fortran/$f.f90" -o "$work/$f.o"
done
gfortran "$work/apps.o" "$work/apps_check.o" "$work/nvs_mod.o" "$lib/libnvs.a" -lpthread -ldl -lm -o "$work/fapps"
for delta in 0 1 mprotect; do
  rm -rf "$work/apps" && mkdir -p "$work/apps"
  out=$(NVS_DELTA=$delta NVS_DIR="$work/apps" "$work/fapps" 2>&1) || { echo "$out"; exit 1; }
  # Nothing on stderr: no refused name, no 'nvs_init was not called' from the frees.
  [ "$out" = "$(echo "$out" | grep '^ *fortran')" ] || { echo "unexpected output (NVS_DELTA=$delta):"; echo "$out"; exit 1; }
  echo "NVS_DELTA=$delta: $out"
done

echo "== MPI (mpicc, libnvs.so): mpirun -np 2 sim $steps, then mpirun -np 2 check $steps"
mkdir -p "$work/mpi"
for prog in sim check; do
  mpicc -std=c11 -Wall -Wextra -Werror -O2 -I "$inc" "nvs-c/examples/mpi/$prog.c" -L "$lib" -lnvs \
    -Wl,-rpath,"$lib" -o "$work/$prog"
done
export NVS_DIR="$work/mpi" NVS_POOL_SIZE=64M NVS_STATS=1
mpirun -np 2 "$work/sim" "$steps"
ls -l "$work/mpi"
mpirun -np 2 "$work/check" "$steps"
