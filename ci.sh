#!/usr/bin/env bash
# The whole test suite (the README's test command). Needs: rustfmt, clippy and the
# x86_64-unknown-none target; for the miri and fuzz steps a nightly toolchain with miri
# and cargo-fuzz (.ci/run installs them all when missing; without them those two steps
# say SKIPPED).
set -euo pipefail
cd "$(dirname "$0")"
step() { printf '\n== %s\n' "$*"; }

step "format";  cargo fmt --all --check
step "clippy";  cargo clippy --workspace --all-targets -- -D warnings
step "tests";   cargo test --workspace
step "crash check: nvs-verify all (every crash image of every workload, damage, lazy/eager, mutants)"
cargo run --release -q -p nvs-verify -- all
step "loom: every interleaving of the concurrent pool paths (preemption bound 3; 2 for the two recovery models)"
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom cargo test --release -q -p nvs-core --test loom
step "loom x crash: every crash image of the interleavings of 2 lane writers x 2 puts (preemption bound 3)"
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom cargo test --release -q -p nvs-verify --test loom_crash -- --nocapture
step "no_std: nvs-core for x86_64-unknown-none"
cargo build -p nvs-core --target x86_64-unknown-none
cargo clippy -p nvs-core --target x86_64-unknown-none -- -D warnings
step "bench: nvs bench --quick (keeps it working; numbers are not judged here)"
cargo run --release -q -p nvs-cli -- bench --quick
step "bench-delta: nvs bench-delta --quick (delta vs full puts per detector; every version checked)"
cargo run --release -q -p nvs-cli -- bench-delta --quick
step "miri: nvs-core on the portable media path (slow tests shrunk or skipped under miri)"
if cargo +nightly miri --version >/dev/null 2>&1; then
  cargo +nightly miri test -p nvs-core
else
  echo "SKIPPED: no nightly toolchain with miri here (.ci/run installs it)"
fi
step "fuzz: recover_image, decode, ops_crash, ${FUZZ_SECONDS:-60} s each (FUZZ_SECONDS=0 skips)"
if [ "${FUZZ_SECONDS:-60}" = 0 ]; then
  echo "SKIPPED: FUZZ_SECONDS=0"
elif command -v cargo-fuzz >/dev/null 2>&1; then
  ./fuzz/run.sh "${FUZZ_SECONDS:-60}"
else
  echo "SKIPPED: cargo-fuzz not installed here (.ci/run installs it)"
fi
step "ok"
