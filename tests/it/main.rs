//! All integration tests live in this one crate, so Bevy is linked once.

mod bench;
mod demo;
mod demo_fuzz;
mod export;
mod friction;
mod robustness;
mod rod;
mod scene;
mod sim;
mod spec_formulas;
mod stdout;
mod throw;
