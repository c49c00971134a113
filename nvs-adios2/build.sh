#!/bin/sh
# Build the nvs ADIOS2 plugin and the examples with g++ against an installed adios2 (the
# PyPI wheel ships headers and libraries) and libnvs.
#   ADIOS2_DIR  the adios2 package directory (default: found with $PYTHON -c 'import adios2')
#   NVS_LIB     the directory holding libnvs.so (default: $CARGO_TARGET_DIR/release or target/release)
#   OUT         where to put libnvs_adios2.so, writer, reader, misuse (default: $NVS_LIB/adios2)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
PYTHON=${PYTHON:-python3}
ADIOS2_DIR=${ADIOS2_DIR:-$("$PYTHON" -c 'import adios2, os; print(os.path.dirname(adios2.__file__))')}
NVS_LIB=${NVS_LIB:-${CARGO_TARGET_DIR:-$root/target}/release}
OUT=${OUT:-$NVS_LIB/adios2}
CXX=${CXX:-g++}
mkdir -p "$OUT"
inc="-I$ADIOS2_DIR/include -I$root/nvs-c/include"
libs="-L$ADIOS2_DIR -ladios2_cxx -ladios2_core -Wl,-rpath,$ADIOS2_DIR -Wl,-rpath-link,$ADIOS2_DIR/../adios2.libs"
flags="-std=c++17 -O2 -g -Wall -Wextra -Wno-unused-parameter"
$CXX $flags -fPIC -shared $inc "$here/NvsEngine.cpp" -o "$OUT/libnvs_adios2.so" \
    $libs -L"$NVS_LIB" -lnvs -Wl,-rpath,"$NVS_LIB" -Wl,--no-undefined &
$CXX $flags $inc "$here/examples/writer.cpp" -o "$OUT/writer" $libs &
wait
$CXX $flags $inc "$here/examples/reader.cpp" -o "$OUT/reader" $libs &
$CXX $flags $inc "$here/examples/misuse.cpp" -o "$OUT/misuse" $libs -L"$NVS_LIB" -lnvs -Wl,-rpath,"$NVS_LIB" &
wait
echo "built $OUT/libnvs_adios2.so, $OUT/writer, $OUT/reader, $OUT/misuse"
