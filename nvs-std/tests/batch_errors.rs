//! A batch refused because of one of its objects names the object ([`Error::Batch`]),
//! through the pool and a lane, for nvs-core's refusals and the shim's own.

use nvs_core::{Error as CoreError, Object, NAME_MAX};
use nvs_std::{CreateOptions, Error, FilePool};

fn pool(dir: &tempfile::TempDir) -> FilePool {
    FilePool::create(dir.path().join("b.pool"), 4 << 20, &CreateOptions::default()).expect("create")
}

/// `e` is about object `index` of a batch, nvs-core's `want` (or none: the shim's own).
fn about(e: &Error, index: usize, want: Option<CoreError>) {
    assert!(matches!(e, Error::Batch { index: i, .. } if *i == index), "{e:?}");
    assert_eq!(e.unbatched().1, Some(index));
    assert_eq!(e.core(), want);
    assert!(e.to_string().contains(&format!("object {index} of the batch: ")), "{e}");
}

#[test]
fn a_batch_names_the_object_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = pool(&dir);
    p.put(0, Object::new("x", b"1").version(5)).unwrap();
    let long = vec![b'n'; NAME_MAX + 1];
    let cases: Vec<([Object<'_>; 3], CoreError)> = vec![
        ([Object::new("a", b"1"), Object::new("b", b"2"), Object::new("", b"3")], CoreError::NameEmpty),
        (
            [Object::new("a", b"1"), Object::new("b", b"2"), Object::new(&long, b"3")],
            CoreError::NameTooLong { len_bytes: NAME_MAX + 1 },
        ),
        (
            [Object::new("a", b"1"), Object::new("b", b"2"), Object::new("x", b"3").version(5)],
            CoreError::VersionNotIncreasing { latest: 5, given: 5 },
        ),
    ];
    for (batch, want) in &cases {
        let e = p.put_batch(1, batch).unwrap_err();
        about(&e, 2, Some(*want));
        let path = dir.path().join("b.pool");
        assert_eq!(e.to_string(), format!("{}: object 2 of the batch: {want}", path.display()));
        let mut lane = p.lane(2).unwrap();
        about(&lane.put_batch(batch).unwrap_err(), 2, Some(*want));
    }
    // More than nvs-core's BATCH_MAX (put_batch_in underneath).
    let names: Vec<String> = (0..400).map(|i| format!("o{i}")).collect();
    let mut big: Vec<Object<'_>> = names.iter().map(|n| Object::new(n, b"v")).collect();
    big[333] = Object::new("", b"v");
    about(&p.put_batch(1, &big).unwrap_err(), 333, Some(CoreError::NameEmpty));
    // The shim's own check: a NUL inside a name.
    let nul = [Object::new("a", b"1"), Object::new("b\0c", b"2")];
    let e = p.put_batch(1, &nul).unwrap_err();
    about(&e, 1, None);
    assert!(matches!(e.unbatched().0, Error::NameNul { at: 1, .. }), "{e:?}");
    // Nothing was committed.
    assert!(p.latest("a").is_err());
    assert_eq!(p.put_batch(1, &cases[0].0[..2]).unwrap(), vec![1, 1]);
}

#[test]
fn an_error_of_no_one_object_is_not_a_batch_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = pool(&dir);
    let e = p.put_batch(999, &[Object::new("a", b"1")]).unwrap_err();
    assert!(matches!(e, Error::Core { source: CoreError::NoSuchLane { .. }, .. }), "{e:?}");
    assert_eq!(e.unbatched().1, None);
}
