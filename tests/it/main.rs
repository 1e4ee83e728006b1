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
mod stdout;
mod throw;
