//! Index checkpoints (`POOL.nvs-index`): the one writer's drop leaves one for a pool of
//! many objects; a read-only open from it gives exactly what a recovery gives — fresh,
//! stale (units, claims or retention since), damaged, foreign or not to be trusted —
//! and only a fresh or caught-up one is used.

mod common;

use common::{contents, recovered};
use nvs_core::{CheckpointUse, Object};
use nvs_std::{checkpoint_path, Access, CreateOptions, FilePool, CHECKPOINT_MIN_OBJECTS};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const NAMES: usize = 40;

fn pool_path(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nvs-checkpoint-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("p.nvs")
}

fn payload(name: usize, v: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64 * 7 + v * 13 + name as u64) as u8).collect()
}

fn opts() -> CreateOptions {
    CreateOptions { lanes_max: 4, segment_len: Some(1 << 20), ..CreateOptions::default() }
}

/// `count` puts on `lane`, cycling through the names, lengths 8..200; every 97th is a
/// delta of its name's previous version.
fn fill(p: &mut FilePool, lane: u32, count: usize, salt: usize) {
    for i in 0..count {
        let n = (i + salt) % NAMES;
        let name = format!("array{n:02}");
        let len = 8 + (i * 31 + salt) % 192;
        let mut buf = [0u8; nvs_core::NAME_MAX];
        let latest = p.names().find(|x| p.name_bytes(x.id, &mut buf) == name.as_bytes()).map(|x| x.latest);
        match latest {
            Some(v) if i % 97 == 0 => {
                let mut data = p.get_vec(name.as_str(), v).unwrap();
                data[0] ^= 0x5a;
                p.put(lane, Object::new(&name, &data).delta(v, &[(0, 1)])).unwrap();
            }
            _ => {
                p.put(lane, Object::new(&name, &payload(n, i as u64, len))).unwrap();
            }
        }
    }
}

/// Open read-only: how the checkpoint was used, and the contents, which must be what a
/// recovery gives.
fn open_and_compare(path: &Path) -> Option<CheckpointUse> {
    let p = FilePool::open(path, Access::ReadOnly).unwrap();
    let used = p.checkpoint_use();
    let got = contents(&p);
    drop(p);
    assert_eq!(got, recovered(path), "checkpoint use {used:?}");
    used
}

fn big_pool(test: &str) -> PathBuf {
    let path = pool_path(test);
    let mut p = FilePool::create(&path, 64 << 20, &opts()).unwrap();
    let n = CHECKPOINT_MIN_OBJECTS as usize;
    fill(&mut p, 0, n / 2 + 100, 0);
    fill(&mut p, 1, n / 2, 3);
    drop(p);
    path
}

#[test]
fn a_writer_leaves_a_checkpoint_that_opens_to_what_recovery_gives() {
    let path = big_pool("fresh");
    assert!(checkpoint_path(&path).exists(), "the writer's drop wrote one");
    assert_eq!(open_and_compare(&path), Some(CheckpointUse::Used));
    // Readers leave it as it is; a writer that changes nothing too.
    let before = std::fs::read(checkpoint_path(&path)).unwrap();
    drop(FilePool::open(&path, Access::ReadWrite).unwrap());
    assert_eq!(std::fs::read(checkpoint_path(&path)).unwrap(), before);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn a_stale_checkpoint_catches_up_with_units_and_claims_since() {
    let path = big_pool("stale");
    let ck = checkpoint_path(&path);
    let old = std::fs::read(&ck).unwrap();
    // More units on both lanes and on a new lane, into new segments: the old checkpoint
    // is put back, as after a writer that died without its drop.
    let mut p = FilePool::open(&path, Access::ReadWrite).unwrap();
    fill(&mut p, 1, 3000, 7);
    fill(&mut p, 2, 500, 1);
    drop(p);
    assert_ne!(std::fs::read(&ck).unwrap(), old, "the writer's drop wrote a new one");
    std::fs::write(&ck, &old).unwrap();
    assert_eq!(open_and_compare(&path), Some(CheckpointUse::Used), "caught up");
    // Retention since: a catch-up does not follow it; recovery does.
    let mut p = FilePool::open(&path, Access::ReadWrite).unwrap();
    assert!(p.reclaim(1).unwrap() > 0, "retention released segments");
    drop(p);
    std::fs::write(&ck, &old).unwrap();
    assert_eq!(open_and_compare(&path), Some(CheckpointUse::Stale));
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn damaged_foreign_or_untrusted_checkpoints_are_not_used() {
    let path = big_pool("damaged");
    let ck = checkpoint_path(&path);
    let good = std::fs::read(&ck).unwrap();
    // A byte flipped anywhere (the head, a lane, a slot, an entry, the sum), or the
    // file cut short or grown: recovery, with what was wrong.
    for at in [0, 9, 100, 200, good.len() / 2, good.len() - 70, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        std::fs::write(&ck, &bad).unwrap();
        let used = open_and_compare(&path);
        assert!(matches!(used, Some(CheckpointUse::Invalid(_))), "byte {at}: {used:?}");
    }
    for len in [0, 7, 64, good.len() - 8, good.len() - 1] {
        std::fs::write(&ck, &good[..len]).unwrap();
        let used = open_and_compare(&path);
        assert!(matches!(used, Some(CheckpointUse::Invalid(_)) | None), "cut to {len}: {used:?}");
    }
    let mut longer = good.clone();
    longer.extend_from_slice(&[0; 64]);
    std::fs::write(&ck, &longer).unwrap();
    assert!(matches!(open_and_compare(&path), Some(CheckpointUse::Invalid(_))));
    // Another pool's checkpoint (same geometry, another pool id).
    let other = big_pool("damaged-other");
    std::fs::copy(checkpoint_path(&other), &ck).unwrap();
    assert_eq!(
        open_and_compare(&path),
        Some(CheckpointUse::Invalid("of another pool, or of this one before it changed"))
    );
    // One that others may write where the pool is not: not read.
    std::fs::write(&ck, &good).unwrap();
    std::fs::set_permissions(&ck, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(open_and_compare(&path), None);
    std::fs::set_permissions(&ck, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(open_and_compare(&path), Some(CheckpointUse::Used));
    // A symbolic link in its place: not followed.
    std::fs::rename(&ck, ck.with_extension("real")).unwrap();
    std::os::unix::fs::symlink(ck.with_extension("real"), &ck).unwrap();
    assert_eq!(open_and_compare(&path), None);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
    let _ = std::fs::remove_dir_all(other.parent().unwrap());
}

#[test]
fn small_pools_get_none_and_names_come_in_recovery_order() {
    let path = pool_path("small");
    let mut p = FilePool::create(&path, 16 << 20, &opts()).unwrap();
    fill(&mut p, 0, 1000, 0);
    drop(p);
    assert!(!checkpoint_path(&path).exists(), "below {CHECKPOINT_MIN_OBJECTS} objects");
    // Puts of one name alternating lanes: its versions are listed in order whatever
    // the order of the entries; a checkpoint, and what recovery gives.
    let mut p = FilePool::open(&path, Access::ReadWrite).unwrap();
    for i in 0..CHECKPOINT_MIN_OBJECTS as usize {
        p.put((i % 2) as u32, Object::new("x", &[i as u8; 8])).unwrap();
    }
    drop(p);
    assert!(checkpoint_path(&path).exists());
    assert_eq!(open_and_compare(&path), Some(CheckpointUse::Used));
    // Names first put on lane 1, then on lane 0, then on lane 1 in one batch: recovery
    // meets them in another order than the writer did; the checkpoint has recovery's.
    let mut p = FilePool::open(&path, Access::ReadWrite).unwrap();
    p.put(1, Object::new("y", b"on lane 1 first")).unwrap();
    p.put(0, Object::new("z", b"on lane 0 after")).unwrap();
    p.put_batch(1, &[Object::new("w", b"1"), Object::new("v", b"2"), Object::new("y", b"3")]).unwrap();
    drop(p);
    assert!(checkpoint_path(&path).exists());
    assert_eq!(open_and_compare(&path), Some(CheckpointUse::Used));
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
