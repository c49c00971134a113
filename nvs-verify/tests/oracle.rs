//! The oracle can fail: each kind of contract violation is caught, and every state the
//! contract allows passes. Plus a smoke run of the crash check on a few workloads.

use nvs_core::Key;
use nvs_verify::check::{oracle, Rec, Recovered};
use nvs_verify::workload::Issued;
use std::collections::BTreeSet;

fn op(op: usize, lane: u32, start: usize, ack: Option<usize>, objs: &[(&str, u64, &[u8])]) -> Issued {
    Issued {
        op,
        lane,
        start,
        ack,
        objects: objs.iter().map(|(n, v, b)| (n.as_bytes().to_vec(), *v, b.to_vec())).collect(),
        ..Default::default()
    }
}

/// The oracle over plain object lists (no lane closed).
fn o(issued: &[Issued], point: usize, durable: &[Rec], rec: &[Rec]) -> Result<(), String> {
    oracle(issued, point, &Recovered::of(durable.to_vec()), &Recovered::of(rec.to_vec()))
}

fn rec(n: &str, v: u64, lane: u32, b: &[u8]) -> Rec {
    (n.as_bytes().to_vec(), v, lane, b.to_vec())
}

fn issued() -> Vec<Issued> {
    vec![
        op(0, 0, 10, Some(20), &[("a", 1, b"A1")]),
        op(1, 0, 20, Some(30), &[("b", 1, b"B1"), ("c", 1, b"C1")]),
        op(2, 1, 30, Some(40), &[("a", 2, b"A2")]),
        op(3, 0, 40, Some(50), &[("a", 3, b"A3")]),
    ]
}

/// Allowed: exactly the acknowledged ops; plus an unacknowledged started one; nothing
/// before anything was acknowledged.
#[test]
fn allowed_states_pass() {
    let is = issued();
    let all = vec![rec("a", 1, 0, b"A1"), rec("b", 1, 0, b"B1"), rec("c", 1, 0, b"C1"), rec("a", 2, 1, b"A2")];
    assert_eq!(o(&is, 40, &[], &all), Ok(()));
    let mut more = all.clone();
    more.push(rec("a", 3, 0, b"A3"));
    assert_eq!(o(&is, 45, &[], &more), Ok(()), "started, not acknowledged, recovered: allowed");
    assert_eq!(o(&is, 45, &[], &all), Ok(()), "started, not acknowledged, lost: allowed");
    assert_eq!(o(&is, 15, &[], &[]), Ok(()));
}

/// Each violation is named.
#[test]
fn violations_are_caught() {
    let is = issued();
    let base = vec![rec("a", 1, 0, b"A1"), rec("b", 1, 0, b"B1"), rec("c", 1, 0, b"C1")];
    let check = |point, rec: &[Rec], needle: &str| {
        let e = o(&is, point, &[], rec).expect_err(needle);
        assert!(e.contains(needle), "{e} should mention {needle}");
    };
    check(30, &base[..1], "acknowledged");
    check(30, &[base[0].clone(), base[1].clone()], "torn");
    let mut phantom = base.clone();
    phantom.push(rec("z", 1, 0, b"Z"));
    check(30, &phantom, "phantom");
    let mut wrong = base.clone();
    wrong[0].3 = b"XX".to_vec();
    check(30, &wrong, "wrong bytes");
    let mut lane = base.clone();
    lane[0].2 = 1;
    check(30, &lane, "lane");
    check(45, &[base[0].clone(), rec("a", 3, 0, b"A3")], "acknowledged"); // op 1 acked and lost
                                                                          // A hole: op 3 recovered without op 1 on the same lane (none acknowledged yet at 25).
    let is2 = vec![op(0, 0, 10, None, &[("a", 1, b"A1")]), op(1, 0, 20, None, &[("a", 2, b"A2")])];
    let e = o(&is2, 25, &[], &[rec("a", 2, 0, b"A2")]).unwrap_err();
    assert!(e.contains("prefix"), "{e}");
    // Unstarted ops' objects are phantoms.
    let e = o(&is, 15, &[], &[rec("b", 1, 0, b"B1"), rec("c", 1, 0, b"C1")]).unwrap_err();
    assert!(e.contains("phantom"), "{e}");
    // Objects recovered before an earlier crash must stay.
    let durable = vec![rec("d", 1, 0, b"D1")];
    let e = o(&[], 5, &durable, &[]).unwrap_err();
    assert!(e.contains("lost"), "{e}");
    assert_eq!(o(&[], 5, &durable, &durable), Ok(()));
}

/// The crash check passes a few real workloads and explores more than one state.
#[test]
fn crash_check_smoke() {
    let fams = nvs_verify::workload::families();
    let mut fam = fams.into_iter().next().unwrap();
    fam.workloads.truncate(20);
    let r = nvs_verify::check::check_family(&fam, 2, false);
    assert!(r.failures.is_empty(), "{:?}", r.failures);
    assert_eq!(r.counts.incomplete, 0);
    assert!(
        r.counts.points > 40 && r.counts.states > r.counts.points,
        "{} points, {} states",
        r.counts.points,
        r.counts.states
    );
}

/// The retention family really releases objects (so its checks are not vacuous), and
/// the oracle rejects a released object that comes back.
#[test]
fn retention_family_releases_objects() {
    let fams = nvs_verify::workload::families();
    let fam = fams.iter().find(|f| f.name == "retention").unwrap();
    let mut released = 0;
    for w in fam.workloads.iter().take(40) {
        let t = nvs_verify::workload::run(w).unwrap();
        released += t.issued.iter().map(|i| i.released.len()).sum::<usize>();
    }
    assert!(released > 20, "only {released} objects released");
    let mut is = issued();
    is.push(Issued {
        op: 9,
        lane: u32::MAX,
        start: 60,
        ack: Some(70),
        released: vec![(0, b"a".to_vec(), 1)],
        ..Default::default()
    });
    let all = vec![
        rec("a", 1, 0, b"A1"),
        rec("b", 1, 0, b"B1"),
        rec("c", 1, 0, b"C1"),
        rec("a", 2, 1, b"A2"),
        rec("a", 3, 0, b"A3"),
    ];
    let e = o(&is, 80, &[], &all).unwrap_err();
    assert!(e.contains("came back"), "{e}");
    assert_eq!(o(&is, 65, &[], &all), Ok(()), "while the reclaim runs, either is fine");
    assert_eq!(o(&is, 80, &[], &all[1..]), Ok(()));
}

/// Objects recovered before an earlier crash that a reclaim since released are owed no
/// more once it is acknowledged, and may be either way while it runs.
#[test]
fn durable_objects_a_reclaim_released() {
    let durable = vec![rec("d", 1, 0, b"D1"), rec("d", 2, 0, b"D2")];
    let reclaim = Issued {
        op: 0,
        lane: u32::MAX,
        start: 10,
        ack: Some(20),
        released: vec![(0, b"d".to_vec(), 1)],
        ..Default::default()
    };
    let is = vec![reclaim];
    assert_eq!(o(&is, 30, &durable, &durable[1..]), Ok(()));
    assert_eq!(o(&is, 15, &durable, &durable), Ok(()));
    assert_eq!(o(&is, 15, &durable, &durable[1..]), Ok(()));
    assert!(o(&is, 30, &durable, &durable).unwrap_err().contains("came back"));
    assert!(o(&is, 30, &durable, &[]).unwrap_err().contains("lost"));
    assert!(o(&is, 5, &durable, &durable[1..]).unwrap_err().contains("lost"));
}

/// End of stream: an acknowledged close with nothing recovered after it must leave the
/// lane closed; a lane is never closed without a close (or an earlier recovery's closed
/// state) after its last recovered put.
#[test]
fn closed_lanes_follow_the_contract() {
    let close = |op, lane, start, ack| Issued { op, lane, start, ack, close: true, ..Default::default() };
    let is = vec![
        op(0, 0, 10, Some(20), &[("a", 1, b"A1")]),
        close(1, 0, 20, Some(30)),
        op(2, 0, 30, Some(40), &[("a", 2, b"A2")]),
        close(3, 0, 40, Some(50)),
    ];
    let a1 = rec("a", 1, 0, b"A1");
    let a2 = rec("a", 2, 0, b"A2");
    let r = |objects: Vec<Rec>, closed: &[u32]| Recovered { objects, closed: closed.to_vec(), ..Recovered::default() };
    let none = Recovered::default();
    assert_eq!(oracle(&is, 30, &none, &r(vec![a1.clone()], &[0])), Ok(()));
    assert!(oracle(&is, 30, &none, &r(vec![a1.clone()], &[])).unwrap_err().contains("acknowledged close is lost"));
    assert_eq!(oracle(&is, 25, &none, &r(vec![a1.clone()], &[])), Ok(()), "while the close runs, either");
    assert_eq!(oracle(&is, 25, &none, &r(vec![a1.clone()], &[0])), Ok(()));
    assert!(oracle(&is, 15, &none, &r(vec![a1.clone()], &[0])).unwrap_err().contains("may only be open"));
    assert!(oracle(&is, 40, &none, &r(vec![a1.clone(), a2.clone()], &[0])).unwrap_err().contains("may only be open"));
    assert_eq!(
        oracle(&is, 35, &none, &r(vec![a1.clone()], &[0])),
        Ok(()),
        "the put after the close lost: still closed"
    );
    assert_eq!(oracle(&is, 50, &none, &r(vec![a1.clone(), a2.clone()], &[0])), Ok(()));
    assert!(oracle(&is, 50, &none, &r(vec![a1.clone(), a2.clone()], &[]))
        .unwrap_err()
        .contains("acknowledged close is lost"));
    assert!(oracle(&is, 50, &none, &r(vec![a1.clone(), a2.clone()], &[0, 1])).unwrap_err().contains("lane 1"));
    // Depth 2: the earlier recovery's closed lane stays closed until a put of it is recovered.
    let durable = r(vec![a1.clone()], &[0]);
    let later = vec![op(0, 0, 10, None, &[("a", 2, b"A2")])];
    assert_eq!(oracle(&later, 20, &durable, &r(vec![a1.clone()], &[0])), Ok(()));
    assert!(oracle(&later, 20, &durable, &r(vec![a1.clone()], &[])).unwrap_err().contains("may only be closed"));
    assert_eq!(oracle(&later, 20, &durable, &r(vec![a1.clone(), a2.clone()], &[])), Ok(()));
    assert!(oracle(&later, 20, &durable, &r(vec![a1.clone(), a2], &[0])).unwrap_err().contains("may only be open"));
    // Detach markers: the last marker after the last recovered put decides (detached,
    // closed, or open with none); a close after a detach leaves the lane closed.
    let detach = |op, lane, start, ack| Issued { op, lane, start, ack, detach: true, ..Default::default() };
    let is = vec![op(0, 0, 10, Some(20), &[("a", 1, b"A1")]), detach(1, 0, 20, Some(30)), close(2, 0, 30, Some(40))];
    let s = |closed: &[u32], detached: &[u32]| Recovered {
        objects: vec![a1.clone()],
        closed: closed.to_vec(),
        detached: detached.to_vec(),
        ..Recovered::default()
    };
    assert_eq!(oracle(&is, 30, &none, &s(&[], &[0])), Ok(()));
    assert!(oracle(&is, 30, &none, &s(&[], &[])).unwrap_err().contains("acknowledged detach is lost"));
    assert!(oracle(&is, 30, &none, &s(&[0], &[])).unwrap_err().contains("may only be detached"));
    assert_eq!(oracle(&is, 35, &none, &s(&[0], &[])), Ok(()), "while the close runs, either");
    assert_eq!(oracle(&is, 35, &none, &s(&[], &[0])), Ok(()));
    assert!(oracle(&is, 35, &none, &s(&[], &[])).unwrap_err().contains("acknowledged detach is lost"));
    assert!(oracle(&is, 45, &none, &s(&[], &[0])).unwrap_err().contains("acknowledged close is lost"));
    assert!(oracle(&is, 45, &none, &s(&[0], &[0])).unwrap_err().contains("closed and detached"));
    assert!(oracle(&is, 15, &none, &s(&[], &[0])).unwrap_err().contains("may only be open"));
}

/// The lane-names family is not vacuous: its pools have lane names, both lanes end up
/// holding the same (name, version), its reclaims release objects and its deltas are
/// stored as deltas. And in the oracle, an object recovered on the other lane than the
/// one that wrote it is a phantom, even where that lane wrote the same (name, version).
#[test]
fn lane_names_family_repeats_versions_across_lanes() {
    use nvs_core::{HeapMemory, Pool};
    let fams = nvs_verify::workload::families();
    let fam = fams.iter().find(|f| f.name == "lane-names").unwrap();
    let (mut shared, mut released, mut deltas) = (0, 0, 0);
    for w in &fam.workloads {
        assert!(w.setup.lane_names);
        let t = nvs_verify::workload::run(w).unwrap();
        released += t.issued.iter().map(|i| i.released.len()).sum::<usize>();
        let rec = nvs_verify::check::recover_all(&t.media).unwrap();
        let pool = Pool::open_read_only(&t.media, HeapMemory::new()).unwrap();
        assert!(pool.layout().lane_names);
        for (n, v, lane, _) in &rec.objects {
            shared += usize::from(*lane == 0 && rec.objects.iter().any(|o| (&o.0, o.1, o.2) == (n, *v, 1)));
            deltas += usize::from(pool.stat(Key::on(*lane, n), *v).unwrap().depth > 0);
        }
    }
    assert!(shared > 100, "only {shared} (name, version) on both lanes");
    assert!(released > 20, "only {released} objects released");
    assert!(deltas > 20, "only {deltas} delta versions");
    let is = vec![op(0, 0, 10, Some(20), &[("a", 1, b"A")]), op(1, 1, 20, Some(30), &[("a", 1, b"B")])];
    assert_eq!(o(&is, 40, &[], &[rec("a", 1, 0, b"A"), rec("a", 1, 1, b"B")]), Ok(()));
    let e = o(&is, 25, &[], &[rec("a", 1, 0, b"A"), rec("a", 1, 1, b"A")]).unwrap_err();
    assert!(e.contains("wrong bytes"), "{e}");
    let e = o(&is[..1], 25, &[], &[rec("a", 1, 0, b"A"), rec("a", 1, 1, b"A")]).unwrap_err();
    assert!(e.contains("phantom") && e.contains("written on lane 0"), "{e}");
}

/// The `ops4` family does what it says: its workloads write all 3 lanes, and their
/// reclaims release objects of units spanning 2 and 3 segments (so the checks of
/// retention among spans are not vacuous).
#[test]
fn ops4_family_writes_three_lanes_and_releases_spans() {
    let fams = nvs_verify::workload::families();
    let fam = fams.iter().find(|f| f.name == "ops4").unwrap();
    assert_eq!(fam.workloads.len(), 9 + 81 + 729 + 6561);
    let (mut lanes, mut released_spans) = (BTreeSet::new(), BTreeSet::new());
    for w in fam.workloads.iter() {
        let t = nvs_verify::workload::run(w).unwrap();
        let size_of = |lane: u32, name: &[u8], v: u64| {
            let put = t.issued.iter().flat_map(|i| i.objects.iter().map(move |o| (i.lane, o)));
            put.filter(|(l, o)| *l == lane && o.0 == name && o.1 == v).map(|(_, o)| o.2.len()).next()
        };
        for i in &t.issued {
            lanes.extend(i.objects.iter().map(|_| i.lane));
            for (lane, name, v) in &i.released {
                // The unit's size: the op that put it (a vectored op's object holds all parts).
                if let Some(n) = size_of(*lane, name, *v).filter(|&n| n > 4096) {
                    released_spans.insert(n.div_ceil(4096));
                }
            }
        }
    }
    assert_eq!(lanes, BTreeSet::from([0, 1, 2]));
    assert!(
        released_spans.contains(&2) && released_spans.contains(&3),
        "released spans of {released_spans:?} segments"
    );
}
