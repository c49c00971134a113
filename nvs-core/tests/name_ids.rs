//! Name ids ([`NameId`]) hold for the index that gave them: after a rebuild (an open, a
//! refresh that recovers, a reclaim) an id taken before names no name — never another
//! name, although the rebuild put another name in its slot.

mod common;
use common::*;
use nvs_core::{HeapMemory, NameId, Object, Pool, Region, NAME_MAX};

/// Every name's id, by the name's bytes.
fn ids(pool: &Pool<Region, HeapMemory>) -> Vec<(Vec<u8>, NameId)> {
    let mut nb = [0u8; NAME_MAX];
    pool.names().map(|n| (pool.name_bytes(n.id, &mut nb).to_vec(), n.id)).collect()
}

/// `old`'s ids (from before a rebuild) name no name of `pool`: no bytes, no versions.
fn all_stale(pool: &Pool<Region, HeapMemory>, old: &[(Vec<u8>, NameId)]) {
    let mut nb = [0u8; NAME_MAX];
    for (name, id) in old {
        let shown = String::from_utf8_lossy(name);
        assert_eq!(pool.name_bytes(*id, &mut nb), b"", "{shown}'s stale id read a name");
        assert_eq!(pool.versions_of(*id).count(), 0, "{shown}'s stale id read versions");
    }
}

/// Puts that order the names one way (by time: "late-lane" first), where recovery,
/// walking lane by lane, orders them the other way: after a rebuild each slot holds
/// the other name.
fn put_crosswise(pool: &mut Pool<Region, HeapMemory>) {
    pool.put(3, Object::new("late-lane", b"3333")).unwrap();
    pool.put(0, Object::new("early-lane", b"00")).unwrap();
    pool.put(0, Object::new("early-lane", b"000")).unwrap();
}

/// The rebuild really renumbered: a name's new id is not its old one (on today's
/// slots, the old id's slot holds the other name).
fn renumbered(before: &[(Vec<u8>, NameId)], after: &[(Vec<u8>, NameId)]) {
    assert_eq!(before.len(), 2);
    let mut b: Vec<_> = before.iter().map(|x| &x.0).collect();
    let mut a: Vec<_> = after.iter().map(|x| &x.0).collect();
    assert_ne!(b, a, "recovery orders the names otherwise than the puts did");
    b.sort();
    a.sort();
    assert_eq!(b, a, "the same names");
}

#[test]
fn an_id_from_before_a_refresh_that_recovers_names_no_name() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut pool = format(&mut ram, 4096);
    put_crosswise(&mut pool);
    let before = ids(&pool);
    // Between rebuilds an id reads its own name, and its versions.
    let mut nb = [0u8; NAME_MAX];
    for (name, id) in &before {
        assert_eq!(pool.name_bytes(*id, &mut nb), &name[..]);
        let want = if name == b"early-lane" { 2 } else { 1 };
        assert_eq!(pool.versions_of(*id).count(), want);
    }
    // The one writer's refresh recovers: a rebuild.
    pool.refresh().unwrap();
    let after = ids(&pool);
    renumbered(&before, &after);
    all_stale(&pool, &before);
    // The new ids read their names.
    for (name, id) in &after {
        assert_eq!(pool.name_bytes(*id, &mut nb), &name[..]);
        assert!(pool.versions_of(*id).count() > 0);
    }
}

#[test]
fn an_id_from_before_a_reopen_names_no_name() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut pool = format(&mut ram, 4096);
    put_crosswise(&mut pool);
    let before = ids(&pool);
    let _ = pool.close();
    // The same media opened again: its first index build, as the first pool's was.
    let mut pool = open(&mut ram).unwrap();
    let mark = pool.index_mark();
    renumbered(&before, &ids(&pool));
    all_stale(&pool, &before);
    // An index mark likewise: one from before a reopen is refused, never read as the
    // new build's (whose objects after it would be other objects).
    pool.put(0, Object::new("late", b"z")).unwrap();
    let _ = pool.close();
    let pool = open(&mut ram).unwrap();
    assert!(pool.objects_after(mark).is_none(), "a mark of the closed pool");
    let now = pool.index_mark();
    assert_eq!(pool.objects_after(now).map(Iterator::count), Some(0));
}

#[test]
fn an_id_from_before_a_reclaim_names_no_name() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut pool = format(&mut ram, 4096);
    // Lane 0's first segment fills with "old" (released by the reclaim: keep 1
    // version), then "kept" follows in later segments.
    let big = [7u8; 1500];
    for _ in 0..3 {
        pool.put(0, Object::new("old", &big)).unwrap();
    }
    for _ in 0..3 {
        pool.put(0, Object::new("kept", &big)).unwrap();
    }
    pool.put(0, Object::new("old", &big)).unwrap();
    let before = ids(&pool);
    assert!(pool.reclaim(1).unwrap() > 0, "a segment released");
    all_stale(&pool, &before);
    let mut nb = [0u8; NAME_MAX];
    for (name, id) in ids(&pool) {
        assert_eq!(pool.name_bytes(id, &mut nb), &name[..]);
    }
}

/// Puts and a reader's refresh that catches up add names without renumbering any: the
/// ids stay good, and `objects_after`'s ids are the names' ids.
#[test]
fn ids_hold_across_puts_and_catch_ups() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut writer = format(&mut ram, 4096);
    writer.put(0, Object::new("a", b"1")).unwrap();
    let mut reader = Pool::open_read_only(ram.region(), HeapMemory::new()).unwrap();
    let (w_before, r_before) = (ids(&writer), ids(&reader));
    let mark = reader.index_mark();
    writer.put(1, Object::new("b", b"2")).unwrap();
    writer.put(0, Object::new("a", b"3")).unwrap();
    reader.refresh().unwrap();
    assert!(reader.objects_after(mark).is_some(), "the refresh caught up");
    let mut nb = [0u8; NAME_MAX];
    for (pool, before) in [(&writer, &w_before), (&reader, &r_before)] {
        for (name, id) in before {
            assert_eq!(pool.name_bytes(*id, &mut nb), &name[..]);
            assert_eq!(pool.versions_of(*id).count(), 2);
        }
    }
    let new: Vec<_> = reader.objects_after(mark).unwrap().collect();
    let names: Vec<_> = new.iter().map(|(id, v)| (reader.name_bytes(*id, &mut nb).to_vec(), v.version)).collect();
    // (The catch-up walks lane by lane.)
    assert_eq!(names, [(b"a".to_vec(), 2), (b"b".to_vec(), 1)]);
    assert_eq!(new[0].0, r_before[0].1, "objects_after's id of a is names()'s");
    // An id of one pool is not an id of another, even of the same media.
    all_stale(&reader, &w_before);
}
