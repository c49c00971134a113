#!/bin/sh
# The peers on the paper's workload: builds nvs-peers/peers.cpp (g++ against libnvs, the
# PyPI adios2 wheel, Debian's libhdf5-dev and libpmemlog-dev) and runs it; writes the
# JSON and an SVG plot.
#   run.sh [--quick] [--json FILE] [--plot FILE.svg] [--trials N] [--dir DIR]
#   ADIOS2_VENV  a venv with adios2 (2.12.x) (made with pip if missing)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
target=${CARGO_TARGET_DIR:-$root/target}
VENV=${ADIOS2_VENV:-$target/adios2-venv}
json="" plot="" args=""
while [ $# -gt 0 ]; do
    case $1 in
        --json) json=$2; shift 2 ;;
        --plot) plot=$2; shift 2 ;;
        *) args="$args $1"; shift ;;
    esac
done
if ! "$VENV/bin/python" -c 'import adios2' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q 'adios2>=2.12,<2.13' numpy
fi
ADIOS2_DIR=$("$VENV/bin/python" -c 'import adios2, os; print(os.path.dirname(adios2.__file__))')
(cd "$root" && cargo build --release -q -p nvs-c)
NVS_LIB="$target/release"
OUT="$target/release/peers"
mkdir -p "$OUT"
${CXX:-g++} -std=c++17 -O2 -g -Wall -Wextra -Wno-unused-parameter \
    -I"$ADIOS2_DIR/include" -I"$root/nvs-c/include" -I/usr/include/hdf5/serial \
    "$here/peers.cpp" -o "$OUT/peers" \
    -L"$ADIOS2_DIR" -ladios2_cxx -ladios2_core -Wl,-rpath,"$ADIOS2_DIR" -Wl,-rpath-link,"$ADIOS2_DIR/../adios2.libs" \
    -L"$NVS_LIB" -lnvs -Wl,-rpath,"$NVS_LIB" \
    -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5 -lpmemlog -lpthread
[ -n "$json" ] || json="$OUT/peers.json"
PMEM_IS_PMEM_FORCE=1 "$OUT/peers" --json "$json" $args
if [ -n "$plot" ]; then
    python3 "$here/plot.py" "$json" "$plot"
    echo "wrote $json and $plot"
else
    echo "wrote $json"
fi
