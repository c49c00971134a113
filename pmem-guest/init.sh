#!/bin/sh
# /init of the nvs persistent-memory guest (busybox sh; run.sh packs it into the
# initramfs). Every line for the host starts with "NVS " (run.sh parses them from the
# serial console). The kernel command line says what this boot does:
#   nvsmode=setup   make namespace 0 fsdax (ext4 -o dax at /mnt) and namespace 1 devdax,
#                   create a pool on each and exercise create/put/get/check/info, and
#                   the device's refusals
#   nvsmode=put     verify both pools (reading whole the versions after nvsfsfrom and
#                   nvsdaxfrom), then put objects until the host kills qemu (or nvsputs
#                   puts are done); nvsk0 is the first counter value
#   nvsmode=verify  verify both pools (every version read whole), bench on /mnt, power off
# The guest ends with poweroff -f (qemu runs with -no-reboot and exits).

export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp /mnt
mount -t tmpfs tmpfs /tmp
echo "NVS INIT"

say() { echo "NVS $*"; }
fail() {
    say "FAIL $*"
    sync
    poweroff -f
    sleep 10
}

mode=put
k0=0
nputs=1000
fsfrom=0
daxfrom=0
for w in $(cat /proc/cmdline); do
    case "$w" in
        nvsmode=*) mode=${w#nvsmode=} ;;
        nvsk0=*) k0=${w#nvsk0=} ;;
        nvsputs=*) nputs=${w#nvsputs=} ;;
        # Versions up to these were read back whole by an earlier boot: this one reads
        # only the newer ones (nvs check still verifies every payload's checksum).
        nvsfsfrom=*) fsfrom=${w#nvsfsfrom=} ;;
        nvsdaxfrom=*) daxfrom=${w#nvsdaxfrom=} ;;
    esac
done
say "MODE $mode k0=$k0 kernel=$(uname -r)"
if [ "$mode" = probe ]; then # run.sh asks whether this accelerator boots at all
    poweroff -f
    sleep 10
fi

# Modules in an order that satisfies every depends= (no modules.dep in here).
for m in libnvdimm nfit nd_btt nd_pmem device_dax dax_pmem crc16 mbcache jbd2 crc32c_generic ext4; do
    out=$(insmod /lib/nvs-modules/$m.ko 2>&1) || fail "insmod $m: $out"
done

# Both regions (one per emulated NVDIMM) appear once nfit has probed.
i=0
while [ ! -e /sys/bus/nd/devices/region0 ] || [ ! -e /sys/bus/nd/devices/region1 ]; do
    i=$((i + 1))
    [ $i -gt 100 ] && fail "regions did not appear: $(ls /sys/bus/nd/devices 2>&1 | tr '\n' ' ')"
    sleep 0.1
done

# Print the output of a command, every line prefixed (stdout and stderr together).
show() {
    tag=$1
    shift
    "$@" >/tmp/show.out 2>&1
    rc=$?
    sed "s/^/NVS $tag /" /tmp/show.out
    return $rc
}

# Deterministic content of counter k (run.sh makes the same bytes on the host).
gen() {
    printf 'k=%d\n' "$1"
    yes "nvs-guest-payload-$1" | head -c $((1000 + ($1 * 37) % 6000))
}

if [ "$mode" = setup ]; then
    show NDCTL ndctl create-namespace -f -e namespace0.0 -m fsdax ||
        fail "ndctl create-namespace -m fsdax on namespace0.0"
    show NDCTL ndctl create-namespace -f -e namespace1.0 -m devdax ||
        fail "ndctl create-namespace -m devdax on namespace1.0"
fi

# Find the devices: the fsdax block device and the devdax character device.
i=0
while :; do
    pmem=$(ls /sys/block 2>/dev/null | grep '^pmem' | head -1)
    dax=$(ls /sys/bus/dax/devices 2>/dev/null | head -1)
    [ -n "$pmem" ] && [ -n "$dax" ] && [ -e "/dev/$pmem" ] && [ -e "/dev/$dax" ] && break
    i=$((i + 1))
    [ $i -gt 100 ] && fail "no pmem block device ($pmem) or dax device ($dax): $(ndctl list -N 2>&1 | tr '\n' ' ')"
    sleep 0.1
done
DAX=/dev/$dax
say "DEVICES /dev/$pmem $DAX"
show NDCTL ndctl list -N

# Where the devdax data lies in its NVDIMM (the host reads the pool from the backing
# file there): the dax device's physical address minus its region's.
daxsys=/sys/bus/dax/devices/$dax
daxres=$(cat $daxsys/resource 2>/dev/null)
daxsize=$(cat $daxsys/size)
# Walk up the dax device's sysfs path to its nd region (regionN).
p=$(readlink -f $daxsys)
while [ "$p" != / ] && ! basename "$p" | grep -q '^region[0-9]*$'; do p=$(dirname "$p"); done
region=$(basename "$p")
regres=$(cat /sys/bus/nd/devices/$region/resource)
say "DAXOFF $((daxres - regres)) $daxsize $region $daxres $regres"

if [ "$mode" = setup ]; then
    # By its path: busybox sh would run its own mke2fs applet for a bare "mke2fs".
    # DAX needs the block size to be the page size (a small fs defaults to 1 KiB). A
    # stripe of 2 MiB makes ext4 allocate a large file 2 MiB-aligned: its pages then
    # fault in as 2 MiB pages (without it every PMD fault here fell back to 4 KiB).
    /usr/sbin/mke2fs -t ext4 -b 4096 -E stride=512,stripe_width=512 -F -q /dev/$pmem >/tmp/mkfs.out 2>&1 || fail "mkfs.ext4 /dev/$pmem: $(cat /tmp/mkfs.out)"
fi
out=$(mount -t ext4 -o dax /dev/$pmem /mnt 2>&1) || fail "mount -o dax /dev/$pmem: $out; dmesg: $(dmesg | tail -5 | tr "\n" " ")"
line=$(grep " /mnt " /proc/mounts)
say "MOUNT $line"
echo "$line" | grep -q 'dax' || fail "/mnt is not mounted with DAX: $line"
FS=/mnt/p.nvs

# exercise TAG UPPER-TAG POOL: put /tmp/in7 as "t" with a follower watching, get it back
# (byte-compared), check, info.
exercise() {
    nvs follow $3 >/tmp/follow.out 2>&1 &
    follower=$!
    sleep 1
    show $2-PUT nvs put $3 t /tmp/in7
    say "RC $1-put $?"
    i=0
    until grep -q "^0	t	1	" /tmp/follow.out || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
    kill $follower 2>/dev/null
    wait $follower 2>/dev/null
    sed "s/^/NVS $2-FOLLOW /" /tmp/follow.out
    grep -q "^0	t	1	" /tmp/follow.out
    say "RC $1-follow $?"
    nvs get $3 t -o /tmp/out7 >/tmp/get.err 2>&1
    rc=$?
    sed "s/^/NVS $2-GET /" /tmp/get.err
    cmp -s /tmp/in7 /tmp/out7 || rc=99
    say "RC $1-get $rc"
    show $2-CHECK nvs check $3
    say "RC $1-check $?"
    show $2-INFO nvs info $3
    say "RC $1-info $?"
}

if [ "$mode" = setup ]; then
    # fsdax: a pool file on ext4 -o dax.
    show FS-CREATE nvs create $FS --size 64M
    say "RC fs-create $?"
    gen 7 >/tmp/in7
    exercise fs FS $FS
    # Which page size a put's stores fault in with: the kernel's fs_dax trace events
    # count 2 MiB (PMD) faults that mapped (NOPAGE) or fell back to 4 KiB pages.
    t=/sys/kernel/tracing
    mount -t tracefs nodev $t 2>/dev/null
    if [ -w $t/events/fs_dax/dax_pmd_fault_done/enable ]; then
        echo 1 >$t/events/fs_dax/dax_pmd_fault_done/enable
        echo 1 >$t/events/fs_dax/dax_pte_fault_done/enable
        head -c $((16 << 20)) /dev/zero | tr '\0' x >/tmp/big
        nvs put $FS big /tmp/big >/dev/null 2>&1
        echo 0 >$t/events/fs_dax/enable
        say "FAULTS pmd=$(grep -c dax_pmd_fault_done $t/trace) pmd_mapped=$(grep dax_pmd_fault_done $t/trace | grep -c NOPAGE)" \
            "pmd_fallback=$(grep dax_pmd_fault_done $t/trace | grep -c FALLBACK) pte=$(grep -c dax_pte_fault_done $t/trace)"
        grep dax_pmd_fault_done $t/trace | head -3 | sed 's/^/NVS FAULTLINE /'
    else
        say "FAULTS no fs_dax trace events in this kernel"
    fi
    # devdax: the pool takes the device (no --size: the device's, from sysfs).
    show DAX-CREATE nvs create $DAX
    say "RC dax-create $?"
    exercise dax DAX $DAX
    # Refusals: a device that holds a pool, a size the device cannot hold, a device a
    # live writer holds. Each must fail (exit 2) and leave the pool as it was.
    show DAX-RECREATE nvs create $DAX
    say "RC dax-recreate $?"
    show DAX-TOOBIG nvs create $DAX --replace --size 1T
    say "RC dax-toobig $?"
    nvs hold $DAX sleep 30 >/dev/null 2>&1 &
    holder=$!
    sleep 3 # the holder has the device's writer locks by then (even under TCG)
    show DAX-INUSE nvs put $DAX t /tmp/in7
    say "RC dax-inuse $?"
    kill $holder 2>/dev/null
    wait $holder 2>/dev/null
    show DAX-AFTER nvs get $DAX t -o /tmp/out7e
    cmp -s /tmp/in7 /tmp/out7e
    say "RC dax-after $?"
fi

# Verify both pools: nvs check, then every version of "o": its counter k (first line)
# and the SHA-256 of its bytes (run.sh compares it with the generator's for that k; few
# processes per object: under TCG every fork and exec is slow).
verify() {
    for pool in fs dax; do
        if [ $pool = fs ]; then path=$FS; else path=$DAX; fi
        show CHECK-$pool nvs check $path
        say "RC check-$pool $?"
        line=$(nvs ls $path 2>/dev/null | grep '^o ')
        versions=$(echo "$line" | sed -n 's/^o  *versions=\([0-9]*\) .*/\1/p')
        latest=$(echo "$line" | sed -n 's/^o  *versions=[0-9]* latest=\([0-9]*\) .*/\1/p')
        say "VERSIONS $pool ${versions:-0} ${latest:-0}"
        if [ $pool = fs ]; then v=$((fsfrom + 1)); else v=$((daxfrom + 1)); fi
        while [ -n "$latest" ] && [ $v -le "$latest" ]; do
            if nvs get $path o --version $v -o /tmp/g 2>/tmp/g.err; then
                first=
                read -r first </tmp/g
                k=${first#k=}
                sum=$(sha256sum /tmp/g)
                say "OBJ $pool $v ${k:-?} ${sum%% *} ."
            else
                say "OBJ $pool $v ? GETFAIL $(head -c 300 /tmp/g.err | tr '\n' ' ') ."
            fi
            v=$((v + 1))
        done
        say "LATEST $pool ${latest:-0}"
    done
}

if [ "$mode" = put ] || [ "$mode" = verify ]; then
    verify
fi
say "READY"

if [ "$mode" = put ]; then
    k=$k0
    end=$((k0 + nputs))
    while [ $k -lt $end ]; do
        if [ $((k % 2)) = 0 ]; then pool=fs; path=$FS; else pool=dax; path=$DAX; fi
        gen $k >/tmp/in
        v=$(nvs put $path o /tmp/in 2>/tmp/put.err) || fail "nvs put $path (k=$k): $(cat /tmp/put.err)"
        say "ACK $pool $k $v ."
        k=$((k + 1))
    done
fi

if [ "$mode" = verify ]; then
    # Speed on the fsdax file system, one bench run per durability: dax (MAP_SYNC, no
    # msync) and msync at every fence; PMDK's pmem_memcpy_persist runs beside both.
    for d in dax msync; do
        say "BENCHSTART $d"
        nvs --durability $d bench --dir /mnt --sync-dir /tmp --quick --trials 3 --clock wall \
            --only nvs_put,nvs_put_nosum,nvs_put_batch64,pmem_memcpy_persist --json /tmp/bench-$d.json >/tmp/bench.out 2>&1 ||
            fail "nvs bench --durability $d on /mnt: $(tail -5 /tmp/bench.out | tr '\n' ' ')"
        grep '"kind": "throughput"' /tmp/bench-$d.json | sed "s/^/NVS BENCH $d /"
    done
fi

umount /mnt || fail "umount /mnt"
say "DONE"
sync
poweroff -f
sleep 10
