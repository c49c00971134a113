//! `nvs follow`: print every object as its writer commits it, until the stream ends
//! (`--json`: one JSON object per line);
//! and the hidden `nvs stress-writer` that the real-process crash test kills.

use super::json::Obj;
use super::stress::{stress_len, stress_payload};
use super::CliError;
use nvs_core::Key;
use nvs_std::show_name;
use nvs_std::{Access, Durability, FilePool, Followed, Follower};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Follow `pool` (only `name`, if given): one line `lane<TAB>name<TAB>version<TAB>size`
/// per committed object. Ends with exit 0 at end of stream, 3 when the writer is gone
/// (died without closing), 2 on timeout. With `verify_stress`, each object is read back
/// and compared with the stress writer's pattern (exit 1 on a mismatch).
pub fn follow(
    pool: &Path,
    name: Option<&[u8]>,
    timeout: Option<f64>,
    verify_stress: bool,
    json: bool,
) -> Result<(), CliError> {
    let timeout = timeout.map(Duration::from_secs_f64);
    // A pool a live writer holds but has not formatted yet (a guest under `nvs hold`,
    // booting): wait for it, as for a writer.
    let start = std::time::Instant::now();
    let mut f = loop {
        match Follower::open(pool, name.map(<[u8]>::to_vec)) {
            Err(e) if e.core() == Some(nvs_core::Error::NotFormatted) && nvs_std::WriterHold::held(pool) => {
                if timeout.is_some_and(|t| start.elapsed() >= t) {
                    return Err(CliError::Usage("timed out waiting for the writer to format the pool".into()));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            r => break r?,
        }
    };
    loop {
        match f.wait(timeout, Duration::from_millis(2))? {
            Followed::Objects(objs) => {
                for o in objs {
                    if verify_stress {
                        let bytes = match f.pool().get_vec(Key::on(o.lane, &o.name), o.version) {
                            // Released by the writer's retention since it was reported.
                            Err(e) if e.core() == Some(nvs_core::Error::NotFound) => continue,
                            r => r?,
                        };
                        if bytes != stress_payload(o.lane, &o.name, o.version, bytes.len()) {
                            return Err(CliError::Mismatch(format!(
                                "BAD: {} v{} (lane {}) does not hold what the stress writer put",
                                show_name(&o.name),
                                o.version,
                                o.lane
                            )));
                        }
                    }
                    // A reader that went away (`nvs follow P | head -1`) ends it quietly.
                    let line = match json {
                        true => Obj::new()
                            .num("lane", o.lane as u64)
                            .name("name", &o.name)
                            .num("version", o.version)
                            .num("len_bytes", o.len_bytes)
                            .line(),
                        false => format!("{}\t{}\t{}\t{}\n", o.lane, show_name(&o.name), o.version, o.len_bytes),
                    };
                    super::output::stdout(&line)?;
                }
            }
            Followed::EndOfStream => return Ok(()),
            Followed::WriterGone => return Err(CliError::WriterGone(f.gone_lanes())),
            Followed::Timeout => return Err(CliError::Usage("timed out waiting for the writer".into())),
        }
    }
}

/// Put stress objects on `lane` forever (or `count` times, then close the lane),
/// printing `name<TAB>version` after each put returns: a line means acknowledged.
pub fn stress_writer(
    pool: &Path,
    lane: u32,
    count: Option<u64>,
    max_size: u64,
    pause_us: u64,
    keep: Option<u32>,
    d: Option<Durability>,
) -> Result<(), CliError> {
    // In a pool with lane names, beside stress writers of other lanes in other processes.
    let mut p = match FilePool::open_lanes_with(pool, Some(&[lane]), d) {
        Err(e) if e.core() == Some(nvs_core::Error::NeedsLaneNames) => FilePool::open_with(pool, Access::ReadWrite, d)?,
        r => r?,
    };
    let mut out = std::io::stdout().lock();
    let names: [&[u8]; 3] = [b"s0", b"s1", b"s2"];
    let mut i = 0u64;
    while count.is_none_or(|c| i < c) {
        let name = names[(i % 3) as usize];
        let version = p.latest(Key::on(lane, name)).map_or(1, |v| v + 1);
        let data = stress_payload(lane, name, version, stress_len(name, version, max_size));
        let object = nvs_core::Object::new(name, &data).version(version);
        let v = match (p.put(lane, object), keep) {
            (Err(e), Some(k)) if e.core() == Some(nvs_core::Error::Full) => {
                p.reclaim(k)?;
                p.put(lane, object)?.version
            }
            (r, _) => r?.version,
        };
        let line = format!("{}\t{v}\n", show_name(name));
        out.write_all(line.as_bytes()).and_then(|_| out.flush()).map_err(|e| CliError::io("stdout", e))?;
        if pause_us > 0 {
            std::thread::sleep(Duration::from_micros(pause_us));
        }
        i += 1;
    }
    p.close_lane(lane)?;
    Ok(())
}
