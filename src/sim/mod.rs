//! The Bevy ECS layer (built by the sandbox issue).
