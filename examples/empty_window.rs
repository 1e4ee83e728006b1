//! The floor under the sandbox window's frame rate: a Bevy window with the sandbox's plugins, camera and window
//! size, and nothing drawn in it (no scene, no panels, multisampling off as on a software renderer).
//!
//! `tools/window-fps target/release/examples/empty_window assets/scenes/wall_throw.ron 28` measures it as it
//! measures the sandbox (the scene argument is ignored here); `EMPTY_WINDOW_SIZE=800x450` sets another size.
//! docs/performance.md (thirty-third session) compares the two under llvmpipe.

use bevy::prelude::*;
use bevy::window::WindowResolution;
use contact_sandbox::app::frame_log::{FrameLogPlugin, FramePlan};

fn main() -> anyhow::Result<()> {
    let plan = FramePlan::from_env()?;
    let (width, height) = match std::env::var("EMPTY_WINDOW_SIZE") {
        Ok(text) => text
            .split_once('x')
            .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
            .filter(|&(w, h)| (1..=16384).contains(&w) && (1..=16384).contains(&h))
            .ok_or_else(|| anyhow::anyhow!("EMPTY_WINDOW_SIZE must be WxH, got {text:?}"))?,
        Err(_) => (1600, 900),
    };
    App::new()
        .add_plugins(DefaultPlugins.set(WindowPlugin {
            primary_window: Some(Window {
                title: "empty window".into(),
                resolution: WindowResolution::new(width, height),
                ..default()
            }),
            ..default()
        }))
        .add_plugins(FrameLogPlugin {
            log_every: plan.log_every,
        })
        .add_systems(Startup, |mut commands: Commands| {
            commands.spawn((Camera2d, Msaa::Off));
        })
        .run();
    Ok(())
}
