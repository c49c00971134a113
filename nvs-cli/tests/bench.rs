//! `nvs bench`: a short run writes the table, the JSON rows and the plot, and leaves no
//! files behind; bad options are usage errors.

use std::process::Command;

fn nvs(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nvs")).args(args).output().expect("run nvs")
}

/// A one-trial quick run of two rows: every (size, threads) row is in the JSON with the
/// required fields, the SVG is an SVG, and the scratch directory is empty afterwards.
#[test]
fn quick_run_writes_table_json_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let sync = tempfile::tempdir().unwrap();
    let json = dir.path().join("rows.json");
    let svg = dir.path().join("plot.svg");
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let o = nvs(&[
        "bench",
        "--quick",
        "--trials",
        "1",
        "--only",
        "memcpy_into_mapping,nvs_put",
        "--dir",
        scratch.to_str().unwrap(),
        "--sync-dir",
        sync.path().to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("nvs put (1 object per commit)") && out.contains("targets"), "{out}");
    let j = std::fs::read_to_string(&json).unwrap();
    assert!(j.trim_start().starts_with('[') && j.trim_end().ends_with(']'));
    for field in ["\"method\"", "\"size_bytes\"", "\"threads\"", "\"gbps\"", "\"ns_per_op\"", "\"ratio_to_ceiling\""] {
        // 4 sizes x 2 thread counts x (the 2 rows asked for + the plain and batched
        // ceilings at 2 store widths, always run).
        assert_eq!(j.matches(field).count(), 4 * 2 * 6, "{field} in {j}");
    }
    // Ratios are over the faster ceiling of each family: a ceiling row at 1 in each cell
    // of the plain family (8) and of the batched one where it fits this small region
    // (1 KiB and 32 KiB: 4).
    assert!(j.matches("\"ratio_to_ceiling\": 1.000000").count() >= 4 * 2 + 2 * 2, "{j}");
    assert!(j.contains("\"method\": \"nvs_put\", \"description\": \"nvs put (1 object per commit)\", \"size_bytes\": 32768, \"threads\": 2"));
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>") && s.contains("polyline"));
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0, "bench left files behind");
    assert_eq!(std::fs::read_dir(sync.path()).unwrap().count(), 0, "bench left files behind");
}

/// An unknown row name is a usage error (exit 2), before any file is made.
#[test]
fn unknown_row_is_a_usage_error() {
    let o = nvs(&["bench", "--quick", "--only", "nvs_teleport"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("nvs: unknown row 'nvs_teleport'"), "{err}");
}
