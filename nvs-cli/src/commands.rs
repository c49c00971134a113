//! The pool commands: create, put, get, ls, info, check, close, reclaim. Each opens the pool it needs
//! (writers: `create`, `put`; everything else read-only, so it runs alongside a live
//! writer), and writes its output to stdout in one piece, reporting a failed write
//! instead of panicking.

use super::json::Obj;
use super::output::{eprintln_note, same_file, stdout, stdout_bytes};
use super::size::human;
use super::CliError;
use nvs_core::Key;
use nvs_core::{CheckpointUse, Object, StoreKind, NAME_MAX};
use nvs_std::{show_name, Access, CreateOptions, Durability, FilePool};
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Inputs at least this large get a progress bar while `put` reads them (on a terminal).
const PROGRESS_MIN: u64 = 16 << 20;

/// How many versions `ls` shows on a name's line before summarising the rest.
const LS_SHOWN: usize = 8;

pub fn create(pool: &Path, size: Option<u64>, opts: CreateOptions) -> Result<(), CliError> {
    let size = match size {
        Some(size) => size,
        None => nvs_std::dax_device_len(pool).ok_or_else(|| {
            CliError::Usage(format!(
                "{}: --size is needed (only a /dev/dax device has a size of its own)",
                pool.display()
            ))
        })?,
    };
    let p = FilePool::create(pool, size, &opts)?;
    let sb = p.layout();
    stdout(&format!(
        "created {}: {} in {} segments of {}, {} lanes{}, payload checksum {}, durability {} \
         (chosen at each open, not kept in the pool)\n",
        pool.display(),
        human(sb.pool_len),
        sb.segment_count,
        human(sb.segment_len),
        sb.lanes_max,
        if sb.lane_names { " with names of their own" } else { "" },
        on_off(sb.payload_checksum),
        p.media().durability(),
    ))
}

#[allow(clippy::too_many_arguments)] // one per `nvs put` option
pub fn put(
    pool: &Path,
    name: &OsStr,
    file: Option<&Path>,
    lane: Option<u32>,
    version: Option<u64>,
    reopen: bool,
    delta: bool,
    meta: &[String],
    durability: Option<Durability>,
) -> Result<(), CliError> {
    // Metadata first: a malformed pair is refused before the pool is opened.
    let mut m = nvs_std::Meta::new();
    for pair in meta {
        let (k, v) = pair.split_once('=').ok_or_else(|| CliError::Usage(format!("--meta {pair:?}: want KEY=VALUE")))?;
        m = m.set(k, v);
    }
    let meta = m.to_bytes().map_err(|e| CliError::Usage(format!("--meta: {e}")))?;
    // The input is opened before the pool: opening a FIFO waits for its writer, and must
    // not do so while holding the pool's writer lock.
    let input = open_input(file)?;
    let name = name.as_bytes();
    let (mut p, lane) = open_to_put(pool, name, lane, durability)?;
    if !reopen && p.lane_info(lane).is_some_and(|i| i.closed) {
        return Err(CliError::Usage(format!(
            "{}: lane {lane}'s stream was ended (nvs close, or its writer's close), and its followers saw the \
             end: --reopen starts it again",
            pool.display()
        )));
    }
    let bytes = read_input(input, p.max_object_bytes(name.len()))?;
    // A spinner while a big mapped input is stored (a read one had its bar already).
    let spin = (matches!(bytes, Input::Mapped(_)) && bytes.len() as u64 >= PROGRESS_MIN)
        .then(|| super::progress::spinner(&format!("putting {}", human(bytes.len() as u64))));
    if delta {
        let r = put_delta(&mut p, lane, name, &bytes);
        spin.inspect(|s| s.finish_and_clear());
        return r;
    }
    let object = Object::new(name, &bytes).meta(&meta);
    let v = p.put(lane, version.map_or(object, |v| object.version(v)));
    spin.inspect(|s| s.finish_and_clear());
    let v = v?.version;
    detach(&mut p);
    // Printed only now: the put returned, so the commit is durable (for the mode in use).
    committed(pool, name, v)
}

/// Open `pool` to put `name` on `lane`: in a pool with lane names, that lane alone, beside
/// writers of other lanes in other processes — by default the lane that holds `name`
/// already, lane 0 for a new one (a producer's series stays on one lane: `nvs put` took
/// the lowest free lane, and two producers of one name got the same versions twice, on
/// two lanes); a name several lanes hold needs `--lane`. Otherwise as the pool's one
/// writer (lane 0 by default).
fn open_to_put(
    pool: &Path,
    name: &[u8],
    lane: Option<u32>,
    d: Option<Durability>,
) -> Result<(FilePool, u32), CliError> {
    // Without --lane: the name's lane (lane 0 for a new name), waited for while another
    // `nvs put` writes it (each is brief; one reading a pipe for longer is an error after
    // LANE_WAIT, naming the lock).
    let (lane, wait) = match lane {
        Some(l) => (l, false),
        None => (lane_holding(pool, name)?.unwrap_or(0), true),
    };
    let deadline = std::time::Instant::now() + LANE_WAIT;
    loop {
        match FilePool::open_lanes_with(pool, Some(&[lane]), d) {
            Ok(p) => return Ok((p, lane)),
            Err(e) if e.core() == Some(nvs_core::Error::NeedsLaneNames) => {
                return Ok((FilePool::open_with(pool, Access::ReadWrite, d)?, lane))
            }
            Err(nvs_std::Error::Locked { held: nvs_std::Held::Lane(_), .. })
                if wait && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// How long `nvs put` without `--lane` waits for its name's lane, in a pool with lane
/// names, while another process writes it.
const LANE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// In a pool with lane names, the one lane holding `name` (`None`: none holds it, or the
/// pool has no lane names); several: a usage error naming them.
fn lane_holding(pool: &Path, name: &[u8]) -> Result<Option<u32>, CliError> {
    let Ok(r) = FilePool::open(pool, Access::ReadOnly) else { return Ok(None) }; // the put says why
    if !r.layout().lane_names {
        return Ok(None);
    }
    let holders: Vec<u32> = (0..r.layout().lanes_max).filter(|&l| r.latest(Key::on(l, name)).is_ok()).collect();
    match holders.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        many => Err(CliError::Usage(format!(
            "{}: lanes {many:?} each hold {}: name one with --lane",
            pool.display(),
            nvs_std::show_name(name)
        ))),
    }
}

/// A clean exit: a detach marker, so that a follower beside a series of `nvs put` runs
/// waits for the next one instead of reporting the writer gone. Best effort, after the
/// put committed: a pool too full for the marker only costs that (the put stands).
fn detach(p: &mut FilePool) {
    let _ = p.detach();
}

/// Print a committed version; if stdout cannot take it, say on stderr which version was
/// committed (exit 4), so that a script does not store it again.
fn committed(pool: &Path, name: &[u8], version: u64) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(format!("{version}\n").as_bytes()).and_then(|()| out.flush()).map_err(|source| {
        let what = format!("{}: {}", pool.display(), show_name(name));
        CliError::CommittedUnreported { what, version, source }
    })
}

/// `put --delta`: compare with the latest version chunk by chunk, store what differs.
fn put_delta(p: &mut FilePool, lane: u32, name: &[u8], bytes: &[u8]) -> Result<(), CliError> {
    let chunk = p.delta_options().chunk_bytes as usize;
    let (parent, changes) = match p.latest(Key::on(lane, name)) {
        Ok(latest) => {
            let old = p.get_vec(Key::on(lane, name), latest)?;
            let changed: Vec<(u64, u64)> = if old.len() == bytes.len() {
                let pairs = old.chunks(chunk).zip(bytes.chunks(chunk)).enumerate();
                pairs.filter(|(_, (a, b))| a != b).map(|(i, (_, b))| ((i * chunk) as u64, b.len() as u64)).collect()
            } else {
                vec![] // another length: a full version whatever the ranges say
            };
            (latest, changed)
        }
        Err(e) if e.core() == Some(nvs_core::Error::NotFound) => (0, vec![]),
        Err(e) => return Err(e.into()),
    };
    let put = p.put(lane, Object::new(name, bytes).delta(parent, &changes))?;
    detach(p);
    let kind = if put.delta { "delta" } else { "full" };
    committed(p.path(), name, put.version)?;
    eprintln_note(&format!("{kind}: stored {} of {} bytes", put.stored_bytes, bytes.len()));
    Ok(())
}

pub fn get(
    pool: &Path,
    name: &OsStr,
    version: Option<u64>,
    lane: Option<u32>,
    output: Option<&Path>,
    durability: Option<Durability>,
) -> Result<(), CliError> {
    let p = FilePool::open_with(pool, Access::ReadOnly, durability)?;
    let name = name.as_bytes();
    let not_found = |e: nvs_std::Error| match (e.core(), version) {
        (Some(nvs_core::Error::NotFound), None) => {
            CliError::Usage(format!("{}: no object named {}", pool.display(), show_name(name)))
        }
        (Some(nvs_core::Error::NotFound), Some(v)) => {
            CliError::Usage(format!("{}: no version {v} of {}", pool.display(), show_name(name)))
        }
        (Some(nvs_core::Error::AmbiguousName { lanes }), _) => CliError::Usage(format!(
            "{}: {lanes} lanes hold {} (the pool has lane names): pick one with --lane",
            pool.display(),
            show_name(name)
        )),
        _ => CliError::Pool(e),
    };
    let key = Key::new(lane, name);
    let version = match version {
        Some(v) => v,
        None => p.latest(key).map_err(not_found)?,
    };
    // A new output file is written in place: the verified copy goes straight into its
    // mapping (no copy in memory first), and on any failure the file is removed.
    if let Some(path) = output.filter(|o| std::fs::symlink_metadata(o).is_err()) {
        let info = p.stat(key, version).map_err(not_found)?;
        if let Some(done) = get_into_new_file(path, info.len_bytes, |buf| p.get(key, version, buf).map_err(not_found)) {
            return done;
        }
    }
    let bytes = p.get_vec(key, version).map_err(not_found)?;
    // The output may be the pool under another name (a symlink, a hard link,
    // /proc/self/fd/N, stdout redirected onto it): refuse by identity, not by path.
    let out = output.map_or(Path::new("/proc/self/fd/1"), |o| o);
    if same_file(pool, out) {
        let shown = output.map_or("stdout".to_string(), |o| o.display().to_string());
        return Err(CliError::Usage(format!(
            "{}: {shown} is the pool itself; refusing to write onto it",
            pool.display()
        )));
    }
    match output {
        Some(path) => replace_file(path, &bytes),
        None => stdout_bytes(&bytes),
    }
}

/// Write `bytes` as the whole content of `path`. An existing regular file (or the one a
/// symlink names) is replaced whole: the bytes go to a new file beside it (its
/// permissions copied), renamed over it once written, so a failure (a full file system)
/// leaves it as it was. Anything else (a device, a FIFO, /proc/self/fd/N), or a file in a
/// directory where no new file can be made, is written in place.
fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let io = |e| CliError::io(format!("cannot write {}", path.display()), e);
    let target = std::fs::canonicalize(path).ok().filter(|t| t.metadata().is_ok_and(|m| m.is_file()));
    let Some(target) = target else { return std::fs::write(path, bytes).map_err(io) };
    let perms = target.metadata().map_err(io)?.permissions();
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".nvs-get-{}", std::process::id()));
    let tmp = target.with_file_name(name);
    let Ok(mut f) = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp) else {
        return std::fs::write(path, bytes).map_err(io);
    };
    let written =
        f.write_all(bytes).and_then(|()| f.set_permissions(perms)).and_then(|()| std::fs::rename(&tmp, &target));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(io)
}

/// Create `path` (which must not exist), reserve `len` bytes for it and `get` the object
/// into its mapping. `None` if the file system cannot reserve the bytes up front (the
/// caller then writes the file the usual way; nothing is left behind); on any other
/// failure the new file is removed.
fn get_into_new_file(
    path: &Path,
    len: u64,
    get: impl FnOnce(&mut [u8]) -> Result<usize, CliError>,
) -> Option<Result<(), CliError>> {
    use std::os::fd::AsRawFd;
    let io = |e| CliError::io(format!("cannot write {}", path.display()), e);
    let f = match std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(path) {
        Ok(f) => f,
        Err(e) => return Some(Err(io(e))),
    };
    // A SIGBUS (the pool shrank under the copy) removes it too.
    let _sigbus = super::sigbus::output_created(path);
    let remove = |r: Result<usize, CliError>| {
        if r.is_err() {
            let _ = std::fs::remove_file(path);
        }
        r.map(|_| ())
    };
    if len == 0 {
        return Some(remove(get(&mut [])));
    }
    // Reserved blocks: a mapping of a file whose file system runs out of room would
    // raise SIGBUS at the first page it cannot back.
    // SAFETY: plain system call on a descriptor `f` keeps open.
    let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, len as libc::off_t) };
    match rc {
        0 => {}
        libc::EOPNOTSUPP | libc::EINVAL => {
            let _ = std::fs::remove_file(path);
            return None;
        }
        rc => return Some(remove(Err(io(std::io::Error::from_raw_os_error(rc))))),
    }
    // SAFETY: a new file only this process knows of (created just above), of `len`
    // bytes with its blocks reserved; nothing else maps or truncates it.
    match unsafe { memmap2::MmapMut::map_mut(&f) } {
        Ok(mut map) => Some(remove(get(&mut map))),
        Err(e) => Some(remove(Err(io(e)))),
    }
}

pub fn ls(pool: &Path, long: bool, json: bool, durability: Option<Durability>) -> Result<(), CliError> {
    let p = FilePool::open_with(pool, Access::ReadOnly, durability)?;
    let mut out = String::new();
    let mut buf = [0u8; NAME_MAX];
    for n in p.names() {
        let name = p.name_bytes(n.id, &mut buf);
        if name.is_empty() {
            continue; // released by a writer's retention since this pool was opened
        }
        let versions: Vec<_> = p.versions_of(n.id).collect();
        if json {
            for v in &versions {
                out += &Obj::new()
                    .name("name", name)
                    .num("version", v.version)
                    .num("len_bytes", v.len_bytes)
                    .num("stored_bytes", v.stored_bytes)
                    .num("delta_depth", v.depth as u64)
                    .num("lane", v.lane as u64)
                    .num("seq", v.seq)
                    .str("meta", &meta_text(&p, name, v))
                    .line();
            }
            continue;
        }
        let total: u64 = versions.iter().map(|v| v.len_bytes).sum();
        let stored: u64 = versions.iter().map(|v| v.stored_bytes).sum();
        let lane = n.lane.map_or(String::new(), |l| format!("  lane={l}"));
        let _ = write!(
            out,
            "{}{lane}  versions={} latest={} bytes={} stored={}",
            show_name(name),
            n.versions,
            n.latest,
            total,
            stored
        );
        if long {
            out.push('\n');
            for v in &versions {
                let kind = if v.depth == 0 { "full".to_string() } else { format!("delta depth {}", v.depth) };
                let _ = write!(
                    out,
                    "  v{}  {} bytes  {kind}  stored {}  lane {} seq {}",
                    v.version, v.len_bytes, v.stored_bytes, v.lane, v.seq
                );
                if v.meta_len > 0 {
                    let _ = write!(out, "  meta {}", meta_text(&p, name, v).escape_default());
                }
                out.push('\n');
            }
            continue;
        }
        let size = |v: &nvs_core::ObjectInfo| match v.depth {
            0 => format!("v{}:{}", v.version, v.len_bytes),
            _ => format!("v{}:{}(delta {})", v.version, v.len_bytes, v.stored_bytes),
        };
        let shown: Vec<String> = versions.iter().rev().take(LS_SHOWN).rev().map(size).collect();
        let more = versions.len().saturating_sub(LS_SHOWN);
        let _ = write!(out, "  sizes=");
        if more > 0 {
            let _ = write!(out, "(+{more} earlier) ");
        }
        let _ = writeln!(out, "{}", shown.join(" "));
    }
    stdout(&out)
}

/// An object's metadata as text (lossy UTF-8; empty if none or gone).
fn meta_text(p: &FilePool, name: &[u8], v: &nvs_core::ObjectInfo) -> String {
    if v.meta_len == 0 {
        return String::new();
    }
    p.meta(Key::on(v.lane, name), v.version).map(|m| String::from_utf8_lossy(&m).into_owned()).unwrap_or_default()
}

pub fn info(pool: &Path, stats: bool, json: bool, durability: Option<Durability>) -> Result<(), CliError> {
    let p = FilePool::open_with(pool, Access::ReadOnly, durability)?;
    let sb = p.layout();
    let st = p.stats();
    let m = p.media();
    if json {
        let mut o = Obj::new()
            .str("kind", "pool")
            .str("pool", &pool.display().to_string())
            .num("format_version", sb.format_version as u64)
            .str("pool_id", &format!("{:#018x}", sb.pool_id))
            .num("pool_len", sb.pool_len)
            .num("file_len", nvs_core::Media::len(m) as u64)
            .str("backing", &m.backing().to_string())
            .num("segment_len", sb.segment_len)
            .num("segment_count", sb.segment_count as u64)
            .num("segments_used", st.segments_used as u64)
            .num("segments_free", p.free_segments() as u64)
            .num("lanes_max", sb.lanes_max as u64)
            .num("lanes_in_use", st.lanes as u64)
            .bool("payload_checksum", sb.payload_checksum)
            .bool("deltas", sb.deltas)
            .bool("lane_names", sb.lane_names)
            .str("durability", &m.durability().to_string())
            .num("units", st.units)
            .num("objects", st.objects)
            .num("payload_bytes", st.payload_bytes)
            .num("index_bytes", p.index_bytes() as u64)
            .num("open_us", p.open_time().as_micros() as u64)
            .str(
                "index_checkpoint",
                match p.checkpoint_use() {
                    None => "none",
                    Some(CheckpointUse::Used) => "used",
                    Some(CheckpointUse::Stale) => "stale",
                    Some(CheckpointUse::Invalid(_)) => "invalid",
                },
            )
            .line();
        if stats {
            o += &super::inspect::stats(&p, true)?;
        }
        return stdout(&o);
    }
    let stores = match m.store_kind() {
        StoreKind::NonTemporal if nvs_core::nt_store_width() >= 32 => {
            "non-temporal (movnti; AVX2 32-byte wide stores for bulk copies)"
        }
        StoreKind::NonTemporal => "non-temporal (movnti; SSE2 16-byte stores for bulk copies)",
        StoreKind::Portable => "portable (volatile writes + fences; no AVX2 wide stores)",
    };
    let file_len = nvs_core::Media::len(m) as u64;
    let mut o = String::new();
    let mut row = |k: &str, v: String| {
        let _ = writeln!(o, "{k:<17} {v}");
    };
    row("pool", pool.display().to_string());
    let commit = if sb.sealed_units() { "one fence per commit: sealed units" } else { "two fences per commit" };
    row("format version", format!("{} ({commit})", sb.format_version));
    row("pool id", format!("{:#018x}", sb.pool_id));
    row("size", format!("{} bytes ({}) of a {} {}", sb.pool_len, human(sb.pool_len), human(file_len), m.backing()));
    row(
        "segments",
        format!(
            "{} of {}: {} used, {} free",
            sb.segment_count,
            human(sb.segment_len),
            st.segments_used,
            p.free_segments()
        ),
    );
    row("lanes", format!("{} (in use: {})", sb.lanes_max, st.lanes));
    let names =
        if sb.lane_names { "every lane its own (versions count per lane)" } else { "one name space for every lane" };
    row("names", names.into());
    row("payload checksum", on_off(sb.payload_checksum).into());
    let deltas = if sb.deltas { "allowed" } else { "not in this pool (made before deltas): full versions only" };
    row("delta objects", deltas.into());
    let origin = match durability {
        Some(_) => "as asked".to_string(),
        None => format!("the default for a {}", m.backing()),
    };
    row("durability", format!("{} ({origin}; used by writers)", m.durability()));
    row("", m.durability().describe_on(m.backing()));
    row("stores", stores.into());
    row(
        "recovered",
        format!(
            "{} units, {} objects, {} payload bytes ({})",
            st.units,
            st.objects,
            st.payload_bytes,
            human(st.payload_bytes)
        ),
    );
    row("index memory", format!("{} (in this process's memory, rebuilt on every open)", human(p.index_bytes() as u64)));
    let how = match p.checkpoint_use() {
        None => "map + recovery".to_string(),
        Some(CheckpointUse::Used) => "map + the index checkpoint beside the pool, caught up".to_string(),
        Some(CheckpointUse::Stale) => "map + recovery: the index checkpoint beside the pool is stale".to_string(),
        Some(CheckpointUse::Invalid(why)) => format!("map + recovery: the index checkpoint beside the pool is {why}"),
    };
    row("open time", format!("{:.3} ms ({how})", p.open_time().as_secs_f64() * 1e3));
    if stats {
        o += &super::inspect::stats(&p, false)?;
    }
    stdout(&o)
}

pub fn check(pool: &Path, json: bool, durability: Option<Durability>) -> Result<(), CliError> {
    // A recovery, whatever index checkpoint lies beside the pool: every unit's headers read.
    let p = match FilePool::open_recovering(pool, durability) {
        Ok(p) => p,
        Err(e) if e.is_corruption() => {
            // Recovery names where it stopped; the raw walk names the damaged places.
            if let (false, Ok(damage)) = (json, super::inspect::walk_damage(pool)) {
                stdout(&damage.iter().map(|l| format!("{l}\n")).collect::<String>())?;
            }
            return Err(e.into());
        }
        Err(e) => return Err(e.into()),
    };
    let spin = super::progress::spinner(&format!("checking {} objects", p.stats().objects));
    let checked = p.verify();
    spin.finish_and_clear();
    let checked = checked?;
    // What the recovery cannot see: units lost before later ones of their lane.
    let damage = super::inspect::walk_damage(pool)?;
    if !damage.is_empty() {
        stdout(&damage.iter().map(|l| format!("{l}\n")).collect::<String>())?;
        return Err(CliError::Mismatch(format!(
            "{}: damaged: {} damaged regions the recovery steps past (listed on stdout; `nvs salvage` gets back \
             what is left)",
            pool.display(),
            damage.len()
        )));
    }
    let st = p.stats();
    let sb = p.layout();
    if json {
        return stdout(
            &Obj::new()
                .str("pool", &pool.display().to_string())
                .bool("clean", true)
                .num("objects", checked)
                .num("units", st.units)
                .num("lanes", st.lanes as u64)
                .num("segments_used", st.segments_used as u64)
                .num("segment_count", sb.segment_count as u64)
                .num("payload_bytes", st.payload_bytes)
                .bool("payload_checksum", sb.payload_checksum)
                .line(),
        );
    }
    let payloads = if sb.payload_checksum {
        "every payload checksum verified"
    } else {
        "payload checksums off: headers verified, payloads not checksummed"
    };
    stdout(&format!(
        "{}: clean: {} objects in {} units, lanes in use {}, segments used {} of {}, {} payload bytes; {}\n",
        pool.display(),
        checked,
        st.units,
        st.lanes,
        st.segments_used,
        sb.segment_count,
        st.payload_bytes,
        payloads
    ))
}

/// `close`: an end-of-stream marker on `lane`.
pub fn close(pool: &Path, lane: u32, durability: Option<Durability>) -> Result<(), CliError> {
    // In a pool with lane names, that lane alone, beside writers of the others.
    let (mut p, lane) = open_to_put(pool, b"", Some(lane), durability)?;
    p.close_lane(lane)?;
    stdout(&format!("{}: lane {lane} closed\n", pool.display()))
}

/// `reclaim`: retention keeping `keep` versions of every name: of every lane, as the
/// pool's one writer, or of `lane` alone (a pool with lane names, beside writers of the
/// other lanes).
pub fn reclaim(pool: &Path, keep: u32, lane: Option<u32>, durability: Option<Durability>) -> Result<(), CliError> {
    let mut p = match lane {
        Some(l) => open_to_put(pool, b"", Some(l), durability)?.0,
        None => FilePool::open_with(pool, Access::ReadWrite, durability)?,
    };
    if lane.is_some() && !p.layout().lane_names {
        return Err(CliError::Usage(format!(
            "{}: --lane: the pool has no lane names, so its one writer reclaims every lane (leave --lane out)",
            pool.display()
        )));
    }
    let freed = p.reclaim(keep)?;
    let (used, all) = (p.stats().segments_used, p.layout().segment_count);
    stdout(&format!("{}: {freed} segments freed; {used} of {all} in use\n", pool.display()))
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// What `nvs put` stores: a regular file mapped read-only (no copy into memory first: a
/// 3 GiB input took most of a put's time to read), else the bytes read from a pipe,
/// stdin or any other file.
enum Input {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl std::ops::Deref for Input {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Input::Mapped(m) => m,
            Input::Read(v) => v,
        }
    }
}

/// The bytes of `file`, or of stdin for `None` or `-`; more than `max` is refused (a
/// regular file by its length, before anything is read).
/// `file` opened for reading (`None`: stdin, for no file or `-`).
fn open_input(file: Option<&Path>) -> Result<Option<(std::fs::File, &Path)>, CliError> {
    match file {
        Some(f) if f != Path::new("-") => std::fs::File::open(f)
            .map(|r| Some((r, f)))
            .map_err(|e| CliError::io(format!("cannot read {}", f.display()), e)),
        _ => Ok(None),
    }
}

fn read_input(input: Option<(std::fs::File, &Path)>, max: u64) -> Result<Input, CliError> {
    // At most one byte more than an object can hold: an endless input (`< /dev/zero`)
    // is refused as soon as it is too large, not read until memory runs out.
    let too_large =
        |what: &str| CliError::Usage(format!("{what} holds more than the {max} bytes an object of this pool can hold"));
    let mut bar = None;
    let (what, reader): (String, Box<dyn Read>) = match input {
        Some((r, f)) => {
            let what = f.display().to_string();
            let meta = r.metadata().map_err(|e| CliError::io(format!("cannot read {what}"), e))?;
            if meta.is_file() && meta.len() > 0 {
                if meta.len() > max {
                    return Err(too_large(&what));
                }
                // A file that shrinks while mapped raises SIGBUS at the first missing
                // page: the handler then says so (and that nothing committed is harmed).
                super::sigbus::input_mapped(f);
                // SAFETY: read-only; a concurrent truncation is the SIGBUS above, and the
                // bytes are only copied (a concurrent writer can only change what is put).
                if let Ok(m) = unsafe { memmap2::Mmap::map(&r) } {
                    if m.len() as u64 == meta.len() {
                        return Ok(Input::Mapped(m));
                    }
                }
            }
            // A bar for a big file (hidden unless stderr is a terminal).
            match meta.len() {
                len if len >= PROGRESS_MIN => {
                    let b = super::progress::bytes(len, "reading");
                    let r = b.wrap_read(r);
                    bar = Some(b);
                    (what, Box::new(r))
                }
                _ => (what, Box::new(r)),
            }
        }
        None => ("stdin".to_string(), Box::new(std::io::stdin().lock())),
    };
    let mut v = Vec::new();
    reader
        .take(max.saturating_add(1))
        .read_to_end(&mut v)
        .map_err(|e| CliError::io(format!("cannot read {what}"), e))?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if v.len() as u64 > max {
        return Err(too_large(&what));
    }
    Ok(Input::Read(v))
}

/// `hold`'s own failures, apart from the command's statuses (as `env` and `timeout`
/// do): it could not hold the pool (or was misused), the command could not be run, the
/// command was not found.
pub const HOLD_FAILED: u8 = 125;
pub const HOLD_CANNOT_RUN: u8 = 126;
pub const HOLD_NOT_FOUND: u8 = 127;

/// The pid of `hold`'s command, for the signal handler that passes signals on.
static HELD_CHILD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// A signal that came before the command was spawned, passed on once it is.
static PENDING: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn pass_on(sig: libc::c_int) {
    let pid = HELD_CHILD.load(std::sync::atomic::Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; the pid is our child's.
        unsafe { libc::kill(pid, sig) };
    } else {
        PENDING.store(sig, std::sync::atomic::Ordering::SeqCst);
    }
}

/// `hold`: `pool`'s writer locks held while `command` runs (see [`nvs_std::WriterHold`]);
/// the command's exit status, 128 + N for a signal N; 125, 126, 127 for hold's own
/// failures (see [`HOLD_FAILED`]). The command inherits the locked file description, so
/// the locks last while it (or a descendant that kept the descriptor) lives, even if
/// this process is killed. SIGTERM and SIGHUP sent to `hold` are passed on to the
/// command; SIGINT and SIGQUIT (which a terminal sends the command too) are ignored
/// while it runs: `hold` waits for it and exits with its status.
pub fn hold(pool: &Path, command: &[std::ffi::OsString]) -> Result<std::process::ExitCode, (u8, CliError)> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let failed = |e: CliError| (HOLD_FAILED, e);
    let (program, args) =
        command.split_first().ok_or_else(|| failed(CliError::Usage("hold: no command to run".into())))?;
    if program.is_empty() {
        return Err(failed(CliError::Usage("hold: the command is an empty string".into())));
    }
    let held = nvs_std::WriterHold::take(pool).map_err(|e| failed(e.into()))?;
    held.inherit().map_err(|e| failed(e.into()))?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    // SAFETY: between fork and exec only async-signal-safe calls (signal): the command
    // starts with the default dispositions of what nvs ignores (SIGXFSZ) or hold
    // ignores or passes on.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGXFSZ, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    // Ignored before the spawn: a Ctrl-C right after it cannot end hold alone. And
    // SIGTERM/SIGHUP are caught before it too: one that comes before the command's pid
    // is known is kept and passed on once it is (hold used to die of it).
    let handler = pass_on as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: setting dispositions; `pass_on` is async-signal-safe (atomics and kill).
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGHUP, handler);
    }
    let mut child = cmd.spawn().map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::NotFound { HOLD_NOT_FOUND } else { HOLD_CANNOT_RUN };
        (code, CliError::io(format!("run {}", program.to_string_lossy()), e))
    })?;
    HELD_CHILD.store(child.id() as i32, std::sync::atomic::Ordering::SeqCst);
    let early = PENDING.swap(0, std::sync::atomic::Ordering::SeqCst);
    if early != 0 {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, early) };
    }
    let status = child.wait().map_err(|e| failed(CliError::io("wait for the command", e)))?;
    drop(held);
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.saturating_add(sig as u8),
        _ => 1,
    };
    Ok(std::process::ExitCode::from(code))
}
