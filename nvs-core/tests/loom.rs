//! loom models of the concurrent paths: every interleaving (within the preemption
//! bound) of the real pool code, with a media whose words are loom atomics. Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p nvs-core --test loom --release`.
//!
//! The media models publication, not persistence: payload words are Relaxed stores,
//! `fence` is a SeqCst fence, the commit word a Release store and its load an Acquire —
//! the x86 guarantees a reader in another process relies on.
#![cfg(loom)]

use loom::sync::atomic::{fence, AtomicU64, Ordering};
use loom::sync::Arc;
use nvs_core::{FormatOptions, HeapMemory, Media, Pool};

struct LoomMedia {
    words: Vec<AtomicU64>,
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
            self.0.words[off / 8 + k].store(u64::from_le_bytes(w), Ordering::Relaxed);
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
}

type LPool = Pool<Shared, HeapMemory>;

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
    let media = Shared(Arc::new(LoomMedia { words: (0..(4096 * 4) / 8).map(|_| AtomicU64::new(0)).collect() }));
    let mut o = FormatOptions::new(9);
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
                spawn(move || p.lane(lane).unwrap().put(b"x", &[lane as u8; 9]).unwrap())
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

/// A writer publishes while a reader looks up `latest`: the reader sees nothing or the
/// committed object, never a version without its bytes.
#[test]
fn writer_publishes_while_reader_reads_latest() {
    model(|| {
        let (_, p) = pool();
        p.lane(0).unwrap().put(b"k", &[1; 16]).unwrap();
        let w = {
            let p = p.clone();
            spawn(move || p.lane(0).unwrap().put(b"k", &[2; 16]).unwrap())
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
                    p.lane(lane).unwrap().put(&name, &[lane as u8 + 1; 8]).unwrap()
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
/// Preemption bound 1: the follower's recovery loads every header word twice (the
/// retention walk, then the indexing walk), each load a loom branch point; at bound 2
/// this model alone runs for many minutes.
#[test]
fn lane_closing_while_a_follower_reads() {
    model_bounded(Some(1), || {
        let (media, p) = pool();
        p.lane(0).unwrap().put(b"k", &[7; 8]).unwrap();
        let w = {
            let p = p.clone();
            spawn(move || {
                let mut w = p.lane(0).unwrap();
                w.put(b"k", &[8; 8]).unwrap();
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
