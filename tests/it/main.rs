//! All integration tests live in this one crate, so Bevy is linked once.

mod rod;
mod sim;
mod scene;
mod throw;
