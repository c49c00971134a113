//! Litmus tests of the persistency model itself: each runs a tiny program on SimMedia,
//! crashes at a point, enumerates what the named words may hold, and asserts both an
//! allowed outcome set and forbidden outcomes.

use nvs_core::Media;
use nvs_sim::{all_points, explore, fence_points, CrashView, SimMedia, State, Verdict};
use std::collections::BTreeSet;

type Outcomes = BTreeSet<Vec<u64>>;

/// Every tuple the given words can hold after a crash at `point` (lazy exploration).
fn outcomes_of(state: State, words: &[usize]) -> (Outcomes, u64) {
    let mut seen = Outcomes::new();
    let v = explore(1 << 16, |ch| {
        let view = CrashView::new(state.clone(), ch.clone());
        seen.insert(words.iter().map(|&w| view.load_word(w * 8)).collect());
        Ok(())
    });
    let Verdict::Pass { runs } = v else { panic!("{v:?}") };
    (seen, runs)
}

fn outcomes(m: &SimMedia, point: usize, words: &[usize]) -> Outcomes {
    outcomes_of(m.crash_state(point), words).0
}

fn set(v: &[&[u64]]) -> Outcomes {
    v.iter().map(|t| t.to_vec()).collect()
}

fn media() -> SimMedia {
    SimMedia::from_bytes(&[0u8; 256])
}

/// A run of `f` on a new thread (fences are per thread).
fn on_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| s.spawn(f).join().unwrap())
}

const X: usize = 0; // word 0, line 0
const Y: usize = 1; // word 1, line 0
const Z: usize = 8; // word 8, line 1

#[test]
fn nt_store_is_pending_before_its_fence() {
    let m = media();
    m.store_word_nt(X * 8, 1);
    assert_eq!(outcomes(&m, m.point(), &[X]), set(&[&[0], &[1]]));
}

#[test]
fn nt_store_is_durable_after_its_fence() {
    let m = media();
    m.store_word_nt(X * 8, 1);
    m.fence();
    let o = outcomes(&m, m.point(), &[X]);
    assert_eq!(o, set(&[&[1]]));
    assert!(!o.contains(&vec![0]));
}

#[test]
fn nt_stores_reorder_before_a_fence() {
    let m = media();
    m.store_word_nt(X * 8, 1);
    m.store_word_nt(Y * 8, 1);
    assert_eq!(outcomes(&m, m.point(), &[X, Y]), set(&[&[0, 0], &[0, 1], &[1, 0], &[1, 1]]));
}

#[test]
fn a_fence_orders_earlier_before_later() {
    let m = media();
    m.store_word_nt(X * 8, 1);
    m.fence();
    m.store_word_nt(Y * 8, 1);
    let o = outcomes(&m, m.point(), &[X, Y]);
    assert_eq!(o, set(&[&[1, 0], &[1, 1]]));
    assert!(!o.contains(&vec![0, 1]), "the later store persisted without the earlier");
}

#[test]
fn another_threads_fence_does_not_persist_my_store() {
    let m = media();
    on_thread(|| m.store_word_nt(X * 8, 1));
    on_thread(|| m.fence());
    assert_eq!(outcomes(&m, m.point(), &[X]), set(&[&[0], &[1]]));
}

#[test]
fn my_fence_persists_only_my_stores() {
    let m = media();
    let (a_stored, b_stored) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    std::thread::scope(|s| {
        s.spawn(|| {
            m.store_word_nt(X * 8, 1);
            a_stored.wait();
            b_stored.wait();
            m.fence();
        });
        s.spawn(|| {
            a_stored.wait();
            m.store_word_nt(Y * 8, 1);
            b_stored.wait();
        });
    });
    let o = outcomes(&m, m.point(), &[X, Y]);
    assert_eq!(o, set(&[&[1, 0], &[1, 1]]));
    assert!(!o.contains(&vec![0, 0]));
}

#[test]
fn a_pending_word_may_hold_any_value_written_since() {
    let m = media();
    m.store_word_nt(X * 8, 1);
    m.store_word_nt(X * 8, 2);
    assert_eq!(outcomes(&m, m.point(), &[X]), set(&[&[0], &[1], &[2]]));
}

#[test]
fn values_before_the_last_durable_one_are_gone() {
    let m = media();
    m.store_word_nt(X * 8, 1);
    m.fence();
    m.store_word_nt(X * 8, 2);
    m.store_word_nt(X * 8, 3);
    let o = outcomes(&m, m.point(), &[X]);
    assert_eq!(o, set(&[&[1], &[2], &[3]]));
    assert!(!o.contains(&vec![0]));
}

#[test]
fn rewriting_a_words_value_is_not_a_branch_point() {
    let mut img = [0u8; 64];
    img[..8].copy_from_slice(&5u64.to_le_bytes());
    let m = SimMedia::from_bytes(&img);
    m.store_word_nt(X * 8, 5);
    let (o, runs) = outcomes_of(m.crash_state(m.point()), &[X]);
    assert_eq!(o, set(&[&[5]]));
    assert_eq!(runs, 1, "no choice should have been made");
}

#[test]
fn a_wide_nt_store_tears_at_word_boundaries() {
    let m = media();
    m.store_nt(0, &[0xFF; 16]);
    let all = u64::MAX;
    assert_eq!(outcomes(&m, m.point(), &[X, Y]), set(&[&[0, 0], &[0, all], &[all, 0], &[all, all]]));
}

#[test]
fn an_unaligned_cached_store_tears_but_keeps_line_order() {
    let m = media();
    m.store(4, &[0xAB; 8]); // bytes 4..12: the top of word 0, the bottom of word 1
    let (lo, hi) = (0xABAB_ABAB_0000_0000u64, 0x0000_0000_ABAB_ABABu64);
    let o = outcomes(&m, m.point(), &[X, Y]);
    assert_eq!(o, set(&[&[0, 0], &[lo, 0], &[lo, hi]]));
    assert!(!o.contains(&vec![0, hi]), "same-line stores persist in order");
}

#[test]
fn a_cached_store_may_persist_without_a_flush() {
    let m = media();
    m.store(0, &1u64.to_le_bytes());
    m.fence();
    assert_eq!(outcomes(&m, m.point(), &[X]), set(&[&[0], &[1]]));
}

#[test]
fn a_flush_without_a_fence_guarantees_nothing() {
    let m = media();
    m.store(0, &1u64.to_le_bytes());
    m.flush(0, 8);
    assert_eq!(outcomes(&m, m.point(), &[X]), set(&[&[0], &[1]]));
}

#[test]
fn flush_then_fence_makes_a_cached_store_durable() {
    let m = media();
    m.store(0, &1u64.to_le_bytes());
    m.flush(0, 8);
    m.fence();
    let o = outcomes(&m, m.point(), &[X]);
    assert_eq!(o, set(&[&[1]]));
}

#[test]
fn cached_stores_to_one_line_persist_in_order() {
    let m = media();
    m.store(X * 8, &1u64.to_le_bytes());
    m.store(Y * 8, &1u64.to_le_bytes());
    let o = outcomes(&m, m.point(), &[X, Y]);
    assert_eq!(o, set(&[&[0, 0], &[1, 0], &[1, 1]]));
    assert!(!o.contains(&vec![0, 1]));
}

#[test]
fn cached_stores_to_different_lines_are_unordered() {
    let m = media();
    m.store(X * 8, &1u64.to_le_bytes());
    m.store(Z * 8, &1u64.to_le_bytes());
    assert_eq!(outcomes(&m, m.point(), &[X, Z]), set(&[&[0, 0], &[0, 1], &[1, 0], &[1, 1]]));
}

#[test]
fn another_thread_may_flush_and_fence_my_line() {
    let m = media();
    on_thread(|| m.store(0, &1u64.to_le_bytes()));
    on_thread(|| {
        m.flush(0, 8);
        m.fence();
    });
    assert_eq!(outcomes(&m, m.point(), &[X]), set(&[&[1]]));
}

#[test]
fn a_flush_needs_the_flushing_threads_fence() {
    let m = media();
    on_thread(|| m.store(0, &1u64.to_le_bytes()));
    on_thread(|| m.flush(0, 8));
    on_thread(|| m.fence());
    assert_eq!(outcomes(&m, m.point(), &[X]), set(&[&[0], &[1]]));
}

#[test]
fn a_fenced_nt_store_overrides_an_earlier_cached_one() {
    let m = media();
    m.store(0, &1u64.to_le_bytes());
    m.store_word_nt(0, 2);
    m.fence();
    let o = outcomes(&m, m.point(), &[X]);
    assert_eq!(o, set(&[&[2]]));
    assert!(!o.contains(&vec![1]));
}

#[test]
fn crash_states_stack_on_undecided_bases() {
    // Crash 1 leaves x undecided; recovery writes y only; crash 2: x still either.
    let m = media();
    m.store_word_nt(X * 8, 1);
    let s1 = m.crash_state(m.point());
    let mut seen = Outcomes::new();
    let v = explore(100, |ch| {
        let m2 = SimMedia::on(nvs_sim::View::new(s1.clone(), ch.clone()));
        m2.store_word_nt(Y * 8, 7);
        m2.fence();
        m2.store_word_nt(X * 8, 9);
        let view = CrashView::new(m2.crash_state(m2.point()), ch.clone());
        seen.insert(vec![view.load_word(X * 8), view.load_word(Y * 8)]);
        Ok(())
    });
    assert!(matches!(v, Verdict::Pass { .. }));
    assert_eq!(seen, set(&[&[0, 7], &[1, 7], &[9, 7]]));
}

#[test]
fn lazy_exploration_branches_only_on_words_read() {
    let m = media();
    for w in 0..16 {
        m.store_word_nt(w * 8, 1);
    }
    let (o, runs) = outcomes_of(m.crash_state(m.point()), &[3]);
    assert_eq!(o, set(&[&[0], &[1]]));
    assert_eq!(runs, 2, "16 pending words, one read: two runs");
}

#[test]
fn eager_and_lazy_agree_and_eager_counts_every_image() {
    let m = media();
    m.store_word_nt(X * 8, 1);
    m.store_word_nt(Y * 8, 2);
    m.store(Z * 8, &3u64.to_le_bytes());
    let s = m.crash_state(m.point());
    let (lazy, lazy_runs) = outcomes_of(s.clone(), &[X, Z]);
    let mut eager = Outcomes::new();
    let v = explore(1000, |ch| {
        let mut view = nvs_sim::View::new(s.clone(), ch.clone());
        let img = view.materialize();
        let w = |i: usize| u64::from_le_bytes(img[i * 8..i * 8 + 8].try_into().unwrap());
        eager.insert(vec![w(X), w(Z)]);
        Ok(())
    });
    assert_eq!(lazy, eager);
    assert_eq!(lazy_runs, 4);
    assert_eq!(v.runs(), 8, "eager branches on y too");
}

#[test]
fn fence_points_cover_every_crash_point() {
    // A small program over three words with fences in between: the union of outcomes
    // at the fence points equals the union over all points.
    let m = media();
    m.store_word_nt(X * 8, 1);
    m.store_word_nt(Y * 8, 1);
    m.fence();
    m.store_word_nt(Z * 8, 1);
    m.store_word_nt(X * 8, 2);
    m.fence();
    m.store_word_nt(Y * 8, 3);
    let ev = m.events();
    let union = |pts: Vec<usize>| -> Outcomes { pts.into_iter().flat_map(|p| outcomes(&m, p, &[X, Y, Z])).collect() };
    let fp = union(fence_points(&ev));
    assert_eq!(fp, union(all_points(&ev)));
    assert!(!fp.contains(&vec![2, 0, 0]), "x=2 was written after the fence that made y=1 durable");
}

#[test]
fn budget_exhaustion_is_incomplete_never_pass() {
    let m = media();
    for w in 0..8 {
        m.store_word_nt(w * 8, 1);
    }
    let s = m.crash_state(m.point());
    let v = explore(10, |ch| {
        let view = CrashView::new(s.clone(), ch.clone());
        (0..8).for_each(|w| {
            view.load_word(w * 8);
        });
        Ok(())
    });
    assert_eq!(v, Verdict::Incomplete { runs: 10 });
}

/// The commit line persists as its first word alone: a crash before its fence shows the
/// old or the new commit word and the line's other words as they were (durable before).
#[test]
fn commit_line_is_one_word() {
    let m = media();
    let mut line = [0u8; 64];
    line[8..16].copy_from_slice(&7u64.to_le_bytes());
    m.store_nt(Z * 8, &line);
    m.fence();
    line[..8].copy_from_slice(&9u64.to_le_bytes());
    m.store_commit_line(Z * 8, &line);
    assert_eq!(outcomes(&m, m.point(), &[Z, Z + 1]), set(&[&[0, 7], &[9, 7]]));
    m.fence();
    assert_eq!(outcomes(&m, m.point(), &[Z, Z + 1]), set(&[&[9, 7]]));
}

/// A commit line that would change more than its first word is refused: the simulator
/// would otherwise model stores the caller did not mean.
#[test]
#[should_panic(expected = "changes its word 2")]
fn commit_line_changing_another_word_is_a_bug() {
    let m = media();
    let mut line = [0u8; 64];
    m.store_nt(Z * 8, &line);
    m.fence();
    line[0] = 9;
    line[16] = 1;
    m.store_commit_line(Z * 8, &line);
}
