//! nvs-core inside a unikernel (nvs-kernel), killed and recovered: boot it under qemu
//! with its pool on an emulated NVDIMM backed by a /dev/shm file, SIGKILL qemu at random
//! moments, boot again, and hold every boot's recovery to what the serial line
//! acknowledged before. Then one boot runs under `nvs hold POOL --` (the host sees the
//! live guest as the pool's writer): host `nvs put` and `nvs reclaim` are refused and
//! change nothing, and `nvs follow` follows the guest to the end of its run. Then the
//! host's own library and `nvs check`/`nvs get` read the guest's pool: one format, two
//! worlds.
//!
//! Needs qemu-system-x86_64 and the x86_64-unknown-none target, so it is ignored by
//! default; run it with
//! `cargo test --release -p nvs-cli --test unikernel -- --ignored --nocapture`.
//! `NVS_QEMU_ACCEL=kvm` uses KVM (default TCG: KVM nested in a VM can be far slower),
//! `NVS_KILLS=N` sets the number of kills (default 24), `NVS_SEED` the random seed,
//! `NVS_KEEP_POOL=1` keeps the pool file (its path is printed) for inspection.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "../../nvs-kernel/src/content.rs"]
mod content;
use content::{byte_of, len_of, NAMES};

/// Retention in the kernel keeps this many newest versions of a name (its `KEEP`).
const KEEP: u64 = 4;
const PMEM_MIB: u64 = 64;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace").to_path_buf()
}

/// Build the kernel (its own workspace, target x86_64-unknown-none) into target/kernel.
fn build_kernel() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    let target = exe.ancestors().nth(3).expect("target dir").join("kernel");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // From its directory: its .cargo/config.toml picks the target and the code model.
    let status = Command::new(cargo)
        .args(["build", "--release", "-q"])
        .current_dir(workspace().join("nvs-kernel"))
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .status()
        .expect("run cargo");
    assert!(status.success(), "building nvs-kernel failed (is the x86_64-unknown-none target installed?)");
    target.join("x86_64-unknown-none/release/nvs-kernel")
}

struct Boot {
    lines: Vec<(Duration, String)>,
    /// qemu's exit status, if it exited on its own.
    status: Option<i32>,
}

/// When a boot is killed.
#[derive(Clone, Copy, Debug)]
enum Kill {
    /// This long after qemu started (in the firmware, or during recovery).
    AfterStart(Duration),
    /// This long after the kernel said `ready` (while it puts).
    AfterReady(Duration),
    /// Never: wait for the kernel to exit.
    Never,
}

/// Boot the kernel and kill qemu (SIGKILL) as `kill` says.
fn boot(kernel: &Path, pool: &Path, append: &str, kill: Kill) -> Boot {
    boot_with(kernel, pool, append, kill, None)
}

/// [`boot`]; with `held`, qemu runs under `nvs hold POOL --` (the host sees the guest
/// as the pool's writer) and `held` runs once when the kernel says `ready` (never
/// killed then: the kernel must end on its own).
fn boot_with(kernel: &Path, pool: &Path, append: &str, kill: Kill, mut held: Option<&mut dyn FnMut()>) -> Boot {
    let accel = std::env::var("NVS_QEMU_ACCEL").unwrap_or_else(|_| "tcg".into());
    let mut cmd = match held {
        Some(_) => {
            let mut c = Command::new(env!("CARGO_BIN_EXE_nvs"));
            c.arg("hold").arg(pool).args(["--", "qemu-system-x86_64"]);
            c
        }
        None => Command::new("qemu-system-x86_64"),
    };
    let mut child = cmd
        .args(["-accel", &accel, "-machine", "pc,nvdimm=on", "-m", "256M,slots=2,maxmem=1G"])
        .arg("-object")
        .arg(format!("memory-backend-file,id=pm,share=on,mem-path={},size={PMEM_MIB}M", pool.display()))
        .args(["-device", "nvdimm,memdev=pm", "-nic", "none", "-nographic", "-no-reboot"])
        .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=4", "-kernel"])
        .arg(kernel)
        .args(["-append", append])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run qemu-system-x86_64 (Debian: apt-get install qemu-system-x86)");
    let start = Instant::now();
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        // Whole lines only: the kill can cut the last one short ("ack temperature 62"
        // of "ack temperature 6205"), and a cut line says nothing.
        let mut out = BufReader::new(out);
        let mut line = Vec::new();
        while out.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) && line.ends_with(b"\n") {
            let text = String::from_utf8_lossy(&line).trim_end_matches(['\n', '\r']).to_string();
            if tx.send((start.elapsed(), text)).is_err() {
                break;
            }
            line.clear();
        }
    });
    let mut lines = Vec::new();
    let mut deadline = match kill {
        Kill::AfterStart(d) => Some(start + d),
        Kill::AfterReady(_) => Some(start + Duration::from_secs(120)),
        Kill::Never => None,
    };
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s.code();
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
            break None;
        }
        assert!(start.elapsed() < Duration::from_secs(180), "the kernel did not exit within 180 s");
        if let Ok((t, l)) = rx.recv_timeout(Duration::from_millis(2)) {
            if let (Kill::AfterReady(d), true) = (kill, l.contains("ready")) {
                deadline = Some(Instant::now() + d);
            }
            if l.contains("ready") {
                if let Some(f) = held.take() {
                    f();
                }
            }
            lines.push((t, l));
        }
    };
    reader.join().expect("reader");
    // The serial output starts after the firmware's: keep from the kernel's first line.
    lines.extend(rx);
    if let Some(i) = lines.iter().position(|(_, l)| l.contains("pmem ")) {
        let (t, l) = lines[i].clone();
        lines[i] = (t, l[l.find("pmem ").unwrap_or(0)..].to_string());
        lines.drain(..i);
    } else {
        lines.clear();
    }
    Boot { lines, status }
}

/// What the host knows of each name: the highest version known committed.
type Known = HashMap<&'static str, u64>;

/// Hold a boot's `have` lines to `known`; returns the boot-to-ready time. The kernel
/// checked every recovered byte itself (a `bad` line otherwise).
fn check_recovery(boot: &Boot, known: &mut Known) -> Option<Duration> {
    for (_, l) in &boot.lines {
        assert!(!l.starts_with("bad") && !l.starts_with("panic"), "the kernel says: {l}");
    }
    let ready = boot.lines.iter().find(|(_, l)| l.starts_with("ready"))?.0;
    let mut in_flight = 0;
    for name in NAMES {
        let have = boot
            .lines
            .iter()
            .find_map(|(_, l)| l.strip_prefix("have ").and_then(|r| r.strip_prefix(name)).map(str::trim))
            .unwrap_or_else(|| panic!("no have line for {name}"));
        let k = known.get(name).copied().unwrap_or(0);
        let (lo, hi) = if have == "none" {
            (0, 0)
        } else {
            let mut it = have.split(' ').map(|x| x.parse::<u64>().expect("a version"));
            (it.next().expect("lo"), it.next().expect("hi"))
        };
        assert!(hi >= k, "{name}: version {k} was acknowledged (or recovered) but the boot recovered up to {hi}");
        assert!(hi <= k + 1, "{name}: recovered {hi}, but nothing above {} was ever put", k + 1);
        in_flight += (hi == k + 1) as u32;
        if hi > 0 {
            // Retention may release a version only once KEEP newer ones exist.
            assert!(
                lo <= hi.saturating_sub(KEEP - 1).max(1),
                "{name}: recovered {lo}..={hi}, lost one of the {KEEP} newest"
            );
        }
        known.insert(name, hi);
    }
    assert!(in_flight <= 1, "more than one put was in flight at the kill");
    Some(ready)
}

/// Record the boot's acknowledgements: each the next version of its name.
fn record_acks(boot: &Boot, known: &mut Known) -> usize {
    let mut n = 0;
    for (_, l) in &boot.lines {
        let Some(rest) = l.strip_prefix("ack ") else { continue };
        let (name, v) = rest.split_once(' ').unwrap_or_else(|| panic!("a bad ack line: {l}"));
        let v = v.parse::<u64>().unwrap_or_else(|_| panic!("a bad ack line: {l}"));
        let name = NAMES.iter().copied().find(|x| *x == name).unwrap_or_else(|| panic!("unknown name in {l}"));
        let k = known.entry(name).or_insert(0);
        assert_eq!(v, *k + 1, "{name}: ack of {v} after {k}");
        *k = v;
        n += 1;
    }
    n
}

#[test]
#[ignore = "needs qemu-system-x86_64 and the x86_64-unknown-none target (ci.sh runs it)"]
fn killed_and_recovered_under_qemu_then_read_by_the_host() {
    let kernel = build_kernel();
    let kernel_bytes = std::fs::metadata(&kernel).expect("kernel").len();
    let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let pool = dir.join(format!("nvs-kernel-test-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&pool);
    std::fs::File::create(&pool).and_then(|f| f.set_len(PMEM_MIB << 20)).expect("pool file");
    let kills: usize = std::env::var("NVS_KILLS").ok().and_then(|s| s.parse().ok()).unwrap_or(24);
    let mut seed: u64 = std::env::var("NVS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    }) | 1;
    println!(
        "kernel {} ({kernel_bytes} bytes), pool {}, {kills} kills, NVS_SEED={seed}",
        kernel.display(),
        pool.display()
    );
    let mut known = Known::new();
    let (mut acks, mut ready_times, mut before_ready) = (0, Vec::new(), 0);
    for k in 0..kills {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // One kill in four at 50 ms to 1 s after qemu started (in the firmware or during
        // recovery), the others 0 to 800 ms after the kernel was ready (while it puts).
        let kill = match seed % 4 {
            0 => Kill::AfterStart(Duration::from_millis(50 + (seed >> 8) % 950)),
            _ => Kill::AfterReady(Duration::from_millis((seed >> 8) % 800)),
        };
        let b = boot(&kernel, &pool, "", kill);
        match check_recovery(&b, &mut known) {
            Some(t) => ready_times.push(t),
            None => before_ready += 1,
        }
        let n = record_acks(&b, &mut known);
        acks += n;
        let reclaims = b.lines.iter().filter(|(_, l)| l.starts_with("reclaim")).count();
        println!("kill {:2} {kill:?}: {n:5} acks, {reclaims} reclaims, known {:?}", k + 1, sorted(&known));
    }
    // A live guest beside the host: qemu under `nvs hold`. Once it is ready, a follower
    // starts and host writers try the pool: refused (the guest's pool unharmed: every
    // later recovery is held to the acks). The guest ends its run (puts=N closes its
    // lane); the follower follows it to that end and exits 0.
    let nvs = env!("CARGO_BIN_EXE_nvs");
    let input = pool.with_extension("input");
    std::fs::write(&input, b"host bytes").expect("input");
    let mut follower = None;
    let mut refused = Vec::new();
    let mut on_ready = || {
        let f = Command::new(nvs).arg("follow").arg(&pool).args(["--timeout", "60"]).stdout(Stdio::piped()).spawn();
        follower = Some(f.expect("nvs follow"));
        for args in [
            vec!["put".as_ref(), pool.as_os_str(), "temperature".as_ref(), input.as_os_str()],
            vec!["reclaim".as_ref(), pool.as_os_str(), "--keep".as_ref(), "1".as_ref()],
        ] {
            let o = Command::new(nvs).args(&args).output().expect("nvs");
            refused.push((
                args[0].to_string_lossy().into_owned(),
                o.status.code(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            ));
        }
    };
    let live = boot_with(&kernel, &pool, "puts=3000", Kill::Never, Some(&mut on_ready));
    assert_eq!(live.status, Some(1), "the held guest ends its run (hold passes on qemu's status): {:?}", live.lines);
    check_recovery(&live, &mut known).expect("the held guest got ready");
    let live_acks = record_acks(&live, &mut known);
    assert!(live.lines.iter().any(|(_, l)| l == "closed"), "the guest closed its lane");
    for (cmd, code, err) in &refused {
        assert_eq!(*code, Some(2), "host {cmd} beside the live guest: {err}");
        assert!(err.contains("locked by another writer"), "host {cmd}: {err}");
    }
    let followed = follower.expect("the follower started").wait_with_output().expect("follower");
    assert_eq!(
        followed.status.code(),
        Some(0),
        "the follower of the live guest: {}",
        String::from_utf8_lossy(&followed.stderr)
    );
    let seen = String::from_utf8_lossy(&followed.stdout);
    for name in NAMES {
        let want = format!("\t{name}\t{}\t", known[name]);
        assert!(seen.lines().any(|l| l.contains(&want)), "the follower saw {name} v{} (the guest's last)", known[name]);
    }
    println!(
        "live guest under nvs hold: {live_acks} acks; host put and reclaim refused; the follower printed {} objects and \
         ended with the guest's stream",
        seen.lines().count()
    );
    acks += live_acks;

    // A pool larger than the NVDIMM (pmem_mib past the backing file's size): refused at
    // boot (exit 9, qemu's 19), before the pool is touched.
    let before = std::fs::read(&pool).expect("pool");
    let big = boot(&kernel, &pool, &format!("pmem_mib={} puts=0", 2 * PMEM_MIB), Kill::Never);
    assert_eq!(big.status, Some(19), "pmem_mib larger than the NVDIMM: {:?}", big.lines);
    assert!(
        big.lines.iter().any(|(_, l)| l.contains("bad pmem_mib=128 but the NVDIMM holds 64 MiB")),
        "{:?}",
        big.lines
    );
    assert!(std::fs::read(&pool).expect("pool") == before, "the refused boot changed the pool");

    // A last boot checks and exits: puts=0.
    let last = boot(&kernel, &pool, "puts=0", Kill::Never);
    assert_eq!(last.status, Some(1), "the checking boot exits 0 through isa-debug-exit: {:?}", last.lines);
    let t = check_recovery(&last, &mut known).expect("the checking boot got ready");
    ready_times.push(t);

    // The host reads the guest's pool: the library, then the tool.
    let p = nvs_std::FilePool::open(&pool, nvs_std::Access::ReadOnly).expect("the host opens the guest's pool");
    let mut versions_checked = 0;
    for (n, name) in NAMES.iter().enumerate() {
        let hi = known[name];
        let versions: Vec<u64> = p.versions(name).expect("versions").map(|i| i.version).collect();
        assert_eq!(versions.last().copied(), Some(hi), "{name}");
        for v in versions {
            let got = p.get_vec(name, v).expect("get");
            let want: Vec<u8> = (0..len_of(n, v)).map(|i| byte_of(n, v, i)).collect();
            assert_eq!(got, want, "{name} v{v} read by the host");
            versions_checked += 1;
        }
    }
    drop(p);
    let check = Command::new(nvs).arg("check").arg(&pool).output().expect("nvs check");
    assert!(check.status.success(), "nvs check: {}", String::from_utf8_lossy(&check.stderr));
    let hi = known["temperature"];
    let get = Command::new(nvs).arg("get").arg(&pool).arg("temperature").args(["--version", &hi.to_string()]).output();
    let get = get.expect("nvs get");
    assert!(get.status.success(), "nvs get: {}", String::from_utf8_lossy(&get.stderr));
    assert_eq!(get.stdout, (0..len_of(0, hi)).map(|i| byte_of(0, hi, i)).collect::<Vec<u8>>());
    ready_times.sort();
    println!(
        "{kills} kills ({before_ready} before the kernel was ready), {acks} acknowledged puts, every recovery held; \
         the host checked {versions_checked} versions byte-exact; nvs check: {}; boot to recovered (qemu start to \
         ready): median {} ms, max {} ms; kernel {kernel_bytes} bytes",
        String::from_utf8_lossy(&check.stdout).lines().last().unwrap_or(""),
        ready_times[ready_times.len() / 2].as_millis(),
        ready_times.last().map_or(0, |t| t.as_millis()),
    );
    if std::env::var_os("NVS_KEEP_POOL").is_some() {
        println!("kept the pool: {}", pool.display());
    } else {
        let _ = std::fs::remove_file(&pool);
    }
    let _ = std::fs::remove_file(&input);
}

fn sorted(k: &Known) -> Vec<(&str, u64)> {
    let mut v: Vec<_> = k.iter().map(|(n, v)| (*n, *v)).collect();
    v.sort();
    v
}
