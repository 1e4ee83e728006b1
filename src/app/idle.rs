//! The window's pace when nothing on it moves. Bevy draws as fast as it can by default: a wall throw that had
//! finished, left open through a lesson, kept most of a core busy drawing the same picture (68 % for 25 minutes
//! under the software renderer here; on a laptop's GPU, a frame every refresh and its fan). A still window draws
//! five frames a second instead, and wakes at once for a key, the pointer or egui's own redraw requests.

use std::time::Duration;

use bevy::prelude::*;
use bevy::winit::{UpdateMode, WinitSettings};

use crate::sim::{Lane, Replay, SimControl, StepInFlight};

/// The longest an idle window waits between frames. Under the quarter second Bevy lets a frame advance its clock
/// by, so the fixed clock keeps its ticks (a recording counts them) while the window idles.
pub const IDLE_WAIT: Duration = Duration::from_millis(200);

/// Whether the window idles now ([`still`]), for the status row to say so.
#[derive(Resource, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Idle(pub bool);

/// Sets the window's update mode each frame: [`IDLE_WAIT`] between frames while [`still`], as fast as it can
/// otherwise. Left out in the screenshot and frame-rate modes, which count frames.
pub struct IdlePlugin;

impl Plugin for IdlePlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<Idle>()
            .add_systems(Last, pace_the_window);
    }
}

/// Whether nothing in the window moves on its own: no replay plays, no step runs on the physics thread, and the
/// run is paused with no single step asked for, or no lane can step again (the run's end; every lane faulted).
pub fn still(
    control: &SimControl,
    lanes_can_step: bool,
    replay_playing: bool,
    step_running: bool,
) -> bool {
    !replay_playing
        && !step_running
        && ((control.paused && control.pending_steps == 0) || !lanes_can_step)
}

/// The update mode for a window that is [`still`] or not.
pub fn update_mode(still: bool) -> UpdateMode {
    if still {
        UpdateMode::reactive_low_power(IDLE_WAIT)
    } else {
        UpdateMode::Continuous
    }
}

fn pace_the_window(
    control: Res<SimControl>,
    lanes: Query<&Lane>,
    replay: Option<Res<Replay>>,
    in_flight: Option<Res<StepInFlight>>,
    settings: Option<ResMut<WinitSettings>>,
    mut idle: ResMut<Idle>,
) {
    let Some(mut settings) = settings else {
        return;
    };
    let lanes_can_step =
        crate::demo::tick_h(lanes.iter().map(|l| &l.world), control.run_end).is_some();
    let now = still(
        &control,
        lanes_can_step,
        replay.is_some_and(|r| r.playing),
        in_flight.is_some_and(|f| f.is_running()),
    );
    idle.set_if_neq(Idle(now));
    let mode = update_mode(now);
    if settings.focused_mode != mode {
        settings.focused_mode = mode;
        settings.unfocused_mode = mode;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window idles when nothing can move on its own, and draws as fast as it can otherwise.
    #[test]
    fn a_window_idles_only_while_nothing_moves() {
        let running = SimControl::default();
        let paused = SimControl {
            paused: true,
            ..default()
        };
        let stepping_once = SimControl {
            paused: true,
            pending_steps: 1,
            ..default()
        };
        // (control, lanes can step, replay playing, step running): still?
        let cases = [
            (&running, true, false, false, false),
            (&running, false, false, false, true),
            (&paused, true, false, false, true),
            (&stepping_once, true, false, false, false),
            (&paused, true, true, false, false),
            (&running, false, false, true, false),
            (&paused, true, false, true, false),
        ];
        for (i, (control, can_step, playing, running, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                still(control, can_step, playing, running),
                expected,
                "case {i}"
            );
        }
        assert_eq!(update_mode(false), UpdateMode::Continuous);
        assert!(matches!(
            update_mode(true),
            UpdateMode::Reactive { wait, react_to_window_events: true, .. } if wait == IDLE_WAIT
        ));
    }

    /// In an app: the wall throw draws as fast as it can while the ball flies and idles once the run has
    /// reached its end, and again as fast as it can after a restart.
    #[test]
    fn the_wall_throw_idles_at_its_end_and_not_before() {
        let mut app = App::new();
        app.add_plugins(MinimalPlugins)
            .add_plugins(crate::sim::SimPlugin)
            .add_plugins(IdlePlugin);
        app.insert_resource(WinitSettings::game());
        app.insert_resource(bevy::time::TimeUpdateStrategy::FixedTimesteps(1));
        app.insert_resource(
            crate::sim::ActiveScene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
                .expect("the shipped scene loads"),
        );
        let mode = |app: &App| app.world().resource::<WinitSettings>().focused_mode;
        app.update();
        app.update();
        assert_eq!(mode(&app), UpdateMode::Continuous, "flying");
        assert_eq!(*app.world().resource::<Idle>(), Idle(false));
        for _ in 0..200 {
            app.update();
        }
        let control = app.world().resource::<SimControl>();
        assert!(control.steps_taken >= 80, "{}", control.steps_taken);
        assert_ne!(mode(&app), UpdateMode::Continuous, "at the run's end");
        assert_eq!(*app.world().resource::<Idle>(), Idle(true));
        app.world_mut().write_message(crate::sim::RestartScene);
        app.update();
        app.update();
        assert_eq!(mode(&app), UpdateMode::Continuous, "run again");
    }
}
