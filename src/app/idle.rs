//! The window's pace when nothing on it moves. Bevy draws as fast as it can by default: a wall throw that had
//! finished, left open through a lesson, kept more than a core busy drawing the same picture (145 % of one over
//! 30 s under the software renderer here; on a laptop's GPU, a frame every refresh and its fan). A still window
//! draws five frames a second instead (30 % of a core here), and wakes at once for a key, the pointer or egui's own
//! redraw requests.

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

/// Sets the window's update mode each frame: [`IDLE_WAIT`] between frames while [`still`], focused or not, and
/// otherwise the modes the window started with (Bevy's: as fast as it can, and 60 Hz unfocused). Left out in the
/// screenshot and frame-rate modes, which count frames.
pub struct IdlePlugin;

impl Plugin for IdlePlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<Idle>()
            .add_systems(Last, pace_the_window);
    }
}

/// An open replay's pace: it steps on its own clock, whatever the sandbox's run control says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayPace {
    pub playing: bool,
    /// A seek (a jump, or the viewer's single step) not yet taken.
    pub seeking: bool,
}

/// Whether nothing in the window moves on its own: nothing `moving` (a step running on the physics thread, or the
/// last one still sliding into place), and an open replay neither playing nor seeking, or without one, the run
/// paused with no single step asked for or no lane able to step again (the run's end; every lane faulted).
pub fn still(
    control: &SimControl,
    lanes_can_step: bool,
    replay: Option<ReplayPace>,
    moving: bool,
) -> bool {
    !moving
        && match replay {
            Some(replay) => !replay.playing && !replay.seeking,
            None => (control.paused && control.pending_steps == 0) || !lanes_can_step,
        }
}

/// The update mode for a window that is [`still`] or not.
pub fn update_mode(still: bool) -> UpdateMode {
    if still {
        UpdateMode::reactive_low_power(IDLE_WAIT)
    } else {
        UpdateMode::Continuous
    }
}

#[allow(clippy::too_many_arguments)]
fn pace_the_window(
    control: Res<SimControl>,
    lanes: Query<&Lane>,
    replay: Option<Res<Replay>>,
    in_flight: Option<Res<StepInFlight>>,
    real: Res<Time<Real>>,
    settings: Option<ResMut<WinitSettings>>,
    mut idle: ResMut<Idle>,
    mut busy_modes: Local<Option<(UpdateMode, UpdateMode)>>,
) {
    let Some(mut settings) = settings else {
        return;
    };
    let busy = *busy_modes.get_or_insert((settings.focused_mode, settings.unfocused_mode));
    let lanes_can_step =
        crate::demo::tick_h(lanes.iter().map(|l| &l.world), control.run_end).is_some();
    let moving = in_flight.as_deref().is_some_and(|f| {
        f.is_running()
            || f.display_fraction(real.elapsed())
                .is_some_and(|fraction| fraction < 1.0)
    });
    let replay = replay.as_deref().map(|r| ReplayPace {
        playing: r.playing,
        seeking: r.seek.is_some(),
    });
    let now = still(&control, lanes_can_step, replay, moving);
    idle.set_if_neq(Idle(now));
    let (focused, unfocused) = if now {
        (update_mode(true), update_mode(true))
    } else {
        busy
    };
    if (settings.focused_mode, settings.unfocused_mode) != (focused, unfocused) {
        settings.focused_mode = focused;
        settings.unfocused_mode = unfocused;
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
        let replay = |playing, seeking| Some(ReplayPace { playing, seeking });
        // (control, lanes can step, replay, moving): still?
        let cases = [
            (&running, true, None, false, false),
            (&running, false, None, false, true),
            (&paused, true, None, false, true),
            (&stepping_once, true, None, false, false),
            (&running, false, None, true, false),
            (&paused, true, None, true, false),
            // A replay starts the sandbox's run (not paused, no end): its own pace decides.
            (&running, true, replay(true, false), false, false),
            (&running, true, replay(false, false), false, true),
            (&running, true, replay(false, true), false, false),
            (&running, true, replay(false, false), true, false),
            (&paused, true, replay(true, false), false, false),
        ];
        for (i, (control, can_step, replay, moving, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                still(control, can_step, replay, moving),
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
        let game = WinitSettings::game();
        app.insert_resource(game.clone());
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
        assert_eq!(mode(&app), update_mode(true), "at the run's end");
        let unfocused = app.world().resource::<WinitSettings>().unfocused_mode;
        assert_eq!(unfocused, update_mode(true), "idle unfocused too");
        assert_eq!(*app.world().resource::<Idle>(), Idle(true));
        app.world_mut().write_message(crate::sim::RestartScene);
        app.update();
        app.update();
        assert_eq!(mode(&app), UpdateMode::Continuous, "run again");
        let unfocused = app.world().resource::<WinitSettings>().unfocused_mode;
        assert_eq!(unfocused, game.unfocused_mode, "unfocused as it started");
    }
}
