//! A batch refused because of one of its objects names that object ([`BatchError`]):
//! through `put_batch` and `put_batch_in`, of the pool and of a lane writer; an error
//! that is no one object's names none. Nothing of a refused batch is committed.

mod common;
use common::*;
use nvs_core::{BatchError, Error, HeapMemory, Object, PlanSlot, Pool, Region, META_MAX, NAME_MAX};

type P = Pool<Region, HeapMemory>;

/// Every way a batch can be put, each giving the error alone or with its index.
fn every_way(pool: &mut P, lane: u32, objects: &[Object<'_>]) -> [Result<usize, BatchError>; 4] {
    let mut slots = vec![PlanSlot::default(); objects.len()];
    let a = pool.put_batch(lane, objects).map(|v| v.len());
    let b = pool.put_batch_in(lane, objects, &mut slots);
    let mut w = pool.lane(lane).unwrap();
    let c = w.put_batch(objects).map(|v| v.len());
    let d = w.put_batch_in(objects, &mut slots);
    [a, b, c, d]
}

/// `objects` refused with `error` about object `index`, every way, and nothing committed.
fn refused(pool: &mut P, objects: &[Object<'_>], index: usize, error: Error) {
    let units = pool.stats().units;
    for (way, r) in every_way(pool, 1, objects).into_iter().enumerate() {
        assert_eq!(r, Err(BatchError { index: Some(index), error }), "way {way}");
        let e = r.unwrap_err();
        assert_eq!(e.to_string(), format!("object {index} of the batch: {error}"));
        assert_eq!(Error::from(e), error);
    }
    assert_eq!(pool.stats().units, units, "a refused batch committed");
}

fn pool(ram: &mut Ram) -> P {
    let mut pool = format(ram, 64 << 10);
    pool.put(0, Object::new("x", b"1").version(5)).unwrap();
    pool
}

#[test]
fn an_empty_name_is_named_by_its_index() {
    let mut ram = Ram::new(4 << 20, 0);
    let mut pool = pool(&mut ram);
    let batch = [Object::new("a", b"1"), Object::new("b", b"2"), Object::new("", b"3"), Object::new("", b"4")];
    refused(&mut pool, &batch, 2, Error::NameEmpty);
    let e = pool.put_batch(0, &batch).unwrap_err();
    assert_eq!(e.to_string(), "object 2 of the batch: empty name");
}

#[test]
fn a_name_too_long_is_named_by_its_index() {
    let mut ram = Ram::new(4 << 20, 0);
    let mut pool = pool(&mut ram);
    let long = vec![b'n'; NAME_MAX + 1];
    let batch = [Object::new("a", b"1"), Object::new("b", b"2"), Object::new(&long, b"3")];
    refused(&mut pool, &batch, 2, Error::NameTooLong { len_bytes: NAME_MAX + 1 });
}

#[test]
fn a_version_not_increasing_is_named_by_its_index() {
    let mut ram = Ram::new(4 << 20, 0);
    let mut pool = pool(&mut ram);
    // Below the name's committed latest (5).
    let batch = [Object::new("a", b"1"), Object::new("b", b"2"), Object::new("x", b"3").version(4)];
    refused(&mut pool, &batch, 2, Error::VersionNotIncreasing { latest: 5, given: 4 });
    // Not above an earlier object of the same name in the batch.
    let batch = [Object::new("y", b"1").version(9), Object::new("b", b"2"), Object::new("y", b"3").version(9)];
    refused(&mut pool, &batch, 2, Error::VersionNotIncreasing { latest: 9, given: 9 });
    // Version 0 (never a version).
    let batch = [Object::new("a", b"1"), Object::new("b", b"2"), Object::new("c", b"3").version(0)];
    refused(&mut pool, &batch, 2, Error::VersionNotIncreasing { latest: 0, given: 0 });
}

#[test]
fn metadata_size_and_delta_ranges_are_named_by_their_index() {
    let mut ram = Ram::new(4 << 20, 0);
    let mut pool = pool(&mut ram);
    let meta = vec![b'm'; META_MAX + 1];
    let batch = [Object::new("a", b"1"), Object::new("b", b"2"), Object::new("c", b"3").meta(&meta)];
    refused(&mut pool, &batch, 2, Error::MetaTooLong { len_bytes: META_MAX + 1 });
    let max = pool.max_object_bytes(1);
    let huge = vec![0u8; max as usize + 1];
    let batch = [Object::new("a", b"1"), Object::new("b", b"2"), Object::new("h", &huge)];
    refused(&mut pool, &batch, 2, Error::TooLarge { len_bytes: max + 1, max_bytes: max });
    // A delta whose changed range reaches past the object's end.
    let base = vec![1u8; 4096];
    pool.put(0, Object::new("d", &base)).unwrap();
    let bad: &[(u64, u64)] = &[(4000, 200)];
    let batch = [Object::new("a", b"1"), Object::new("b", b"2"), Object::new("d", &base).delta(1, &bad)];
    refused(&mut pool, &batch, 2, Error::DeltaRanges { offset: 4000 });
}

/// The first refused object is named, past the small-batch path (a unit of more than
/// 64 objects finds same-named objects another way) and past `BATCH_MAX`.
#[test]
fn the_first_refused_object_of_a_large_batch_is_named() {
    let mut ram = Ram::new(8 << 20, 0);
    let mut pool = pool(&mut ram);
    let names: Vec<String> = (0..300).map(|i| format!("o{i}")).collect();
    let mut batch: Vec<Object<'_>> = names.iter().map(|n| Object::new(n, b"v")).collect();
    batch[37] = Object::new("", b"v");
    batch[200] = Object::new("o1", b"v").version(1);
    let mut slots = vec![PlanSlot::default(); batch.len()];
    let e = pool.put_batch_in(1, &batch, &mut slots).unwrap_err();
    assert_eq!(e, BatchError { index: Some(37), error: Error::NameEmpty });
    batch[37] = Object::new("o37", b"v");
    let e = pool.put_batch_in(1, &batch, &mut slots).unwrap_err();
    assert_eq!(e, BatchError { index: Some(200), error: Error::VersionNotIncreasing { latest: 1, given: 1 } });
    assert_eq!(pool.stats().units, 1, "nothing committed");
}

/// An error that is no one object's names none: the batch's size, the lane, the pool's
/// state, room.
#[test]
fn an_error_of_the_whole_batch_names_no_object() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut pool = format(&mut ram, 4096);
    let two = [Object::new("a", b"1"), Object::new("", b"2")];
    let none = |error| Err(BatchError { index: None, error });
    assert_eq!(pool.put_batch(9, &two).map(drop), none(Error::NoSuchLane { lane: 9, lanes_max: 4 }));
    assert_eq!(pool.put_batch(0, &[]).map(drop), none(Error::BatchSize { count: 0 }));
    assert_eq!(pool.put_batch_in(0, &two, &mut [PlanSlot::default()]).map(drop), none(Error::BatchSize { count: 2 }));
    // A unit too large as a whole, each of its objects fitting.
    let part = vec![0u8; pool.max_object_bytes(1) as usize * 2 / 3];
    let big = [Object::new("a", &part), Object::new("b", &part)];
    assert!(matches!(pool.put_batch(0, &big), Err(BatchError { index: None, error: Error::TooLarge { .. } })));
    assert!(pool.put_batch(0, &big[..1]).is_ok(), "one of them fits");
    assert_eq!(BatchError::from(Error::Full).to_string(), Error::Full.to_string());
    // Read-only.
    let _ = pool.close();
    let mut ro = Pool::open_read_only(ram.region(), HeapMemory::new()).unwrap();
    assert_eq!(ro.put_batch(0, &two).map(drop), none(Error::ReadOnly));
}
