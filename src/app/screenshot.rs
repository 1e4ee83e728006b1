//! Screenshot mode (`CONTACT_SANDBOX_SCREENSHOT`, `CONTACT_SANDBOX_FRAMES`): one fixed step per frame, a scripted
//! action on frame 2, a capture of the window after N frames, exit 0 once the PNG is on disk.

use std::path::PathBuf;

use anyhow::Context;
use bevy::prelude::*;
use bevy::render::view::screenshot::{Screenshot, ScreenshotCaptured, save_to_disk};
use bevy::time::TimeUpdateStrategy;

use crate::physics::DVec2;
use crate::sim::{ActiveScene, SpawnBall, SpawnRod, Stepping, ThrowBall};

/// Frames before the capture when `CONTACT_SANDBOX_FRAMES` is not set.
pub const DEFAULT_FRAMES: u32 = 15;
/// Frames to wait for the capture to reach the disk before giving up.
const CAPTURE_TIMEOUT_FRAMES: u32 = 600;

/// Where and when to capture.
#[derive(Resource, Clone, Debug)]
pub struct ScreenshotPlan {
    pub path: PathBuf,
    pub frames: u32,
}

impl ScreenshotPlan {
    /// Reads `CONTACT_SANDBOX_SCREENSHOT` and `CONTACT_SANDBOX_FRAMES`; `None` when no screenshot is asked for.
    pub fn from_env() -> anyhow::Result<Option<ScreenshotPlan>> {
        let Some(path) = std::env::var_os("CONTACT_SANDBOX_SCREENSHOT") else {
            return Ok(None);
        };
        let frames = match std::env::var("CONTACT_SANDBOX_FRAMES") {
            Ok(text) => text
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| (3..=100_000).contains(n))
                .with_context(|| {
                    format!("CONTACT_SANDBOX_FRAMES must be an integer in 3..=100000, got {text:?}")
                })?,
            Err(_) => DEFAULT_FRAMES,
        };
        Ok(Some(ScreenshotPlan {
            path: PathBuf::from(path),
            frames,
        }))
    }
}

pub struct ScreenshotPlugin {
    pub plan: ScreenshotPlan,
}

#[derive(Resource, Default)]
struct Progress {
    frame: u32,
    requested: bool,
    captured: bool,
}

impl Plugin for ScreenshotPlugin {
    fn build(&self, app: &mut App) {
        let _ = std::fs::remove_file(&self.plan.path);
        app.insert_resource(self.plan.clone())
            .insert_resource(TimeUpdateStrategy::FixedTimesteps(1))
            // Exactly the planned steps before the capture, not whatever a worker thread finished by then.
            .insert_resource(Stepping::Inline)
            .init_resource::<Progress>()
            .add_systems(Update, drive_screenshot);
    }
}

#[allow(clippy::too_many_arguments)] // a Bevy system: each parameter is one query or resource
fn drive_screenshot(
    mut commands: Commands,
    plan: Res<ScreenshotPlan>,
    mut progress: ResMut<Progress>,
    active: Option<Res<ActiveScene>>,
    mut throw: MessageWriter<ThrowBall>,
    mut spawn: MessageWriter<SpawnBall>,
    mut rod: MessageWriter<SpawnRod>,
    mut exit: MessageWriter<AppExit>,
) {
    progress.frame += 1;
    if progress.frame == 2
        && let Some(active) = active
    {
        match active.current.name.as_str() {
            "Wall throw" => {
                throw.write(ThrowBall {
                    v0: 5.0,
                    h: None,
                    stiffness: None,
                    dhat: None,
                });
            }
            "Rod drop" => {
                rod.write(SpawnRod {
                    center: DVec2::new(0.0, 1.2),
                    angle: 0.6,
                    length: 0.5,
                    mass: 1.0,
                    restitution: 0.5,
                    velocity: DVec2::ZERO,
                    omega: 2.0,
                });
            }
            "Thin-wall gauntlet" => {
                spawn.write(SpawnBall {
                    position: DVec2::new(0.0, 0.3),
                    velocity: DVec2::new(20.0, 0.0),
                    radius: 0.005,
                    mass: 0.1,
                });
            }
            _ => {
                spawn.write(SpawnBall {
                    position: DVec2::new(0.0, 1.1),
                    velocity: DVec2::new(0.5, 0.0),
                    radius: 0.05,
                    mass: 0.5,
                });
            }
        }
    }
    if progress.frame >= plan.frames && !progress.requested {
        progress.requested = true;
        commands
            .spawn(Screenshot::primary_window())
            .observe(save_to_disk(plan.path.clone()))
            .observe(
                |_: On<ScreenshotCaptured>, mut progress: ResMut<Progress>| {
                    progress.captured = true
                },
            );
    }
    if progress.captured && std::fs::metadata(&plan.path).is_ok_and(|m| m.len() > 0) {
        info!("screenshot written to {}", plan.path.display());
        exit.write(AppExit::Success);
    } else if progress.frame > plan.frames + CAPTURE_TIMEOUT_FRAMES {
        error!("no screenshot arrived within {CAPTURE_TIMEOUT_FRAMES} frames");
        exit.write(AppExit::from_code(3));
    }
}
