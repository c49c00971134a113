//! Replays every checked-in input of `fuzz/corpus/<target>/` through the same checks the
//! fuzz targets run, on stable, as part of `cargo test`; and keeps the corpora small.

use std::path::PathBuf;

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).expect("read input")))
        .collect()
}

fn replay(target: &str) {
    let inputs = corpus(target);
    assert!(!inputs.is_empty(), "no corpus for {target}");
    let failed: Vec<&str> = inputs
        .iter()
        .filter(|(name, data)| {
            let r = std::panic::catch_unwind(|| nvs_fuzz_check::run(target, data));
            if r.is_err() {
                eprintln!("{target}: input {name} failed (message above)");
            }
            r.is_err()
        })
        .map(|(name, _)| name.as_str())
        .collect();
    assert!(failed.is_empty(), "{target}: {} of {} inputs failed: {failed:?}", failed.len(), inputs.len());
}

#[test]
fn recover_image_corpus() {
    replay("recover_image");
}

#[test]
fn decode_corpus() {
    replay("decode");
}

#[test]
fn ops_crash_corpus() {
    replay("ops_crash");
}

/// The checked-in corpora stay small (the budget: under 2 MB in all).
#[test]
fn checkpoint_corpus() {
    replay("checkpoint");
}

#[test]
fn corpora_are_small() {
    let total: usize = nvs_fuzz_check::TARGETS.iter().flat_map(|t| corpus(t)).map(|(_, d)| d.len()).sum();
    assert!(total < 2_000_000, "fuzz corpora hold {total} bytes");
}
