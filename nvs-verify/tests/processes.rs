//! Writer processes over one media (the `two-writers` and `process-crash` families):
//! the workloads do what they say — both writers claim segments in between each
//! other's operations, a paused writer has the other run inside its op, a dead
//! writer's cut op is decided both ways — and a sample of each family passes the
//! crash check.

use nvs_core::internals::format::{DATA_OFF, SEGMENT_MAGIC};
use nvs_sim::Event;
use nvs_verify::check::check_family;
use nvs_verify::workload::{families, run, Family, Op, Trace};
use std::collections::{BTreeMap, BTreeSet};

fn family(name: &str) -> Family {
    families().into_iter().find(|f| f.name == name).expect("the family")
}

/// The threads (writer processes) that claimed a segment, in trace order.
fn claims(t: &Trace) -> Vec<u32> {
    let seg = t.setup.segment_len;
    let header_word = |w: u32| {
        let off = w as u64 * 8;
        off >= DATA_OFF && (off - DATA_OFF).is_multiple_of(seg)
    };
    let events = t.media.events();
    let stores = events.iter().filter_map(|e| match *e {
        Event::Store { thread, word, value, .. } if value == SEGMENT_MAGIC && header_word(word) => Some(thread),
        _ => None,
    });
    stores.collect()
}

#[test]
fn both_writers_claim_segments_in_between_each_others_operations() {
    let fam = family("two-writers");
    let t = run(&fam.workloads[0]).unwrap();
    let c = claims(&t);
    assert_eq!(c.iter().collect::<BTreeSet<_>>().len(), 2, "claims by {c:?}");
    let turns = c.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(turns >= 3, "claims by {c:?}");
}

#[test]
fn a_paused_writer_has_the_other_claim_inside_its_op() {
    let fam = family("two-writers");
    let mut inside = 0;
    for w in fam.workloads.iter().filter(|w| w.ops.iter().any(|o| matches!(o, Op::Paused { .. }))) {
        let at = w.ops.iter().position(|o| matches!(o, Op::Paused { .. })).unwrap();
        let t = run(w).unwrap();
        let (start, end) = t.spans[at];
        let threads: BTreeSet<u32> = t.media.events()[start..end]
            .iter()
            .map(|e| match *e {
                Event::Store { thread, .. } | Event::Flush { thread, .. } | Event::Fence { thread } => thread,
            })
            .collect();
        inside += usize::from(threads.len() == 2);
    }
    assert!(inside >= 20, "only {inside} paused ops had the other writer run inside them");
}

#[test]
fn a_dead_writers_cut_op_is_decided_both_ways() {
    let fam = family("process-crash");
    let (mut whole, mut absent) = (0, 0);
    for w in &fam.workloads {
        let t = run(w).unwrap();
        assert!(t.check_from > t.format_end, "{}: crash points from the death on", w.id);
        let Some(at) = w.ops.iter().position(|o| matches!(o, Op::Crash { events, .. } if *events < usize::MAX)) else {
            continue;
        };
        let cut = t.issued.iter().find(|is| is.op == at).expect("the cut op's intent");
        match (cut.ack, cut.objects.is_empty() && !cut.close && !cut.join && cut.released.is_empty()) {
            (Some(_), false) => whole += 1,
            (None, true) => absent += 1,
            _ => {}
        }
    }
    assert!(whole >= 10 && absent >= 30, "whole {whole}, absent {absent}");
}

#[test]
fn a_takeover_continues_the_lanes_versions() {
    // Per (lane, name), the versions put (the dead writer's whole cut op included, an
    // absent one dropped) are 1, 2, 3, ...: the new writer goes on from what the dead
    // one committed, taking none twice and skipping none.
    for w in &family("process-crash").workloads {
        let t = run(w).unwrap();
        let mut seen: BTreeMap<(u32, &[u8]), u64> = BTreeMap::new();
        for is in &t.issued {
            for (name, v, _) in &is.objects {
                let last = seen.entry((is.lane, name)).or_insert(0);
                assert_eq!(*v, *last + 1, "{}: op {} on lane {}", w.id, is.op, is.lane);
                *last = *v;
            }
        }
    }
}

#[test]
fn a_sample_of_each_family_passes() {
    for name in ["two-writers", "process-crash"] {
        let fam = family(name);
        let workloads = fam.workloads.iter().step_by(9).cloned().collect();
        let sample = Family { workloads, ..fam };
        let r = check_family(&sample, 2, false);
        assert!(r.failures.is_empty(), "{name}: {:?}", r.failures);
        assert_eq!(r.counts.incomplete, 0);
        assert!(r.counts.points >= 40, "{name}: {:?}", r.counts);
    }
}
