#!/bin/sh
# Build the nvs ADIOS2 plugin and the examples against an installed adios2 and libnvs.
# Exits non-zero if any compile fails.
#   ADIOS2_DIR   the adios2 package directory of the PyPI wheel (serial; default: found
#                with $PYTHON -c 'import adios2')
#   ADIOS2_MPI   instead: the prefix of an MPI-enabled ADIOS2 (build-adios2-mpi.sh makes
#                one): the plugin and the examples are built with mpicxx, for MPI programs,
#                plus the MPI examples (mpi_writer, mpi_dump, mpi_bench)
#   NVS_LIB      the directory holding libnvs.so (default: $CARGO_TARGET_DIR/release or target/release)
#   OUT          where to put libnvs_adios2.so and the programs (default: $NVS_LIB/adios2)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
NVS_LIB=${NVS_LIB:-${CARGO_TARGET_DIR:-$root/target}/release}
OUT=${OUT:-$NVS_LIB/adios2}
flags="-std=c++17 -O3 -g -Wall -Wextra -Wno-unused-parameter -I$root/nvs-c/include"
nvs="-L$NVS_LIB -lnvs -Wl,-rpath,$NVS_LIB"
if [ -n "${ADIOS2_MPI:-}" ]; then
    CXX=${CXX:-mpicxx}
    # The plugin is built as for a serial ADIOS2 (ADIOS2 2.12 calls a plugin's serial
    # EngineCreate even in an MPI build), with MPI for its own collectives on Open.
    plugin="$flags -DNVS_ADIOS2_MPI=1 -I$ADIOS2_MPI/include"
    pluginlibs="-L$ADIOS2_MPI/lib -ladios2_cxx -ladios2_core -Wl,-rpath,$ADIOS2_MPI/lib"
    flags="$flags $("$ADIOS2_MPI/bin/adios2-config" --cxx-flags -m)"
    libs="$("$ADIOS2_MPI/bin/adios2-config" --cxx-libs -m) -L$ADIOS2_MPI/lib -ladios2_core_mpi -ladios2_core -Wl,-rpath,$ADIOS2_MPI/lib"
    examples="writer reader misuse mpi_writer mpi_dump mpi_bench"
else
    PYTHON=${PYTHON:-python3}
    ADIOS2_DIR=${ADIOS2_DIR:-$("$PYTHON" -c 'import adios2, os; print(os.path.dirname(adios2.__file__))')}
    CXX=${CXX:-g++}
    flags="$flags -I$ADIOS2_DIR/include"
    libs="-L$ADIOS2_DIR -ladios2_cxx -ladios2_core -Wl,-rpath,$ADIOS2_DIR -Wl,-rpath-link,$ADIOS2_DIR/../adios2.libs"
    plugin=$flags pluginlibs=$libs
    examples="writer reader misuse"
fi
mkdir -p "$OUT"
failed=0
# two compiles at a time; each one's status is checked
run() {
    "$@" || { echo "build.sh: failed: $*" >&2; return 1; }
}
run $CXX $plugin -fPIC -shared "$here/NvsEngine.cpp" -o "$OUT/libnvs_adios2.so" $pluginlibs $nvs -Wl,--no-undefined &
p1=$!
for e in $examples; do
    run $CXX $flags "$here/examples/$e.cpp" -o "$OUT/$e" $libs $nvs &
    wait $p1 || failed=1
    p1=$!
done
wait $p1 || failed=1
[ $failed = 0 ] || { echo "build.sh: a compile failed" >&2; exit 1; }
echo "built $OUT: libnvs_adios2.so $examples"
