//! Index checkpoints against recovery at every stage of a pool's life.

#[test]
fn checkpoints_give_what_recovery_gives() {
    assert_eq!(nvs_verify::checkpoint::check_checkpoints(), Ok(()));
}
