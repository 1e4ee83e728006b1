//! All integration tests live in this one crate, so Bevy is linked once.

mod rod;
mod scene;
mod throw;
