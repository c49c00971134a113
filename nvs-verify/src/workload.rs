//! Workloads: short sequences of pool operations over two or three lanes, in the
//! families of the crash check, and [`run`], which runs any of them on a recording
//! [`SimMedia`](nvs_sim::SimMedia) to get a trace and the model of what each operation
//! issued and when it was acknowledged: one writer by `crate::runner`, writer processes
//! by `crate::processes`.

pub use crate::contract::{Issued, ReadResult};
pub use crate::runner::{continue_with, every_sequence, Family, Op, Setup, Trace, Workload, Writers, DELTA_NAME};

/// Run a workload on a fresh recording media: by one writer, or by writer processes
/// ([`Writers::Processes`]).
pub fn run(w: &Workload) -> Result<Trace, String> {
    match w.setup.writers {
        Writers::One => crate::runner::run_one(w),
        Writers::Processes { drain } => crate::processes::run(w, drain),
    }
}

/// Payload sizes crossing word and cache-line boundaries, and multi-line.
pub const SIZES: [usize; 10] = [0, 1, 7, 8, 9, 63, 64, 65, 130, 300];

/// The operation kinds of the exhaustive family, sized by position.
fn op_kind(kind: usize, pos: usize) -> Op {
    let s = |k: usize| SIZES[(pos * 3 + k) % SIZES.len()];
    match kind {
        0 => Op::Put { lane: 0, size: s(0) },
        1 => Op::Put { lane: 1, size: s(1) },
        2 => Op::Vectored { lane: 0, sizes: vec![s(0), s(1), s(2)] },
        3 => Op::Vectored { lane: 1, sizes: vec![s(2), s(0)] },
        4 => Op::Batch { lane: 0, sizes: vec![s(0), s(1)] },
        5 => Op::Batch { lane: 1, sizes: vec![s(1), s(2), s(0)] },
        _ => Op::Reopen,
    }
}

/// Every sequence of 1 to `max_len` operations drawn from the 7 kinds.
pub fn sequences(max_len: usize) -> Vec<Vec<Op>> {
    every_sequence(7, max_len, op_kind)
}

/// The operation kinds of the `ops4` family over 3 lanes, sized by position: small
/// puts, vectored and batched, spans of 2 and 3 segments (4 KiB), retention, reopens.
fn op4_kind(kind: usize, pos: usize) -> Op {
    let s = |k: usize| SIZES[(pos * 3 + k) % SIZES.len()];
    match kind {
        0 => Op::Put { lane: 0, size: s(0) },
        1 => Op::Put { lane: 1, size: s(1) },
        2 => Op::Put { lane: 2, size: s(2) },
        3 => Op::Vectored { lane: 2, sizes: vec![s(0), s(1), s(2)] },
        4 => Op::Batch { lane: 1, sizes: vec![s(1), s(2), s(0)] },
        5 => Op::Put { lane: 0, size: 5000 },
        6 => Op::Vectored { lane: 1, sizes: vec![4000, 7, 4500] },
        7 => Op::Reclaim { keep: 1 },
        _ => Op::Reopen,
    }
}

fn family(name: &'static str, what: &'static str, setup: Setup, seqs: Vec<Vec<Op>>) -> Family {
    let workloads = seqs
        .into_iter()
        .enumerate()
        .map(|(i, ops)| Workload { id: format!("{name}/{i}"), setup: setup.clone(), ops })
        .collect();
    Family { name, what, workloads, all_points: false, then: vec![], in_format: false }
}

/// The families of the crash check.
pub fn families() -> Vec<Family> {
    let mut fams = Vec::new();
    fams.push(family("ops", "every sequence of 1-3 ops over 2 lanes", Setup::small(), sequences(3)));
    fams.push(family(
        "ops4",
        "every sequence of 1-4 ops over 3 lanes (spans of 2 and 3 segments, reclaims, reopens)",
        Setup { lanes: 3, segments: 16, ..Setup::small() },
        every_sequence(9, 4, op4_kind),
    ));
    let mut stale = family(
        "stale",
        "the same, over an earlier pool's bytes",
        Setup { stale: true, ..Setup::small() },
        sequences(3),
    );
    stale.workloads.retain(|w| w.ops.len() <= 2 || w.ops.iter().all(|o| *o != Op::Reopen));
    fams.push(stale);
    let big = |kind: usize, pos: usize| {
        let s = [1500, 2600, 3900][(kind + pos) % 3];
        match kind {
            0 => Op::Put { lane: 0, size: s },
            1 => Op::Put { lane: 1, size: s },
            2 => Op::Batch { lane: 0, sizes: vec![s / 2, s / 3] },
            _ => Op::Vectored { lane: 1, sizes: vec![s / 3, 7, s / 2] },
        }
    };
    let mut seg = Vec::new();
    for a in 0..4 {
        for b in 0..4 {
            seg.push(vec![big(a, 0), big(b, 1)]);
            for c in 0..4 {
                seg.push(vec![big(a, 0), big(b, 1), big(c, 2)]);
            }
        }
    }
    fams.push(family("segment", "multi-line objects crossing segment boundaries", Setup::small(), seg));
    // A claim torn by a crash, then the same segment claimed again.
    let fill = |lane| Op::Put { lane, size: 1500 };
    fams.push(family(
        "claims",
        "segment claims on both lanes, reclaimed and claimed again",
        Setup::small(),
        vec![
            vec![fill(0), fill(0), fill(0)],
            vec![fill(0), fill(1), fill(0), fill(0)],
            vec![fill(0), fill(0), fill(0), Op::Reclaim { keep: 1 }, fill(0), fill(0)],
        ],
    ));
    let full_setup = Setup { segments: 3, ..Setup::small() };
    let mut full = Vec::new();
    for lanes in [[0u32, 0, 0, 0, 0], [0, 1, 0, 1, 0], [1, 1, 0, 0, 1]] {
        full.push(lanes.iter().map(|&lane| Op::Put { lane, size: 2000 }).collect());
        full.push(lanes.iter().map(|&lane| Op::Batch { lane, sizes: vec![900, 900] }).collect());
    }
    fams.push(family("full", "puts until the pool is full (refusals store nothing)", full_setup, full));
    let close_kinds = |k: usize, pos: usize| match k {
        0 => Op::Close { lane: 0 },
        1 => Op::Close { lane: 1 },
        k => op_kind(k - 2, pos),
    };
    let mut close = Vec::new();
    for a in 0..5 {
        for b in 0..5 {
            close.push(vec![close_kinds(a, 0), close_kinds(b, 1)]);
            for c in 0..5 {
                close.push(vec![close_kinds(a, 0), close_kinds(b, 1), close_kinds(c, 2)]);
            }
        }
    }
    fams.push(family("close", "end-of-stream markers between puts", Setup::small(), close));
    // Marker units alone (no puts): the commit-sequence mutants must be killed through an
    // end-of-stream unit too, which is sealed by the same function as a put's unit.
    let c = |lane| Op::Close { lane };
    fams.push(family(
        "markers",
        "end-of-stream markers only, no puts",
        Setup::small(),
        vec![vec![c(0)], vec![c(1)], vec![c(0), c(1)], vec![c(0), c(0)], vec![c(1), c(0), c(1)]],
    ));
    // Joins: taking a lane claims its segment (fenced) before any unit, so a follower
    // counts the lane; around puts, closes, a rollover and a reopen.
    let join_kinds = |k: usize, pos: usize| match k {
        0 => Op::Join { lane: 0 },
        1 => Op::Join { lane: 1 },
        2 => Op::Close { lane: 1 },
        3 => Op::Reopen,
        k => op_kind(k - 4, pos),
    };
    let mut join = Vec::new();
    for a in 0..6 {
        for b in 0..6 {
            join.push(vec![join_kinds(a, 0), join_kinds(b, 1)]);
            if a < 2 {
                for c in 0..6 {
                    join.push(vec![join_kinds(a, 0), join_kinds(b, 1), join_kinds(c, 2)]);
                }
            }
        }
    }
    fams.push(family("join", "lanes taken for writing (a claim, no unit) among puts and closes", Setup::small(), join));
    // Retention: puts big enough to fill segments, reclaims between them, reopens.
    let keep_kinds = |k: usize, pos: usize| match k {
        0 => Op::Reclaim { keep: 1 },
        1 => Op::Reopen,
        2 => Op::Put { lane: 0, size: 1500 + 300 * pos },
        3 => Op::Put { lane: 1, size: 2500 },
        _ => Op::Batch { lane: 0, sizes: vec![1200, 900] },
    };
    let mut keep = Vec::new();
    for a in [2usize, 4] {
        for b in 0..5 {
            for c in 0..5 {
                for d in 0..5 {
                    keep.push(vec![
                        keep_kinds(a, 0),
                        keep_kinds(2, 1),
                        keep_kinds(b, 2),
                        keep_kinds(c, 3),
                        keep_kinds(d, 4),
                        Op::Reclaim { keep: 1 },
                    ]);
                }
            }
        }
    }
    // Same-size units, so a lane reusing its own released segment leaves old units of
    // that lane exactly at its new tail.
    for size in [1500, 1800, 900] {
        let put = Op::Put { lane: 0, size };
        let mut ops = vec![put.clone(); 6];
        ops.extend([Op::Reclaim { keep: 1 }, put.clone(), put.clone(), Op::Reopen, put.clone()]);
        keep.push(ops);
    }
    fams.push(family("retention", "reclaims (keep 1) between puts filling segments", Setup::small(), keep));
    let mut allp = family("allpoints", "a crash after every single event", Setup::small(), sequences(2));
    allp.all_points = true;
    fams.push(allp);
    // Delta puts of one name, on both lanes, between reopens, reclaims and a filler.
    let delta_kinds = |k: usize| match k {
        0 => Op::Delta { lane: 0, size: 1000, changes: vec![(10, 5)] },
        1 => Op::Delta { lane: 0, size: 1000, changes: vec![(100, 1), (700, 130)] },
        2 => Op::Delta { lane: 1, size: 1000, changes: vec![(0, 1000)] },
        3 => Op::Reopen,
        4 => Op::Reclaim { keep: 1 },
        5 => Op::Put { lane: 0, size: 2500 },
        // Another size: a full version, whatever the parent (then deltas of the new size).
        _ => Op::Delta { lane: 0, size: 700, changes: vec![(5, 10)] },
    };
    let mut deltas = Vec::new();
    for a in [0usize, 1, 2] {
        for b in 0..7 {
            for c in 0..7 {
                deltas.push(vec![delta_kinds(a), delta_kinds(b), delta_kinds(c)]);
            }
        }
    }
    // Chains reaching full_every, with reclaims that must keep their bases.
    for tail in 0..6 {
        let mut ops: Vec<Op> = [0, 1, 0, 5, 1, 0, 4].iter().map(|&k| delta_kinds(k)).collect();
        ops.push(delta_kinds(tail));
        ops.push(delta_kinds(1));
        deltas.push(ops);
    }
    fams.push(family(
        "delta",
        "delta puts (chains, fallbacks, both lanes) with reopens and reclaims",
        Setup::small(),
        deltas.clone(),
    ));
    fams.push(family(
        "delta-cross",
        "the same with chains across segments (as pools before 2026-12-01 hold them)",
        Setup { cross_chains: true, ..Setup::small() },
        deltas.clone(),
    ));
    deltas.truncate(40);
    fams.push(family(
        "delta-checksum",
        "delta puts with payload checksums on",
        Setup { payload_checksum: true, ..Setup::small() },
        deltas,
    ));
    fams.push(family(
        "checksum",
        "payload checksums on",
        Setup { payload_checksum: true, ..Setup::small() },
        sequences(2),
    ));
    // Spans (format 2): units of 2 and 3 segments (puts, vectored, batches, a delta of a
    // large object) among small puts, reopens and reclaims, on fresh media and over an
    // earlier pool's bytes. 4 KiB segments: 5000 bytes take 2, 9000 take 3.
    let span_kinds = |k: usize| match k {
        0 => Op::Put { lane: 0, size: 5000 },
        1 => Op::Put { lane: 1, size: 9000 },
        2 => Op::Batch { lane: 0, sizes: vec![3000, 2500] },
        3 => Op::Vectored { lane: 1, sizes: vec![4000, 7, 1500] },
        4 => Op::Put { lane: 0, size: 100 },
        5 => Op::Reopen,
        6 => Op::Reclaim { keep: 1 },
        _ => Op::Delta { lane: 0, size: 6000, changes: vec![(100, 10), (5000, 64)] },
    };
    let span_setup = Setup { segments: 10, ..Setup::small() };
    let mut span = Vec::new();
    for a in 0..4 {
        for b in 0..8 {
            span.push(vec![span_kinds(a), span_kinds(b)]);
            for c in [0, 1, 4, 6, 7] {
                span.push(vec![span_kinds(a), span_kinds(b), span_kinds(c)]);
            }
        }
    }
    // A lane's spans released by retention and their segments reused by a span again.
    for k in [0usize, 1, 2] {
        span.push(vec![span_kinds(k), span_kinds(k), span_kinds(k), span_kinds(6), span_kinds(k), span_kinds(5)]);
    }
    span.push(vec![span_kinds(7), span_kinds(7), span_kinds(6), span_kinds(7), span_kinds(5), span_kinds(7)]);
    fams.push(family(
        "span",
        "units spanning 2 and 3 segments, with reclaims, deltas and reopens",
        span_setup.clone(),
        span.clone(),
    ));
    fams.push(family(
        "span-stale",
        "the same over an earlier pool's bytes",
        Setup { stale: true, ..span_setup.clone() },
        span.clone(),
    ));
    // Sealed units (format 3 with payload checksums: one fence per unit, the lane's
    // newest unit verified whole): the spans over fresh and stale media.
    let sealed: Vec<Vec<Op>> = span.iter().step_by(2).cloned().collect();
    let sealed_setup = Setup { payload_checksum: true, ..span_setup.clone() };
    fams.push(family(
        "sealed-span",
        "sealed units (payload checksums on: one fence each) spanning segments, with reclaims, deltas and reopens",
        sealed_setup.clone(),
        sealed.clone(),
    ));
    fams.push(family(
        "sealed-stale",
        "the same over an earlier pool's bytes",
        Setup { stale: true, ..sealed_setup.clone() },
        sealed,
    ));
    // Forged payloads where retention releases a span (ops 0 and 3 put the same name)
    // and its covered segments lie free, then reused.
    let mut forged = span;
    for k in [0usize, 1] {
        forged.push(vec![span_kinds(k), span_kinds(5), span_kinds(5), span_kinds(k), span_kinds(6), span_kinds(5)]);
        forged.push(vec![span_kinds(k), span_kinds(5), span_kinds(5), span_kinds(k), span_kinds(6), span_kinds(k)]);
    }
    fams.push(family(
        "forged",
        "the same, and spans released and reused, with payloads made of the pool's own segment and unit headers",
        Setup { forged: true, ..span_setup.clone() },
        forged.clone(),
    ));
    fams.push(family(
        "sealed-forged",
        "the same with sealed units (a unit header copied into a payload must not verify there)",
        Setup { forged: true, ..sealed_setup },
        forged.into_iter().step_by(2).collect(),
    ));
    fams.push(family(
        "stream",
        "detach and close markers, reclaims after them, metadata, explicit versions, batches of 70",
        Setup::small(),
        stream_workloads(),
    ));
    fams.push(family(
        "lane-names",
        "lane names: both lanes put the same names (batches, reclaims, deltas, reopens)",
        Setup { lane_names: true, ..Setup::small() },
        lane_name_workloads(),
    ));
    // Format over fresh media and over earlier pools (each ran its workload and more).
    let mut format =
        family("format", "a crash inside format, on fresh media and over an earlier pool", Setup::small(), vec![]);
    for stale in [false, true] {
        for ops in
            [vec![], vec![Op::Put { lane: 0, size: 100 }], vec![Op::Put { lane: 1, size: 3000 }, Op::Close { lane: 0 }]]
        {
            let setup = Setup { stale, ..Setup::small() };
            format.workloads.push(Workload { id: format!("format/{}", format.workloads.len()), setup, ops });
        }
    }
    format.in_format = true;
    fams.push(format);
    let depth2 = depth2_families(&fams);
    fams.extend(depth2);
    fams.extend(crate::processes::families());
    fams
}

/// The `stream` family: what a stream's writer does beside puts. Every sequence of 1-3
/// ops of: detach and close markers, a put with metadata, one at an explicit version
/// (a gap of 4 behind it), a batch of 70 objects (more than 64: a plan of its own), a
/// reclaim, a reopen. Then lanes that fill segments, end (close or detach), are
/// reclaimed (a truncate unit after the marker: the lane stays ended) and go on.
fn stream_workloads() -> Vec<Vec<Op>> {
    let kind = |k: usize, _pos: usize| match k {
        0 => Op::Detach { lane: 0 },
        1 => Op::Close { lane: 0 },
        2 => Op::Tagged { lane: 0, size: 130, meta: 40, gap: 1 },
        3 => Op::Tagged { lane: 1, size: 9, meta: 3, gap: 5 },
        4 => Op::Batch { lane: 1, sizes: (0..70).map(|k| SIZES[k % SIZES.len()] % 64).collect() },
        5 => Op::Detach { lane: 1 },
        6 => Op::Reclaim { keep: 1 },
        _ => Op::Reopen,
    };
    let mut out = every_sequence(8, 3, kind);
    let fill = |lane| Op::Put { lane, size: 1500 };
    let tagged = |lane| Op::Tagged { lane, size: 1500, meta: 200, gap: 2 };
    for end in [Op::Close { lane: 0 }, Op::Detach { lane: 0 }] {
        for then in [None, Some(fill(0)), Some(Op::Close { lane: 0 }), Some(Op::Detach { lane: 0 }), Some(tagged(0))] {
            let mut ops = vec![fill(0), tagged(0), fill(0), fill(0), tagged(0), fill(1), fill(0)];
            ops.extend([end.clone(), Op::Reclaim { keep: 1 }]);
            ops.extend(then);
            ops.push(Op::Reopen);
            out.push(ops);
        }
    }
    out
}

/// The `lane-names` family: in a pool with lane names both lanes put the same names
/// (`runner::name`), so the same (name, version) is held by both lanes; the checker
/// reads each lane's names through reads of `Key::on`, and a read by name alone must be
/// refused while both lanes hold the name.
fn lane_name_workloads() -> Vec<Vec<Op>> {
    let small = |k: usize, pos: usize| {
        let s = |j: usize| SIZES[(pos * 3 + j) % SIZES.len()];
        match k {
            0 => Op::Put { lane: 0, size: s(0) },
            1 => Op::Put { lane: 1, size: s(1) },
            // n0, n1, n0: a name twice in one unit.
            2 => Op::Batch { lane: 0, sizes: vec![s(0), s(1), s(2)] },
            3 => Op::Batch { lane: 1, sizes: vec![s(2), s(0)] },
            4 => Op::Vectored { lane: 1, sizes: vec![s(1), s(2)] },
            _ => Op::Reopen,
        }
    };
    let mut out = Vec::new();
    // Every sequence of 1-2 ops; of 3 ops, those that start with lane 0 then lane 1.
    for a in 0..6 {
        out.push(vec![small(a, 0)]);
        for b in 0..6 {
            out.push(vec![small(a, 0), small(b, 1)]);
        }
    }
    for a in [0, 2] {
        for b in [1, 3, 4] {
            for c in 0..6 {
                out.push(vec![small(a, 0), small(b, 1), small(c, 2)]);
            }
        }
    }
    // Retention: puts filling segments on both lanes, a reclaim (keep 1, of each lane's
    // names), more puts into released segments, a reopen.
    let big = |k: usize| match k {
        0 => Op::Put { lane: 0, size: 1500 },
        1 => Op::Put { lane: 1, size: 2500 },
        2 => Op::Batch { lane: 0, sizes: vec![1200, 900] },
        _ => Op::Batch { lane: 1, sizes: vec![900, 1200] },
    };
    for a in [0, 2] {
        for b in [1, 3] {
            for tail in 0..4 {
                out.push(vec![
                    big(a),
                    big(b),
                    big(a),
                    big(b),
                    big(a),
                    Op::Reclaim { keep: 1 },
                    big(tail),
                    Op::Reopen,
                    big(b),
                    Op::Reclaim { keep: 1 },
                ]);
            }
        }
    }
    // Deltas of `DELTA_NAME` on both lanes, each lane's chain against its own versions.
    let delta = |k: usize| match k {
        0 => Op::Delta { lane: 0, size: 1000, changes: vec![(10, 5)] },
        1 => Op::Delta { lane: 1, size: 1000, changes: vec![(100, 1), (700, 130)] },
        2 => Op::Delta { lane: 1, size: 700, changes: vec![(5, 10)] },
        3 => Op::Reopen,
        _ => Op::Reclaim { keep: 1 },
    };
    for a in [0, 1] {
        for b in 0..5 {
            for c in 0..5 {
                out.push(vec![delta(a), delta(1 - a), delta(b), delta(c), delta(0), delta(1)]);
            }
        }
    }
    out
}

/// Depth 2 and 3: first crashes of other families' workloads, each followed by a writer
/// that runs more operations and is crashed again at every point (at depth 3, again). The second crash's images
/// are explored as fully as the first's; what bounds the cost is which workloads are
/// taken and what the writer runs after the crash (see DESIGN.md).
fn depth2_families(fams: &[Family]) -> Vec<Family> {
    let of = |name: &str| &fams.iter().find(|f| f.name == name).expect("family").workloads;
    let put = |lane, size| Op::Put { lane, size };
    let mut out = Vec::new();
    let mut add = |name: &'static str, what: &'static str, ws: Vec<Workload>, then: Vec<Op>| {
        let workloads = ws.into_iter().enumerate().map(|(i, w)| Workload { id: format!("{name}/{i}"), ..w }).collect();
        out.push(Family { name, what, workloads, all_points: false, then: vec![then], in_format: false });
    };
    let short: Vec<Workload> = of("ops").iter().filter(|w| w.ops.len() <= 2).cloned().collect();
    add(
        "crash2",
        "ops, crash, then puts on both lanes and a segment rollover",
        short,
        vec![put(0, 77), put(1, 77), put(0, 3000)],
    );
    add(
        "claims2",
        "torn claims, then the same segments claimed again",
        of("claims").clone(),
        vec![put(0, 77), put(0, 1500), put(1, 1500)],
    );
    let seg: Vec<Workload> = of("segment").iter().filter(|w| w.ops.len() == 2).cloned().collect();
    add("segment2", "segment rollovers, crash, then more rollovers", seg, vec![put(0, 2000), put(1, 2000)]);
    let keep: Vec<Workload> = of("retention").iter().rev().take(12).cloned().collect();
    add(
        "retention2",
        "reclaims, crash (the open's repair is crashed too), then puts and a reclaim",
        keep,
        vec![put(0, 1500), Op::Reclaim { keep: 1 }, put(0, 1500)],
    );
    let close: Vec<Workload> = of("close").iter().filter(|w| w.ops.len() == 2).cloned().collect();
    add(
        "close2",
        "end-of-stream markers, crash, then a put and a close",
        close,
        vec![put(0, 77), Op::Close { lane: 0 }, put(1, 9)],
    );
    let join: Vec<Workload> = of("join").iter().filter(|w| w.ops.len() == 2).cloned().collect();
    add(
        "join2",
        "lanes taken for writing, crash, then a join, puts and a close",
        join,
        vec![Op::Join { lane: 1 }, put(1, 77), Op::Join { lane: 0 }, put(0, 3000), Op::Close { lane: 1 }],
    );
    let stream: Vec<Workload> = of("stream").iter().filter(|w| w.ops.len() == 2).cloned().collect();
    add(
        "stream2",
        "markers, metadata, explicit versions, crash, then a detach, a tagged put and a close",
        stream,
        vec![Op::Detach { lane: 1 }, Op::Tagged { lane: 0, size: 200, meta: 9, gap: 3 }, Op::Close { lane: 0 }],
    );
    // Sealed units: a torn newest unit dropped, its header cleared by the writer's open,
    // its place reused by the next unit, which is crashed at every point.
    let sealed: Vec<Workload> = of("checksum").iter().filter(|w| w.ops.len() <= 2).cloned().collect();
    add(
        "sealed2",
        "sealed units, crash, then puts on both lanes and a segment rollover",
        sealed,
        vec![put(0, 77), put(1, 300), put(0, 3000)],
    );
    let span: Vec<Workload> = of("span").iter().filter(|w| w.ops.len() == 2).step_by(4).cloned().collect();
    add("span2", "spans, crash, then a span and a reclaim", span, vec![put(0, 5000), Op::Reclaim { keep: 1 }]);
    // A lane-names pool's followers refresh (catch up) across the lanes' name spaces.
    let lanes: Vec<Workload> = of("lane-names").iter().filter(|w| w.ops.len() == 2).step_by(3).cloned().collect();
    add(
        "lane-names2",
        "lane names, crash, then both lanes put the same names again and a reclaim",
        lanes,
        vec![put(1, 77), Op::Batch { lane: 0, sizes: vec![9, 1500] }, put(1, 3000), Op::Reclaim { keep: 1 }],
    );
    let delta: Vec<Workload> = of("delta").iter().step_by(6).cloned().collect();
    add(
        "delta2",
        "delta puts, crash, then deltas (one resized) and a reclaim",
        delta,
        vec![
            Op::Delta { lane: 0, size: 1000, changes: vec![(64, 8)] },
            Op::Reclaim { keep: 1 },
            Op::Delta { lane: 1, size: 900, changes: vec![(0, 8)] },
        ],
    );
    // Depth 3: a crash, a writer's recovery and repair and what it runs crashed at every
    // point, and each of those images recovered by another writer crashed again.
    let mut three: Vec<Workload> = of("ops").iter().filter(|w| w.ops.len() == 2).step_by(3).cloned().collect();
    three.extend(of("claims").iter().cloned());
    three.extend(of("retention").iter().rev().take(4).cloned());
    three.extend(of("span").iter().filter(|w| w.ops.len() == 2).step_by(8).cloned());
    out.push(Family {
        name: "crash3",
        what: "crash; a writer's recovery and a reclaim crashed at every point; each image's recovery and a put crashed again",
        workloads: three.into_iter().enumerate().map(|(i, w)| Workload { id: format!("crash3/{i}"), ..w }).collect(),
        all_points: false,
        then: vec![vec![Op::Reclaim { keep: 1 }], vec![put(0, 1500)]],
        in_format: false,
    });
    out
}
