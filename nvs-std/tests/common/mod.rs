//! What the index checkpoint tests compare: everything a reader of a pool can learn.

use nvs_core::Key;
use nvs_std::{checkpoint_path, Access, FilePool};
use std::fmt::Write as _;
use std::path::Path;

/// Everything a reader can learn, as text; errors are part of it (a forged checkpoint
/// may give them), never a panic of this test's own.
pub fn contents(p: &FilePool) -> String {
    let mut s = format!("{:?} free {}\n", p.stats(), p.free_segments());
    for n in p.names() {
        let name = p.name_bytes(n.id, &mut [0u8; nvs_core::NAME_MAX]).to_vec();
        let key = || match n.lane.filter(|_| p.layout().lane_names) {
            Some(l) => Key::on(l, name.as_slice()),
            None => Key::from(name.as_slice()),
        };
        writeln!(s, "{} {} {} {:?}", String::from_utf8_lossy(&name), n.versions, n.latest, n.lane).unwrap();
        writeln!(s, " latest {:?}", p.latest(key()).map_err(|e| e.to_string())).unwrap();
        for o in p.versions_of(n.id) {
            let got = p.get_vec(key(), o.version);
            let sum = got.map(|b| b.iter().fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(b as u64)));
            let meta = p.meta(key(), o.version).map(|m| m.len());
            writeln!(s, "  {o:?} {:?} meta {:?}", sum.map_err(|e| e.to_string()), meta.map_err(|e| e.to_string()))
                .unwrap();
        }
    }
    for lane in 0..p.layout().lanes_max {
        writeln!(s, "lane {lane}: {:?}", p.lane_info(lane)).unwrap();
    }
    s
}

/// What a recovery gives (the checkpoint set aside meanwhile).
pub fn recovered(path: &Path) -> String {
    let ck = checkpoint_path(path);
    let aside = ck.with_extension("aside");
    let had = std::fs::rename(&ck, &aside).is_ok();
    let got = FilePool::open(path, Access::ReadOnly).map(|p| {
        assert_eq!(p.checkpoint_use(), None);
        contents(&p)
    });
    if had {
        std::fs::rename(&aside, &ck).unwrap();
    }
    match got {
        Ok(c) => c,
        Err(e) => format!("open failed: {e}"),
    }
}
