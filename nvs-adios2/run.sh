#!/bin/sh
# Build libnvs, the nvs ADIOS2 plugin and the examples, and run them:
#   C++ writer -> C++ reader and Python writer -> Python reader (and across), with the nvs
#   engine and with BP5 (the same programs, another XML config); a reader following a
#   live writer; a writer killed with SIGKILL (the reader errors, it does not hang); a
#   writer restarted in Append mode continuing after the last committed step; the engine
#   used wrongly (examples/misuse.cpp: every case a clear error, nothing committed lost).
# Every reader checks every value it reads and exits non-zero on a mismatch.
#   ADIOS2_VENV  a venv with adios2 (2.12.x) and numpy (made with pip if missing)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
target=${CARGO_TARGET_DIR:-$root/target}
VENV=${ADIOS2_VENV:-$target/adios2-venv}
if ! "$VENV/bin/python" -c 'import adios2, numpy' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q 'adios2>=2.12,<2.13' numpy
fi
PY="$VENV/bin/python"
(cd "$root" && cargo build --release -q -p nvs-c)
OUT="$target/release/adios2"
PYTHON="$PY" NVS_LIB="$target/release" OUT="$OUT" "$here/build.sh" >/dev/null
export ADIOS2_PLUGIN_PATH="$OUT"
E="$here/examples"
W="$OUT/writer" R="$OUT/reader"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ms() { echo $(( $(date +%s%N) / 1000000 )); }
fail() { echo "FAIL: $*" >&2; exit 1; }
# a reader that hangs is a failure, not a stuck CI job
T="timeout 60"

for cfg in nvs bp5; do
    echo "== $cfg: C++ and Python writers and readers (the same programs; config $cfg.xml)"
    d="$work/$cfg"; mkdir -p "$d"; cd "$d"
    $T "$W" "$E/$cfg.xml" sim.bp 10
    $T "$R" "$E/$cfg.xml" sim.bp 10
    $T "$PY" "$E/reader.py" "$E/$cfg.xml" sim.bp 10
    $T "$PY" "$E/writer.py" "$E/$cfg.xml" sim.bp 10
    $T "$PY" "$E/reader.py" "$E/$cfg.xml" sim.bp 10
    $T "$R" "$E/$cfg.xml" sim.bp 10
done

echo "== nvs: readers started before the writer follow it live (C++ and Python)"
d="$work/live"; mkdir -p "$d"; cd "$d"
$T "$R" "$E/nvs.xml" sim.bp 20 & r1=$!
$T "$PY" "$E/reader.py" "$E/nvs.xml" sim.bp 20 & r2=$!
sleep 0.5
$T "$W" "$E/nvs.xml" sim.bp 20 --sleep 50
wait $r1 || fail "C++ live reader"
wait $r2 || fail "Python live reader"

echo "== nvs: the writer is killed with SIGKILL mid-stream; the readers error, they do not hang"
d="$work/kill"; mkdir -p "$d"; cd "$d"
"$W" "$E/nvs.xml" sim.bp 100000 --sleep 20 & w=$!
sleep 0.3
$T "$R" "$E/nvs.xml" sim.bp > r1.out 2>&1 & r1=$!
$T "$PY" "$E/reader.py" "$E/nvs.xml" sim.bp > r2.out 2>&1 & r2=$!
sleep 1.5
kill -KILL $w; killed=$(ms)
wait $w 2>/dev/null || true
rc1=0; wait $r1 || rc1=$?; t1=$(( $(ms) - killed ))
rc2=0; wait $r2 || rc2=$?; t2=$(( $(ms) - killed ))
cat r1.out r2.out
[ $rc1 = 2 ] && grep -q "writer of rank 0 of sim.nvs died" r1.out || fail "C++ reader: exit $rc1, not the dead-writer error"
[ $rc2 = 2 ] && grep -q "writer of rank 0 of sim.nvs died" r2.out || fail "Python reader: exit $rc2, not the dead-writer error"
echo "readers ended ${t1} ms and ${t2} ms after the SIGKILL (exit 2: the writer died)"

echo "== nvs: a restarted writer (Append) continues after the last committed step"
out=$($T "$W" "$E/nvs.xml" sim.bp 5 --append); echo "$out"
first=$(echo "$out" | sed -n 's/.*steps \([0-9]*\)\.\..*/\1/p')
[ "${first:-0}" -gt 0 ] || fail "the restarted writer began at step ${first:-?}"
$T "$PY" "$E/writer.py" "$E/nvs.xml" sim.bp 5 --append
$T "$R" "$E/nvs.xml" sim.bp $((first + 10))
$T "$PY" "$E/reader.py" "$E/nvs.xml" sim.bp $((first + 10))

if command -v mpirun >/dev/null 2>&1; then
    echo "== nvs: four ranks of one MPI job writing one output: one writes, the others are refused, loudly"
    # (This ADIOS2 is serial: each rank is a writer of its own, none knows of the others.
    # The writers hold the pool 3 s each so that all four overlap however late mpirun
    # starts one: a rank started after the first had finished would be a rerun, which
    # replaces the output, as BP5's does.)
    d="$work/ranks"; mkdir -p "$d"; cd "$d"
    for run in 1 2 3; do
        rm -f sim.nvs* rc.* out.*
        $T mpirun -np 4 sh -c "\"$W\" \"$E/nvs.xml\" sim.bp 10 --sleep 300 > out.\$PMI_RANK 2>&1; echo \$? > rc.\$PMI_RANK" || true
        ok=$(cat rc.* | grep -c '^0$' || true)
        refused=$(grep -l 'live writer\|another writer created it\|locked by another writer' out.* | wc -l)
        [ "$ok" = 1 ] && [ "$refused" = 3 ] || { cat out.*; fail "ranks: $ok wrote, $refused refused (want 1 and 3)"; }
        $T "$R" "$E/nvs.xml" sim.bp 10 > /dev/null || fail "ranks: the pool does not hold the writer's 10 steps"
    done
    echo "3 runs: each time one rank wrote all 10 steps, three were refused naming the other writer"
fi

echo "== nvs: misuse (bad parameters, damaged or forged pools, calls it does not offer): clear errors, nothing lost"
mkdir -p "$work/misuse"
# Its status is its own, not that of a filter of its output (sh has no pipefail).
rc=0
timeout 300 "$OUT/misuse" "$work/misuse" > "$work/misuse.out" || rc=$?
grep -v '^       (' "$work/misuse.out" || true
[ $rc = 0 ] || fail "misuse (exit $rc)"
echo "all ADIOS2 runs passed"
