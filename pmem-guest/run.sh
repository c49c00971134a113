#!/usr/bin/env bash
# nvs on real kernel persistent-memory paths: boot a Debian kernel under qemu with two
# emulated NVDIMMs (one fsdax namespace with ext4 -o dax, one devdax namespace), run the
# nvs CLI in the guest, SIGKILL qemu mid-put again and again, and hold every boot's
# recovery to what the guest acknowledged on its serial console. Then the host reads the
# devdax pool out of the NVDIMM's backing file and checks it with its own nvs.
#
# Environment: NVS_BIN (default target/release/nvs; not built here), NVS_GUEST_KILLS
# (default 12), NVS_GUEST_SEED (random seed), NVS_GUEST_ACCEL (kvm or tcg; default kvm
# when /dev/kvm is usable), NVS_GUEST_KEEP=1 keeps the scratch directory.
# Prints "SKIPPED: <why>" and exits 0 only when no guest can be booted at all (no qemu,
# or the kernel package cannot be downloaded). Any other failure exits non-zero.
set -euo pipefail
trap 'echo "pmem-guest: FAIL: unexpected error (status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
NVS_BIN=${NVS_BIN:-$root/target/release/nvs}
case "$NVS_BIN" in /*) ;; *) NVS_BIN=$root/$NVS_BIN ;; esac
KILLS=${NVS_GUEST_KILLS:-12}
SEED=${NVS_GUEST_SEED:-$(($(date +%s) % 100000))}
# The fsdax NVDIMM holds ext4 with the kill loop's pool and the bench's files; the devdax
# one holds a pool alone.
FS_MIB=1024
DAX_MIB=256
t_run0=$(date +%s.%N)

skip() {
    echo "SKIPPED: $*"
    exit 0
}
die() {
    echo "pmem-guest: FAIL: $*" >&2
    exit 1
}
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

command -v qemu-system-x86_64 >/dev/null || skip "no qemu-system-x86_64 (Debian: apt-get install qemu-system-x86)"
[ -x "$NVS_BIN" ] || die "no nvs binary at $NVS_BIN (build it first: cargo build --release -p nvs-cli)"

# --- The guest kernel and busybox: Debian packages, cached outside the repository. ---
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/nvs
mods="libnvdimm nfit nd_btt nd_pmem device_dax dax_pmem crc16 mbcache jbd2 crc32c_generic ext4"
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
    sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -1 || true)
if [ -n "$kpkg" ]; then
    cache=$cache_root/guest-$kpkg
else
    # No apt here: use the newest guest already cached, if any.
    cache=$(ls -d "$cache_root"/guest-linux-image-* 2>/dev/null | sort -V | tail -1 || true)
    [ -n "$cache" ] && [ -f "$cache/.ok" ] ||
        skip "cannot name the kernel package (apt-cache depends linux-image-amd64 failed) and none is cached"
fi
if [ ! -f "$cache/.ok" ]; then
    echo "pmem-guest: downloading $kpkg and busybox-static into $cache"
    mkdir -p "$cache_root"
    dl=$(mktemp -d "$cache_root/.dl.XXXXXX")
    fetch() { (cd "$dl" && apt-get download -q "$kpkg" busybox-static >"$dl/apt.log" 2>&1); }
    if ! fetch; then
        apt-get update -qq >/dev/null 2>&1 || true
        fetch || {
            tail -3 "$dl/apt.log" >&2 || true
            rm -rf "$dl"
            skip "cannot download $kpkg / busybox-static with apt-get download"
        }
    fi
    mkdir -p "$dl/x" "$dl/out/modules"
    for deb in "$dl"/*.deb; do dpkg-deb -x "$deb" "$dl/x"; done
    cp "$dl"/x/boot/vmlinuz-* "$dl/out/vmlinuz"
    cp "$dl/x/bin/busybox" "$dl/out/busybox"
    for m in $mods; do
        f=$(find "$dl"/x/lib/modules/*/kernel -name "$m.ko" -o -name "$m.ko.xz" -o -name "$m.ko.zst" | head -1)
        [ -n "$f" ] || die "module $m not in $kpkg"
        case "$f" in
            *.xz) xz -dc "$f" >"$dl/out/modules/$m.ko" ;;
            *.zst) zstd -qdc "$f" >"$dl/out/modules/$m.ko" ;;
            *) cp "$f" "$dl/out/modules/$m.ko" ;;
        esac
    done
    basename "$(ls -d "$dl"/x/lib/modules/*)" >"$dl/out/kernel-version"
    touch "$dl/out/.ok"
    rm -rf "$cache"
    mv "$dl/out" "$cache"
    rm -rf "$dl"
fi

# --- Host tools that go into the guest. ---
if ! command -v ndctl >/dev/null; then
    echo "pmem-guest: installing ndctl"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ndctl >/dev/null ||
        die "ndctl is missing and apt-get install ndctl failed"
fi
command -v mke2fs >/dev/null || die "no mke2fs on the host (Debian: apt-get install e2fsprogs)"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/nvs-pmem-guest.XXXXXX")
qpid=
cleanup() {
    if [ -n "$qpid" ]; then kill -9 "$qpid" 2>/dev/null || true; fi
    if [ "${NVS_GUEST_KEEP:-0}" = 1 ]; then echo "pmem-guest: kept $scratch"; else rm -rf "$scratch"; fi
}
trap cleanup EXIT

# --- The initramfs: busybox, the modules, ndctl, mke2fs and nvs with their libraries. ---
ir=$scratch/root
mkdir -p "$ir"/{bin,sbin,usr/bin,usr/sbin,lib/nvs-modules,lib/x86_64-linux-gnu,lib64,etc,proc,sys,dev,tmp,mnt}
cp "$cache/busybox" "$ir/bin/busybox"
for a in $("$cache/busybox" --list); do [ "$a" = busybox ] || ln -s busybox "$ir/bin/$a"; done
cp "$cache"/modules/*.ko "$ir/lib/nvs-modules/"
add_binary() { # a host binary and the shared libraries it loads (none if static)
    cp "$1" "$ir$2"
    # Without debug information (nvs's is most of its size, and the initramfs is
    # unpacked by an emulated CPU under TCG): the code is the same.
    if command -v strip >/dev/null; then strip --strip-debug "$ir$2"; fi
    local lib
    for lib in $(ldd "$1" 2>/dev/null | grep -o '/[^ ]*' || true); do
        mkdir -p "$ir$(dirname "$lib")"
        [ -e "$ir$lib" ] || cp -L "$lib" "$ir$lib"
    done
}
add_binary "$(command -v ndctl)" /usr/bin/ndctl
add_binary "$(command -v mke2fs)" /usr/sbin/mke2fs
add_binary "$NVS_BIN" /usr/bin/nvs
# PMDK's libpmem for the bench's pmem_memcpy_persist row (nvs bench loads it at run
# time; without it that row says "not available").
pmem_lib=$(ldconfig -p 2>/dev/null | sed -n 's/^[[:space:]]*libpmem\.so\.1 (libc6,x86-64) => //p' | head -1)
if [ -n "$pmem_lib" ]; then
    add_binary "$pmem_lib" "/lib/x86_64-linux-gnu/libpmem.so.1"
else
    echo "pmem-guest: no libpmem.so.1 on the host (Debian: libpmem-dev): the bench's PMDK row will say not available"
fi
[ -f /etc/mke2fs.conf ] && cp /etc/mke2fs.conf "$ir/etc/"
cp "$here/init.sh" "$ir/init"
chmod 755 "$ir/init"
(cd "$ir" && find . | "$cache/busybox" cpio -o -H newc 2>/dev/null) >"$scratch/initrd"

# --- qemu. ---
truncate -s ${FS_MIB}M "$scratch/pm0.img"
truncate -s ${DAX_MIB}M "$scratch/pm1.img"
qemu_args() { # ACCEL MODE K0
    local cpu=max
    [ "$1" = kvm ] && cpu=host
    echo -machine pc,nvdimm=on,accel="$1" -cpu $cpu -smp 1 -m 1G,slots=4,maxmem=8G \
        -object memory-backend-file,id=pm0,share=on,mem-path="$scratch/pm0.img",size=${FS_MIB}M,align=2M \
        -device nvdimm,id=nv0,memdev=pm0 \
        -object memory-backend-file,id=pm1,share=on,mem-path="$scratch/pm1.img",size=${DAX_MIB}M,align=2M \
        -device nvdimm,id=nv1,memdev=pm1 \
        -kernel "$cache/vmlinuz" -initrd "$scratch/initrd" -nographic -no-reboot -nic none
}
# Is KVM usable? /dev/kvm can be there and still not boot Linux (nested KVM in some
# cloud VMs hangs in the kernel's decompressor): a probe boot must reach /init.
PROBE_S=${NVS_GUEST_KVM_PROBE_S:-30}
accel=${NVS_GUEST_ACCEL:-}
if [ -z "$accel" ]; then
    accel=tcg
    if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
        t0=$(now)
        # shellcheck disable=SC2046 # qemu_args prints words without spaces in them
        qemu-system-x86_64 $(qemu_args kvm) -append "console=ttyS0 quiet panic=-1 nvsmode=probe" \
            </dev/null >"$scratch/probe.log" 2>&1 &
        qpid=$!
        while kill -0 "$qpid" 2>/dev/null && ! grep -aq 'NVS INIT' "$scratch/probe.log" &&
            awk -v e="$(secs "$t0" "$(now)")" -v t="$PROBE_S" 'BEGIN { exit !(e < t) }'; do
            sleep 0.1
        done
        if grep -aq 'NVS INIT' "$scratch/probe.log"; then
            accel=kvm
            echo "pmem-guest: KVM probe: /init after $(secs "$t0" "$(now)") s"
        else
            echo "pmem-guest: /dev/kvm is there but a KVM guest did not reach /init within $PROBE_S s" \
                "(its console: $(tr -d '\r' <"$scratch/probe.log" | grep -av '^$' | tail -1 | cut -c1-80)): using TCG"
        fi
        kill -9 "$qpid" 2>/dev/null || true
        wait "$qpid" 2>/dev/null || true
        qpid=
    fi
fi
case "$accel" in
    kvm) timeout=180 ;;
    tcg) timeout=1200 ;;
    *) die "NVS_GUEST_ACCEL must be kvm or tcg, not $accel" ;;
esac
echo "pmem-guest: $(echo "$accel" | tr a-z A-Z), kernel $(cat "$cache/kernel-version"), nvs $NVS_BIN," \
    "initramfs $(($(stat -c %s "$scratch/initrd") >> 20)) MiB, $KILLS kills, NVS_GUEST_SEED=$SEED, scratch $scratch"

# (Its status is 0 even when a reader like grep -q stops reading early: with pipefail a
# SIGPIPE of tr would fail the pipeline on a long log.)
log_lines() { tr -d '\r' <"$1" || true; }
boot_s=()
# boot MODE K0 KILL_AFTER_ACKS KILL_DELAY_MS LOG: boot the guest; with KILL_AFTER_ACKS > 0,
# SIGKILL qemu once that many ACK lines are on the console (after KILL_DELAY_MS more).
# Sets boot_rc (qemu's status, or "killed"), boot_acks_at_kill, t_init, t_ready.
boot() {
    local mode=$1 k0=$2 kill_acks=$3 delay_ms=$4 log=$5
    local t0 el n
    t0=$(now)
    t_init= t_ready= boot_rc= boot_acks_at_kill=
    # shellcheck disable=SC2046 # qemu_args prints words without spaces in them
    qemu-system-x86_64 $(qemu_args "$accel") -append "console=ttyS0 quiet panic=-1 nvsmode=$mode nvsk0=$k0 ${boot_extra:-}" \
        </dev/null >"$log" 2>"$log.err" &
    qpid=$!
    while :; do
        el=$(secs "$t0" "$(now)")
        if [ -z "$t_init" ] && grep -aq 'NVS INIT' "$log"; then t_init=$el; fi
        if [ -z "$t_ready" ] && grep -q '^NVS READY' "$log"; then t_ready=$el; fi
        if ! kill -0 "$qpid" 2>/dev/null; then
            boot_rc=0
            wait "$qpid" || boot_rc=$?
            qpid=
            break
        fi
        if [ "$kill_acks" -gt 0 ]; then
            n=$(grep -c '^NVS ACK [a-z]* [0-9]* [0-9]* \.' "$log" || true)
            if [ "$n" -ge "$kill_acks" ]; then
                [ "$delay_ms" -gt 0 ] && sleep "$(awk -v m="$delay_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
                kill -9 "$qpid"
                wait "$qpid" 2>/dev/null || true
                qpid=
                boot_rc=killed
                boot_acks_at_kill=$(grep -c '^NVS ACK [a-z]* [0-9]* [0-9]* \.' "$log" || true)
                break
            fi
        fi
        if awk -v e="$el" -v t="$timeout" 'BEGIN { exit !(e > t) }'; then
            kill -9 "$qpid" 2>/dev/null || true
            wait "$qpid" 2>/dev/null || true
            qpid=
            echo "--- console (last 40 lines) ---" >&2
            log_lines "$log" | tail -40 >&2
            die "the $mode boot did not finish within $timeout s"
        fi
        sleep 0.05
    done
    if grep -q '^NVS FAIL' "$log"; then
        log_lines "$log" | grep '^NVS ' | tail -30 >&2
        die "the $mode boot failed: $(log_lines "$log" | grep '^NVS FAIL' | head -1)"
    fi
    if [ -z "$t_init" ]; then
        echo "--- console ---" >&2
        log_lines "$log" | tail -40 >&2
        cat "$log.err" >&2
        die "the $mode boot never reached /init (qemu status $boot_rc)"
    fi
    boot_s+=("$t_init")
}

# The deterministic content of counter k: the same bytes as init.sh's gen.
gen() {
    printf 'k=%d\n' "$1"
    yes "nvs-guest-payload-$1" | head -c $((1000 + ($1 * 37) % 6000)) || true
}

failures=()
soft_fail() {
    echo "pmem-guest: FAIL: $*" >&2
    failures+=("$*")
}

# --- Boot 1: setup. ---
log=$scratch/boot-setup.log
boot setup 0 0 0 "$log"
[ "$boot_rc" = 0 ] || die "the setup boot: qemu exited with $boot_rc"
grep -q '^NVS DONE' "$log" || die "the setup boot did not finish: $(log_lines "$log" | tail -20)"
first_boot=$t_init
echo "pmem-guest: setup boot: /init after $t_init s (qemu start to /init), done in $(secs 0 "$t_ready") s"
log_lines "$log" | grep -E '^NVS (DEVICES|MOUNT|DAXOFF)' | sed 's/^NVS /  /'
for step in fs-create fs-put fs-follow fs-get fs-check fs-info dax-create dax-put dax-follow dax-get dax-check dax-info; do
    tag=$(echo "${step%%-*}" | tr a-z A-Z)-$(echo "${step#*-}" | tr a-z A-Z)
    rc=$(log_lines "$log" | sed -n "s/^NVS RC $step //p")
    if [ "$rc" = 0 ]; then
        out=$(log_lines "$log" | sed -n "s/^NVS $tag //p" | head -1 || true)
        [ "${step#*-}" = get ] && out="the bytes put"
        echo "  ok   nvs ${step#*-} (${step%%-*}): $out"
    else
        soft_fail "nvs ${step#*-} on the ${step%%-*} pool exited ${rc:-?}: $(log_lines "$log" | sed -n "s/^NVS $tag //p" | tr '\n' ' ')"
    fi
done
faults=$(log_lines "$log" | sed -n 's/^NVS FAULTS //p')
case "$faults" in
    pmd=*)
        # "pmd=N pmd_mapped=M pmd_fallback=F pte=P" for a 16 MiB put into the fsdax pool.
        eval "$faults"
        if [ "$pmd_mapped" -gt 0 ] && [ "$pmd_fallback" = 0 ] && [ "$pte" = 0 ]; then
            echo "  ok   a 16 MiB put faults in 2 MiB pages: $pmd_mapped PMD faults mapped, none fell back, no 4 KiB fault"
        else
            soft_fail "a 16 MiB put on fsdax did not fault in 2 MiB pages only: $faults"
        fi
        ;;
    *) echo "  note: no page-fault counts: ${faults:-none printed}" ;;
esac
echo "  --- nvs info /mnt/p.nvs (fsdax, ext4 -o dax) ---"
log_lines "$log" | sed -n 's/^NVS FS-INFO /    /p'
echo "  --- nvs info /dev/dax (devdax) ---"
log_lines "$log" | sed -n 's/^NVS DAX-INFO /    /p'
fsinfo=$(log_lines "$log" | sed -n 's/^NVS FS-INFO //p')
daxinfo=$(log_lines "$log" | sed -n 's/^NVS DAX-INFO //p')
echo "$fsinfo" | grep -qE '^durability +dax' ||
    soft_fail "nvs info on the fsdax pool does not say 'durability  dax': $(echo "$fsinfo" | grep '^durability' || echo '(no durability line)')"
echo "$fsinfo" | grep -E '^size ' | grep -q 'MAP_SYNC' ||
    soft_fail "nvs info on the fsdax pool does not say MAP_SYNC on its size line: $(echo "$fsinfo" | grep '^size' || echo '(no size line)')"
echo "$daxinfo" | grep -qE '^durability +dax' ||
    soft_fail "nvs info on the devdax pool does not say 'durability  dax': $(echo "$daxinfo" | grep '^durability' || echo '(no durability line)')"
# The refusals on the device: each exits 2 with its reason, and the pool stays whole.
refused() { # STEP TAG WHAT-THE-MESSAGE-SAYS
    local rc out
    rc=$(log_lines "$log" | sed -n "s/^NVS RC $1 //p")
    out=$(log_lines "$log" | sed -n "s/^NVS $2 //p" | tr '\n' ' ')
    if [ "$rc" = 2 ] && echo "$out" | grep -q "$3"; then
        echo "  ok   refused (exit 2): $out"
    else
        soft_fail "$1 should be refused (exit 2, saying '$3'): exit ${rc:-?}: $out"
    fi
}
refused dax-recreate DAX-RECREATE "holds an nvs pool already"
refused dax-toobig DAX-TOOBIG "fewer than"
refused dax-inuse DAX-INUSE "locked by another writer"
log_lines "$log" | grep -q '^NVS RC dax-after 0$' &&
    echo "  ok   after the refusals the device's pool reads back as put" ||
    soft_fail "after the refusals the device's pool does not read back: $(log_lines "$log" | grep '^NVS DAX-AFTER' | tr '\n' ' ')"
log_lines "$log" | grep -q '^NVS RC dax-create 0$' ||
    die "nvs create on the devdax device failed (see above): the kill loop needs both pools"

# --- Kill/reboot loop. ---
RANDOM=$SEED
acked=$scratch/acked # "pool k version" of every acknowledged put
: >"$acked"
# The SHA-256 of gen K, cached in hashes[K].
declare -A hashes
hash_k() {
    if [ -z "${hashes[$1]:-}" ]; then
        hashes[$1]=$(gen "$1" | sha256sum)
        hashes[$1]=${hashes[$1]%% *}
    fi
}
# verify_boot LOG WHAT: the boot's recovery holds every put acknowledged before: a clean
# nvs check of both pools (every payload checksum verified), versions 1..latest of "o" all
# there, none lost since an earlier boot, every version the guest read whole this boot
# (those after nvs{fs,dax}from; all of them in the final boot) the content of its
# counter k, and every acknowledged (pool, k, version) among the versions read whole by
# this boot or an earlier one. Sets fsfrom/daxfrom: the latest version of each pool.
: >"$scratch/seen"
fsfrom=0 daxfrom=0
verify_boot() {
    local log=$1 what=$2 pool k v sum line versions latest before
    for pool in fs dax; do
        log_lines "$log" | grep -q "^NVS RC check-$pool 0$" || {
            log_lines "$log" | grep "^NVS CHECK-$pool" >&2 || true
            die "$what: nvs check of the $pool pool failed"
        }
        read -r versions latest < <(log_lines "$log" | sed -n "s/^NVS VERSIONS $pool //p")
        [ "${versions:-x}" = "${latest:-y}" ] ||
            die "$what: the $pool pool has ${versions:-?} versions of o, latest ${latest:-?}: some are missing"
        if [ $pool = fs ]; then before=$fsfrom; fsfrom=$latest; else before=$daxfrom; daxfrom=$latest; fi
        [ "$latest" -ge "$before" ] || die "$what: the $pool pool's latest version is $latest, an earlier boot saw $before"
    done
    log_lines "$log" | { grep '^NVS OBJ ' || true; } >"$scratch/objs"
    while read -r line; do
        read -r _ _ pool v k sum _ <<<"$line"
        [[ "$k" =~ ^[0-9]+$ ]] || die "$what: version $v of o in the $pool pool is unreadable or not put by this test: $line"
        hash_k "$k"
        [ "$sum" = "${hashes[$k]}" ] || die "$what: version $v of o in the $pool pool (k=$k) has the wrong content"
        echo "$pool $k $v" >>"$scratch/seen"
    done <"$scratch/objs"
    while read -r pool k v; do
        grep -qx "$pool $k $v" "$scratch/seen" ||
            die "$what: the acknowledged put $pool k=$k version $v is missing (or has another version)"
    done <"$acked"
}
total_kills=0
for i in $(seq 1 "$KILLS"); do
    log=$scratch/boot-put-$i.log
    target=$((3 + RANDOM % 28))
    delay=0
    # One kill in three: a random short delay after the ACK (mid-put, or in between).
    [ $((RANDOM % 3)) = 0 ] && delay=$((RANDOM % 150))
    boot_extra="nvsfsfrom=$fsfrom nvsdaxfrom=$daxfrom"
    boot put $((i * 1000)) "$target" "$delay" "$log"
    [ "$boot_rc" = killed ] || die "put boot $i ended on its own (status $boot_rc) before the kill: $(log_lines "$log" | tail -5)"
    verify_boot "$log" "put boot $i"
    checked=$(wc -l <"$acked")
    log_lines "$log" | sed -n 's/^NVS ACK \([a-z]*\) \([0-9]*\) \([0-9]*\) \.$/\1 \2 \3/p' >>"$acked"
    total_kills=$((total_kills + 1))
    echo "pmem-guest: kill $i: /init at $t_init s, ready at $t_ready s, $checked earlier puts verified;" \
        "killed after $boot_acks_at_kill ACKs (target $target, +$delay ms)"
done

# --- Final boot: verify and power off cleanly. ---
log=$scratch/boot-verify.log
boot_extra="nvsfsfrom=0 nvsdaxfrom=0"
: >"$scratch/seen"
boot verify 0 0 0 "$log"
[ "$boot_rc" = 0 ] || die "the final boot: qemu exited with $boot_rc"
grep -q '^NVS DONE' "$log" || die "the final boot did not finish: $(log_lines "$log" | tail -20)"
verify_boot "$log" "final boot"
nacked=$(wc -l <"$acked")
echo "pmem-guest: final boot: all $nacked acknowledged puts present with their content and version;" \
    "nvs check clean on both pools"

# --- The host reads the devdax pool out of its NVDIMM's backing file. ---
read -r off size region _ < <(log_lines "$log" | sed -n 's/^NVS DAXOFF //p')
[ -n "${off:-}" ] || die "the guest did not say where the devdax data lies"
img=$scratch/pm${region#region}.img
[ -f "$img" ] || die "no backing file for $region"
dd if="$img" of="$scratch/dax.pool" bs=1M iflag=skip_bytes,count_bytes skip="$off" count="$size" status=none
[ "$(head -c 7 "$scratch/dax.pool")" = NVSPOOL ] ||
    die "no nvs superblock at offset $off of $img ($region)"
out=$("$NVS_BIN" check "$scratch/dax.pool" 2>&1) || die "host nvs check of the devdax pool (offset $off of $img): $out"
echo "pmem-guest: host: $out"
nhost=0
while read -r pool k v; do
    [ "$pool" = dax ] || continue
    got=$("$NVS_BIN" get "$scratch/dax.pool" o --version "$v" | sha256sum) ||
        die "host nvs get of dax version $v failed"
    [ "$got" = "$(gen "$k" | sha256sum)" ] || die "host nvs get: dax version $v is not the content of k=$k"
    nhost=$((nhost + 1))
done <"$acked"
echo "pmem-guest: host: the devdax pool at offset $off of the backing file ($size bytes):" \
    "$nhost acknowledged puts read back byte-exact with nvs get"

# --- Speed: nvs put on fsdax with dax (MAP_SYNC) vs msync at every fence vs PMDK. ---
log_lines "$log" | sed -n 's/^NVS BENCH \([a-z]*\) \(.*\),\{0,1\}$/\1 \2/p' >"$scratch/bench.rows"
python3 - "$scratch/bench.rows" <<'PY' || soft_fail "the bench rows of the final boot are missing or unreadable"
import json, sys
rows = {}
for line in open(sys.argv[1]):
    mode, _, js = line.partition(" ")
    r = json.loads(js.rstrip().rstrip(","))
    if r.get("threads") == 1 and r.get("available"):
        rows[(mode, r["method"], r["size_bytes"])] = r["gbps"]
if not rows:
    sys.exit(1)
def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
print("pmem-guest: speed on fsdax, 1 thread, GB/s: nvs with durability dax (MAP_SYNC) and msync,")
print("  the bench's ceiling (NT copy + fence + commit line + fence) and PMDK's pmem_memcpy_persist,")
print("  all on /mnt in one run each. Emulated pmem is host DRAM: read the ratios, not the speeds.")
print(f"  {'row':<30}{'dax':>8}{'msync':>8}{'ceiling':>9}{'PMDK':>8}{'dax/msync':>11}{'dax/PMDK':>10}")
for method in ("nvs_put", "nvs_put_nosum", "nvs_put_batch64"):
    ceiling = "ceiling" if method != "nvs_put_batch64" else "ceiling_batch64"
    for b in sorted({k[2] for k in rows if k[1] == method}):
        dax, ms = rows.get(("dax", method, b)), rows.get(("msync", method, b))
        ce, pm = rows.get(("dax", ceiling, b)), rows.get(("dax", "pmem_memcpy_persist", b))
        f = lambda x: f"{x:.3f}" if x else "-"
        ratio = lambda a, c: f"{a / c:.2f}x" if a and c else "-"
        print(f"  {method + ' ' + size(b):<30}{f(dax):>8}{f(ms):>8}{f(ce):>9}{f(pm):>8}{ratio(dax, ms):>11}{ratio(dax, pm):>10}")
PY

mean=$(printf '%s\n' "${boot_s[@]}" | awk '{ s += $1 } END { printf "%.2f", s / NR }')
echo
echo "pmem-guest summary: $(echo "$accel" | tr a-z A-Z); boot (qemu start to /init) first $first_boot s," \
    "mean $mean s over ${#boot_s[@]} boots; $total_kills kills (SIGKILL of qemu); $nacked acknowledged puts" \
    "checked after every later boot; $nhost of them read by the host from the devdax backing file;" \
    "run took $(secs "$t_run0" "$(now)") s"
if [ ${#failures[@]} -gt 0 ]; then
    echo "pmem-guest: ${#failures[@]} check(s) failed:" >&2
    printf '  - %s\n' "${failures[@]}" >&2
    exit 1
fi
echo "pmem-guest: PASS"
