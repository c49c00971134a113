//! Index checkpoints against recovery ([`check_checkpoints`]): a checkpoint taken at
//! each stage of a pool's life, opened over the pool at every later stage, must give
//! what a recovery of that stage gives (the same [`Pool::state_digest`]) — caught up
//! with the units and claims since, or, after retention, recovered. Crash images are
//! checked the same way by [`crate::user::check`]'s incremental path (module
//! `catchup`), which opens every fourth image of a crash point from its base's
//! checkpoint too.

use nvs_core::{checkpoint_memory, CheckpointUse, FormatOptions, HeapMemory, Object, Pool};
use nvs_sim::SimMedia;

/// The stages: `Err` says which checkpoint, over which stage, disagreed.
pub fn check_checkpoints() -> Result<(), String> {
    let mut o = FormatOptions::new(0xC4EC_9017);
    o.segment_len = Some(4096);
    o.lanes_max = 3;
    o.payload_checksum = true;
    let m = SimMedia::from_bytes(&vec![0u8; 4096 * 24]);
    let mut pool = Pool::format(&m, o, HeapMemory::new()).map_err(|e| e.to_string())?;
    let err = |e: nvs_core::Error| e.to_string();
    let mut checkpoints: Vec<(usize, Vec<u8>)> = Vec::new();
    for stage in 0..8usize {
        // A stage's work: puts on lanes 0 and 1 (into new segments), lane 2 from stage
        // 3, an end-of-stream marker at 5, retention at 6.
        for i in 0..12u8 {
            let name = [b'a' + i % 4];
            let lane = u32::from(i % 2 == 1 || stage % 2 == 1);
            pool.put(lane, Object::new(&name, &vec![i ^ stage as u8; 40 + 30 * (i as usize)])).map_err(err)?;
        }
        if stage >= 3 {
            pool.put(2, Object::new(b"late", &[stage as u8; 64])).map_err(err)?;
        }
        if stage == 5 {
            pool.close_lane(2).map_err(err)?;
        }
        if stage == 6 {
            pool.reclaim(2).map_err(err)?;
        }
        // What a recovery of this stage gives, and its checkpoint.
        let mut now = Pool::open_read_only(&m, HeapMemory::new()).map_err(err)?;
        let want = now.state_digest();
        let mut bytes = Vec::new();
        if !now.write_checkpoint(&mut |b| {
            bytes.extend_from_slice(b);
            true
        }) {
            return Err(format!("stage {stage}: a recovered pool wrote no checkpoint"));
        }
        checkpoints.push((stage, bytes));
        for (taken, bytes) in &checkpoints {
            let (mut from, used) =
                Pool::open_read_only_from_checkpoint(&m, checkpoint_memory(bytes), bytes).map_err(err)?;
            if let CheckpointUse::Invalid(why) = used {
                return Err(format!("stage {stage}: the checkpoint of stage {taken} was refused: {why}"));
            }
            if from.state_digest() != want {
                return Err(format!(
                    "stage {stage}: an open from the checkpoint of stage {taken} ({used:?}) differs from a recovery"
                ));
            }
            if taken == &stage && used != CheckpointUse::Used {
                return Err(format!("stage {stage}: its own checkpoint was not used ({used:?})"));
            }
        }
    }
    Ok(())
}
