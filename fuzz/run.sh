#!/usr/bin/env bash
# Run every fuzz target for SECONDS each (default 60), one after another:
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# Toolchain: nightly with AddressSanitizer when that builds here, else stable with
# `--sanitizer none` (set NVS_FUZZ_STABLE=1 to force the latter). New inputs go to a
# scratch corpus (the checked-in fuzz/corpus/<target> is only read), so a run never
# dirties the tree; a finding stops the run with libFuzzer's message, and its input is in
# fuzz/artifacts/<target>/ (reproduce: cargo +nightly fuzz run <target> <file>; then add
# it as a regression test in nvs-fuzz-check/tests/regressions.rs before fixing it).
# Prints libFuzzer's final line (execs, cov, ft) per target.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(recover_image decode ops_crash checkpoint)

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "fuzz: cargo-fuzz is not installed (cargo install cargo-fuzz --locked)" >&2
  exit 1
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
if [ "${NVS_FUZZ_STABLE:-0}" != 1 ] && cargo +nightly fuzz build --sanitizer address >"$scratch/build.log" 2>&1; then
  run=(cargo +nightly fuzz)
  opts=(--sanitizer address)
else
  [ "${NVS_FUZZ_STABLE:-0}" = 1 ] || { tail -n 20 "$scratch/build.log"; echo "fuzz: nightly + AddressSanitizer did not build here"; }
  echo "fuzz: using stable with --sanitizer none"
  run=(cargo +stable fuzz)
  opts=(--sanitizer none)
  "${run[@]}" build "${opts[@]}"
fi
for t in "${targets[@]}"; do
  mkdir -p "$scratch/$t"
  log="$scratch/$t.log"
  echo "fuzz: $t for ${secs}s (${run[*]} ${opts[*]})"
  if ! "${run[@]}" run "${opts[@]}" "$t" "$scratch/$t" "corpus/$t" -- \
      -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz: $t FOUND A FAILURE; the input is in fuzz/artifacts/$t/" >&2
    exit 1
  fi
  grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 | sed "s/^/fuzz: $t: /" || true
  grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$log" | sed "s/^/fuzz: $t: /" || true
done
