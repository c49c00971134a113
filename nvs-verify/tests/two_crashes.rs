//! Regression: two crashes around a segment claim must not make a pool unopenable.
//!
//! One lane, 4 KiB segments: puts fill segment 0 and a third claims segment 1; a crash
//! tears that claim (some header words persisted, the magic did not), so recovery
//! rightly treats the segment as free. A writer reopens, puts a small object (segment 0)
//! and a 1,500-byte one, which claims segment 1 again and rewrites the same magic,
//! pool-id and lane words. If a second crash persists only those, the torn words of the
//! first claim complete a valid header with the old first sequence number — and
//! recovery used to fail with `Corrupted(SequenceGap)` with every acknowledged put
//! intact. Every image of both crashes is explored here.

use nvs_sim::fence_points;
use nvs_verify::check::check_trace;
use nvs_verify::workload::{run, Op, Setup, Workload};

fn check(ops: Vec<Op>, then: Vec<Op>) {
    let r = check_deep(ops, &[then]);
    // Both crashes were really explored: many first images, each with nested ones.
    assert!(r.points >= 5 && r.states > 500, "{r:?}");
}

/// Every image of `ops` crashed, and of each later crash with `then`.
fn check_deep(ops: Vec<Op>, then: &[Vec<Op>]) -> nvs_verify::check::Counts {
    let w = Workload { id: "crashes".into(), setup: Setup::small(), ops };
    let trace = run(&w).unwrap();
    let points: Vec<usize> =
        fence_points(&trace.media.events()).into_iter().filter(|&p| p >= trace.format_end).collect();
    let r = check_trace(|p| trace.media.crash_state(p), &points, &trace.issued, then, true);
    assert!(r.failures.is_empty(), "{:?}", r.failures);
    assert_eq!(r.counts.incomplete, 0);
    r.counts
}

#[test]
fn a_torn_claim_then_the_same_claim_torn_again() {
    let fill = Op::Put { lane: 0, size: 1500 };
    check(vec![fill.clone(), fill.clone(), fill], vec![Op::Put { lane: 0, size: 77 }, Op::Put { lane: 0, size: 1500 }]);
}

#[test]
fn a_torn_claim_of_a_released_segment() {
    let fill = Op::Put { lane: 0, size: 1500 };
    let mut ops = vec![fill.clone(); 4];
    ops.extend([Op::Reclaim { keep: 1 }, fill.clone(), fill.clone()]);
    check(ops, vec![Op::Put { lane: 0, size: 77 }, fill]);
}

/// Three crashes: a torn claim, the writer's recovery and reclaim torn at every point,
/// and each of those images' recovery and a claiming put torn again. The third crash
/// is really explored: many more states than the first two alone.
#[test]
fn a_torn_claim_its_recovery_torn_and_that_recovery_torn() {
    let fill = Op::Put { lane: 0, size: 1500 };
    let ops = vec![fill.clone(); 3];
    let two = check_deep(ops.clone(), &[vec![Op::Reclaim { keep: 1 }]]);
    let three = check_deep(ops, &[vec![Op::Reclaim { keep: 1 }], vec![fill]]);
    assert_eq!(two.points, three.points);
    assert!(three.states > 3 * two.states, "{} states at depth 3, {} at depth 2", three.states, two.states);
}
