#!/bin/sh
# The snapshot workload through ADIOS2, BP5 beside the nvs engine, on /dev/shm: per rank
# count and array size, Open, write per step and read per step of each, and nvs's ratio
# (BP5's time / nvs's: above 1, nvs is faster). Numbers, not a test.
#   bench.sh [STEPS] (default 5); needs the MPI ADIOS2 (ADIOS2_MPI or build-adios2-mpi.sh)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
target=${CARGO_TARGET_DIR:-$root/target}
steps=${1:-5}
(cd "$root" && cargo build --release -q -p nvs-c)
A2MPI=${ADIOS2_MPI:-$("$here/build-adios2-mpi.sh")}
M="$target/release/adios2/mpi"
ADIOS2_MPI="$A2MPI" NVS_LIB="$target/release" OUT="$M" "$here/build.sh" >/dev/null
export ADIOS2_PLUGIN_PATH="$M"
work=$(mktemp -d /dev/shm/nvs-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
echo "ranks MiB/rank | open ms BP5 nvs | write ms/step BP5 nvs ratio | read ms/step BP5 nvs ratio"
for n in 1 2 4; do
    for mib in 1 16 64; do
        # a pool for every step with room to spare (segments are per lane)
        sed "s|<parameter key=\"PoolSize\" value=\"64M\"/>|<parameter key=\"PoolSize\" value=\"$((2 * n * mib * (steps + 1) + 64))M\"/>|" \
            "$here/examples/nvs.xml" > nvs.xml
        b=$(mpirun -np $n "$M/mpi_bench" "$here/examples/bp5.xml" sim.bp "$steps" "$mib")
        rm -rf sim.bp
        v=$(mpirun -np $n "$M/mpi_bench" nvs.xml sim.bp "$steps" "$mib")
        rm -f sim.nvs
        echo "$b" | grep -q " 0 wrong" && echo "$v" | grep -q " 0 wrong" || { echo "$b"; echo "$v"; exit 1; }
        field() { echo "$1" | sed -n "s/.* $2 *\([0-9.]*\) ms.*/\1/p"; }
        awk -v n=$n -v m=$mib -v bo="$(field "$b" open)" -v vo="$(field "$v" open)" \
            -v bw="$(field "$b" write)" -v vw="$(field "$v" write)" \
            -v br="$(field "$b" read)" -v vr="$(field "$v" read)" \
            'BEGIN { printf "%5d %8d | %7.2f %7.2f | %8.2f %8.2f %5.2fx | %8.2f %8.2f %5.2fx\n", n, m, bo, vo, bw, vw, bw / vw, br, vr, br / vr }'
    done
done
