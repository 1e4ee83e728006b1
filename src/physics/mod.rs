//! The physics core: plain Rust on f64, no Bevy. The CLI, the GUI and the tests all call it.
//!
//! One concept per file, as ipc-toolkit keeps them apart: [`geometry`] (balls, walls, distances),
//! [`barrier`], [`penalty`], [`ccd`], [`broad_phase`], [`potential`] (the incremental potential),
//! [`linear`] and [`newton`] (the solver), [`stiffness`] (d̂ and adaptive κ), [`world`] (a lane) and
//! [`spawn_grid`] (which balls a new one can touch).

pub mod barrier;
pub mod block_cholesky;
pub mod broad_phase;
pub mod ccd;
pub mod friction;
pub mod geometry;
pub mod linear;
pub mod newton;
pub mod ordering;
pub mod penalty;
pub mod potential;
pub mod rod;
pub mod rod_flight;
pub mod spawn_grid;
pub mod stiffness;
mod union_find;
pub mod world;

pub use glam::DVec2;
