//! contact-sandbox: a 2D physics sandbox that makes contact mechanics visible and reproducible.
//!
//! - [`physics`] is the plain-Rust f64 core (no Bevy): geometry, barrier, penalty, CCD, the incremental
//!   potential and its Newton solver, friction, and the rod impact law.
//! - [`scene`] reads and validates the RON scene files and builds physics worlds from them.
//! - [`sim`] is the Bevy ECS layer that steps lanes in `FixedUpdate`.
//! - [`app`] is the windowed sandbox: rendering, egui panels, input.
//! - [`cli`] holds the headless subcommands.

pub mod app;
pub mod cli;
pub mod demo;
pub mod physics;
pub mod scene;
pub mod sim;
#[doc(hidden)]
pub mod testing;
pub mod text;
