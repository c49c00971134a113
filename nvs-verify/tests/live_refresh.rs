//! A refresh racing a reclaim, exhaustively at the granularity of reads: a reader's
//! recovery that read the media as it was before a writer's reclaim-and-reuse for its
//! first `k` reads and as it is after the writer's `j`-th store for the rest — for every
//! `j` of the writer's trace and every `k` — must never call the pool corrupted (a
//! refresh that sees the writer's moving state looks again), and what it then lists
//! reads back as written or is `NotFound`. Both ways a refresh can go: recovering, and
//! catching up from the old state (which must give up, not go wrong, when what it
//! reads moves under it).

use nvs_core::{Error, FormatOptions, HeapMemory, Media, Object, Pool};
use nvs_sim::{Event, SimMedia};
use std::cell::{Cell, RefCell};

/// A media that serves reads from `before` until it is armed, then from `before` for the
/// first `switch_at` reads and from `after` for the rest. Never stored to.
struct Switching {
    before: Vec<u8>,
    after: RefCell<Vec<u8>>,
    armed: Cell<bool>,
    reads: Cell<usize>,
    switch_at: Cell<usize>,
}

impl Switching {
    fn bytes(&self, f: impl FnOnce(&[u8])) {
        let n = self.reads.get();
        if self.armed.get() {
            self.reads.set(n + 1);
        }
        if self.armed.get() && n >= self.switch_at.get() {
            f(&self.after.borrow())
        } else {
            f(&self.before)
        }
    }
}

impl Media for &Switching {
    fn len(&self) -> usize {
        self.before.len()
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        self.bytes(|b| dst.copy_from_slice(&b[off..off + dst.len()]))
    }
    fn load_word(&self, off: usize) -> u64 {
        let mut w = 0;
        self.bytes(|b| w = u64::from_le_bytes(b[off..off + 8].try_into().unwrap()));
        w
    }
    fn store_nt(&self, _: usize, _: &[u8]) {
        panic!("a read-only pool stored")
    }
    fn store_word_nt(&self, _: usize, _: u64) {
        panic!("a read-only pool stored")
    }
    fn store(&self, _: usize, _: &[u8]) {
        panic!("a read-only pool stored")
    }
    fn flush(&self, _: usize, _: usize) {}
    fn fence(&self) {}
}

#[test]
fn a_refresh_that_sees_a_reclaim_midway_never_reports_corruption() {
    // One lane, two 4 KiB segments: v1 (8 bytes) in segment 0, v2 fills segment 1; the
    // writer's reclaim(1) releases segment 0 and v3 reuses it, at v1's very offset.
    let sim = SimMedia::from_bytes(&vec![0u8; 4096 * 3]);
    let mut o = FormatOptions::new(9);
    o.segment_len = Some(4096);
    o.lanes_max = 1;
    let mut w = Pool::format(&sim, o, HeapMemory::new()).unwrap();
    w.put(0, Object::new(b"k", &[1; 8])).unwrap();
    w.put(0, Object::new(b"k", &[2; 3776])).unwrap();
    let before = sim.volatile_bytes();
    let start = sim.point();
    assert_eq!(w.reclaim(1), Ok(1));
    assert_eq!(w.put(0, Object::new(b"k", &[3; 8])).map(|p| p.version), Ok(3));
    let events = sim.events();
    // The media after each of the writer's stores.
    let mut states = vec![before.clone()];
    let mut cur = before.clone();
    for e in &events[start..] {
        if let Event::Store { word, value, .. } = *e {
            cur[word as usize * 8..word as usize * 8 + 8].copy_from_slice(&value.to_le_bytes());
            states.push(cur.clone());
        }
    }
    let m = Switching {
        before: before.clone(),
        after: RefCell::new(before.clone()),
        armed: Cell::new(false),
        reads: Cell::new(0),
        switch_at: Cell::new(0),
    };
    let mut r = Pool::open_read_only(&m, HeapMemory::new()).unwrap();
    // How many reads one refresh of the old state makes (the switch can fall at any):
    // a recovery, and a catch-up from the old state (which reads far less).
    let count_reads = |r: &mut Pool<&Switching, HeapMemory>, catch_up: bool| {
        m.armed.set(false);
        r.refresh_by_recovery().unwrap();
        m.reads.set(0);
        m.switch_at.set(usize::MAX);
        m.armed.set(true);
        if catch_up { r.refresh() } else { r.refresh_by_recovery() }.unwrap();
        m.reads.get()
    };
    let reads = [count_reads(&mut r, false), count_reads(&mut r, true)];
    let (mut checked, mut gone) = (0, 0);
    for after in &states {
        *m.after.borrow_mut() = after.clone();
        for (k, catch_up) in (0..=reads[0]).map(|k| (k, false)).chain((0..=reads[1]).map(|k| (k, true))) {
            m.armed.set(false);
            if catch_up {
                // From the old state, read whole: the refresh then catches up (or gives up).
                r.refresh_by_recovery().unwrap();
            }
            m.reads.set(0);
            m.switch_at.set(k);
            m.armed.set(true);
            if catch_up { r.refresh() } else { r.refresh_by_recovery() }
                .unwrap_or_else(|e| panic!("switch after {k} reads (catch-up: {catch_up}): {e}"));
            // The media has moved on: gets read the writer's state.
            m.switch_at.set(0);
            let mut b = vec![0u8; 3776];
            for v in r.versions(b"k").unwrap().map(|i| i.version).collect::<Vec<_>>() {
                match r.get(b"k", v, &mut b) {
                    Ok(n) => assert!(b[..n].iter().all(|&x| x == v as u8), "v{v} wrong after a switch at {k}"),
                    Err(e) => {
                        assert_eq!(e, Error::NotFound);
                        gone += 1;
                    }
                }
            }
            checked += 1;
        }
    }
    println!(
        "{checked} refreshes ({} writer states x {} + {} switch points, recovering and catching up), {gone} gets NotFound",
        states.len(),
        reads[0] + 1,
        reads[1] + 1
    );
    assert!(checked > 1000);
}
