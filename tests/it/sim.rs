//! The ECS layer headless (MinimalPlugins, one fixed step per update): the seed's numbers through the plugin,
//! spawning through the message path the mouse uses, live settings edits, restart, refused spawns.

use std::path::Path;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use contact_sandbox::physics::DVec2;
use contact_sandbox::physics::world::ContactMethod;
use contact_sandbox::sim::{
    ActiveScene, Ball, CycleScene, Lane, LaneMember, LaneSettings, LoadScene, RestartScene,
    SceneCatalogue, SimControl, SimLog, SimPlugin, SpawnBall, SpawnRod, Stepping, ThrowBall,
    lane_outcome, lane_summary,
};

const WALL_THROW: &str = "assets/scenes/wall_throw.ron";
const BALL_PIT: &str = "assets/scenes/ball_pit.ron";
const ROD_DROP: &str = "assets/scenes/rod_drop.ron";

/// A headless app on `scene` where every `update()` advances the fixed clock by exactly one step.
fn headless(scene: &str) -> App {
    let mut app = App::new();
    app.add_plugins(MinimalPlugins).add_plugins(SimPlugin);
    app.insert_resource(TimeUpdateStrategy::FixedTimesteps(1));
    app.insert_resource(ActiveScene::load(Path::new(scene)).expect("built-in scene loads"));
    app
}

/// Lanes in scene order: (index, name, method, steps, balls, time).
fn lanes(app: &mut App) -> Vec<(usize, String, ContactMethod, u64, usize, f64)> {
    let mut out: Vec<_> = app
        .world_mut()
        .query::<&Lane>()
        .iter(app.world())
        .map(|l| {
            (
                l.index,
                l.world.name.clone(),
                l.world.settings.method,
                l.world.stats.steps,
                l.world.balls.len(),
                l.world.time,
            )
        })
        .collect();
    out.sort_by_key(|l| l.0);
    out
}

fn with_lane<T>(app: &mut App, index: usize, f: impl FnOnce(&Lane) -> T) -> T {
    let mut query = app.world_mut().query::<&Lane>();
    let lane = query
        .iter(app.world())
        .find(|l| l.index == index)
        .expect("lane exists");
    f(lane)
}

fn run_updates(app: &mut App, n: usize) {
    for _ in 0..n {
        app.update();
    }
}

#[test]
fn wall_throw_through_the_ecs_gives_the_seed_numbers_at_5_m_per_s() {
    let mut app = headless(WALL_THROW);
    app.update();
    app.world_mut().write_message(ThrowBall {
        v0: 5.0,
        h: None,
        stiffness: None,
        dhat: None,
    });
    // More updates than the scene's 80 steps: the plugin stops each lane at the scene's `steps`.
    run_updates(&mut app, 120);
    let lanes = lanes(&mut app);
    assert_eq!(lanes.len(), 2);
    assert_eq!(
        lanes[0].2,
        ContactMethod::Penalty,
        "penalty lane is first (drawn on top)"
    );
    assert_eq!(lanes[0].3, 80);
    assert_eq!(lanes[1].3, 80);

    let (penalty_through, penalty_outcome) = with_lane(&mut app, 0, |l| {
        (l.world.ball_tunneled(0), lane_outcome(&l.world))
    });
    assert!(
        penalty_through,
        "penalty k = 1e4 lets the 5 m/s ball through the 20 mm wall"
    );
    assert_eq!(penalty_outcome, "through");
    // Its smallest gap was at a step's end before it passed: said so, not a bare "min gap" beside "through".
    let penalty_summary = with_lane(&mut app, 0, |l| lane_summary(&l.world));
    assert_eq!(
        penalty_summary,
        "min gap 3.00 mm at a step's end (a ball passed a wall between two steps), max Newton 2"
    );

    let (gap, newton, tunneled, summary) = with_lane(&mut app, 1, |l| {
        (
            l.world.stats.min_gap.expect("IPC lane has a gap"),
            l.world.stats.max_newton,
            l.world.ball_tunneled(0),
            lane_summary(&l.world),
        )
    });
    assert!(!tunneled);
    // The seed prints the gap to 0.1 µm.
    assert!(
        (gap * 1e6 - 24.0).abs() < 0.05,
        "IPC min gap {} µm, seed says 24.0 µm",
        gap * 1e6
    );
    assert_eq!(newton, 9);
    assert_eq!(summary, "min gap 24.0 µm, max Newton 9");
}

#[test]
fn spawning_through_the_message_path_puts_a_ball_in_every_lane() {
    let mut app = headless(BALL_PIT);
    app.update();
    let before: Vec<usize> = lanes(&mut app).iter().map(|l| l.4).collect();
    app.world_mut().write_message(SpawnBall {
        position: DVec2::new(0.0, 1.1),
        velocity: DVec2::new(0.5, 0.0),
        radius: 0.03,
        mass: 0.2,
    });
    run_updates(&mut app, 2);
    let after: Vec<usize> = lanes(&mut app).iter().map(|l| l.4).collect();
    assert_eq!(after.len(), 2);
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(*a, b + 1);
    }
    // Every ball has an entity that belongs to a lane.
    let mut query = app.world_mut().query::<(&Ball, &LaneMember)>();
    let entities = query.iter(app.world()).count();
    assert_eq!(entities, after.iter().sum::<usize>());
    assert!(app.world().resource::<SimLog>().error.is_none());
}

#[test]
fn a_settings_edit_takes_effect_on_the_next_step() {
    let mut app = headless(WALL_THROW);
    run_updates(&mut app, 3);
    let t0 = lanes(&mut app)[0].5;
    {
        let mut query = app.world_mut().query::<(&Lane, &mut LaneSettings)>();
        for (lane, mut settings) in query.iter_mut(app.world_mut()) {
            if lane.index == 0 {
                settings.0.h = 0.005;
                settings.0.stiffness = 1e6;
            }
        }
    }
    app.update();
    let (h, k, t1) = with_lane(&mut app, 0, |l| {
        (l.world.settings.h, l.world.settings.stiffness, l.world.time)
    });
    assert_eq!(h, 0.005);
    assert_eq!(k, 1e6);
    assert!(
        (t1 - t0 - 0.005).abs() < 1e-12,
        "the step after the edit used h = 5 ms (t {t0} → {t1})"
    );
    assert!(app.world().resource::<SimLog>().error.is_none());
}

/// Sets lane `index`'s penalty k through its settings component, as the lane panel does.
fn edit_stiffness(app: &mut App, index: usize, k: f64) {
    let mut query = app.world_mut().query::<(&Lane, &mut LaneSettings)>();
    for (lane, mut settings) in query.iter_mut(app.world_mut()) {
        if lane.index == index {
            settings.0.stiffness = k;
        }
    }
}

/// After an edit part-way through a run, the lane's outcome is the run's, begun under other settings, and says
/// so; an edit before the first step, an edit back, and a restart leave the bare outcome.
#[test]
fn an_outcome_after_a_mid_run_edit_names_the_settings_its_run_began_with() {
    let mut app = headless(WALL_THROW);
    app.world_mut().resource_mut::<SimControl>().paused = true;
    run_updates(&mut app, 1);
    assert_eq!(lanes(&mut app)[0].3, 0, "no step taken yet");
    edit_stiffness(&mut app, 0, 2e4);
    run_updates(&mut app, 1);
    assert_eq!(with_lane(&mut app, 0, |l| l.world.settings.stiffness), 2e4);
    app.world_mut().resource_mut::<SimControl>().paused = false;
    run_updates(&mut app, 1);
    let outcome = with_lane(&mut app, 0, |l| lane_outcome(&l.world));
    assert!(
        !outcome.contains("begun"),
        "edited before its first step: {outcome}"
    );
    run_updates(&mut app, 79);
    assert_eq!(lanes(&mut app)[0].3, 80, "the run is over");
    let before = with_lane(&mut app, 0, |l| lane_outcome(&l.world));
    assert_eq!(before, "through");
    edit_stiffness(&mut app, 0, 1e6);
    run_updates(&mut app, 1);
    let after = with_lane(&mut app, 0, |l| lane_outcome(&l.world));
    assert_eq!(after, "through, in a run begun with k = 20000 N/m");
    // A second edit: the run still began with the first settings.
    edit_stiffness(&mut app, 0, 1e5);
    run_updates(&mut app, 1);
    let again = with_lane(&mut app, 0, |l| lane_outcome(&l.world));
    assert_eq!(again, "through, in a run begun with k = 20000 N/m");
    edit_stiffness(&mut app, 0, 2e4);
    run_updates(&mut app, 1);
    assert_eq!(
        with_lane(&mut app, 0, |l| lane_outcome(&l.world)),
        "through"
    );
    edit_stiffness(&mut app, 0, 1e6);
    run_updates(&mut app, 1);
    app.world_mut().write_message(RestartScene);
    run_updates(&mut app, 2);
    let restarted = with_lane(&mut app, 0, |l| lane_outcome(&l.world));
    assert!(
        !restarted.contains("begun"),
        "a restart runs the edit from the start: {restarted}"
    );
}

#[test]
fn an_invalid_settings_edit_is_reported_and_not_applied() {
    let mut app = headless(WALL_THROW);
    run_updates(&mut app, 2);
    {
        let mut query = app.world_mut().query::<(&Lane, &mut LaneSettings)>();
        for (lane, mut settings) in query.iter_mut(app.world_mut()) {
            if lane.index == 1 {
                settings.0.dhat = Some(-1e-3);
            }
        }
    }
    app.update();
    let dhat = with_lane(&mut app, 1, |l| l.world.settings.dhat);
    assert_eq!(dhat, Some(1e-3));
    let error = app
        .world()
        .resource::<SimLog>()
        .error
        .clone()
        .expect("an error message");
    assert!(error.contains("dhat"), "{error}");
    // A valid edit of another lane does not answer it.
    {
        let mut query = app.world_mut().query::<(&Lane, &mut LaneSettings)>();
        for (lane, mut settings) in query.iter_mut(app.world_mut()) {
            if lane.index == 0 {
                settings.0.dhat = Some(2e-3);
            }
        }
    }
    app.update();
    assert_eq!(app.world().resource::<SimLog>().error, Some(error));
    // A valid edit of the same lane answers the refusal: its banner goes.
    {
        let mut query = app.world_mut().query::<(&Lane, &mut LaneSettings)>();
        for (lane, mut settings) in query.iter_mut(app.world_mut()) {
            if lane.index == 1 {
                settings.0.dhat = Some(2e-3);
            }
        }
    }
    app.update();
    assert_eq!(
        with_lane(&mut app, 1, |l| l.world.settings.dhat),
        Some(2e-3)
    );
    assert_eq!(app.world().resource::<SimLog>().error, None);
}

/// Edits lane `index`'s settings as the window does, then takes one fixed step.
fn edit_lane(app: &mut App, index: usize, edit: impl Fn(&mut LaneSettings)) {
    let mut query = app.world_mut().query::<(&Lane, &mut LaneSettings)>();
    for (lane, mut settings) in query.iter_mut(app.world_mut()) {
        if lane.index == index {
            edit(&mut settings);
        }
    }
    app.update();
}

/// A refused edit of one setting stays on screen while another setting of the lane is edited (the field the
/// focus went to: typed μ = -1, then a click into d̂): only an applied edit of the refused setting answers it.
#[test]
fn a_refused_edit_stays_until_an_edit_of_the_same_setting_applies() {
    use contact_sandbox::sim::{ErrorTopic, LaneSetting};
    let mut app = headless(WALL_THROW);
    run_updates(&mut app, 2);
    // Refused by the sim: μ < 0.
    edit_lane(&mut app, 0, |s| s.0.friction = -1.0);
    let error = app.world().resource::<SimLog>().error.clone();
    assert!(
        error.as_deref().is_some_and(|e| e.contains("friction")),
        "{error:?}"
    );
    edit_lane(&mut app, 0, |s| s.0.stiffness = 2e4);
    edit_lane(&mut app, 0, |s| s.0.dhat = Some(2e-3));
    assert_eq!(with_lane(&mut app, 0, |l| l.world.settings.stiffness), 2e4);
    assert_eq!(
        app.world().resource::<SimLog>().error,
        error,
        "an edit of k or d̂ withdrew the refused μ"
    );
    edit_lane(&mut app, 0, |s| s.0.friction = 0.2);
    assert_eq!(with_lane(&mut app, 0, |l| l.world.settings.friction), 0.2);
    assert_eq!(app.world().resource::<SimLog>().error, None);

    // Refused by the window's field (text it does not take), about μ: the same.
    let refusal = "lane 'penalty': friction μ: \"-1\" is outside 0 to 10; kept 0.2";
    app.world_mut().resource_mut::<SimLog>().error_about(
        ErrorTopic::LaneEdit {
            lane: 0,
            settings: vec![LaneSetting::Friction],
        },
        refusal,
    );
    edit_lane(&mut app, 0, |s| s.0.method = ContactMethod::Ipc);
    assert_eq!(
        with_lane(&mut app, 0, |l| l.world.settings.method),
        ContactMethod::Ipc
    );
    assert_eq!(
        app.world().resource::<SimLog>().error.as_deref(),
        Some(refusal),
        "the method's edit withdrew the refused μ"
    );
    edit_lane(&mut app, 0, |s| s.0.friction = 0.3);
    assert_eq!(app.world().resource::<SimLog>().error, None);

    // Dismissed: the error and what it was about both go.
    let mut log = app.world_mut().resource_mut::<SimLog>();
    log.error_about(
        ErrorTopic::LaneEdit {
            lane: 0,
            settings: vec![LaneSetting::Friction],
        },
        refusal,
    );
    log.clear_error();
    assert_eq!((log.error.as_deref(), log.topic.as_ref()), (None, None));
}

#[test]
fn restart_restores_the_scene() {
    let mut app = headless(WALL_THROW);
    run_updates(&mut app, 30);
    assert!(lanes(&mut app).iter().all(|l| l.3 >= 29));
    app.world_mut().write_message(RestartScene);
    app.update();
    let lanes = lanes(&mut app);
    assert_eq!(lanes.len(), 2, "the old lanes are gone");
    for l in &lanes {
        assert_eq!(l.3, 0, "lane {} restarted", l.1);
        assert_eq!(l.4, 1);
    }
    let position = with_lane(&mut app, 1, |l| l.world.balls[0].position);
    assert_eq!(position, DVec2::ZERO);
    assert_eq!(app.world().resource::<SimControl>().steps_taken, 0);
    app.update();
    assert_eq!(with_lane(&mut app, 1, |l| l.world.stats.steps), 1);
}

/// Sends a spawn of a 1 kg point ball at rest at `position` (wall throw's wall starts at x = 0.503 m).
fn spawn_point_ball(app: &mut App, position: DVec2) {
    app.world_mut().write_message(SpawnBall {
        position,
        velocity: DVec2::ZERO,
        radius: 0.0,
        mass: 1.0,
    });
}

#[test]
fn a_spawn_inside_the_ipc_wall_is_refused_with_a_message_and_no_lane_changes() {
    let mut app = headless(WALL_THROW);
    app.update();
    spawn_point_ball(&mut app, DVec2::new(0.513, 0.0));
    run_updates(&mut app, 2);
    let error = app
        .world()
        .resource::<SimLog>()
        .error
        .clone()
        .expect("a readable refusal");
    assert!(error.contains("ipc"), "{error}");
    assert!(error.contains("wall"), "{error}");
    for l in lanes(&mut app) {
        assert_eq!(l.4, 1, "lane {} keeps only the scene's ball", l.1);
    }
    // The app keeps stepping.
    run_updates(&mut app, 2);
    assert!(lanes(&mut app).iter().all(|l| l.3 >= 4));
}

/// A burst of spawns in one frame (the Rain button drops ten) gives one message for its refusals, with their
/// count and the first reason, and still spawns the balls that fit.
#[test]
fn a_burst_of_refused_spawns_gives_one_message() {
    let mut app = headless(WALL_THROW);
    app.update();
    let raised = app.world().resource::<SimLog>().raised;
    for position in [
        DVec2::new(0.513, 0.0),
        DVec2::new(0.2, 0.0),
        DVec2::new(0.515, 0.0),
        DVec2::new(0.517, 0.0),
    ] {
        spawn_point_ball(&mut app, position);
    }
    run_updates(&mut app, 2);
    let log = app.world().resource::<SimLog>();
    assert_eq!(log.raised, raised + 1, "{:?}", log.errors);
    let error = log.error.clone().expect("a readable refusal");
    assert!(
        error.starts_with("3 of 4 balls refused; the first: "),
        "{error}"
    );
    assert!(error.contains("wall"), "{error}");
    for l in lanes(&mut app) {
        assert_eq!(l.4, 2, "lane {} got the ball that fits", l.1);
    }
}

/// A refusal shown for the old lanes goes when the lanes are rebuilt (a restart, a throw, another scene); a
/// refusal raised in the same frame as the rebuild stays.
#[test]
fn an_error_about_the_old_lanes_is_cleared_when_the_lanes_are_rebuilt() {
    let mut app = headless(WALL_THROW);
    app.update();
    spawn_point_ball(&mut app, DVec2::new(0.513, 0.0));
    run_updates(&mut app, 2);
    assert!(app.world().resource::<SimLog>().error.is_some());
    app.world_mut()
        .write_message(LoadScene("assets/scenes/ball_pit.ron".into()));
    run_updates(&mut app, 2);
    let log = app.world().resource::<SimLog>();
    assert_eq!(
        log.error, None,
        "the wall throw's refusal stayed in the ball pit"
    );
    assert_eq!(log.errors.len(), 1, "the history keeps it");

    // A throw refused in the frame of a restart: the refusal is about the new lanes too, and stays.
    app.world_mut().write_message(RestartScene);
    app.world_mut().write_message(ThrowBall {
        v0: 5.0,
        h: Some(-0.01),
        stiffness: None,
        dhat: None,
    });
    run_updates(&mut app, 2);
    assert!(app.world().resource::<SimLog>().error.is_some());
}

/// `]` and `[` step past a scene file that does not load, saying so, instead of stopping in front of it.
#[test]
fn cycling_scenes_steps_past_a_broken_file() {
    let broken = std::env::temp_dir().join(format!("cs-broken-{}.ron", std::process::id()));
    std::fs::write(&broken, "Scene(name: ").expect("written");
    let mut app = headless(WALL_THROW);
    app.update();
    app.insert_resource(SceneCatalogue {
        paths: vec![WALL_THROW.into(), broken.clone(), BALL_PIT.into()],
    });
    let loaded = |app: &mut App| app.world().resource::<ActiveScene>().path.clone();
    for (step, expected) in [(1, BALL_PIT), (-1, WALL_THROW), (1, BALL_PIT)] {
        app.world_mut().write_message(CycleScene(step));
        run_updates(&mut app, 2);
        assert_eq!(loaded(&mut app), Path::new(expected), "step {step}");
    }
    let log = app.world().resource::<SimLog>();
    let skipped: Vec<&String> = log
        .errors
        .iter()
        .filter(|e| e.contains("skipped"))
        .collect();
    assert_eq!(skipped.len(), 3, "{:?}", log.errors);
    assert!(
        skipped[0].contains(&broken.display().to_string()),
        "{}",
        skipped[0]
    );
    let _ = std::fs::remove_file(&broken);
}

#[test]
fn an_invalid_throw_is_refused_and_the_scene_keeps_running() {
    let mut app = headless(WALL_THROW);
    run_updates(&mut app, 2);
    app.world_mut().write_message(ThrowBall {
        v0: 5.0,
        h: Some(-0.01),
        stiffness: None,
        dhat: None,
    });
    run_updates(&mut app, 2);
    assert!(app.world().resource::<SimLog>().error.is_some());
    assert!(lanes(&mut app).iter().all(|l| l.3 >= 3));
}

#[test]
fn after_startup_every_update_takes_exactly_one_fixed_step() {
    let mut app = headless(WALL_THROW);
    app.update();
    let s0 = lanes(&mut app)[0].3;
    run_updates(&mut app, 10);
    assert_eq!(lanes(&mut app)[0].3, s0 + 10);
}

#[test]
fn lengths_are_told_in_the_unit_that_suits_them() {
    use contact_sandbox::sim::length_text;
    assert_eq!(length_text(24.0e-6), "24.0 µm");
    assert_eq!(length_text(0.9994e-3), "999.4 µm");
    assert_eq!(length_text(26.9008e-3), "26.90 mm");
    assert_eq!(length_text(0.5), "500.00 mm");
    assert_eq!(length_text(4.4316), "4.432 m");
    assert_eq!(length_text(0.0), "0.0 µm");
    assert_eq!(length_text(1e-6), "1.0 µm");
    assert_eq!(length_text(0.34321e-6), "343.2 nm");
    assert_eq!(length_text(1e-9), "1.0 nm");
    assert_eq!(length_text(3e-12), "3.0e-12 m");
    // A unit is kept only while its rounded figure is below 1000.
    assert_eq!(length_text(0.99996e-6), "1.0 µm");
    assert_eq!(length_text(0.99996e-3), "1.00 mm");
    assert_eq!(length_text(0.999996), "1.000 m");
}

#[test]
fn a_penalty_lane_cannot_become_ipc_while_a_ball_is_inside_a_wall() {
    let mut app = headless(WALL_THROW);
    app.update();
    app.world_mut().write_message(ThrowBall {
        v0: 1.0,
        h: None,
        stiffness: None,
        dhat: None,
    });
    // At 1 m/s the penalty lane's ball is inside the wall from about step 45 until it is pushed back out.
    let inside = |app: &mut App| {
        with_lane(app, 0, |l| {
            let mut world = l.world.clone();
            world.gap_and_penetration().1 > 0.0
        })
    };
    let mut steps = 0;
    while !inside(&mut app) {
        run_updates(&mut app, 1);
        steps += 1;
        assert!(steps < 200, "the penalty ball never entered the wall");
    }
    let set_method = |app: &mut App, method| {
        let mut query = app.world_mut().query::<(&Lane, &mut LaneSettings)>();
        for (lane, mut settings) in query.iter_mut(app.world_mut()) {
            if lane.index == 0 {
                settings.0.method = method;
            }
        }
    };
    set_method(&mut app, ContactMethod::Ipc);
    app.update();
    assert_eq!(
        with_lane(&mut app, 0, |l| l.world.settings.method),
        ContactMethod::Penalty
    );
    let error = app.world().resource::<SimLog>().error.clone();
    assert!(
        error
            .as_deref()
            .is_some_and(|e| e.contains("ipc") && e.contains("overlaps")),
        "{error:?}"
    );
    // Once the ball is out of the wall again, the switch is taken.
    while inside(&mut app) {
        run_updates(&mut app, 1);
        steps += 1;
        assert!(steps < 400, "the penalty ball never left the wall");
    }
    let (sunk, steps_at_switch) = with_lane(&mut app, 0, |l| {
        (l.world.stats.max_penetration, l.world.stats.steps)
    });
    assert!(
        sunk > 0.0 && steps_at_switch > 40,
        "{sunk} m, {steps_at_switch} steps"
    );
    set_method(&mut app, ContactMethod::Ipc);
    app.update();
    assert_eq!(
        with_lane(&mut app, 0, |l| l.world.settings.method),
        ContactMethod::Ipc
    );
    // The penalty run's depth is not read as an IPC gap ("stopped at 0.0 µm short"): the lane's extremes start
    // again under the new method, from the state at the switch.
    let (deepest, closest, now) = with_lane(&mut app, 0, |l| {
        let mut world = l.world.clone();
        (
            world.stats.max_penetration,
            world.stats.min_gap,
            world.gap_and_penetration().0,
        )
    });
    assert_eq!(deepest, 0.0);
    // The Newton counts restart too: they hold the steps since the switch only.
    let (steps, newton_steps) = with_lane(&mut app, 0, |l| {
        (l.world.stats.steps, l.world.stats.newton_steps)
    });
    assert_eq!(newton_steps, steps - steps_at_switch, "{steps} steps");
    assert!(
        closest.is_some_and(|gap| gap > 0.0 && now.is_some_and(|now| gap <= now)),
        "{closest:?} {now:?}"
    );
}

#[test]
fn a_throw_and_a_restart_keep_the_inspector_edits_and_the_throw_sets_its_own() {
    let mut app = headless(WALL_THROW);
    run_updates(&mut app, 2);
    {
        let mut query = app.world_mut().query::<(&Lane, &mut LaneSettings)>();
        for (lane, mut settings) in query.iter_mut(app.world_mut()) {
            if lane.index == 1 {
                settings.0.kappa = 1e6;
                settings.0.friction = 0.25;
            }
        }
    }
    run_updates(&mut app, 1);
    app.world_mut().write_message(RestartScene);
    run_updates(&mut app, 1);
    let (kappa, friction) = with_lane(&mut app, 1, |l| {
        (l.world.settings.kappa, l.world.settings.friction)
    });
    assert_eq!((kappa, friction), (1e6, 0.25));
    app.world_mut().write_message(ThrowBall {
        v0: 2.0,
        h: None,
        stiffness: None,
        dhat: Some(2e-3),
    });
    run_updates(&mut app, 1);
    let settings = with_lane(&mut app, 1, |l| l.world.settings.clone());
    assert_eq!((settings.kappa, settings.friction), (1e6, 0.25));
    assert_eq!(settings.dhat, Some(2e-3), "the throw's own d̂ wins");
    assert_eq!(with_lane(&mut app, 1, |l| l.world.balls[0].velocity.x), 2.0);
    // A new scene brings its own settings, even with a throw in the same frame.
    app.world_mut()
        .write_message(LoadScene(Path::new(WALL_THROW).to_path_buf()));
    app.world_mut().write_message(ThrowBall {
        v0: 1.0,
        h: None,
        stiffness: None,
        dhat: None,
    });
    run_updates(&mut app, 1);
    assert_eq!(with_lane(&mut app, 1, |l| l.world.settings.kappa), 1e4);
    assert_eq!(with_lane(&mut app, 1, |l| l.world.settings.friction), 0.0);
}

#[test]
fn an_edit_of_a_mirror_is_undone_since_the_physics_does_not_read_it() {
    use contact_sandbox::sim::Wall;
    let mut app = headless(WALL_THROW);
    run_updates(&mut app, 2);
    let mut balls = app.world_mut().query::<&mut Ball>();
    for mut ball in balls.iter_mut(app.world_mut()) {
        ball.radius = 0.3;
        ball.index = 999;
    }
    let mut walls = app.world_mut().query::<(&mut Wall, &mut Name)>();
    for (mut wall, mut name) in walls.iter_mut(app.world_mut()) {
        wall.half_extents.x = 5.0;
        wall.index = 7;
        // A renamed wall is still the same wall (its index used to be read from its name).
        name.set("renamed wall 1");
    }
    app.update();
    let mut balls = app.world_mut().query::<&Ball>();
    for ball in balls.iter(app.world()) {
        assert_eq!((ball.index, ball.radius), (0, 0.0), "the seed's point ball");
    }
    let mut walls = app.world_mut().query::<&Wall>();
    for wall in walls.iter(app.world()) {
        assert!((wall.half_extents.x - 0.01).abs() < 1e-12, "{wall:?}");
        assert_eq!(wall.index, 0, "{wall:?}");
    }
}

/// A lane switched to IPC once its ball had left the wall, then restarted: the restarted scene starts with the
/// ball inside the wall, so the switch is refused again, but the lane's other edits (μ, κ) stay. They used to
/// go with it.
#[test]
fn a_restart_that_refuses_a_switch_to_ipc_keeps_the_lanes_other_edits() {
    let dir = std::env::temp_dir().join(format!("contact-sandbox-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("overlap.ron");
    std::fs::write(
        &path,
        r#"Scene(name: "overlap", steps: None, lanes: [LaneSpec(name: "pen",
            contact: ContactSettings(method: Penalty, stiffness: 1e5, gravity: (0, 0)),
            walls: [WallSpec(center: (0.5, 0.0), half_extents: (0.01, 0.25))],
            balls: [BallSpec(position: (0.485, 0.0), velocity: (-0.2, 0.0), radius: 0.01)])])"#,
    )
    .expect("writes the scene");
    let mut app = headless(path.to_str().expect("a UTF-8 path"));
    let overlapping = |app: &mut App| {
        with_lane(app, 0, |l| {
            let mut world = l.world.clone();
            world.gap_and_penetration().1 > 0.0
        })
    };
    run_updates(&mut app, 1);
    assert!(overlapping(&mut app), "the scene starts inside the wall");
    let mut steps = 0;
    while overlapping(&mut app) {
        run_updates(&mut app, 1);
        steps += 1;
        assert!(steps < 200, "the ball never left the wall");
    }
    {
        let mut query = app.world_mut().query::<&mut LaneSettings>();
        for mut settings in query.iter_mut(app.world_mut()) {
            settings.0.method = ContactMethod::Ipc;
            settings.0.friction = 0.3;
            settings.0.kappa = 2e4;
        }
    }
    run_updates(&mut app, 1);
    assert_eq!(
        with_lane(&mut app, 0, |l| l.world.settings.method),
        ContactMethod::Ipc
    );
    app.world_mut().write_message(RestartScene);
    run_updates(&mut app, 1);
    let settings = with_lane(&mut app, 0, |l| l.world.settings.clone());
    assert_eq!(settings.method, ContactMethod::Penalty);
    assert_eq!((settings.friction, settings.kappa), (0.3, 2e4));
    let error = app.world().resource::<SimLog>().error.clone();
    assert!(
        error
            .as_deref()
            .is_some_and(|e| e.contains("overlaps") && e.contains("other edits are kept")),
        "{error:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A rod dropped from the window just above the floor but tilted into it is set on the floor, and the lane reports
/// no sink; one dropped with its centre below the floor is refused with a word, and no lane gets it. (Before, both
/// were lifted out at their first step and reported as sinks of up to a metre.)
#[test]
fn a_rod_dropped_into_the_floor_is_set_on_it_and_one_below_it_is_refused() {
    let mut app = headless(ROD_DROP);
    app.init_resource::<SimLog>();
    app.update();
    let (floor, rods_before) =
        with_lane(&mut app, 0, |l| (l.world.rod_floor_y, l.world.rods.len()));
    let drop = |center_y: f64| SpawnRod {
        center: DVec2::new(0.5, center_y),
        angle: 0.7,
        length: 0.4,
        mass: 1.0,
        restitution: 0.5,
        velocity: DVec2::ZERO,
        omega: 0.0,
    };
    // Its centre 5 cm above the floor: tilted at 0.7 rad its lower end would be 7.9 cm below it.
    app.world_mut().write_message(drop(floor + 0.05));
    // The message is applied in Update, after the frame's fixed step: the rod is placed, not yet stepped.
    app.update();
    let (rods, lowest) = with_lane(&mut app, 0, |l| {
        let rod = l.world.rods.last().expect("a rod");
        (l.world.rods.len(), rod.lowest_end_height())
    });
    assert_eq!(rods, rods_before + 1);
    assert!(
        lowest >= floor - 1e-8,
        "the rod's lower end at {lowest}, floor {floor}"
    );
    // Its first steps start on the floor: nothing is lifted out and reported as a sink.
    run_updates(&mut app, 3);
    let sink = with_lane(&mut app, 0, |l| l.world.stats.rod_max_sink);
    assert!(
        sink < 1e-6,
        "a sink of {sink} m reported for a rod set on the floor"
    );
    assert_eq!(app.world().resource::<SimLog>().error, None);
    app.world_mut().write_message(drop(floor - 0.01));
    app.update();
    let error = app
        .world()
        .resource::<SimLog>()
        .error
        .clone()
        .unwrap_or_default();
    assert!(
        error.starts_with("rod refused: its lower end would start ")
            && error.contains("below the floor of lane '"),
        "{error}"
    );
    assert_eq!(
        with_lane(&mut app, 0, |l| l.world.rods.len()),
        rods_before + 1
    );
}

/// An edit of a lane's h sets the fixed clock to 1 / the lanes' smallest h, as a restart does and as a replay
/// plays it: an edit to 5 ms left the clock at 100 Hz, the run at half real time. A lane that faults leaves the
/// clock to the lanes that still step.
#[test]
fn an_edit_of_a_lane_s_h_sets_the_fixed_clock_at_once() {
    let mut app = headless(WALL_THROW);
    app.update();
    let rate = |app: &App| {
        app.world()
            .resource::<Time<Fixed>>()
            .timestep()
            .as_secs_f64()
            .recip()
    };
    assert!((rate(&app) - 100.0).abs() < 1e-6, "{} Hz", rate(&app));
    edit_lane(&mut app, 1, |s| s.0.h = 0.005);
    assert_eq!(with_lane(&mut app, 1, |l| l.world.settings.h), 0.005);
    assert!((rate(&app) - 200.0).abs() < 1e-6, "{} Hz", rate(&app));
    edit_lane(&mut app, 1, |s| s.0.h = 0.02);
    assert!(
        (rate(&app) - 100.0).abs() < 1e-6,
        "the other lane's 10 ms: {} Hz",
        rate(&app)
    );
    edit_lane(&mut app, 0, |s| s.0.h = 0.001);
    assert!((rate(&app) - 1000.0).abs() < 1e-6, "{} Hz", rate(&app));
    // A rate set on the slider holds through R, which keeps the lanes' h (it was reset to the lanes' rate).
    app.world_mut()
        .resource_mut::<Time<Fixed>>()
        .set_timestep_hz(30.0);
    app.world_mut().write_message(RestartScene);
    app.update();
    app.update();
    assert_eq!(
        with_lane(&mut app, 0, |l| l.world.settings.h),
        0.001,
        "R keeps the edit"
    );
    assert!((rate(&app) - 30.0).abs() < 1e-6, "{} Hz", rate(&app));
    // The 1 ms lane faults: the 20 ms lane alone steps on, in real time.
    let mut query = app.world_mut().query::<&mut Lane>();
    for mut lane in query.iter_mut(app.world_mut()) {
        if lane.index == 0 {
            lane.world.fault = Some("a test's fault".into());
        }
    }
    app.update();
    assert!((rate(&app) - 50.0).abs() < 1e-6, "{} Hz", rate(&app));
}

/// The window's lanes keep time together: the penalty lane edited to 1 ms and restarted (R keeps the edit) takes
/// ten steps to the IPC lane's one, both balls at the same time on every tenth tick; the fixed clock runs at
/// 1 000 Hz, so the run is in real time; both lanes end at the scene's 0.8 s.
#[test]
fn a_lane_edited_to_a_smaller_h_keeps_time_with_the_others_after_a_restart() {
    let mut app = headless(WALL_THROW);
    app.update();
    edit_lane(&mut app, 0, |s| s.0.h = 0.001);
    assert_eq!(with_lane(&mut app, 0, |l| l.world.settings.h), 0.001);
    app.world_mut().write_message(RestartScene);
    app.update();
    let rate = app
        .world()
        .resource::<Time<Fixed>>()
        .timestep()
        .as_secs_f64()
        .recip();
    assert!((rate - 1000.0).abs() < 1e-6, "{rate} Hz");
    for tick in 1..=800u64 {
        app.update();
        let lanes = lanes(&mut app);
        assert_eq!((lanes[0].3, lanes[1].3), (tick, tick / 10), "tick {tick}");
        if tick % 10 == 0 {
            assert!((lanes[0].5 - lanes[1].5).abs() < 1e-12, "tick {tick}");
        }
    }
    run_updates(&mut app, 5);
    let lanes = lanes(&mut app);
    assert_eq!(
        (lanes[0].3, lanes[1].3),
        (800, 80),
        "the run ended at 0.8 s"
    );
    assert_eq!(app.world().resource::<SimControl>().steps_taken, 800);
}

/// A step asked for while paused (O) runs in the next frame however slow the clock, inline and on the worker, and
/// the bodies are drawn where it left them: at a time scale of 0.01 and 1 ms frames, wall throw's 10 ms tick
/// comes once in 1 000 frames, which the step used to wait for (500 leave a loaded machine's worker room).
#[test]
fn a_paused_single_step_does_not_wait_for_a_slowed_clock() {
    for stepping in [Stepping::Inline, Stepping::Background] {
        let mut app = App::new();
        app.add_plugins(MinimalPlugins).add_plugins(SimPlugin);
        app.insert_resource(TimeUpdateStrategy::ManualDuration(
            std::time::Duration::from_millis(1),
        ));
        app.insert_resource(stepping);
        app.insert_resource(
            ActiveScene::load(Path::new(WALL_THROW)).expect("built-in scene loads"),
        );
        app.update();
        app.world_mut()
            .resource_mut::<Time<Virtual>>()
            .set_relative_speed_f64(0.01);
        app.world_mut().resource_mut::<SimControl>().toggle_pause();
        run_updates(&mut app, 3);
        let before = app.world().resource::<SimControl>().steps_taken;
        let steps_before: Vec<u64> = lanes(&mut app).iter().map(|l| l.3).collect();
        app.world_mut().resource_mut::<SimControl>().single_step();
        let mut frames = 0;
        while app.world().resource::<SimControl>().steps_taken == before && frames < 1_000 {
            app.update();
            frames += 1;
            if stepping == Stepping::Background {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        let control = app.world().resource::<SimControl>();
        assert_eq!(
            control.steps_taken,
            before + 1,
            "{stepping:?}: no step in {frames} frames"
        );
        assert!(
            frames <= 500,
            "{stepping:?}: the step waited {frames} frames for the slowed clock"
        );
        let steps_after: Vec<u64> = lanes(&mut app).iter().map(|l| l.3).collect();
        let one_more: Vec<u64> = steps_before.iter().map(|s| s + 1).collect();
        assert_eq!(
            steps_after, one_more,
            "{stepping:?}: each lane stepped once"
        );
        // Drawn at the new state, not part-way from the old one.
        assert_drawn_at_their_states(&mut app, &format!("{stepping:?}, after the step"));
        run_updates(&mut app, 50);
        assert_eq!(
            app.world().resource::<SimControl>().steps_taken,
            before + 1,
            "{stepping:?}: one O, one step"
        );
        // Resumed before the slowed clock's next tick: still drawn there, not a step back (the previous states
        // were the ones before the step until that tick).
        app.world_mut().resource_mut::<SimControl>().toggle_pause();
        app.update();
        assert_drawn_at_their_states(&mut app, &format!("{stepping:?}, resumed"));
    }
}

/// Every body's transform is its lane-local state moved by its lane's offset (to 10⁻³ relative).
fn assert_drawn_at_their_states(app: &mut App, when: &str) {
    let mut lanes_q = app.world_mut().query::<(Entity, &Lane)>();
    let offsets: Vec<(Entity, DVec2)> = lanes_q
        .iter(app.world())
        .map(|(e, l)| (e, l.offset))
        .collect();
    let mut bodies = app
        .world_mut()
        .query::<(&LaneMember, &contact_sandbox::sim::BodyState, &Transform)>();
    let mut drawn = 0;
    for (member, state, transform) in bodies.iter(app.world()) {
        let offset = offsets
            .iter()
            .find(|(e, _)| *e == member.0)
            .map(|(_, o)| *o)
            .expect("a body's lane exists");
        let at = (state.position + offset) * f64::from(contact_sandbox::sim::UNITS_PER_METRE);
        let shown = DVec2::new(
            f64::from(transform.translation.x),
            f64::from(transform.translation.y),
        );
        assert!(
            (shown - at).length() < 1e-3 * at.length().max(1.0),
            "{when}: a body drawn at {shown:?}, its state at {at:?}"
        );
        drawn += 1;
    }
    assert!(drawn > 0, "{when}: no bodies to look at");
}
