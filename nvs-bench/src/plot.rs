//! Throughput against object size, one line per method (solid: 1 thread, dashed: 2
//! threads), as a hand-written SVG: log-scaled size axis, linear GB/s axis, a legend.

use super::run::Method;
use super::{Row, Setup, SIZES, THREADS};
use std::fmt::Write as _;

const W: f64 = 1080.0;
const H: f64 = 560.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 700.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 500.0;

const COLOURS: [&str; 13] = [
    "#000000", "#555555", "#d62728", "#7f7f7f", "#aaaaaa", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
    "#e377c2", "#17becf", "#bcbd22",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

pub fn svg(setup: &Setup, rows: &[Row]) -> String {
    let max = rows.iter().filter_map(|r| r.result.as_ref().ok()).map(|x| x.gbps).fold(1.0f64, f64::max);
    let step = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0].into_iter().find(|s| max / s <= 8.0).unwrap_or(100.0);
    let ymax = (max / step).ceil() * step;
    let (lo, hi) = ((SIZES[0] as f64).log2(), (SIZES[SIZES.len() - 1] as f64).log2());
    let x = |size: usize| LEFT + ((size as f64).log2() - lo) / (hi - lo) * (RIGHT - LEFT);
    let y = |g: f64| BOTTOM - g / ymax * (BOTTOM - TOP);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="24" font-size="15">nvs bench: throughput vs object size ({}, {})</text>"#,
        esc(&setup.cpu),
        esc(&setup.date)
    );
    let _ = writeln!(
        o,
        r##"<text x="{LEFT}" y="42" fill="#555">median of {} trials; solid 1 thread, dashed 2 threads (aggregate); region in {}</text>"##,
        setup.trials,
        esc(&setup.dir.display().to_string())
    );
    // Axes and grid.
    let mut g = 0.0;
    while g <= ymax + 1e-9 {
        let yy = y(g);
        let _ = writeln!(o, r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{RIGHT}" y2="{yy:.1}" stroke="#ddd"/>"##);
        let _ = writeln!(o, r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{g}</text>"#, LEFT - 6.0, yy + 4.0);
        g += step;
    }
    for &s in &SIZES {
        let xx = x(s);
        let _ = writeln!(o, r##"<line x1="{xx:.1}" y1="{TOP}" x2="{xx:.1}" y2="{BOTTOM}" stroke="#eee"/>"##);
        let _ = writeln!(
            o,
            r#"<text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            BOTTOM + 18.0,
            crate::human(s as u64)
        );
    }
    let _ = writeln!(
        o,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#000"/>"##,
        RIGHT - LEFT,
        BOTTOM - TOP
    );
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">object size (log scale)</text>"#,
        (LEFT + RIGHT) / 2.0,
        BOTTOM + 40.0
    );
    let _ = writeln!(
        o,
        r#"<text transform="translate(20 {:.1}) rotate(-90)" text-anchor="middle">GB/s</text>"#,
        (TOP + BOTTOM) / 2.0
    );
    // One polyline per (method, threads); points only where measured.
    for (i, m) in Method::ALL.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        for &t in &THREADS {
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.method == *m && r.threads == t)
                .filter_map(|r| r.result.as_ref().ok().map(|rate| (x(r.size), y(rate.gbps))))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let dash = if t == 1 { "" } else { r#" stroke-dasharray="6 4""# };
            let p: Vec<String> = pts.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
            let _ = writeln!(
                o,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="{}"{dash}/>"#,
                p.join(" "),
                if matches!(m, Method::Put | Method::Batch | Method::Get) { 2.5 } else { 1.5 }
            );
            for (a, b) in pts {
                let _ = writeln!(o, r#"<circle cx="{a:.1}" cy="{b:.1}" r="2.5" fill="{colour}"/>"#);
            }
        }
        let ly = TOP + 8.0 + i as f64 * 20.0;
        let _ = writeln!(
            o,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="2.5"/>"#,
            RIGHT + 20.0,
            RIGHT + 44.0
        );
        let _ = writeln!(o, r#"<text x="{:.1}" y="{:.1}">{}</text>"#, RIGHT + 50.0, ly + 4.0, esc(m.describe()));
    }
    o.push_str("</svg>\n");
    o
}
