#!/usr/bin/env bash
# The whole test suite (the README's test command). It installs with rustup and cargo
# what it needs and is missing (rustfmt, clippy, the x86_64- and aarch64-unknown-none targets, a
# nightly toolchain with miri, cargo-fuzz), so it runs on a machine where only rustup
# was set up, and a Python venv (target/pyenv, from PyPI) for nvs-py. PMDK's libraries
# (optional bench rows) and python3-venv need the system's package manager:
# .ci/run installs them.
set -euo pipefail
cd "$(dirname "$0")"
step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%T)"; }

step "setup: what the suite needs (rustup components and target, nightly miri, cargo-fuzz)"
rustup component add rustfmt clippy >/dev/null 2>&1 || true
for t in x86_64-unknown-none aarch64-unknown-none; do
  if ! rustup target list --installed | grep -qx "$t"; then
    rustup target add "$t"
  fi
done
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  if rustup toolchain list | grep -q '^nightly-'; then
    rustup component add --toolchain nightly miri rust-src
  else
    rustup toolchain install nightly --profile minimal -c miri,rust-src
  fi
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

step "format";  cargo fmt --all --check
step "clippy";  cargo clippy --workspace --all-targets -- -D warnings
step "docs (the public crates' own, then every crate's with the features the workspace turns on)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -q -p nvs-core -p nvs-std
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -q --workspace
step "tests";   cargo test --workspace
step "crash check: nvs-verify all (every crash image of every workload, damage, lazy/eager, mutants)"
cargo run --release -q -p nvs-verify -- all
step "crash check of a user's own code: nvs-verify's restart_protocol example (passes as written, catches its seeded bug)"
cargo run --release -q -p nvs-verify --example restart_protocol
step "loom: every interleaving of the concurrent pool paths (preemption bound 3; 2 for the two recovery models)"
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom cargo test --release -q -p nvs-core --test loom
step "loom x crash: every crash image of the interleavings of 2 lane writers x 2 puts (preemption bound 2)"
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom cargo test --release -q -p nvs-verify --test loom_crash -- --nocapture
step "C ABI: the Fortran example (gfortran) and the MPI example (mpicc, mpirun -np 2 twice)"
if command -v gfortran >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
  nvs-c/examples/run.sh
else
  echo "SKIPPED: gfortran or MPI missing (.ci/run installs gfortran, mpich, libmpich-dev)"
fi
step "no_std: nvs-core for x86_64-unknown-none and aarch64-unknown-none"
for t in x86_64-unknown-none aarch64-unknown-none; do
  cargo build -p nvs-core --target "$t"
  cargo clippy -p nvs-core --target "$t" -- -D warnings
done
step "aarch64: nvs-core's portable-media tests on aarch64 Linux under qemu-user (format pinned, region, crash cuts, bad images, API)"
if command -v qemu-aarch64 >/dev/null 2>&1 && command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
  rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu" \
  CARGO_TARGET_DIR=target/aarch64 cargo test --release -q -p nvs-core --target aarch64-unknown-linux-gnu \
    --lib --test format_pin --test region --test crash_cut --test bad_images --test api
else
  echo "SKIPPED: qemu-aarch64 or aarch64-linux-gnu-gcc missing (.ci/run installs qemu-user, gcc-aarch64-linux-gnu)"
fi
step "unikernel: nvs-kernel under qemu, SIGKILLed 24 times and recovered, then read by the host"
(cd nvs-kernel && cargo fmt --check && CARGO_TARGET_DIR=../target/kernel cargo clippy --release -- -D warnings)
if command -v qemu-system-x86_64 >/dev/null 2>&1; then
  cargo test --release -q -p nvs-cli --test unikernel -- --ignored --nocapture
else
  echo "SKIPPED: qemu-system-x86_64 missing (.ci/run installs qemu-system-x86)"
fi
step "persistent memory: a Linux guest on two emulated NVDIMMs (fsdax ext4 -o dax + MAP_SYNC, devdax), qemu SIGKILLed 12 times, every acknowledged put read back"
cargo build --release -q -p nvs-cli
pmem-guest/run.sh
step "bench: nvs bench --quick (keeps it working; numbers are not judged here)"
cargo run --release -q -p nvs-cli -- bench --quick
step "bench-delta: nvs bench-delta --quick (delta vs full puts per detector; every version checked)"
cargo run --release -q -p nvs-cli -- bench-delta --quick
step "python: nvs-py (PyO3, maturin) lint, pip install into a venv, pytest (reads pools the nvs tool writes too)"
cargo fmt --manifest-path nvs-py/Cargo.toml --check
cargo clippy --manifest-path nvs-py/Cargo.toml --all-targets -- -D warnings
cargo build --release -q -p nvs-cli
python3 -m venv target/pyenv
target/pyenv/bin/pip install -q maturin numpy pytest
# maturin is the PEP 517 backend; the venv's bin on PATH lets pip find it (no isolation).
PATH="$PWD/target/pyenv/bin:$PATH" target/pyenv/bin/pip install -q --no-build-isolation ./nvs-py
NVS_BIN="$PWD/${CARGO_TARGET_DIR:-target}/release/nvs" target/pyenv/bin/python -m pytest -q nvs-py/tests
step "adios2: the nvs ADIOS2 engine (the PyPI wheel, and an MPI ADIOS2 built once and cached; C++ and Python, nvs and BP5 value by value at 1, 2 and 4 ranks, live, SIGKILL, restart)"
if command -v g++ >/dev/null 2>&1; then
  ADIOS2_VENV="$PWD/${CARGO_TARGET_DIR:-target}/adios2-venv" nvs-adios2/run.sh
else
  echo "SKIPPED: g++ missing (.ci/run installs it)"
fi
step "peers: nvs-peers/run.sh --quick (nvs, ADIOS2 BP5, HDF5, POSIX, pmemlog, memcpy on the snapshot workload; numbers not judged)"
if command -v g++ >/dev/null 2>&1 && [ -f /usr/include/hdf5/serial/hdf5.h ] && [ -f /usr/include/libpmemlog.h ]; then
  ADIOS2_VENV="$PWD/${CARGO_TARGET_DIR:-target}/adios2-venv" nvs-peers/run.sh --quick
else
  echo "SKIPPED: g++, libhdf5-dev or libpmemlog-dev missing (.ci/run installs them)"
fi
# Miri and the fuzzers each keep one core busy: miri runs beside the fuzz stage (its
# output is shown after it), which saves the fuzz stage's minutes on a 2-core machine.
step "miri: nvs-core on the portable media path (slow tests shrunk or skipped under miri), in the background"
miri_log="$(mktemp)"
(
  if cargo +nightly miri --version >/dev/null 2>&1; then
    cargo +nightly miri test -p nvs-core
  else
    echo "SKIPPED: no nightly toolchain with miri here (the setup step could not install it)"
  fi
) >"$miri_log" 2>&1 &
miri_pid=$!
trap 'kill "$miri_pid" 2>/dev/null || true' EXIT
step "fuzz: recover_image, decode, ops_crash, checkpoint, ${FUZZ_SECONDS:-60} s each (FUZZ_SECONDS=0 skips)"
if [ "${FUZZ_SECONDS:-60}" = 0 ]; then
  echo "SKIPPED: FUZZ_SECONDS=0"
elif command -v cargo-fuzz >/dev/null 2>&1; then
  ./fuzz/run.sh "${FUZZ_SECONDS:-60}"
else
  echo "SKIPPED: cargo-fuzz not installed here (the setup step could not install it)"
fi
step "miri: waiting for it to finish; its output"
miri_rc=0
wait "$miri_pid" || miri_rc=$?
trap - EXIT
cat "$miri_log"
rm -f "$miri_log"
if [ "$miri_rc" != 0 ]; then
  echo "miri FAILED (exit $miri_rc)"
  exit 1
fi
step "ok"
