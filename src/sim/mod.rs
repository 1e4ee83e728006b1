//! The Bevy ECS layer: one lane entity per physics world, body and wall entities mirroring it, and `FixedUpdate`
//! systems in named sets that gather, step and write back. No physics formula lives here: every step is
//! [`LaneWorld::step`], every check is the core's or the scene module's.
//!
//! ```text
//! Update:      SimSet::ApplyMessages  (Start/StopRecording, Start/StopReplay, SpawnBall, ThrowBall, SpawnRod,
//!                                     RestartScene, LoadScene, CycleScene, replay seeks)
//!              SimSet::Writeback      (mirror new bodies at once, so a paused lane shows its spawns)
//!              SimSet::Interpolate    (Transform = lerp(previous, current, overstep fraction))
//! FixedUpdate: SimSet::Gather → record_hash → SimSet::Step (step_lanes, or drive_replay) → SimSet::Writeback
//! ```
//!
//! With [`Stepping::Background`] (the window), `step_lanes` starts a batch of steps on a worker thread and a
//! later tick's Gather collects it; messages first wait for a batch in flight ([`stepping`]). Tests, headless
//! runs, screenshots and the export step inline.
//!
//! [`SimPlugin`] runs under `MinimalPlugins` (tests, headless) and `DefaultPlugins` (the window) alike.

mod components;
mod messages;
mod recording;
mod stepping;

use std::path::{Path, PathBuf};

use bevy::prelude::*;

pub use components::*;
pub use messages::*;
pub use recording::*;
pub use stepping::{StepInFlight, Stepping, collect_now, no_step_in_flight};

use crate::demo::{
    Action, apply_settings, refuse_ipc_into_overlap, refuse_rod_below_floor, rod_rise_onto_floors,
    spawn_ball_everywhere, spawn_rod_everywhere, thrown_scene,
};
use crate::physics::DVec2;
use crate::physics::world::{ContactMethod, ContactSettings, LaneWorld};
use crate::scene::{BallSpec, RodSpec, Scene, SceneError};

/// The scene the sandbox opens on.
pub const DEFAULT_SCENE: &str = "assets/scenes/wall_throw.ron";

/// The scenes `[` and `]` cycle through, in menu order.
/// Every scene in `assets/scenes/` is here (SPEC §4: the scenes are switchable from the UI).
pub const BUILT_IN_SCENES: [&str; 6] = [
    "assets/scenes/wall_throw.ron",
    "assets/scenes/ball_pit.ron",
    "assets/scenes/slope.ron",
    "assets/scenes/rod_drop.ron",
    "assets/scenes/gauntlet.ron",
    "assets/scenes/ball_pit_2000.ron",
];

/// The built-in scenes' text, compiled in, in the order of [`BUILT_IN_SCENES`]: the window opens on its default
/// scene and offers the others from any working directory, not only from the repository's root.
const BUILT_IN_TEXTS: [&str; 6] = [
    include_str!("../../assets/scenes/wall_throw.ron"),
    include_str!("../../assets/scenes/ball_pit.ron"),
    include_str!("../../assets/scenes/slope.ron"),
    include_str!("../../assets/scenes/rod_drop.ron"),
    include_str!("../../assets/scenes/gauntlet.ron"),
    include_str!("../../assets/scenes/ball_pit_2000.ron"),
];

/// The compiled-in text of a built-in scene named by its path in the repository (`assets/scenes/…`).
pub fn built_in_text(path: &Path) -> Option<&'static str> {
    BUILT_IN_SCENES
        .iter()
        .position(|p| Path::new(p) == path)
        .map(|i| BUILT_IN_TEXTS[i])
}

/// The simulation's system sets, in the order they run.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimSet {
    /// Update: user actions arriving as messages change the lanes.
    ApplyMessages,
    /// FixedUpdate: validated settings edits are copied into the lanes; previous states are remembered.
    Gather,
    /// FixedUpdate: the lanes step, keeping time together ([`crate::demo::step_lanes`]).
    Step,
    /// FixedUpdate and Update: body entities are created and updated from the lanes.
    Writeback,
    /// Update: transforms are interpolated between the last two fixed steps.
    Interpolate,
}

/// The simulation plugin. Insert an [`ActiveScene`] before `Startup` (or send [`LoadScene`]) to get lanes.
#[derive(Default)]
pub struct SimPlugin;

impl Plugin for SimPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<SimControl>()
            .init_resource::<Stepping>()
            .init_resource::<StepInFlight>()
            .init_resource::<SimLog>()
            .init_resource::<SceneCatalogue>()
            .add_message::<SpawnBall>()
            .add_message::<ThrowBall>()
            .add_message::<SpawnRod>()
            .add_message::<RestartScene>()
            .add_message::<LoadScene>()
            .add_message::<CycleScene>()
            .init_resource::<Recorder>()
            .add_message::<StartRecording>()
            .add_message::<StopRecording>()
            .add_message::<StartReplay>()
            .add_message::<StopReplay>()
            .register_type::<Ball>()
            .register_type::<Rod>()
            .register_type::<Wall>()
            .register_type::<LaneMember>()
            .register_type::<BodyState>()
            .register_type::<PreviousBodyState>()
            .configure_sets(
                Update,
                (
                    SimSet::ApplyMessages,
                    SimSet::Writeback,
                    SimSet::Interpolate,
                )
                    .chain(),
            )
            .configure_sets(
                FixedUpdate,
                (SimSet::Gather, SimSet::Step, SimSet::Writeback).chain(),
            )
            .add_systems(Startup, spawn_active_scene)
            .add_systems(
                Update,
                (
                    stepping::settle_before_messages,
                    recording_messages,
                    replay_messages,
                    apply_messages,
                    seek_replay,
                )
                    .chain()
                    .in_set(SimSet::ApplyMessages),
            )
            .add_systems(
                Update,
                (write_back_bodies, restore_mirrors)
                    .chain()
                    .in_set(SimSet::Writeback),
            )
            .add_systems(
                Update,
                (hold_previous_while_paused, interpolate_transforms)
                    .chain()
                    .in_set(SimSet::Interpolate),
            )
            .add_systems(
                RunFixedMainLoop,
                stepping::step_when_asked.in_set(RunFixedMainLoopSystems::BeforeFixedMainLoop),
            )
            .add_systems(
                FixedUpdate,
                (
                    (
                        stepping::collect_finished_step,
                        (
                            gather_settings.run_if(no_step_in_flight),
                            remember_previous_states,
                        ),
                    )
                        .chain()
                        .in_set(SimSet::Gather),
                    record_hash
                        .run_if(no_step_in_flight)
                        .after(SimSet::Gather)
                        .before(SimSet::Step),
                    (step_lanes, drive_replay).in_set(SimSet::Step),
                    follow_lanes_rate.after(SimSet::Step),
                    write_back_bodies.in_set(SimSet::Writeback),
                ),
            );
    }
}

impl ActiveScene {
    /// Loads and validates a scene file.
    /// A built-in scene's path that names no file here (the program started outside the repository) loads its
    /// compiled-in copy.
    pub fn load(path: &Path) -> Result<ActiveScene, SceneError> {
        ActiveScene::load_in(Path::new(""), path)
    }

    /// [`ActiveScene::load`] with `path` taken relative to `root` (the working directory for `""`).
    fn load_in(root: &Path, path: &Path) -> Result<ActiveScene, SceneError> {
        let (text, file) =
            crate::scene::read_or_compiled_in(root, path, built_in_text(path), "scenes")?;
        let scene = Scene::parse(&text, &file)?;
        Ok(ActiveScene {
            path: path.to_path_buf(),
            loaded: scene.clone(),
            current: scene,
        })
    }
}

impl SimControl {
    /// Does the next fixed tick step the lanes?
    pub fn steps_this_tick(&self) -> bool {
        !self.paused || self.pending_steps > 0
    }
}

/// What a lane's balls did, in the words of the wall-throw panel: "through", "turned back X mm short" (the closest
/// approach once contact has ended and the wall turned the ball back; the seed's table calls it "stop"; "stopped"
/// for a ball left at rest), "turned back at X mm depth" (penalty), "left contact after coming within X, moving
/// at v m/s" (a ball falling past the wall or off a slope), "in contact, moving at v m/s, gap X" (a ball sliding
/// along a wall),
/// "at rest in contact, gap X" or "flying"; for a lane of many balls "in contact, …", "contact ended, …" (every
/// ball has left its contacts) or "no contact yet". Penalty
/// reports the deepest penetration, IPC the smallest gap (SPEC §2).
pub fn lane_outcome(world: &LaneWorld) -> String {
    lane_outcome_of_run(world, false)
}

/// [`lane_outcome`], for a run that may be over (`run_over`: the lane took all the steps it was given): a single
/// ball that never came into contact then "never reached the wall", as `throw` says, rather than "flying".
///
/// After a settings edit part-way through the run, the outcome is that run's, begun under other settings, and it
/// says so (", in a run begun with k = 1e4 N/m"): under a title that reads "(edited: k = 1e6 N/m)" a bare
/// "through" would pass for the edited setting's result.
pub fn lane_outcome_of_run(world: &LaneWorld, run_over: bool) -> String {
    let outcome = outcome_of_run(world, run_over);
    match &world.stats.run_began_with {
        Some(began) => format!(
            "{outcome}, in a run begun with {}",
            settings_changes(&world.settings, began).join(", ")
        ),
        None => outcome,
    }
}

fn outcome_of_run(world: &LaneWorld, run_over: bool) -> String {
    let flying = || {
        if run_over && !world.walls.is_empty() {
            "never reached the wall".to_string()
        } else {
            "flying".to_string()
        }
    };
    if world.balls.is_empty() {
        return rods_outcome(world);
    }
    if (0..world.balls.len()).any(|i| world.ball_tunneled(i)) {
        return "through".into();
    }
    let stats = &world.stats;
    // One ball is the seed's throw: it stops short of the wall, or at a depth inside it. Many balls are a pile,
    // where "stopped" would say nothing: the closest approach or the deepest overlap so far is what it reports.
    let pile = world.balls.len() > 1;
    match world.settings.method {
        ContactMethod::Penalty if stats.max_penetration > 0.0 => {
            let depth = length_text(stats.max_penetration);
            let now = world.last.as_ref().map_or(0.0, |last| last.max_penetration);
            let speed = world.balls[0].velocity.length();
            // "so far": the record, which the lane's line beside it also gives as "max penetration"; the depth
            // now is far smaller once a landing pile has settled (11.46 mm then, about 1 mm now in the pit).
            if pile && now > 0.0 {
                format!(
                    "in contact, overlap {} now, deepest so far {depth}",
                    length_text(now)
                )
            } else if pile {
                format!("contact ended, deepest overlap so far {depth}")
            } else if now > 0.0 && speed > RESTING_SPEED {
                format!(
                    "in contact, moving at {speed:.3} m/s, overlap {}",
                    length_text(now)
                )
            } else if now > 0.0 {
                format!("at rest in contact, overlap {}", length_text(now))
            } else if let Some(ended) = turned_back(world) {
                format!("{ended} at {depth} depth")
            } else {
                format!("left contact after reaching {depth} depth, moving at {speed:.3} m/s")
            }
        }
        ContactMethod::Ipc => match stats.min_gap {
            Some(gap) if gap < world.dhat() && pile => {
                let now = world.last.as_ref().and_then(|last| last.min_gap);
                let state = if now.is_some_and(|now| now < world.dhat()) {
                    "in contact"
                } else {
                    "contact ended"
                };
                format!("{state}, closest gap so far {}", length_text(gap.max(0.0)))
            }
            Some(gap) if gap < world.dhat() => {
                // A ball still in contact may be sliding along the wall (the slope) rather than stopped at it;
                // once contact has ended, the closest approach is where the throw stopped and turned.
                let now = world.last.as_ref().and_then(|last| last.min_gap);
                let speed = world.balls[0].velocity.length();
                match now {
                    Some(now) if now < world.dhat() && speed > RESTING_SPEED => format!(
                        "in contact, moving at {speed:.3} m/s, gap {}",
                        length_text(now.max(0.0))
                    ),
                    Some(now) if now < world.dhat() => {
                        format!("at rest in contact, gap {}", length_text(now.max(0.0)))
                    }
                    _ if let Some(ended) = turned_back(world) => {
                        format!("{ended} {} short", length_text(gap.max(0.0)))
                    }
                    _ => format!(
                        "left contact after coming within {}, moving at {speed:.3} m/s",
                        length_text(gap.max(0.0))
                    ),
                }
            }
            _ if pile => "no contact yet".into(),
            _ => flying(),
        },
        _ if pile => "no contact yet".into(),
        _ => flying(),
    }
}

/// How a lane's only ball, out of contact now, ended if the wall turned it back: "stopped" about at rest,
/// "turned back" moving away from the nearest wall mostly along that wall's normal (within 45°) and not falling
/// (moving within 45° of gravity), as the seed's throw does (its table calls the closest approach "stop"; a class
/// sees the ball leave the wall). `None` for a ball that falls past a wall's end or slides off a slope: no wall
/// turned it back.
fn turned_back(world: &LaneWorld) -> Option<&'static str> {
    let Some(ball) = world.balls.first() else {
        return Some("stopped");
    };
    let speed = ball.velocity.length();
    if speed <= RESTING_SPEED {
        return Some("stopped");
    }
    let within_45_degrees =
        |direction: DVec2| ball.velocity.dot(direction) >= std::f64::consts::FRAC_1_SQRT_2 * speed;
    let gravity = world.settings.gravity.normalize_or_zero();
    if gravity != DVec2::ZERO && within_45_degrees(gravity) {
        return None;
    }
    world
        .walls
        .iter()
        .map(|wall| crate::physics::geometry::ball_wall_distance(ball.position, ball.radius, wall))
        .min_by(|a, b| a.value.total_cmp(&b.value))
        .is_none_or(|nearest| within_45_degrees(nearest.gradient))
        .then_some("turned back")
}

/// Below this speed a ball in contact is called at rest [m/s]: a sticking ball under the smoothed friction
/// creeps at up to ε_v (1 mm/s in the shipped scenes).
const RESTING_SPEED: f64 = 5e-3;

/// A lane without balls: where its rods are ("2 lying on the floor, 1 on one end, 1 in flight"), or "empty".
fn rods_outcome(world: &LaneWorld) -> String {
    if world.rods.is_empty() {
        return "empty".into();
    }
    // The tolerance the canvas uses for its contact rings: a resting end sits on the floor to round-off.
    let touching = |rod: &crate::physics::rod_flight::Rod| {
        rod.endpoints()
            .iter()
            .filter(|p| p.y - world.rod_floor_y < 1e-6)
            .count()
    };
    let mut counts = [0usize; 3];
    for rod in &world.rods {
        counts[touching(rod)] += 1;
    }
    let parts: Vec<String> = [
        (counts[2], "lying on the floor"),
        (counts[1], "on one end"),
        (counts[0], "in flight"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    let rods = if world.rods.len() == 1 { "rod" } else { "rods" };
    format!("{} {rods}: {}", world.rods.len(), parts.join(", "))
}

/// The settings `now` changed from `was` (the lane's settings in its scene), each with its value now:
/// `["k = 1e6 N/m"]`, empty when none changed. A lane's name often quotes a setting ("penalty k=1e4"), so the
/// panels show these beside it ([`lane_title`]) rather than let the name speak for an edited lane.
pub fn settings_changes(was: &ContactSettings, now: &ContactSettings) -> Vec<String> {
    LaneSetting::changed(was, now)
        .into_iter()
        .map(|setting| setting.value_text(now))
        .collect()
}

/// A lane's name as its panels show it: the name, and after an edit what changed ("penalty k=1e4 (edited:
/// k = 1e6 N/m)"), so a result is never shown under a setting the lane no longer has. `was` is the lane's
/// settings in its scene (`None`: nothing to compare with).
pub fn lane_title(world: &LaneWorld, was: Option<&ContactSettings>) -> String {
    let changes = was.map(|was| settings_changes(was, &world.settings));
    match changes {
        Some(changes) if !changes.is_empty() => {
            format!("{} (edited: {})", world.name, changes.join(", "))
        }
        _ => world.name.clone(),
    }
}

/// "min gap X µm, max Newton N" (or the penetration for a lane whose balls overlapped), the length in the unit
/// that suits it ([`length_text`]). Gaps are measured at the ends of steps, which is said in a lane where a ball
/// went through a wall between two of them: "through" beside a bare positive gap read as a contradiction.
pub fn lane_summary(world: &LaneWorld) -> String {
    let stats = &world.stats;
    if world.balls.is_empty() && !world.rods.is_empty() {
        // Rods are resolved by the impulse law, not by Newton: gaps and iterations would say nothing.
        return format!(
            "{} impacts, deepest sink {}",
            stats.rod_impacts,
            length_text(stats.rod_max_sink.max(0.0))
        );
    }
    let gap = match stats.min_gap {
        Some(g) if g.is_finite() && g >= 0.0 && stats.tunneled > 0 => format!(
            "min gap {} at a step's end (a ball passed a wall between two steps)",
            length_text(g)
        ),
        Some(g) if g.is_finite() && g >= 0.0 => format!("min gap {}", length_text(g)),
        Some(g) if g.is_finite() => format!("max penetration {}", length_text(-g)),
        _ => "min gap —".into(),
    };
    format!("{gap}, max Newton {}", stats.max_newton)
}

/// Lengths for people, as the panels and messages give them (defined beside the other text helpers).
pub use crate::text::length_text;

/// Lane-local bounds `(min, max)` of everything in a lane [m]; a unit box around the origin when it is empty.
pub fn lane_bounds(world: &LaneWorld) -> (DVec2, DVec2) {
    let mut lo = DVec2::splat(f64::INFINITY);
    let mut hi = DVec2::splat(f64::NEG_INFINITY);
    for w in &world.walls {
        let (a, b) = w.aabb();
        lo = lo.min(a);
        hi = hi.max(b);
    }
    for b in &world.balls {
        lo = lo.min(b.position - DVec2::splat(b.radius));
        hi = hi.max(b.position + DVec2::splat(b.radius));
    }
    for r in &world.rods {
        for p in r.endpoints() {
            lo = lo.min(p);
            hi = hi.max(p);
        }
    }
    if lo.is_finite() && hi.is_finite() && (hi - lo).length() > 0.0 {
        (lo, hi)
    } else {
        (DVec2::splat(-0.5), DVec2::splat(0.5))
    }
}

/// Offsets that place lanes one above the other (lane 0 on top) when the lanes are wider than tall, and side by
/// side (lane 0 on the left) otherwise, with a gap of 15 % of the larger lane size.
pub fn lane_offsets(bounds: &[(DVec2, DVec2)]) -> Vec<DVec2> {
    let size = bounds
        .iter()
        .fold(DVec2::ZERO, |m, (lo, hi)| m.max(*hi - *lo));
    let gap = 0.15 * size.x.max(size.y);
    let vertical = size.x >= size.y;
    let mut offsets = Vec::with_capacity(bounds.len());
    let mut cursor = 0.0;
    for (lo, hi) in bounds {
        if vertical {
            // Put this lane's top at -cursor.
            offsets.push(DVec2::new(0.0, -cursor - hi.y));
            cursor += hi.y - lo.y + gap;
        } else {
            offsets.push(DVec2::new(cursor - lo.x, 0.0));
            cursor += hi.x - lo.x + gap;
        }
    }
    offsets
}

fn spawn_active_scene(
    mut commands: Commands,
    scene: Option<Res<ActiveScene>>,
    mut control: ResMut<SimControl>,
    mut fixed: ResMut<Time<Fixed>>,
) {
    if let Some(scene) = scene {
        build_lanes(&mut commands, &scene.current, &mut control, &mut fixed);
    }
}

/// Spawns one lane entity per lane of `scene`, with wall, ball and rod entities.
fn build_lanes(
    commands: &mut Commands,
    scene: &Scene,
    control: &mut SimControl,
    fixed: &mut Time<Fixed>,
) {
    let worlds = scene.build();
    prepare_lanes(scene, &worlds, control, fixed);
    spawn_lane_entities(commands, worlds);
}

/// The clock and the step counter for a fresh run of `scene` on `worlds`, its lanes as built with the panel's
/// kept edits: the fixed clock runs at `1 / h` of their smallest h, which a tick advances the run by, so a lane
/// edited to 1 ms runs in real time (the scene's own rate, [`crate::demo::fixed_rate_hz`], without edits); set only
/// where that rate changed ([`follow_rate`]), so a rate set on the slider holds through R, a throw and F5.
fn prepare_lanes(
    scene: &Scene,
    worlds: &[LaneWorld],
    control: &mut SimControl,
    fixed: &mut Time<Fixed>,
) {
    control.run_end = crate::demo::run_seconds(scene);
    follow_rate(worlds.iter(), control, fixed);
    control.steps_taken = 0;
    control.pending_steps = 0;
}

/// The lanes' settings as edited before a throw or a restart (by lane index), and the throw's own h, penalty k
/// and IPC d̂, which replace the edits'.
struct KeptSettings {
    lanes: Vec<ContactSettings>,
    h: Option<f64>,
    stiffness: Option<f64>,
    dhat: Option<f64>,
}

impl KeptSettings {
    /// `edited` with the throw's values on top, each where the throw applies it (SPEC §2: k to penalty lanes,
    /// d̂ to IPC lanes).
    fn over(&self, edited: &ContactSettings) -> ContactSettings {
        let mut settings = edited.clone();
        if let Some(h) = self.h {
            settings.h = h;
        }
        match settings.method {
            ContactMethod::Penalty => {
                if let Some(k) = self.stiffness {
                    settings.stiffness = k;
                }
            }
            ContactMethod::Ipc => {
                if self.dhat.is_some() {
                    settings.dhat = self.dhat;
                }
            }
        }
        settings
    }
}

/// Spawns one lane entity per world, with wall, ball and rod entities, laid out side by side.
fn spawn_lane_entities(commands: &mut Commands, worlds: Vec<LaneWorld>) {
    spawn_lane_entities_with_history(commands, worlds, Vec::new(), None);
}

/// [`spawn_lane_entities`], the lanes' plots starting from `histories` (by lane; a missing one is empty), laid
/// out by `layout`: each lane's bounds as its run was built (one per world), which the layout and the view keep
/// for the whole run. `None` (or a layout for other lanes) lays the lanes out by what they hold now, as a fresh
/// build does. A replay or a restored sandbox shows lanes in the middle of a run, whose balls may have left:
/// laid out by their present positions they moved, or turned from one above the other to side by side.
pub(crate) fn spawn_lane_entities_with_history(
    commands: &mut Commands,
    worlds: Vec<LaneWorld>,
    histories: Vec<LaneDiagnostics>,
    layout: Option<Vec<(DVec2, DVec2)>>,
) {
    let bounds: Vec<(DVec2, DVec2)> = match layout {
        Some(layout) if layout.len() == worlds.len() => layout,
        _ => worlds.iter().map(lane_bounds).collect(),
    };
    let offsets = lane_offsets(&bounds);
    let mut histories = histories.into_iter();
    for (index, ((world, bounds), offset)) in
        worlds.into_iter().zip(bounds).zip(offsets).enumerate()
    {
        let lane_entity = commands.spawn_empty().id();
        let mut wall_entities = Vec::with_capacity(world.walls.len());
        for (k, w) in world.walls.iter().enumerate() {
            let entity = commands.spawn((
                Name::new(format!("{} wall {k}", world.name)),
                Wall {
                    index: k,
                    center: w.center,
                    half_extents: w.half_extents,
                    angle: w.angle,
                },
                LaneMember(lane_entity),
                body_transform(w.center + offset, w.angle),
            ));
            wall_entities.push(entity.id());
        }
        let settings = LaneSettings(world.settings.clone());
        let mut lane = Lane::new(index, world, offset, bounds);
        lane.wall_entities = wall_entities;
        mirror_new_bodies(commands, lane_entity, &mut lane);
        commands.entity(lane_entity).insert((
            Name::new(format!("lane {index}: {}", lane.world.name)),
            settings,
            histories.next().unwrap_or_default(),
            lane,
        ));
    }
}

/// Despawns the body entities beyond the lane's bodies (a replay that seeks back to before a spawn).
pub(crate) fn drop_surplus_bodies(commands: &mut Commands, lane: &mut Lane) {
    for entity in lane
        .ball_entities
        .drain(lane.world.balls.len().min(lane.ball_entities.len())..)
    {
        commands.entity(entity).despawn();
    }
    for entity in lane
        .rod_entities
        .drain(lane.world.rods.len().min(lane.rod_entities.len())..)
    {
        commands.entity(entity).despawn();
    }
}

fn body_transform(position: DVec2, angle: f64) -> Transform {
    Transform::from_xyz(
        position.x as f32 * UNITS_PER_METRE,
        position.y as f32 * UNITS_PER_METRE,
        1.0,
    )
    .with_rotation(Quat::from_rotation_z(angle as f32))
}

/// Creates entities for bodies the lane's world has but the ECS does not mirror yet.
fn mirror_new_bodies(commands: &mut Commands, lane_entity: Entity, lane: &mut Lane) {
    for i in lane.ball_entities.len()..lane.world.balls.len() {
        let b = lane.world.balls[i];
        let state = BodyState {
            position: b.position,
            velocity: b.velocity,
            angle: 0.0,
            omega: 0.0,
        };
        let entity = commands
            .spawn((
                Name::new(format!("{} ball {i}", lane.world.name)),
                Ball {
                    index: i,
                    radius: b.radius,
                    mass: b.mass,
                },
                LaneMember(lane_entity),
                state,
                PreviousBodyState {
                    position: b.position,
                    angle: 0.0,
                },
                body_transform(b.position + lane.offset, 0.0),
            ))
            .id();
        lane.ball_entities.push(entity);
    }
    for i in lane.rod_entities.len()..lane.world.rods.len() {
        let r = lane.world.rods[i];
        let entity = commands
            .spawn((
                Name::new(format!("{} rod {i}", lane.world.name)),
                Rod {
                    index: i,
                    length: r.length,
                    mass: r.mass,
                    restitution: r.restitution,
                },
                LaneMember(lane_entity),
                BodyState {
                    position: r.center,
                    velocity: r.velocity,
                    angle: r.angle,
                    omega: r.omega,
                },
                PreviousBodyState {
                    position: r.center,
                    angle: r.angle,
                },
                body_transform(r.center + lane.offset, r.angle),
            ))
            .id();
        lane.rod_entities.push(entity);
    }
}

/// Lanes whose settings an edit may have changed.
type EditedLanes<'w, 's> =
    Query<'w, 's, (&'static mut Lane, &'static mut LaneSettings), Changed<LaneSettings>>;

/// Gather: copies each valid settings edit into its lane; an invalid one is reverted and reported.
/// While a demo replays, the lanes follow the demo and edits are reverted.
pub fn gather_settings(
    mut lanes: ParamSet<(EditedLanes, Query<&Lane>)>,
    mut log: ResMut<SimLog>,
    mut recorder: ResMut<Recorder>,
    control: Res<SimControl>,
    replay: Option<Res<Replay>>,
) {
    // A recording with no room for these edits ends before them (see `Recorder::end_unless_room`).
    let coming = lanes
        .p0()
        .iter()
        .filter(|(lane, settings)| settings.0 != lane.world.settings)
        .count();
    if replay.is_none() && !recorder.has_room(coming) {
        let all = lanes.p1();
        recorder.end_unless_room(control.ticks, coming, || {
            recording::hash_of_lanes(all.iter())
        });
    }
    for (mut lane, mut settings) in &mut lanes.p0() {
        if settings.0 == lane.world.settings {
            continue;
        }
        if replay.is_some() {
            settings.0 = lane.world.settings.clone();
            continue;
        }
        let changed = LaneSetting::changed(&lane.world.settings, &settings.0);
        let applied = refuse_ipc_into_overlap(&mut lane.world, &settings.0)
            .and_then(|()| apply_settings(&mut lane.world, &settings.0));
        match applied {
            Ok(()) => {
                // A refused edit of a setting this edit changed is answered by it: its banner would now mislead.
                // One of the lane's other settings is not (the field that took the focus from a refused one).
                log.withdraw_lane_edit(lane.index, &changed);
                log.info(format!("lane '{}': settings applied", lane.world.name));
                recorder.record(
                    control.ticks,
                    Action::Settings {
                        lane: lane.index,
                        settings: settings.0.clone(),
                    },
                );
            }
            Err(message) => {
                log.error_about(
                    ErrorTopic::LaneEdit {
                        lane: lane.index,
                        settings: changed,
                    },
                    message,
                );
                settings.0 = lane.world.settings.clone();
            }
        }
    }
}

/// FixedUpdate, after the step: the fixed clock follows the rate the lanes' next tick plays at
/// ([`crate::demo::play_rate_hz`]: 1 / the smallest h of the lanes that can step), so the window runs as a replay
/// and an export of it play: an edit from 10 ms to 5 ms left the clock at 100 Hz (half real time), and after a
/// 1 ms lane faulted its 10 ms neighbour ran at 1 000 Hz (ten times real time). A replay sets the clock itself.
pub fn follow_lanes_rate(
    lanes: Query<&Lane>,
    mut control: ResMut<SimControl>,
    replay: Option<Res<Replay>>,
    mut fixed: ResMut<Time<Fixed>>,
) {
    if replay.is_none() {
        follow_rate(
            lanes.iter().map(|lane| &lane.world),
            &mut control,
            &mut fixed,
        );
    }
}

/// Sets the fixed clock to the lanes' play rate when that rate differs from the one it was last set to
/// ([`SimControl::lanes_hz`]), so that the fixed-rate slider holds until the lanes' h (or which of them can step)
/// changes: a teacher's 30 Hz used to be reset by every R, throw and F5.
fn follow_rate<'a>(
    lanes: impl Iterator<Item = &'a LaneWorld> + Clone,
    control: &mut SimControl,
    fixed: &mut Time<Fixed>,
) {
    let hz = crate::demo::play_rate_hz(
        lanes,
        control.run_end,
        fixed.timestep().as_secs_f64().recip(),
    );
    if control.lanes_hz != Some(hz) {
        control.lanes_hz = Some(hz);
        fixed.set_timestep_hz(hz);
    }
}

/// Gather: the state before this tick's step is what interpolation starts from (equal to the current state when
/// no step is taken, so a paused lane stands still). With background stepping, the state before the batch just
/// collected (and nothing while none was).
pub fn remember_previous_states(
    mut bodies: Query<(&BodyState, &mut PreviousBodyState)>,
    stepping: Option<Res<Stepping>>,
    in_flight: Option<Res<StepInFlight>>,
    mut seen: Local<u64>,
) {
    if stepping.is_some_and(|s| *s == Stepping::Background)
        && let Some(in_flight) = in_flight
    {
        if in_flight.collected == *seen {
            return;
        }
        *seen = in_flight.collected;
    }
    for (state, mut previous) in &mut bodies {
        previous.position = state.position;
        previous.angle = state.angle;
    }
}

/// Step: one [`LaneWorld::step`] per lane (through [`crate::demo::step_lanes`], as a replay does), then the
/// diagnostics sample; a new fault is reported. A replaying demo steps the lanes instead. With
/// [`Stepping::Background`] the steps are started on a worker thread instead, unless a batch is still running
/// ([`stepping`]); a later tick collects them.
pub fn step_lanes(
    mut lanes: Query<(Entity, &mut Lane, &mut LaneDiagnostics)>,
    mut control: ResMut<SimControl>,
    mut log: ResMut<SimLog>,
    replay: Option<Res<Replay>>,
    mut background: stepping::Background,
) {
    if replay.is_some() || !control.steps_this_tick() {
        return;
    }
    let mut sorted: Vec<(Entity, Mut<Lane>, Mut<LaneDiagnostics>)> = lanes.iter_mut().collect();
    sorted.sort_by_key(|(_, lane, _)| lane.index);
    // Lanes that will not step (all at the run's end, or faulted) need no thread.
    let idle = sorted
        .iter()
        .all(|(_, l, _)| !crate::demo::lane_can_step(&l.world, control.run_end));
    if !idle || background.is_running() {
        let worlds: Vec<(Entity, &LaneWorld)> =
            sorted.iter().map(|(e, l, _)| (*e, &l.world)).collect();
        if background.step(&worlds, &mut control) {
            return;
        }
    }
    if control.paused {
        control.pending_steps -= 1;
    }
    control.ticks += 1;
    let had_fault: Vec<bool> = sorted
        .iter()
        .map(|(_, l, _)| l.world.fault.is_some())
        .collect();
    let stepped_before: Vec<u64> = sorted.iter().map(|(_, l, _)| l.world.stats.steps).collect();
    let stepped = {
        let mut worlds: Vec<&mut LaneWorld> =
            sorted.iter_mut().map(|(_, l, _)| &mut l.world).collect();
        crate::demo::step_lanes(&mut worlds, control.run_end)
    };
    for (k, (_, lane, diagnostics)) in sorted.iter_mut().enumerate() {
        if lane.world.stats.steps > stepped_before[k] {
            push_sample(&lane.world, diagnostics);
        }
        if !had_fault[k]
            && let Some(fault) = &lane.world.fault
        {
            log.error(format!("lane '{}': {fault}", lane.world.name));
        }
    }
    if stepped {
        control.steps_taken += 1;
    }
}

/// Adds the lane's last step to its diagnostics history.
fn push_sample(world: &LaneWorld, diagnostics: &mut LaneDiagnostics) {
    if let Some(sample) = sample(world) {
        diagnostics.push(sample);
    }
}

/// The diagnostics sample of the lane's last step.
pub(crate) fn sample(world: &LaneWorld) -> Option<DiagnosticSample> {
    world.last.as_ref().map(|d| DiagnosticSample {
        step: d.step,
        time: world.time,
        min_gap: d.min_gap,
        max_penetration: d.max_penetration,
        newton_iterations: d.newton_iterations,
        energy: d.energy,
        rod_impacts: d.rods.iter().map(|r| r.impacts.len()).sum(),
    })
}

/// Writeback: mirrors new bodies and copies every body's state from its lane.
pub fn write_back_bodies(
    mut commands: Commands,
    mut lanes: Query<(Entity, &mut Lane)>,
    mut bodies: Query<&mut BodyState>,
) {
    for (lane_entity, mut lane) in &mut lanes {
        mirror_new_bodies(&mut commands, lane_entity, &mut lane);
        for (b, &entity) in lane.world.balls.iter().zip(&lane.ball_entities) {
            if let Ok(mut state) = bodies.get_mut(entity) {
                let next = BodyState {
                    position: b.position,
                    velocity: b.velocity,
                    angle: 0.0,
                    omega: 0.0,
                };
                if *state != next {
                    *state = next;
                }
            }
        }
        for (r, &entity) in lane.world.rods.iter().zip(&lane.rod_entities) {
            if let Ok(mut state) = bodies.get_mut(entity) {
                let next = BodyState {
                    position: r.center,
                    velocity: r.velocity,
                    angle: r.angle,
                    omega: r.omega,
                };
                if *state != next {
                    *state = next;
                }
            }
        }
    }
}

/// Writeback: a ball's or rod's mirrored constants (radius, mass, length, e, its index) and a wall's box come from
/// its lane. The physics never reads the mirrors, so an edit in the World Inspector is undone here rather than
/// drawn as if it had changed the simulation.
pub fn restore_mirrors(
    lanes: Query<&Lane>,
    mut balls: Query<(Entity, &LaneMember, &mut Ball), Changed<Ball>>,
    mut rods: Query<(Entity, &LaneMember, &mut Rod), Changed<Rod>>,
    mut walls: Query<(Entity, &LaneMember, &mut Wall), Changed<Wall>>,
) {
    // The mirror's own index is a hint (it may be the edited field); the lane's entity list is the truth.
    let slot = |entities: &[Entity], hint: usize, entity: Entity| {
        if entities.get(hint) == Some(&entity) {
            Some(hint)
        } else {
            entities.iter().position(|&e| e == entity)
        }
    };
    for (entity, member, mut ball) in &mut balls {
        let Ok(lane) = lanes.get(member.0) else {
            continue;
        };
        if let Some(i) = slot(&lane.ball_entities, ball.index, entity)
            && let Some(b) = lane.world.balls.get(i)
        {
            ball.set_if_neq(Ball {
                index: i,
                radius: b.radius,
                mass: b.mass,
            });
        }
    }
    for (entity, member, mut rod) in &mut rods {
        let Ok(lane) = lanes.get(member.0) else {
            continue;
        };
        if let Some(i) = slot(&lane.rod_entities, rod.index, entity)
            && let Some(r) = lane.world.rods.get(i)
        {
            rod.set_if_neq(Rod {
                index: i,
                length: r.length,
                mass: r.mass,
                restitution: r.restitution,
            });
        }
    }
    for (entity, member, mut wall) in &mut walls {
        let Ok(lane) = lanes.get(member.0) else {
            continue;
        };
        if let Some(index) = slot(&lane.wall_entities, wall.index, entity)
            && let Some(w) = lane.world.walls.get(index)
        {
            wall.set_if_neq(Wall {
                index,
                center: w.center,
                half_extents: w.half_extents,
                angle: w.angle,
            });
        }
    }
}

/// Interpolate, first: while paused, each body's previous state is its current one. After a single step the
/// previous state is the one before it until the next tick, which the time scale may put a second away; a resume
/// inside that second drew the bodies a step back (α near 0) and slid them forward again.
pub fn hold_previous_while_paused(
    control: Res<SimControl>,
    mut bodies: Query<(&BodyState, &mut PreviousBodyState)>,
) {
    if !control.paused {
        return;
    }
    for (state, mut previous) in &mut bodies {
        if previous.position != state.position || previous.angle != state.angle {
            previous.position = state.position;
            previous.angle = state.angle;
        }
    }
}

/// Interpolate: `Transform` = lerp(previous, current, α) + lane offset, α the fixed clock's overstep fraction
/// (with background stepping, how far the display is between the last two batches' arrivals); paused, 1.
pub fn interpolate_transforms(
    time: Res<Time<Fixed>>,
    real: Res<Time<Real>>,
    stepping: Option<Res<Stepping>>,
    in_flight: Option<Res<StepInFlight>>,
    control: Res<SimControl>,
    lanes: Query<&Lane>,
    mut bodies: Query<(&LaneMember, &BodyState, &PreviousBodyState, &mut Transform)>,
) {
    let background = stepping.is_some_and(|s| *s == Stepping::Background);
    // Paused, the bodies stand where the panels' numbers describe them: a single step shows its result at once
    // rather than sliding into it over a tick that the time scale may have slowed to a second.
    let alpha = if control.paused {
        1.0
    } else {
        in_flight
            .filter(|_| background)
            .and_then(|f| f.display_fraction(real.elapsed()))
            .unwrap_or_else(|| time.overstep_fraction_f64().clamp(0.0, 1.0))
    };
    for (member, state, previous, mut transform) in &mut bodies {
        let Ok(lane) = lanes.get(member.0) else {
            continue;
        };
        let position = previous.position.lerp(state.position, alpha) + lane.offset;
        let angle = previous.angle + (state.angle - previous.angle) * alpha;
        if !position.is_finite() || !angle.is_finite() {
            continue;
        }
        let z = transform.translation.z;
        transform.translation = Vec3::new(
            position.x as f32 * UNITS_PER_METRE,
            position.y as f32 * UNITS_PER_METRE,
            z,
        );
        transform.rotation = Quat::from_rotation_z(angle as f32);
    }
}

/// The resources [`apply_messages`] changes besides the lanes.
#[derive(bevy::ecs::system::SystemParam)]
struct Controls<'w> {
    control: ResMut<'w, SimControl>,
    log: ResMut<'w, SimLog>,
    recorder: ResMut<'w, Recorder>,
    fixed: ResMut<'w, Time<Fixed>>,
    replay: Option<Res<'w, Replay>>,
}

/// One message for the spawns of a frame that were refused (`refused`, of `asked`): the refusal itself when it is
/// the only one, else how many there were and the first reason.
fn refused_spawns(refused: &[String], asked: usize) -> Option<String> {
    match refused {
        [] => None,
        [one] => Some(one.clone()),
        [first, ..] => Some(format!(
            "{} of {asked} balls refused; the first: {first}",
            refused.len()
        )),
    }
}

#[allow(clippy::too_many_arguments)]
fn apply_messages(
    mut commands: Commands,
    mut spawns: MessageReader<SpawnBall>,
    mut throws: MessageReader<ThrowBall>,
    mut rods: MessageReader<SpawnRod>,
    mut restarts: MessageReader<RestartScene>,
    mut loads: MessageReader<LoadScene>,
    mut cycles: MessageReader<CycleScene>,
    mut lanes: Query<(Entity, &mut Lane)>,
    members: Query<Entity, With<LaneMember>>,
    active: Option<ResMut<ActiveScene>>,
    catalogue: Res<SceneCatalogue>,
    mut c: Controls,
) {
    if c.replay.is_some() {
        // A replay owns the lanes: user actions would make it a different run.
        let ignored = spawns.read().count()
            + throws.read().count()
            + rods.read().count()
            + restarts.read().count()
            + loads.read().count()
            + cycles.read().count();
        if ignored > 0 {
            c.log.error_about(
                ErrorTopic::Session,
                "a demo is replaying: stop the replay to change the simulation",
            );
        }
        return;
    }
    // An error shown before this frame's rebuild was about lanes that are gone.
    let errors_before = c.log.raised;
    let tick = c.control.ticks;
    let mut active = active;
    // Scene changes first: a spawn in the same frame lands in the new scene's lanes next frame at worst.
    // The scenes to try in turn: the one picked, or the menu's next (previous) one, then the one after it when
    // that file does not load, so that `]` steps past a broken file instead of stopping at it.
    let mut candidates: Vec<PathBuf> = loads
        .read()
        .last()
        .map(|l| l.0.clone())
        .into_iter()
        .collect();
    let mut cycling = false;
    if let Some(step) = cycles.read().map(|c| c.0).reduce(|a, b| a + b)
        && !catalogue.paths.is_empty()
    {
        let n = catalogue.paths.len() as i32;
        let current = active
            .as_ref()
            .and_then(|a| catalogue.paths.iter().position(|p| *p == a.path))
            .unwrap_or(0) as i32;
        let direction = if step < 0 { -1 } else { 1 };
        cycling = true;
        candidates = (0..n)
            .map(|k| {
                catalogue.paths[(current + step + direction * k).rem_euclid(n) as usize].clone()
            })
            .collect();
        // The scene on screen comes last: it is reloaded only when the step lands on it (a menu of one scene).
        if let Some(at) = candidates
            .iter()
            .skip(1)
            .position(|p| active.as_ref().is_some_and(|a| a.path == *p))
        {
            candidates.truncate(at + 1);
        }
    }
    let mut rebuild: Option<Scene> = None;
    // A throw or a restart runs the same scene again with the lanes' settings as edited; a new scene brings its
    // own. `None`: take the scene's.
    let mut keep: Option<KeptSettings> = None;
    let mut scene_loaded = false;
    let edited = || {
        let mut settings: Vec<(usize, ContactSettings)> = lanes
            .iter()
            .map(|(_, lane)| (lane.index, lane.world.settings.clone()))
            .collect();
        settings.sort_by_key(|(index, _)| *index);
        settings.into_iter().map(|(_, s)| s).collect::<Vec<_>>()
    };
    for path in candidates {
        match ActiveScene::load(&path) {
            Ok(scene) => {
                // A scene file whose lanes differ in h runs its `steps` of the smallest: said, as `run` says it.
                match crate::demo::mixed_h_note(&scene.current, None) {
                    Some(note) => c.log.info(format!("loaded {}: {note}", path.display())),
                    None => c.log.info(format!("loaded {}", path.display())),
                }
                c.recorder
                    .record(tick, Action::Scene(Box::new(scene.current.clone())));
                rebuild = Some(scene.current.clone());
                // A new scene brings its own settings, even with a throw in the same frame.
                scene_loaded = true;
                match active.as_mut() {
                    Some(a) => **a = scene,
                    None => commands.insert_resource(scene),
                }
                break;
            }
            Err(e) if cycling => c.log.error(format!("{e}; skipped")),
            Err(e) => c.log.error(format!("{e}; keeping the current scene")),
        }
    }
    for throw in throws.read() {
        let Some(a) = active.as_mut() else {
            c.log.error("no scene is loaded; nothing to throw");
            continue;
        };
        let file = a.path.display().to_string();
        match thrown_scene(
            &a.current,
            throw.v0,
            (throw.h, throw.stiffness, throw.dhat),
            None,
            &file,
        ) {
            Ok(mut scene) => {
                if keep.is_none() && !scene_loaded {
                    keep = Some(KeptSettings {
                        lanes: edited(),
                        h: None,
                        stiffness: None,
                        dhat: None,
                    });
                }
                // The throw's own h, k and d̂ win over the edits (the throw panel sets them).
                if let Some(keep) = keep.as_mut() {
                    keep.h = throw.h.or(keep.h);
                    keep.stiffness = throw.stiffness.or(keep.stiffness);
                    keep.dhat = throw.dhat.or(keep.dhat);
                }
                // The run's length in steps of the thrown scene's h (lanes the panel edited to another h keep
                // time with them); the action holds it, so the replay runs as many steps whatever scene its
                // recording started from.
                let steps = crate::demo::thrown_steps(&a.loaded, &scene, throw.v0);
                if steps.is_some() {
                    scene.steps = steps;
                }
                a.current = scene.clone();
                rebuild = Some(scene);
                c.log.info(format!("throw at {} m/s", throw.v0));
                c.recorder.record(
                    tick,
                    Action::Throw {
                        v0: throw.v0,
                        h: throw.h,
                        stiffness: throw.stiffness,
                        dhat: throw.dhat,
                        steps,
                    },
                );
            }
            Err(e) => c.log.error(format!("throw refused: {e}")),
        }
    }
    if restarts.read().count() > 0 {
        match active.as_ref() {
            Some(a) => {
                c.recorder.record(tick, Action::Restart);
                if rebuild.is_none() {
                    rebuild = Some(a.current.clone());
                    keep = Some(KeptSettings {
                        lanes: edited(),
                        h: None,
                        stiffness: None,
                        dhat: None,
                    });
                }
            }
            None => c.log.error("no scene is loaded; nothing to restart"),
        }
    }
    if let Some(scene) = rebuild {
        if c.log.raised == errors_before {
            c.log.clear_error();
        }
        for (entity, _) in &lanes {
            commands.entity(entity).despawn();
        }
        for entity in &members {
            commands.entity(entity).despawn();
        }
        let mut worlds = scene.build();
        let mut kept_actions = Vec::new();
        if let Some(keep) = keep.filter(|keep| keep.lanes.len() == worlds.len()) {
            for (index, (world, edited)) in worlds.iter_mut().zip(&keep.lanes).enumerate() {
                let wanted = keep.over(edited);
                if wanted == world.settings {
                    continue;
                }
                // The window's checks, then what a replay's `Settings` action after the rebuild does.
                let apply = |world: &mut LaneWorld, wanted: &ContactSettings| {
                    refuse_ipc_into_overlap(world, wanted)
                        .and_then(|()| apply_settings(world, wanted))
                };
                let original = world.settings.clone();
                let kept = match apply(world, &wanted) {
                    Ok(()) => Some(wanted),
                    // A switch to IPC the restarted scene's overlaps refuse: the lane's other edits stay.
                    Err(message) if wanted.method != world.settings.method => {
                        let others = ContactSettings {
                            method: world.settings.method,
                            ..wanted
                        };
                        let others_edited = others != original;
                        let kept = apply(world, &others).ok().map(|()| others);
                        c.log.error(if kept.is_some() && others_edited {
                            format!("{message}; the lane's other edits are kept")
                        } else {
                            message
                        });
                        kept
                    }
                    Err(message) => {
                        c.log.error(message);
                        None
                    }
                };
                if let Some(settings) = kept.filter(|kept| *kept != original) {
                    kept_actions.push(Action::Settings {
                        lane: index,
                        settings,
                    });
                }
            }
        }
        prepare_lanes(&scene, &worlds, &mut c.control, &mut c.fixed);
        spawn_lane_entities(&mut commands, worlds);
        if c.recorder.armed {
            let hz = c.fixed.timestep().as_secs_f64().recip();
            c.recorder.begin(scene, hz, tick);
            c.log.info("recording");
        }
        for action in kept_actions {
            c.recorder.record(tick, action);
        }
        // Spawns this frame were aimed at the old lanes.
        spawns.clear();
        rods.clear();
        return;
    }
    let mut sorted: Vec<Mut<Lane>> = lanes.iter_mut().map(|(_, lane)| lane).collect();
    sorted.sort_by_key(|lane| lane.index);
    // Refusals are gathered so that a burst (Rain drops ten balls in one frame) gives one message, not one each.
    let mut refused: Vec<String> = Vec::new();
    let mut asked = 0;
    for spawn in spawns.read() {
        asked += 1;
        let ball = BallSpec {
            position: spawn.position,
            velocity: spawn.velocity,
            radius: spawn.radius,
            mass: spawn.mass,
        };
        let mut worlds: Vec<&mut LaneWorld> = sorted.iter_mut().map(|l| &mut l.world).collect();
        match spawn_ball_everywhere(&mut worlds, &ball, None) {
            Ok(()) => {
                c.recorder.record(tick, Action::Spawn(ball));
                extend_run(&mut c.control, active.as_deref(), &sorted);
            }
            Err(message) => refused.push(message),
        }
    }
    if let Some(message) = refused_spawns(&refused, asked) {
        c.log.error(message);
    }
    for spawn in rods.read() {
        let mut rod = RodSpec {
            center: spawn.center,
            angle: spawn.angle,
            length: spawn.length,
            mass: spawn.mass,
            restitution: spawn.restitution,
            velocity: spawn.velocity,
            omega: spawn.omega,
        };
        // A rod dropped above the floor but tilted into it is set on the floor; one dropped below it is refused.
        let floors = sorted.iter().map(|l| &l.world);
        if floors.clone().all(|lane| rod.center.y >= lane.rod_floor_y) {
            rod.center.y += rod_rise_onto_floors(floors, &rod);
        }
        if let Err(message) = refuse_rod_below_floor(sorted.iter().map(|l| &l.world), &rod) {
            c.log.error_about(ErrorTopic::Session, message);
            continue;
        }
        let mut worlds: Vec<&mut LaneWorld> = sorted.iter_mut().map(|l| &mut l.world).collect();
        match spawn_rod_everywhere(&mut worlds, &rod) {
            Ok(()) => {
                c.recorder.record(tick, Action::Rod(rod));
                extend_run(&mut c.control, active.as_deref(), &sorted);
            }
            Err(message) => c.log.error(message),
        }
    }
}

/// A spawn starts the scene's run over from the lanes' present time, as a replay's session does
/// ([`crate::demo::end_after_spawn`]).
fn extend_run(control: &mut SimControl, active: Option<&ActiveScene>, lanes: &[Mut<Lane>]) {
    let now = crate::demo::lanes_time(lanes.iter().map(|l| &l.world));
    let seconds = active.and_then(|a| crate::demo::run_seconds(&a.current));
    control.run_end = crate::demo::end_after_spawn(control.run_end, seconds, now);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty directory of its own under the system's temporary directory.
    fn empty_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cs-active-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        dir
    }

    /// A refused edit from the window names the scene field and the panel's label for it: "Newton cap" was
    /// reported as `contact.newton_max_iterations` alone, a name the window shows nowhere.
    #[test]
    fn a_refused_setting_names_its_field_and_its_label() {
        let mut lane = crate::physics::world::LaneWorld::new(
            "l",
            ContactSettings::default(),
            Vec::new(),
            Vec::new(),
        );
        let refused = crate::demo::apply_settings(
            &mut lane,
            &ContactSettings {
                newton_max_iterations: 0,
                ..ContactSettings::default()
            },
        )
        .expect_err("a cap of 0");
        assert!(
            refused.starts_with("lane 'l': contact.newton_max_iterations (\"Newton cap\") must be"),
            "{refused}"
        );
        let refused = crate::demo::apply_settings(
            &mut lane,
            &ContactSettings {
                gravity: DVec2::new(0.0, f64::NAN),
                ..ContactSettings::default()
            },
        )
        .expect_err("a NaN gravity");
        assert!(refused.contains("(\"gravity y\")"), "{refused}");
        for (field, setting) in [
            ("contact.method", LaneSetting::Method),
            ("contact.stiffness", LaneSetting::Stiffness),
            ("contact.dhat", LaneSetting::Dhat),
            ("contact.kappa", LaneSetting::Kappa),
            ("contact.adaptive_kappa", LaneSetting::AdaptiveKappa),
            ("contact.ccd_factor", LaneSetting::CcdFactor),
            ("contact.h", LaneSetting::H),
            ("contact.gravity.x", LaneSetting::Gravity),
            ("contact.newton_tolerance", LaneSetting::NewtonTolerance),
            (
                "contact.newton_max_iterations",
                LaneSetting::NewtonMaxIterations,
            ),
            ("contact.friction", LaneSetting::Friction),
            ("contact.friction_epsilon_v", LaneSetting::FrictionEpsilonV),
            (
                "contact.friction_iterations",
                LaneSetting::FrictionIterations,
            ),
        ] {
            assert_eq!(LaneSetting::of_field(field), Some(setting), "{field}");
        }
        assert_eq!(LaneSetting::of_field("walls[0].center"), None);
    }

    /// Every setting of a lane is named when it alone changes (the list is a destructuring, so a new setting
    /// must be added to it), and none when nothing did.
    #[test]
    fn every_changed_setting_is_named_with_its_value_now() {
        let was = ContactSettings::default();
        assert!(settings_changes(&was, &was).is_empty());
        let cases: Vec<(ContactSettings, &str)> = vec![
            (
                ContactSettings {
                    method: ContactMethod::Penalty,
                    ..was.clone()
                },
                "method penalty",
            ),
            (
                ContactSettings {
                    stiffness: 1e6,
                    ..was.clone()
                },
                "k = 1e6 N/m",
            ),
            (
                ContactSettings {
                    dhat: Some(1e-5),
                    ..was.clone()
                },
                "d\u{302} = 1e-5 m",
            ),
            (
                ContactSettings {
                    kappa: 10.0,
                    ..was.clone()
                },
                "κ = 10",
            ),
            (
                ContactSettings {
                    adaptive_kappa: true,
                    ..was.clone()
                },
                "adaptive κ on",
            ),
            (
                ContactSettings {
                    ccd_factor: 0.5,
                    ..was.clone()
                },
                "CCD factor = 0.5",
            ),
            (
                ContactSettings {
                    h: 0.02,
                    ..was.clone()
                },
                "h = 0.02 s",
            ),
            (
                ContactSettings {
                    gravity: DVec2::ZERO,
                    ..was.clone()
                },
                "g = (0, 0) m/s²",
            ),
            (
                ContactSettings {
                    newton_tolerance: 1e-6,
                    ..was.clone()
                },
                "Newton tolerance = 1e-6 m",
            ),
            (
                ContactSettings {
                    newton_max_iterations: 5,
                    ..was.clone()
                },
                "Newton cap = 5",
            ),
            (
                ContactSettings {
                    friction: 0.25,
                    ..was.clone()
                },
                "μ = 0.25",
            ),
            (
                ContactSettings {
                    friction_epsilon_v: 0.01,
                    ..was.clone()
                },
                "ε_v = 0.01 m/s",
            ),
            (
                ContactSettings {
                    friction_iterations: 3,
                    ..was.clone()
                },
                "friction passes = 3",
            ),
        ];
        for (now, expected) in cases {
            assert_eq!(settings_changes(&was, &now), [expected]);
        }
        let now = ContactSettings {
            dhat: None,
            ..ContactSettings {
                dhat: Some(1e-3),
                ..was.clone()
            }
        };
        assert_eq!(
            settings_changes(
                &ContactSettings {
                    dhat: Some(1e-3),
                    ..was.clone()
                },
                &now
            ),
            ["d\u{302} automatic"]
        );
    }

    /// Outside the repository (a `root` without `assets/`), a copy of a shipped scene opened by its own path takes
    /// the built-in entry's place: the window started there with the scene's absolute path listed it twice. An
    /// edited copy is a scene of its own, and so is any copy where the built-in's file is there.
    #[test]
    fn a_copy_of_a_built_in_scene_takes_its_place_outside_the_repository_unless_edited() {
        let built_ins = || SceneCatalogue {
            paths: BUILT_IN_SCENES
                .iter()
                .map(std::path::PathBuf::from)
                .collect(),
        };
        let elsewhere = empty_dir("catalogue-root");
        let dir = empty_dir("catalogue-copy");
        let text = built_in_text(Path::new(BUILT_IN_SCENES[0])).expect("compiled in");
        let copy = dir.join("wall_throw.ron");
        std::fs::write(&copy, text).expect("written");
        let mut outside = built_ins();
        assert_eq!(outside.add_in(&elsewhere, &copy), copy);
        assert_eq!(outside.paths.len(), BUILT_IN_SCENES.len());
        assert_eq!(outside.paths[0], copy, "in the built-in's slot");
        let edited = dir.join("edited").join("ball_pit.ron");
        std::fs::create_dir_all(edited.parent().expect("a folder")).expect("folders");
        let pit = built_in_text(Path::new(BUILT_IN_SCENES[1])).expect("compiled in");
        std::fs::write(&edited, format!("{pit}// edited\n")).expect("written");
        assert_eq!(outside.add_in(&elsewhere, &edited), edited);
        assert_eq!(outside.paths.len(), BUILT_IN_SCENES.len() + 1);
        // In the repository the built-in's own file is there: a copy elsewhere is another file.
        let mut inside = built_ins();
        assert_eq!(inside.add(&copy), copy);
        assert_eq!(inside.paths.len(), BUILT_IN_SCENES.len() + 1);
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&elsewhere);
    }

    /// Outside the repository a built-in scene's path loads the compiled-in copy; any other missing path, and a
    /// built-in path whose file exists but is broken, are errors naming the file.
    #[test]
    fn a_built_in_scene_missing_from_disk_loads_its_compiled_in_copy_and_nothing_else_does() {
        let elsewhere = empty_dir("elsewhere");
        for built_in in BUILT_IN_SCENES {
            let path = Path::new(built_in);
            let here = ActiveScene::load(path).expect("the repository's file loads");
            let away = ActiveScene::load_in(&elsewhere, path).expect("the compiled-in copy loads");
            assert_eq!(away.loaded, here.loaded, "{built_in}");
            assert_eq!(away.path, path);
        }
        let unknown = Path::new("assets/scenes/no_such_scene.ron");
        let error = ActiveScene::load_in(&elsewhere, unknown)
            .expect_err("not a built-in scene")
            .to_string();
        assert!(error.contains("no_such_scene.ron"), "{error}");

        let broken = empty_dir("broken");
        let path = Path::new(BUILT_IN_SCENES[0]);
        let file = broken.join(path);
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("folders");
        std::fs::write(&file, "(name: ").expect("written");
        let error = ActiveScene::load_in(&broken, path)
            .expect_err("a broken file on disk is not replaced by the built-in copy")
            .to_string();
        assert!(error.contains(&file.display().to_string()), "{error}");
        let _ = std::fs::remove_dir_all(&elsewhere);
        let _ = std::fs::remove_dir_all(&broken);
    }
}
