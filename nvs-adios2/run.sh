#!/bin/sh
# Build libnvs, the nvs ADIOS2 plugin and the examples, and run them:
#   C++ writer -> C++ reader and Python writer -> Python reader (and across), with the nvs
#   engine and with BP5 (the same programs, another XML config); a reader following a
#   live writer; a writer killed with SIGKILL (the reader errors, it does not hang); a
#   writer restarted in Append mode continuing after the last committed step; the engine
#   used wrongly (examples/misuse.cpp: every case a clear error, nothing committed lost).
# Every reader checks every value it reads and exits non-zero on a mismatch.
#   ADIOS2_VENV  a venv with adios2 (2.12.x) and numpy (made with pip if missing)
#   ADIOS2_MPI   an MPI ADIOS2's install prefix (default: build-adios2-mpi.sh's, built
#                once and cached); NVS_ADIOS2_MPI=0 skips the MPI runs
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

# An MPI ADIOS2 (built once from PyPI's source distribution and cached outside the
# clone; NVS_ADIOS2_MPI=0 skips this part, saying so) for MPI programs of several ranks.
A2MPI=""
if [ "${NVS_ADIOS2_MPI:-1}" = 0 ]; then
    echo "SKIPPED: the MPI ADIOS2 runs (NVS_ADIOS2_MPI=0)"
elif ! command -v mpicxx >/dev/null 2>&1 || ! command -v cmake >/dev/null 2>&1; then
    fail "the MPI ADIOS2 runs need mpicxx and cmake (NVS_ADIOS2_MPI=0 skips them)"
else
    echo "== an MPI ADIOS2 (build-adios2-mpi.sh: cached after the first build, 7-10 min)"
    A2MPI=${ADIOS2_MPI:-$("$here/build-adios2-mpi.sh")} || fail "could not build an MPI ADIOS2"
    echo "$A2MPI"
    M="$OUT/mpi"
    ADIOS2_MPI="$A2MPI" NVS_LIB="$target/release" OUT="$M" "$here/build.sh" >/dev/null
fi
if [ -n "$A2MPI" ]; then
    # The MPI plugin for MPI programs; the serial one (the wheel's) for Python readers.
    mpi() { ADIOS2_PLUGIN_PATH="$M" $T mpirun "$@"; }
    dump() { ADIOS2_PLUGIN_PATH="$M" $T "$M/mpi_dump" "$@"; }
    pydump() { $T "$PY" "$E/dump.py" "$@"; }
    same() { cmp -s "$1" "$2" || { diff "$1" "$2" | head -20; fail "$3: $1 and $2 differ"; }; }
    echo "== MPI: 1, 2 and 4 ranks write one global array (and a two-block array, a local array, a global value, a local value); every value read equals BP5's (C++ and Python readers)"
    for n in 1 2 4; do
        d="$work/mpi$n"; mkdir -p "$d"; cd "$d"
        mpi -np $n "$M/mpi_writer" "$E/bp5.xml" sim.bp 4
        mpi -np $n "$M/mpi_writer" "$E/nvs.xml" sim.bp 4
        dump "$E/bp5.xml" sim.bp > bp5.txt && dump "$E/nvs.xml" sim.bp > nvs.txt || fail "mpi_dump ($n ranks)"
        same bp5.txt nvs.txt "C++ reader, $n ranks"
        pydump "$E/bp5.xml" sim.bp > py-bp5.txt && pydump "$E/nvs.xml" sim.bp > py-nvs.txt || fail "dump.py ($n ranks)"
        same py-bp5.txt py-nvs.txt "Python reader, $n ranks"
        echo "$n rank(s): $(grep -c '^step [0-9]*$' nvs.txt) steps, $(wc -w < nvs.txt) words of C++ dump and $(wc -w < py-nvs.txt) of Python dump, the same as BP5's"
    done
    echo "== MPI: one reader of 2 and 4 ranks' blocks of 4 MiB (read on several threads at once): every value right"
    for n in 2 4; do
        d="$work/mpibig$n"; mkdir -p "$d"; cd "$d"
        sed 's|<parameter key="PoolSize" value="64M"/>|<parameter key="PoolSize" value="256M"/>|' "$E/nvs.xml" > nvs.xml
        mpi -np $n "$M/mpi_bench" nvs.xml sim.bp 3 4 > bench.out 2>&1 || { cat bench.out; fail "mpi_bench, $n ranks"; }
        grep -q "3 steps, 0 wrong" bench.out || { cat bench.out; fail "mpi_bench, $n ranks: values wrong"; }
        echo "$n ranks: $(sed -n 's/.*\(read .*\)/\1/p' bench.out)"
    done
    cd "$work/mpi4" # the 4-rank output, for the Python checks below
    # a block of a local array whose size is not Count()'s: refused, never written past
    # the caller's buffer (Python sizes it by Count(), which a plugin engine cannot set)
    $T "$PY" - "$E/nvs.xml" <<'PYEOF' || fail "Python: a local array's block of another size was not refused"
import sys, adios2
io = adios2.Adios(sys.argv[1]).declare_io("SimIO")
with adios2.Stream(io, "sim.bp", "r") as s:
    for _ in s.steps(timeout=10.0):
        try:
            s.read("particles", block_id=3)
        except Exception as e:
            assert "does not let a plugin engine" in str(e), e
            print("Python: a block of another size than Count() is refused:", str(e)[:90], "...")
            break
        sys.exit("block 3 of particles was read into a buffer of Count()'s size")
PYEOF

    # ReadRandomAccess: ADIOS2 opens a plugin engine in Read mode instead; the call that
    # needs it (the number of steps) is refused, not answered 0
    $T "$PY" - "$E/nvs.xml" <<'PYEOF' || fail "Python FileReader: Steps() was not refused"
import sys, adios2
io = adios2.Adios(sys.argv[1]).declare_io("SimIO")
with adios2.FileReader(io, "sim.bp") as f:
    try:
        n = f.num_steps()
    except Exception as e:
        assert "ReadRandomAccess" in str(e), e
        print("Python FileReader: num_steps() refused:", str(e)[:100], "...")
    else:
        sys.exit(f"FileReader: num_steps() gave {n}")
PYEOF

    echo "== MPI: 2 of 4 ranks open an output with a communicator of their own: an error after OpenTimeout, nothing made"
    d="$work/mpionly"; mkdir -p "$d"; cd "$d"
    sed 's|<parameter key="PoolSize" value="64M"/>|&<parameter key="OpenTimeout" value="3"/>|' "$E/nvs.xml" > only.xml
    mpi -np 4 "$M/mpi_writer" only.xml sim.bp 2 --only 2 > only.out 2>&1 && fail "an Open by 2 of 4 ranks did not fail"
    grep -q "rank 0 of 4 waited 3 s (OpenTimeout)" only.out || { cat only.out; fail "no OpenTimeout error"; }
    [ ! -e sim.nvs ] || fail "the refused Open made a pool"
    grep "rank 0" only.out | head -1

    echo "== MPI: readers started before 4 ranks write follow them live (C++ and Python)"
    cd "$work/mpi4"
    rm -f sim.nvs
    dump "$E/nvs.xml" sim.bp > live.txt & r1=$!
    pydump "$E/nvs.xml" sim.bp > py-live.txt & r2=$!
    sleep 0.5
    mpi -np 4 "$M/mpi_writer" "$E/nvs.xml" sim.bp 4 --sleep 100
    wait $r1 || fail "C++ live reader"
    wait $r2 || fail "Python live reader"
    same bp5.txt live.txt "C++ live reader, 4 ranks"
    same py-bp5.txt py-live.txt "Python live reader, 4 ranks"
    echo "both followed 4 steps of 4 ranks live, the same values as BP5"

    echo "== MPI: rank 2 of 4 dies inside step 3; readers get an error naming it, the steps before are intact; Append continues"
    d="$work/mpikill"; mkdir -p "$d"; cd "$d"
    dump "$E/nvs.xml" sim.bp > live.txt 2> live.err & r1=$!
    sleep 0.5
    mpi -np 4 "$M/mpi_writer" "$E/nvs.xml" sim.bp 8 --die 2 3 > /dev/null 2>&1 && fail "the writer job did not fail"
    rc=0; wait $r1 || rc=$?
    cat live.err
    [ $rc = 2 ] && grep -q "writer of rank 2 (step 3 lacks its blocks) of sim.nvs died" live.err ||
        fail "the live reader: exit $rc, not an error naming rank 2"
    # the first 3 steps, value for value, are those of the whole BP5 run of 4 ranks
    head -n $(grep -n '^step 3$' "$work/mpi4/bp5.txt" | cut -d: -f1) "$work/mpi4/bp5.txt" | sed '$d' > want.txt
    same want.txt live.txt "steps 0..2 before the rank died"
    rc=0; pydump "$E/nvs.xml" sim.bp > py.txt 2> py.err || rc=$?
    [ $rc = 2 ] && grep -q "writer of rank 2 (step 3 lacks its blocks)" py.err || { cat py.err; fail "Python reader: exit $rc"; }
    mpi -np 4 "$M/mpi_writer" "$E/nvs.xml" sim.bp 2 --append
    dump "$E/nvs.xml" sim.bp > after.txt || fail "reading after the Append"
    [ "$(grep '^step [0-9]*$' after.txt | tr '\n' ' ')" = "step 0 step 1 step 2 step 4 step 5 " ] ||
        fail "after the Append: $(grep '^step [0-9]*$' after.txt | tr '\n' ' ')"
    echo "Append after the death: steps 0, 1, 2, 4, 5 (step 3, which rank 2 never committed, is skipped)"

    echo "== MPI: KeepSteps bounds a long stream: 200 steps of 4 ranks in a 1 MiB pool; the steps kept equal BP5's"
    d="$work/mpikeep"; mkdir -p "$d"; cd "$d"
    sed 's|<parameter key="PoolSize" value="64M"/>|<parameter key="PoolSize" value="1M"/>|' "$E/nvs.xml" > full.xml
    sed 's|<parameter key="PoolSize" value="1M"/>|&<parameter key="KeepSteps" value="3"/>|' full.xml > keep.xml
    mpi -np 4 "$M/mpi_writer" full.xml sim.bp 200 > full.out 2>&1 && fail "200 steps fit in a 1 MiB pool without KeepSteps?"
    grep -q "the pool is full: a larger PoolSize, or KeepSteps" full.out || { cat full.out; fail "no pool-full error"; }
    rm -f sim.nvs
    mpi -np 4 "$M/mpi_writer" keep.xml sim.bp 200
    dump keep.xml sim.bp > keep.txt || fail "reading the stream KeepSteps bounded"
    mpi -np 4 "$M/mpi_writer" "$E/bp5.xml" sim.bp 200 > /dev/null
    dump "$E/bp5.xml" sim.bp > bp5.txt
    first=$(grep -m1 '^step [0-9]*$' keep.txt)
    # (the dumps' last lines count the steps read: BP5's reader read all 200)
    sed -n "/^$first\$/,\$p" bp5.txt | grep -v '^end of stream' > want.txt
    grep -v '^end of stream' keep.txt > kept.txt
    same want.txt kept.txt "the steps KeepSteps kept"
    echo "without KeepSteps: $(grep -o 'commit step [0-9]* of rank [0-9]* (the pool is full[^)]*)' full.out | head -1)"
    echo "KeepSteps=3: all 200 steps committed; a reader after them gets $(grep -c '^step [0-9]*$' keep.txt) ($first..199), each the same as BP5's"
fi

echo "== nvs: misuse (bad parameters, damaged or forged pools, calls it does not offer): clear errors, nothing lost"
mkdir -p "$work/misuse"
# Its status is its own, not that of a filter of its output (sh has no pipefail).
rc=0
timeout 300 "$OUT/misuse" "$work/misuse" > "$work/misuse.out" || rc=$?
grep -v '^       (' "$work/misuse.out" || true
[ $rc = 0 ] || fail "misuse (exit $rc)"
echo "all ADIOS2 runs passed"
