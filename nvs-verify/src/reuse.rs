//! A torn sealed unit's place reused ([`check_sealed_reuse`]): the case the writer's
//! open clears a lane's torn tail for, which the crash check's all-or-nothing
//! abstraction of a sealed range does not produce (it needs a first crash that leaves
//! out only part of a unit's words, and a second that persists only part of the next).

use nvs_core::{FormatOptions, HeapMemory, Object, Pool};
use nvs_sim::{Event, SimMedia};

/// The store events of `m` from event `from` on: (byte offset, value).
fn stores(m: &SimMedia, from: usize) -> Vec<(usize, u64)> {
    m.events()[from..]
        .iter()
        .filter_map(|e| match *e {
            Event::Store { word, value, .. } => Some((word as usize * 8, value)),
            _ => None,
        })
        .collect()
}

fn apply(img: &mut [u8], stores: &[(usize, u64)], keep: impl Fn(usize) -> bool) {
    for &(off, v) in stores {
        if keep(off) {
            img[off..off + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// Unit P ("k") persists but for its payload's first word; recovery drops it. A writer
/// opens the pool and puts Q ("j", P's bytes) at P's place, and a crash persists only
/// Q's payload: "k", dropped by the first recovery and never acknowledged, must not come
/// back. `Err` says what went wrong.
pub fn check_sealed_reuse() -> Result<(), String> {
    let mut o = FormatOptions::new(0x5EA1);
    o.segment_len = Some(4096);
    o.lanes_max = 2;
    o.payload_checksum = true;
    let m = SimMedia::from_bytes(&vec![0u8; 4096 * 5]);
    let mut pool = Pool::format(&m, o, HeapMemory::new()).map_err(|e| e.to_string())?;
    pool.put(0, Object::new(b"a", &[1u8; 100])).map_err(|e| e.to_string())?;
    let before = m.volatile_bytes();
    let from = m.events().len();
    let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
    pool.put(0, Object::new(b"k", &data)).map_err(|e| e.to_string())?;
    let p_payload = pool.stat(b"k", 1).map_err(|e| e.to_string())?.offset as usize;
    drop(pool);
    let mut torn = before.clone();
    apply(&mut torn, &stores(&m, from), |off| off != p_payload);
    let found = |img: &[u8], name: &[u8]| -> Result<bool, String> {
        let pool = Pool::open_read_only(SimMedia::from_bytes(img), HeapMemory::new()).map_err(|e| e.to_string())?;
        Ok(pool.stat(name, 1).is_ok())
    };
    if found(&torn, b"k")? {
        return Err("a sealed unit missing a payload word was recovered".into());
    }
    // The writer's open (its stores are fenced before it returns), then Q.
    let w = SimMedia::from_bytes(&torn);
    let mut pool = Pool::open(&w, HeapMemory::new()).map_err(|e| e.to_string())?;
    let opened = w.volatile_bytes();
    let from = w.events().len();
    pool.put(0, Object::new(b"j", &data)).map_err(|e| e.to_string())?;
    let q_payload = pool.stat(b"j", 1).map_err(|e| e.to_string())?.offset as usize;
    drop(pool);
    if q_payload != p_payload {
        return Err(format!("Q at {q_payload:#x}, not at P's place {p_payload:#x}"));
    }
    let mut crash = opened;
    apply(&mut crash, &stores(&w, from), |off| off >= q_payload);
    match found(&crash, b"k")? {
        true => Err("a torn sealed unit dropped by recovery came back after its place was reused".into()),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_torn_sealed_unit_stays_dropped() {
        assert_eq!(super::check_sealed_reuse(), Ok(()));
    }
}
