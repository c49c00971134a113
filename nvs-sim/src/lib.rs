//! # nvs-sim
//!
//! A [`nvs_core::Media`] that sees every store and builds every crash image an x86
//! machine could leave (the persistency model, DESIGN.md), and the explorers that run recovery over
//! those images.
//!
//! - [`SimMedia`] records every store (split into aligned 8-byte words), flush and
//!   fence, per thread, and keeps the volatile view the running code reads back. Under
//!   `--cfg loom` the threads are loom's model threads and every fence is a loom
//!   scheduling point (nvs-verify's loom × crash test, tests/loom_crash.rs).
//! - [`state::crash_state`] turns a trace prefix into a [`State`]: what every word may
//!   hold after a crash there. [`state::fence_points`] are the crash points that cover
//!   every image (before each fence, and at the end); [`state::all_points`] is every
//!   single event, to cross-check that reduction.
//! - [`explore::explore`] runs a check once per combination of choices it can observe:
//!   with a [`CrashView`] the check (recovery) branches only on undecided words it reads
//!   (lazy); calling [`View::materialize`] first branches on every word (eager).
pub mod explore;
pub mod media;
pub mod state;

pub use explore::{explore, replay, Chooser, Verdict};
pub use media::{thread_id, CrashView, SimMedia, View};
pub use state::{all_points, crash_state, fence_points, Cell, Event, Recording, State, Stepper};
