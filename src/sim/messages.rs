//! The one way in for user actions: the mouse, the buttons, the keys and the tests all write these messages,
//! and [`super::apply_messages`] turns them into changes of the lanes.

use std::path::PathBuf;

use bevy::prelude::*;

use crate::physics::DVec2;

/// Spawn one ball at the same lane-local spot in every lane of the scene (like-for-like comparison).
/// If any lane refuses it (e.g. inside a wall of an IPC lane) no lane gets it and [`super::SimLog`] says why.
#[derive(Message, Clone, Copy, Debug, PartialEq)]
pub struct SpawnBall {
    /// Lane-local centre [m].
    pub position: DVec2,
    /// Initial velocity [m/s].
    pub velocity: DVec2,
    /// Radius [m] (0 = point ball).
    pub radius: f64,
    /// Mass [kg].
    pub mass: f64,
}

/// The seed's throw: restart the scene with every scene ball's initial velocity set to `(v0, 0)`, optionally
/// with a new time step `h`, penalty stiffness `k` (penalty lanes) and `d̂` (IPC lanes).
#[derive(Message, Clone, Copy, Debug, PartialEq)]
pub struct ThrowBall {
    /// Throw speed along +x [m/s].
    pub v0: f64,
    pub h: Option<f64>,
    pub stiffness: Option<f64>,
    pub dhat: Option<f64>,
}

/// Drop a rod into every lane (lane-local centre, angle, velocity and angular velocity).
#[derive(Message, Clone, Copy, Debug, PartialEq)]
pub struct SpawnRod {
    pub center: DVec2,
    pub angle: f64,
    pub length: f64,
    pub mass: f64,
    pub restitution: f64,
    pub velocity: DVec2,
    pub omega: f64,
}

/// Rebuild every lane from the active scene.
#[derive(Message, Clone, Copy, Debug, Default, PartialEq)]
pub struct RestartScene;

/// Load a scene file and make it active; a file that fails to load leaves the current scene running.
#[derive(Message, Clone, Debug, PartialEq)]
pub struct LoadScene(pub PathBuf);

/// Move through the [`super::SceneCatalogue`]: `+1` next, `-1` previous.
#[derive(Message, Clone, Copy, Debug, PartialEq)]
pub struct CycleScene(pub i32);
