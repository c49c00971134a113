//! How `user::check` scales with a workload of small puts: `cargo run --release -p
//! nvs-verify --example user_scale -- N [BYTES] [whole]` checks N puts of BYTES (64)
//! (one name, the restart reads the latest version) and prints the time and the counts;
//! `whole` recovers every crash image from nothing (as a workload of at most
//! `Setup::full_check_ops` operations is), for comparison.
use nvs_verify::user::{check, Setup};
use std::time::Instant;

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let size: usize = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(64);
    let mut setup = Setup::named(((n as usize * (size + 128)) * 2 + (1 << 20)).next_multiple_of(4096), "scale");
    if std::env::args().nth(3).as_deref() == Some("whole") {
        setup.full_check_ops = usize::MAX;
    }
    setup.options.segment_len = Some(((size as u64 + 4096) * 2).next_power_of_two().max(64 << 10));
    let t = Instant::now();
    let report = check(
        &setup,
        |run| {
            for step in 1..=n {
                run.put(0, b"step", &vec![step as u8; size]).map_err(|e| e.to_string())?;
                run.ack(step);
            }
            Ok(())
        },
        |pool| Ok(pool.latest("step").unwrap_or(0)),
        |&at, acked| match acked.last() {
            Some(&s) if at < s => Err(format!("restarts at {at}, {s} was durable")),
            _ => Ok(()),
        },
    );
    println!("{n} puts of {size} bytes: {:.2} s: {report}", t.elapsed().as_secs_f64());
}
