//! # nvs-verify
//!
//! The proof that nvs keeps its crash contract (README, "What nvs promises"): workload families run
//! through `nvs-sim`, a crash at every crash point, every image recovery can observe
//! explored (lazily, cross-checked eagerly), the contract checked on what comes back;
//! bad media checked for clear errors; and seeded protocol bugs (mutants) that the
//! check must kill. `cargo run --release -p nvs-verify -- all` prints the verdict table.
//! [`user::check`] runs the same machinery over your own code on top of nvs.
pub(crate) mod catchup;
pub mod check;
pub mod checkpoint;
mod contract;
pub mod crosscheck;
pub mod damage;
pub mod mutants;
pub mod processes;
pub mod reuse;
mod runner;
pub mod user;
pub mod workload;
