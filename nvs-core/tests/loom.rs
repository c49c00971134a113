//! loom models of the concurrent paths: every interleaving (within the preemption
//! bound) of the real pool code, with a media whose words are loom atomics. Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p nvs-core --test loom --release`.
//!
//! The media models publication, not persistence: payload words are Relaxed stores,
//! `fence` is a SeqCst fence, the commit word a Release store and its load an Acquire —
//! the x86 guarantees a reader in another process relies on.
//!
//! The pools here have no payload checksums, so their units commit with two fences and a
//! commit word. A sealed unit (checksums on) is published by its fence and read only once
//! it verifies whole: a reader's check reads every payload word, a loom branch each, and
//! the models would not finish. Sealed units beside writer processes are checked by
//! nvs-verify's `sealed-processes` family instead (every crash image, readers included).
#![cfg(loom)]

use loom::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use loom::sync::Arc;
use nvs_core::Key;
use nvs_core::{FormatOptions, HeapMemory, Media, Object, Pool};

struct LoomMedia {
    words: Vec<AtomicU64>,
    /// The claim lock of writers in several processes (a spin lock here; a file lock in
    /// nvs-std).
    claims: AtomicBool,
}

#[derive(Clone)]
struct Shared(Arc<LoomMedia>);

impl Media for Shared {
    fn len(&self) -> usize {
        self.0.words.len() * 8
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        if dst.is_empty() {
            return;
        }
        for w in off / 8..=(off + dst.len() - 1) / 8 {
            let bytes = self.0.words[w].load(Ordering::Relaxed).to_le_bytes();
            for (k, b) in bytes.iter().enumerate() {
                let a = w * 8 + k;
                if a >= off && a < off + dst.len() {
                    dst[a - off] = *b;
                }
            }
        }
    }
    fn load_word(&self, off: usize) -> u64 {
        self.0.words[off / 8].load(Ordering::Acquire)
    }
    fn store_nt(&self, off: usize, src: &[u8]) {
        for (k, chunk) in src.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            let word = &self.0.words[off / 8 + k];
            // A word that already holds the value is left alone: no reader can tell, and
            // the put path's zero padding over fresh (zeroed) media then adds no loom
            // branch points (it made one model run for many minutes).
            // SAFETY (loom's contract for unsync_load): every store to this word is by
            // this thread or happened before it — words are stored only by the lane
            // that owns their segment, or before that lane claimed it under the lock.
            if unsafe { word.unsync_load() } == u64::from_le_bytes(w) {
                continue;
            }
            word.store(u64::from_le_bytes(w), Ordering::Relaxed);
        }
    }
    fn store_word_nt(&self, off: usize, word: u64) {
        self.0.words[off / 8].store(word, Ordering::Release);
    }
    fn store(&self, off: usize, src: &[u8]) {
        let mut cur = vec![0u8; src.len().next_multiple_of(8) + 8];
        let base = off & !7;
        self.read(base, &mut cur[..(off - base + src.len()).next_multiple_of(8)]);
        cur[off - base..off - base + src.len()].copy_from_slice(src);
        self.store_nt(base, &cur[..(off - base + src.len()).next_multiple_of(8)]);
    }
    fn flush(&self, _off: usize, _len: usize) {}
    fn fence(&self) {
        fence(Ordering::SeqCst);
    }
    fn lock_claims(&self) -> nvs_core::Result<()> {
        while self.0.claims.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            loom::thread::yield_now();
        }
        Ok(())
    }
    fn unlock_claims(&self) {
        self.0.claims.store(false, Ordering::Release);
    }
}

type LPool = Pool<Shared, HeapMemory>;

/// Fresh (zeroed) media of `pages` 4 KiB pages.
fn media(pages: usize) -> Shared {
    Shared(Arc::new(LoomMedia {
        words: (0..(4096 * pages) / 8).map(|_| AtomicU64::new(0)).collect(),
        claims: AtomicBool::new(false),
    }))
}

/// Stack for each model thread: a pool (256 lanes of state) and recovery live there.
const STACK: usize = 4 << 20;

/// `loom::model`, running the body on a thread with a big enough stack.
fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(None, f)
}

/// As [`model`], with a preemption bound of its own (`None`: LOOM_MAX_PREEMPTIONS).
fn model_bounded(preemptions: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let f = std::sync::Arc::new(f);
    let mut b = loom::model::Builder::new();
    b.max_branches = 1_000_000;
    if preemptions.is_some() {
        b.preemption_bound = preemptions;
    }
    b.check(move || {
        let f = f.clone();
        spawn(move || f()).join().unwrap();
    });
}

fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> loom::thread::JoinHandle<T> {
    loom::thread::Builder::new().stack_size(STACK).spawn(f).unwrap()
}

/// A fresh pool of 3 segments of 4 KiB, 2 lanes.
fn pool() -> (Shared, Arc<LPool>) {
    let media = media(4);
    let mut o = FormatOptions::new(9);
    o.payload_checksum = false; // two-fence units: see the module docs
    o.segment_len = Some(4096);
    o.lanes_max = 2;
    let p = Pool::format(media.clone(), o, HeapMemory::new()).unwrap();
    (media, Arc::new(p))
}

fn reopen(media: &Shared) -> LPool {
    Pool::open_read_only(media.clone(), HeapMemory::new()).unwrap()
}

/// Two lanes claim their first segments at once: they get different segments, and
/// both puts survive a reopen.
#[test]
fn concurrent_segment_claims() {
    model(|| {
        let (media, p) = pool();
        let hs: Vec<_> = (0..2u32)
            .map(|lane| {
                let p = p.clone();
                spawn(move || p.lane(lane).unwrap().put(Object::new(b"x", &[lane as u8; 9])).unwrap().version)
            })
            .collect();
        let vs: Vec<u64> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        assert_ne!(vs[0], vs[1], "two lanes took one version");
        let r = reopen(&media);
        assert_eq!(r.stats().segments_used, 2);
        let mut b = [0u8; 9];
        for lane in 0..2u32 {
            r.get(b"x", vs[lane as usize], &mut b).unwrap();
            assert_eq!(b, [lane as u8; 9]);
        }
    });
}

/// Two writer processes — two pools over one media, each opened for its own lane of a
/// pool with lane names — claim their first segments at once, each under the claim lock
/// after reading the other's headers: they get different segments, and both puts
/// survive a reopen.
#[test]
fn cross_process_segment_claims() {
    model(|| two_processes_put(false));
}

/// The same, the second process opening (a whole recovery, without the claim lock: the
/// headers read around it) while the first one claims and puts: it must not go wrong
/// whatever it saw. Bound 2: at 3 this model takes 20 minutes (every media word the
/// recovery reads races the claim).
#[test]
fn an_open_beside_a_claim() {
    model_bounded(Some(2), || two_processes_put(true));
}

/// Format a 2-lane pool with lane names; two writer processes (one per lane) each put
/// `x`; the first starts putting before the second opens if `open_while_putting`.
fn two_processes_put(open_while_putting: bool) {
    let media = media(4);
    let mut o = FormatOptions::new(9);
    o.payload_checksum = false; // two-fence units: see the module docs
    o.segment_len = Some(4096);
    o.lanes_max = 2;
    o.lane_names = true;
    drop(Pool::format(media.clone(), o, HeapMemory::new()).unwrap());
    let put =
        |mut p: LPool, lane: u32| spawn(move || p.put(lane, Object::new(b"x", &[lane as u8; 9])).unwrap().version);
    let open = |lane: u32| Pool::open_lanes(media.clone(), HeapMemory::new(), &[lane]).unwrap();
    let hs = match open_while_putting {
        true => {
            let first = put(open(0), 0);
            [first, put(open(1), 1)]
        }
        false => {
            let (p0, p1) = (open(0), open(1));
            [put(p0, 0), put(p1, 1)]
        }
    };
    let vs: Vec<u64> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(vs, [1, 1], "each lane's own name space");
    let r = reopen(&media);
    assert_eq!(r.stats().segments_used, 2);
    let mut b = [0u8; 9];
    for lane in 0..2u32 {
        r.get(Key::on(lane, b"x"), 1, &mut b).unwrap();
        assert_eq!(b, [lane as u8; 9]);
    }
}

/// A writer publishes while a reader looks up `latest`: the reader sees nothing or the
/// committed object, never a version without its bytes.
#[test]
fn writer_publishes_while_reader_reads_latest() {
    model(|| {
        let (_, p) = pool();
        p.lane(0).unwrap().put(Object::new(b"k", &[1; 16])).unwrap();
        let w = {
            let p = p.clone();
            spawn(move || p.lane(0).unwrap().put(Object::new(b"k", &[2; 16])).unwrap().version)
        };
        let v = p.latest(b"k").unwrap();
        let mut b = [0u8; 16];
        assert_eq!(p.get(b"k", v, &mut b), Ok(16));
        assert_eq!(b, [v as u8; 16]);
        assert_eq!(w.join().unwrap(), 2);
    });
}

/// Two writers on distinct lanes and a reader: the reader sees each name at a committed
/// version with its bytes; afterwards both are there.
#[test]
fn two_writers_and_a_reader() {
    model(|| {
        let (_, p) = pool();
        let hs: Vec<_> = (0..2u32)
            .map(|lane| {
                let p = p.clone();
                spawn(move || {
                    let name = [b'a' + lane as u8];
                    p.lane(lane).unwrap().put(Object::new(&name, &[lane as u8 + 1; 8])).unwrap().version
                })
            })
            .collect();
        let mut b = [0u8; 8];
        for lane in 0..2u8 {
            if let Ok(v) = p.latest(&[b'a' + lane]) {
                p.get(&[b'a' + lane], v, &mut b).unwrap();
                assert_eq!(b, [lane + 1; 8]);
            }
        }
        for h in hs {
            assert_eq!(h.join().unwrap(), 1);
        }
        assert_eq!(p.stats().objects, 2);
    });
}

/// A lane closes while a follower (another pool on the same media, as in another
/// process) recovers: the follower recovers without error, sees the committed object,
/// and sees the lane closed only with everything before the close.
///
/// Preemption bound 2: the follower's recovery loads every header word twice (the
/// retention walk, then the indexing walk), each load a loom branch point, so this
/// model grows fastest with the bound.
#[test]
fn lane_closing_while_a_follower_reads() {
    model_bounded(Some(2), || {
        let (media, p) = pool();
        p.lane(0).unwrap().put(Object::new(b"k", &[7; 8])).unwrap();
        let w = {
            let p = p.clone();
            spawn(move || {
                let mut w = p.lane(0).unwrap();
                w.put(Object::new(b"k", &[8; 8])).unwrap();
                w.close().unwrap();
            })
        };
        let f = reopen(&media);
        let latest = f.latest(b"k").unwrap();
        let mut b = [0u8; 8];
        f.get(b"k", latest, &mut b).unwrap();
        assert_eq!(b, [6 + latest as u8; 8]);
        if f.lane_info(0).unwrap().closed {
            assert_eq!(latest, 2, "closed before its last put was visible");
        }
        w.join().unwrap();
        assert!(reopen(&media).lane_info(0).unwrap().closed);
    });
}

/// Executions of [`a_reclaim_racing_a_reader_in_another_process`]; of them, how many
/// gave the reader the original bytes, how many `NotFound`, and in how many the reader's
/// get overlapped the writer's reclaim-and-put (counted outside loom, which runs every
/// model thread on one OS thread).
static RECLAIM_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static RECLAIM_OK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static RECLAIM_GONE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static RECLAIM_OVERLAP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static WRITER_STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static WRITER_DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A reclaim racing a reader in another process: a read-only pool on the same media,
/// opened while v1 of `k` was there, gets v1 while the writer releases v1's segment and
/// reuses it (v3 lands at v1's very payload offset). The reader gets v1's exact bytes or
/// `NotFound`, never v3's or a mix.
///
/// One lane, two segments of 4 KiB: v1 (8 bytes) in segment 0; v2 (3,776 bytes) does
/// not fit behind it and claims segment 1, leaving room for the truncate unit but not
/// for v3, which must claim a segment — and the only free one is segment 0.
///
/// Preemption bound 2: at bound 0 loom runs the reader only after the writer finished
/// (the stale reads are still explored, the interleavings are not).
#[test]
fn a_reclaim_racing_a_reader_in_another_process() {
    use std::sync::atomic::Ordering::Relaxed as R;
    let started = std::time::Instant::now();
    model_bounded(Some(2), || {
        RECLAIM_RUNS.fetch_add(1, R);
        WRITER_STARTED.store(false, R);
        WRITER_DONE.store(false, R);
        let media = media(3);
        let mut o = FormatOptions::new(9);
        o.payload_checksum = false; // two-fence units: see the module docs
        o.payload_checksum = false; // two-fence units: see the module docs
        o.segment_len = Some(4096);
        o.lanes_max = 1;
        let mut w: LPool = Pool::format(media.clone(), o, HeapMemory::new()).unwrap();
        assert_eq!(w.put(0, Object::new(b"k", &[1; 8])).unwrap().version, 1);
        assert_eq!(w.put(0, Object::new(b"k", &[2; 3776])).unwrap().version, 2);
        assert_eq!((w.stats().segments_used, w.free_segments()), (2, 0));
        // The reader's index lists v1 (the other process opened the pool before the reclaim).
        let r = reopen(&media);
        let v1_at = r.stat(b"k", 1).unwrap().offset;
        let writer = spawn(move || {
            WRITER_STARTED.store(true, R);
            assert_eq!(w.reclaim(1).unwrap(), 1);
            assert_eq!(w.put(0, Object::new(b"k", &[3; 8])).unwrap().version, 3);
            WRITER_DONE.store(true, R);
            assert_eq!(w.stat(b"k", 3).unwrap().offset, v1_at, "v3 did not reuse v1's place");
        });
        let reader = spawn(move || {
            let mut b = [0u8; 8];
            let writer_done = WRITER_DONE.load(R);
            let got = r.get(b"k", 1, &mut b);
            if !writer_done && WRITER_STARTED.load(R) {
                RECLAIM_OVERLAP.fetch_add(1, R);
            }
            match got {
                Ok(n) => {
                    assert_eq!((n, b), (8, [1; 8]), "the reader got bytes that are not v1's");
                    RECLAIM_OK.fetch_add(1, R);
                }
                Err(e) => {
                    assert_eq!(e, nvs_core::Error::NotFound);
                    RECLAIM_GONE.fetch_add(1, R);
                }
            }
        });
        writer.join().unwrap();
        reader.join().unwrap();
    });
    let (runs, ok, gone) = (RECLAIM_RUNS.load(R), RECLAIM_OK.load(R), RECLAIM_GONE.load(R));
    let overlap = RECLAIM_OVERLAP.load(R);
    eprintln!(
        "reclaim vs reader: {runs} executions ({ok} got v1, {gone} NotFound; the get overlapped the writer in {overlap}), {:.1?}",
        started.elapsed()
    );
    assert!(runs > 1, "loom explored {runs} execution(s): the model interleaves nothing");
    assert!(ok > 0 && gone > 0, "only one outcome ({ok} got v1, {gone} NotFound): the race is not explored");
    assert!(overlap > 0, "the reader's get never overlapped the writer: no interleaving explored");
}
