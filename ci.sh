#!/usr/bin/env bash
# The whole test suite (the README's test command). Needs: rustfmt, clippy and the
# x86_64-unknown-none target (.ci/run installs them when missing).
set -euo pipefail
cd "$(dirname "$0")"
step() { printf '\n== %s\n' "$*"; }

step "format";  cargo fmt --all --check
step "clippy";  cargo clippy --workspace --all-targets -- -D warnings
step "tests";   cargo test --workspace
step "crash check: nvs-verify all (every crash image of every workload, damage, lazy/eager, mutants)"
cargo run --release -q -p nvs-verify -- all
step "no_std: nvs-core for x86_64-unknown-none"
cargo build -p nvs-core --target x86_64-unknown-none
cargo clippy -p nvs-core --target x86_64-unknown-none -- -D warnings
step "bench: nvs bench --quick (keeps it working; numbers are not judged here)"
cargo run --release -q -p nvs-std --bin nvs -- bench --quick
step "ok"
