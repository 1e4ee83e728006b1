//! A headless sandbox session: the lanes of a scene, the user actions that change them, and one fixed tick at
//! a time. The ECS layer ([`crate::sim`]) calls the same functions for the same actions, so what a window
//! recorded and what [`Session`] replays are the same arithmetic in the same order.

use serde::{Deserialize, Serialize};

use super::TimedAction;
use crate::physics::DVec2;
use crate::physics::broad_phase::BroadPhase;
use crate::physics::geometry::ball_wall_gap;
use crate::physics::spawn_grid::SpawnGrid;
use crate::physics::world::{ContactMethod, ContactSettings, LaneWorld, SpawnError};
use crate::scene::{
    BallSpec, MAX_RODS_PER_LANE, MAX_RUN_STEPS, RodSpec, Scene, SceneError, check_contact,
};

/// One user action that changes the simulation. Demo files and scripts hold these; the GUI's messages map
/// onto them one to one. Unknown fields in a variant (`Throw(v0: 1, dhar: …)`) are errors, as in scenes: a typo
/// must not record a different run than the one written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum Action {
    /// Spawn a ball at the same lane-local spot in every lane; refused everywhere if any lane refuses it.
    Spawn(BallSpec),
    /// The seed's throw: restart with every scene ball's velocity `(v0, 0)` and, optionally, a new `h`,
    /// penalty stiffness `k` (penalty lanes) and `d̂` (IPC lanes).
    Throw {
        v0: f64,
        #[serde(default)]
        h: Option<f64>,
        #[serde(default)]
        stiffness: Option<f64>,
        #[serde(default)]
        dhat: Option<f64>,
        /// The run's length in steps (the window records what [`thrown_steps`] gave it); without it, the current
        /// scene's, as demos recorded before this field and scripts that leave it out run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        steps: Option<u64>,
    },
    /// Drop a rod into every lane.
    Rod(RodSpec),
    /// Rebuild every lane from the current scene.
    Restart,
    /// Switch to this scene (stored whole, so a demo never depends on a file that may change).
    Scene(Box<Scene>),
    /// Replace lane `lane`'s contact settings (an edit in the inspector).
    Settings {
        lane: usize,
        settings: ContactSettings,
    },
    /// The user paused. The timeline counts only ticks that step, so this does not change the physics.
    Pause,
    /// The user resumed.
    Resume,
    /// The user asked for a single step while paused (the step itself is the next tick).
    SingleStep,
}

impl Action {
    /// A short name for messages and the replay viewer.
    pub fn label(&self) -> String {
        match self {
            Action::Spawn(b) => format!(
                "spawn ball at ({:.3}, {:.3}) m, v = ({:.3}, {:.3}) m/s",
                b.position.x, b.position.y, b.velocity.x, b.velocity.y
            ),
            Action::Throw { v0, .. } => format!("throw at {v0} m/s"),
            Action::Rod(r) => format!("drop rod at ({:.3}, {:.3}) m", r.center.x, r.center.y),
            Action::Restart => "restart".into(),
            Action::Scene(s) => format!("switch to scene '{}'", s.name),
            Action::Settings { lane, .. } => format!("settings of lane {lane}"),
            Action::Pause => "pause".into(),
            Action::Resume => "resume".into(),
            Action::SingleStep => "single step".into(),
        }
    }

    /// Does this action change the physics (as opposed to only the clock's pace)?
    pub fn changes_physics(&self) -> bool {
        !matches!(self, Action::Pause | Action::Resume | Action::SingleStep)
    }
}

/// What applying an action needs the caller to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Every lane must be rebuilt from this scene (which is now the current scene).
    Rebuild(Scene),
    /// The lanes were changed in place (or, for pace-only actions, nothing changed).
    InPlace,
}

/// The scene a throw produces from `current`: every ball's velocity `(v0, 0)`, with the optional overrides, and
/// `steps` as its run's length when given (else `current`'s). `file` names the scene in a validation error.
pub fn thrown_scene(
    current: &Scene,
    v0: f64,
    (h, stiffness, dhat): (Option<f64>, Option<f64>, Option<f64>),
    steps: Option<u64>,
    file: &str,
) -> Result<Scene, SceneError> {
    let mut scene = current.clone();
    for lane in &mut scene.lanes {
        for ball in &mut lane.balls {
            ball.velocity = DVec2::new(v0, 0.0);
        }
        if let Some(h) = h {
            lane.contact.h = h;
        }
        match lane.contact.method {
            ContactMethod::Penalty => {
                if let Some(k) = stiffness {
                    lane.contact.stiffness = k;
                }
            }
            ContactMethod::Ipc => {
                if dhat.is_some() {
                    lane.contact.dhat = dhat;
                }
            }
        }
    }
    if steps.is_some() {
        scene.steps = steps;
    }
    scene.validate(file)?;
    Ok(scene)
}

/// How many steps the window's throw runs, for a scene whose run is limited; the throw's action records it, so
/// a replay runs what the window ran. A run keeps the loaded scene's length in seconds (its `steps` at its
/// smallest h), counted in steps of the thrown scene's smallest h: the wall throw's 80 steps of 10 ms are 160 of
/// 5 ms, so a smaller step still reaches the wall (with 80 steps of 1 ms the ball stopped 80 mm out, "never
/// reached the wall"). A lane the panel edited to another h keeps time with them ([`step_lanes`]). A run shorter
/// than 1.5 times the time the widest of the thrown balls' gaps to their nearest walls takes at `v0` runs that
/// long instead, to see a slow ball arrive and turn. At most [`MAX_RUN_STEPS`].
pub fn thrown_steps(loaded: &Scene, thrown: &Scene, v0: f64) -> Option<u64> {
    let steps = loaded.steps?;
    let seconds = steps as f64 * smallest_h(loaded);
    let h = smallest_h(thrown);
    // The gap each lane's thrown ball has to close, to its nearest wall; the widest of them.
    let gap = thrown
        .lanes
        .iter()
        .filter_map(|lane| {
            let ball = lane.balls.first()?.to_ball();
            lane.walls
                .iter()
                .map(|wall| ball_wall_gap(ball.position, ball.radius, &wall.to_wall()))
                .reduce(f64::min)
        })
        .fold(0.0, f64::max);
    let reach = 1.5 * gap / v0.abs();
    let seconds = if reach.is_finite() && reach > seconds {
        reach
    } else {
        seconds
    };
    let count = seconds / h;
    if !count.is_finite() {
        return Some(steps);
    }
    // 0.8 s / 0.01 s is 80.00000000000001: a count within rounding of a whole number is that number.
    let whole = count.round();
    let count = if (count - whole).abs() <= 1e-9 * whole.max(1.0) {
        whole
    } else {
        count.ceil()
    };
    Some((count as u64).clamp(1, MAX_RUN_STEPS))
}

/// Notes on a script's throws that leave out `steps` where the window's Throw would run another length: such a
/// throw keeps the current scene's steps (the loaded scene's, or the last throw's), so a smaller `h` runs a
/// shorter time (80 steps of 1 ms are 0.08 s against the wall throw's 0.8 s, and the ball never reaches the wall).
/// Throws apply to the current scene as [`Session`] applies them; only throws before the script's first scene
/// switch are checked. Each note names the action, its tick and the `steps` that would run the window's length.
pub fn throws_without_steps_notes(
    scene: &Scene,
    actions: &[TimedAction],
    file: &str,
) -> Vec<String> {
    let mut current = scene.clone();
    let mut notes = Vec::new();
    for (k, timed) in actions.iter().enumerate() {
        let (v0, h, stiffness, dhat, steps) = match &timed.action {
            Action::Scene(_) => break,
            Action::Throw {
                v0,
                h,
                stiffness,
                dhat,
                steps,
            } => (*v0, *h, *stiffness, *dhat, *steps),
            _ => continue,
        };
        let Ok(thrown) = thrown_scene(&current, v0, (h, stiffness, dhat), steps, file) else {
            continue;
        };
        if let (None, Some(runs), Some(window)) =
            (steps, thrown.steps, thrown_steps(scene, &thrown, v0))
            && runs != window
        {
            let h = smallest_h(&thrown);
            notes.push(format!(
                "{file}: actions[{k}] (tick {}): this Throw has no steps, so it runs the current scene's {runs} \
                 steps ({} s at h = {} s); the window's Throw would run {window}: add `steps: Some({window})` to run \
                 that",
                timed.tick,
                crate::text::number(runs as f64 * h),
                crate::text::number(h),
            ));
        }
        current = thrown;
    }
    notes
}

/// Notes on a script's `Settings` actions that change more than one of a lane's settings: an action replaces the
/// lane's whole settings, and a field it leaves out takes its default, so `ContactSettings(method: Ipc)` on the wall
/// throw also turns gravity on (a review's script did that and saw the ball fall). Each note names the action, the
/// lane and every setting it changes from what the lane runs then (the scene's, as throws and restarts set it).
/// Only actions before the script's first scene switch are checked.
pub fn settings_replaced_notes(scene: &Scene, actions: &[TimedAction], file: &str) -> Vec<String> {
    let mut base: Vec<ContactSettings> = scene
        .lanes
        .iter()
        .map(|lane| lane.contact.clone())
        .collect();
    let mut now = base.clone();
    let mut notes = Vec::new();
    for (k, timed) in actions.iter().enumerate() {
        match &timed.action {
            Action::Scene(_) => break,
            Action::Restart => now.clone_from(&base),
            Action::Throw {
                h, stiffness, dhat, ..
            } => {
                for settings in &mut base {
                    if let Some(h) = h {
                        settings.h = *h;
                    }
                    match settings.method {
                        ContactMethod::Penalty => {
                            if let Some(k) = stiffness {
                                settings.stiffness = *k;
                            }
                        }
                        ContactMethod::Ipc => {
                            if dhat.is_some() {
                                settings.dhat = *dhat;
                            }
                        }
                    }
                }
                now.clone_from(&base);
            }
            Action::Settings { lane, settings } => {
                let Some(current) = now.get_mut(*lane) else {
                    continue;
                };
                let changes = crate::sim::settings_changes(current, settings);
                if changes.len() > 1 {
                    notes.push(format!(
                        "{file}: actions[{k}] (tick {}): Settings replaces lane {lane}'s whole settings, a field left \
                         out taking its default: it changes {}",
                        timed.tick,
                        changes.join(", ")
                    ));
                }
                *current = settings.clone();
            }
            _ => {}
        }
    }
    notes
}

/// The `Throw` field behind a refusal of the scene it produced: `lanes[0].balls[3].velocity.x` is `v0`,
/// `lanes[1].contact.dhat` is `dhat`; a place the throw did not set (a ball's position) names the lane's field.
fn throw_field(place: &str) -> String {
    let field = place.rsplit_once("].").map_or(place, |(_, field)| field);
    match field {
        "velocity.x" | "velocity.y" => "v0".into(),
        "contact.h" => "h".into(),
        "contact.stiffness" => "stiffness".into(),
        "contact.dhat" => "dhat".into(),
        _ => place.into(),
    }
}

/// Spawns `ball` in every lane, or in none: each lane is checked first, and the first refusal is the error.
///
/// `grids`, when given, holds a [`SpawnGrid`] per lane over its balls as they are (it is built when it does not
/// hold one per lane, and the ball is added to it): each check then compares the ball with its neighbours only.
/// The caller empties it whenever the lanes change otherwise (a step, a rebuild).
pub fn spawn_ball_everywhere(
    lanes: &mut [&mut LaneWorld],
    ball: &BallSpec,
    grids: Option<&mut Vec<SpawnGrid>>,
) -> Result<(), String> {
    let ball = ball.to_ball();
    // Every lane takes the ball: the scene's limit on ball–wall pairs holds after it as the scene file's does.
    let pairs: usize = lanes
        .iter()
        .map(|lane| (lane.balls.len() + 1) * lane.walls.len())
        .sum();
    if pairs > crate::scene::MAX_BALL_WALL_PAIRS_PER_SCENE {
        return Err(format!(
            "spawn refused: the lanes would hold {pairs} ball–wall pairs between them, more than the {} a scene \
             tracks for tunnelling",
            crate::scene::MAX_BALL_WALL_PAIRS_PER_SCENE
        ));
    }
    let refused =
        |lane: &LaneWorld, e: SpawnError| format!("spawn refused in lane '{}': {e}", lane.name);
    match grids {
        Some(grids) => {
            if grids.len() != lanes.len() {
                *grids = lanes.iter().map(|l| SpawnGrid::new(&l.balls)).collect();
            }
            for (lane, grid) in lanes.iter().zip(grids.iter()) {
                lane.check_spawn(&ball, Some(grid))
                    .map_err(|e| refused(lane, e))?;
            }
            for (lane, grid) in lanes.iter_mut().zip(grids.iter_mut()) {
                lane.add_ball_indexed(ball, grid)
                    .map_err(|e| refused(lane, e))?;
            }
        }
        None => {
            for lane in lanes.iter() {
                lane.check_spawn(&ball, None)
                    .map_err(|e| refused(lane, e))?;
            }
            for lane in lanes.iter_mut() {
                lane.add_ball(ball).map_err(|e| refused(lane, e))?;
            }
        }
    }
    Ok(())
}

/// Drops `rod` into every lane, or into none.
pub fn spawn_rod_everywhere(lanes: &mut [&mut LaneWorld], rod: &RodSpec) -> Result<(), String> {
    let rod = rod.to_rod();
    rod.check_spawn().map_err(|e| {
        format!(
            "rod refused: {} {}, got {}",
            e.field,
            e.reason,
            crate::text::number(e.value)
        )
    })?;
    if let Some(full) = lanes.iter().find(|l| l.rods.len() >= MAX_RODS_PER_LANE) {
        return Err(format!(
            "rod refused: lane '{}' already holds {MAX_RODS_PER_LANE} rods, the most it can",
            full.name
        ));
    }
    for lane in lanes.iter_mut() {
        lane.rods.push(rod);
    }
    Ok(())
}

/// Refuses a rod that would start with an end below a lane's floor, as a scene file's rod is refused
/// ([`crate::scene::rod_start_depth`]): the rod step would lift it out at once and report the lift as a sink, a jump
/// no physics made. The window and `record --script` (new recordings) check this before [`spawn_rod_everywhere`];
/// a replay does not, so a demo recorded before the check still replays as it was recorded.
pub fn refuse_rod_below_floor<'a>(
    lanes: impl IntoIterator<Item = &'a LaneWorld>,
    rod: &RodSpec,
) -> Result<(), String> {
    let rod = rod.to_rod();
    for lane in lanes {
        if let Some(depth) = crate::scene::rod_start_depth(lane.rod_floor_y, &rod) {
            return Err(format!(
                "rod refused: its lower end would start {} below the floor of lane '{}' (its floor at y = {} m); \
                 drop it on or above the floor",
                crate::text::length_text(depth),
                lane.name,
                crate::text::number(lane.rod_floor_y)
            ));
        }
    }
    Ok(())
}

/// How far `rod` must rise for both its ends to start on or above every lane's floor (0 when they do): a rod
/// dropped in the window at a point above the floor but tilted into it is set on the floor instead of refused.
pub fn rod_rise_onto_floors<'a>(
    lanes: impl IntoIterator<Item = &'a LaneWorld>,
    rod: &RodSpec,
) -> f64 {
    let lowest = rod.to_rod().lowest_end_height();
    lanes
        .into_iter()
        .map(|lane| lane.rod_floor_y - lowest)
        .fold(0.0, f64::max)
}

/// Replaces a lane's contact settings after checking them.
pub fn apply_settings(lane: &mut LaneWorld, settings: &ContactSettings) -> Result<(), String> {
    check_contact(settings).map_err(|(field, problem)| {
        // The scene field, as a script writes it, and the panel's label for it ("Newton cap").
        let label = crate::sim::LaneSetting::of_field(&field)
            .map(|setting| format!(" (\"{}\")", setting.label()))
            .unwrap_or_default();
        format!(
            "lane '{}': {field}{label} {problem}; the edit was not applied",
            lane.name
        )
    })?;
    let switched = lane.settings.method != settings.method;
    // An edit before the first step is as good as a start with it; after, the run's records mix the two.
    if lane.stats.steps > 0 && lane.stats.run_began_with.is_none() {
        lane.stats.run_began_with = Some(lane.settings.clone());
    }
    if lane.stats.run_began_with.as_ref() == Some(settings) {
        lane.stats.run_began_with = None;
    }
    lane.settings = settings.clone();
    if switched {
        // The closest gap, the deepest overlap and the Newton counts so far were measured under the other method:
        // read under this one they said "stopped 0.0 µm short" of a wall a penalty ball had sunk into. They start
        // again from the state now.
        lane.stats.min_gap = None;
        lane.stats.max_penetration = 0.0;
        lane.stats.max_newton = 0;
        lane.stats.total_newton = 0;
        lane.stats.newton_steps = 0;
        lane.measure_gaps();
    }
    Ok(())
}

/// Refuses to switch a lane to IPC while any of its pairs overlaps. IPC's barrier is infinite at a zero gap
/// (SPEC §1.2, §1.6): the balls would stay stuck inside each other or a wall, every solve failing. The window and
/// `record --script` (new recordings) check this before [`apply_settings`]; a replay does not, so a demo recorded
/// before the check still replays as it was recorded. The message names the deepest overlap.
pub fn refuse_ipc_into_overlap(
    lane: &mut LaneWorld,
    settings: &ContactSettings,
) -> Result<(), String> {
    if settings.method == ContactMethod::Ipc && lane.settings.method != ContactMethod::Ipc {
        let (gap, _) = lane.gap_and_penetration();
        if gap.is_some_and(|gap| gap <= 0.0) {
            let overlap = deepest_overlap(lane)
                .map(|(what, depth)| format!("{what} by {}", overlap_depth_text(depth)))
                .unwrap_or_else(|| "two bodies touch".into());
            return Err(format!(
                "lane '{}': method ipc needs a positive gap between every pair, but {overlap}; the edit was not \
                 applied (switch once nothing overlaps; a restart helps only where the scene starts apart)",
                lane.name
            ));
        }
    }
    Ok(())
}

/// An overlap's depth: in mm to three decimals where that shows it, else in the unit that does (a review found
/// "by 0.000 mm" for 1.4·10⁻¹¹ m), and a touch as such.
fn overlap_depth_text(depth: f64) -> String {
    if depth * 1e3 >= 0.0005 {
        format!("{:.3} mm", depth * 1e3)
    } else if depth > 0.0 {
        crate::text::length_text(depth)
    } else {
        "0 m (they touch)".into()
    }
}

/// The deepest overlap (or touch) of a lane, as ("ball 0 overlaps wall 1", depth [m]).
fn deepest_overlap(lane: &LaneWorld) -> Option<(String, f64)> {
    let mut deepest: Option<(String, f64)> = None;
    let mut keep = |what: &dyn Fn() -> String, gap: f64| {
        if gap <= 0.0 && deepest.as_ref().is_none_or(|(_, depth)| -gap > *depth) {
            deepest = Some((what(), -gap));
        }
    };
    for (i, b) in lane.balls.iter().enumerate() {
        for (k, w) in lane.walls.iter().enumerate() {
            keep(
                &|| format!("ball {i} overlaps wall {k}"),
                ball_wall_gap(b.position, b.radius, w),
            );
        }
    }
    let centre: Vec<DVec2> = lane.balls.iter().map(|b| b.position).collect();
    let radius: Vec<f64> = lane.balls.iter().map(|b| b.radius).collect();
    let mut pairs = Vec::new();
    BroadPhase::default().near_pairs(&centre, &radius, 0.0, &mut pairs);
    for (i, j) in pairs {
        let (i, j) = (i as usize, j as usize);
        keep(
            &|| format!("ball {j} overlaps ball {i}"),
            (centre[i] - centre[j]).length() - radius[i] - radius[j],
        );
    }
    deepest
}

/// How far past a clock a lane's step may end and still count as reaching it, as a fraction of the step: a
/// lane's time is a running sum of its h, which after 10⁶ steps differs from the product by about 10⁻⁵ h.
pub const CLOCK_SLACK: f64 = 0.01;

/// The time a run of `scene` lasts [s]: its `steps` at the smallest h of its lanes, as the window's throw counts
/// them (80 steps of 10 ms, or 800 of 1 ms, are 0.8 s). Lanes of a larger h take as many steps as fit in it
/// ([`step_lanes`]); none without `steps` (the run goes on).
pub fn run_seconds(scene: &Scene) -> Option<f64> {
    scene.steps.and_then(|steps| seconds_of(steps, scene))
}

/// The time `steps` steps of the smallest h of `scene`'s lanes take [s] (none for a scene without lanes).
pub fn seconds_of(steps: u64, scene: &Scene) -> Option<f64> {
    Some(steps as f64 * smallest_h(scene)).filter(|t| t.is_finite())
}

/// The smallest h of `scene`'s lanes [s] (infinite for a scene without lanes).
pub fn smallest_h(scene: &Scene) -> f64 {
    scene
        .lanes
        .iter()
        .map(|l| l.contact.h)
        .fold(f64::INFINITY, f64::min)
}

/// Where `scene`'s lanes differ in h, a note that its `steps` count steps of the smallest ("the lanes' h differ
/// (0.001 s to 0.01 s); they keep time together for 80 steps of the smallest, 0.08 s"): editing one lane of a
/// scene file to a finer h shortens its run. None where they agree or the run has no end.
pub fn mixed_h_note(scene: &Scene, steps: Option<u64>) -> Option<String> {
    let steps = steps.or(scene.steps)?;
    let smallest = smallest_h(scene);
    let largest = scene.lanes.iter().map(|l| l.contact.h).fold(0.0, f64::max);
    (smallest < largest).then(|| {
        format!(
            "the lanes' h differ ({} s to {} s); they keep time together for {} of the smallest, {} s",
            crate::text::significant(smallest),
            crate::text::significant(largest),
            crate::text::counted(steps, "step", "steps"),
            crate::text::significant(steps as f64 * smallest)
        )
    })
}

/// The run's end after a ball or a rod is spawned into lanes whose clocks have reached `lanes_time`: a scene's
/// run (its `scene_seconds`) starts over from the spawn, so a ball thrown after the run finished moves. An end is
/// never brought forward, and a scene without one runs on.
pub fn end_after_spawn(
    end: Option<f64>,
    scene_seconds: Option<f64>,
    lanes_time: f64,
) -> Option<f64> {
    match (end, scene_seconds) {
        (Some(end), Some(seconds)) => Some(end.max(lanes_time + seconds)),
        _ => end,
    }
}

/// The latest clock among `lanes` [s].
pub fn lanes_time<'a>(lanes: impl IntoIterator<Item = &'a LaneWorld>) -> f64 {
    lanes.into_iter().map(|l| l.time).fold(0.0, f64::max)
}

/// May `lane` step again before the run ends at `end`? Not once it has faulted, nor when its next step would end
/// after `end` (by more than [`CLOCK_SLACK`] of it).
pub fn lane_can_step(lane: &LaneWorld, end: Option<f64>) -> bool {
    LaneClock::of(lane).can_step(end)
}

/// The steps `lane` has left before the run ends at `end`, at its present h, whether or not it has faulted (none
/// when the run has no end).
pub fn lane_steps_left(lane: &LaneWorld, end: Option<f64>) -> Option<u64> {
    Some(clock_steps_left(&LaneClock::of(lane), end?))
}

/// The steps a clock has left before `end`, at its h, faulted or not.
fn clock_steps_left(clock: &LaneClock, end: f64) -> u64 {
    let left = ((end - clock.time) / clock.h + CLOCK_SLACK).floor();
    if left > 0.0 { left as u64 } else { 0 }
}

/// The steps a lane of step `h` takes from time 0 before a run ends at `end`: as many as [`step_lanes`] lets it
/// take, its clock summed as [`LaneWorld::step`] sums it.
pub fn steps_until(h: f64, end: f64) -> u64 {
    let (mut time, mut steps) = (0.0, 0);
    while h > 0.0 && time + h <= end + CLOCK_SLACK * h {
        time += h;
        steps += 1;
    }
    steps
}

/// A lane's clock as the tick rule sees it: its time, its h, and whether it may still step (it has not faulted).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LaneClock {
    pub time: f64,
    pub h: f64,
    pub live: bool,
}

impl LaneClock {
    pub fn of(lane: &LaneWorld) -> LaneClock {
        LaneClock {
            time: lane.time,
            h: lane.settings.h,
            live: lane.fault.is_none(),
        }
    }

    /// May the lane step again before the run ends at `end`? Not once it has faulted, nor when its next step
    /// would end after `end` (by more than [`CLOCK_SLACK`] of it).
    fn can_step(&self, end: Option<f64>) -> bool {
        self.live && end.is_none_or(|end| self.time + self.h <= end + CLOCK_SLACK * self.h)
    }
}

/// The time the next tick runs the lanes to and its smallest h ([`step_lanes`]): the lane of the smallest h among
/// those that can step drives it (the earliest of them on a tie). None when no lane can step.
fn next_tick(clocks: impl Iterator<Item = LaneClock>, end: Option<f64>) -> Option<(f64, f64)> {
    clocks
        .filter(|c| c.can_step(end))
        .min_by(|a, b| {
            a.h.total_cmp(&b.h)
                .then((a.time + a.h).total_cmp(&(b.time + b.h)))
        })
        .map(|c| (c.time + c.h, c.h))
}

/// Does the lane of `clock` step on a tick that runs to `to`, whose smallest h is `smallest`?
fn steps_on_tick(clock: &LaneClock, end: Option<f64>, (to, smallest): (f64, f64)) -> bool {
    clock.can_step(end) && clock.time + clock.h <= to + CLOCK_SLACK * smallest
}

/// One fixed tick. Lanes keep time together: the lane of the smallest h among those that can step
/// ([`lane_can_step`]) takes one step, and every other lane steps with it if its own step ends by then (within
/// [`CLOCK_SLACK`] of the smallest step). Lanes of one h all step every tick, as they always have; a lane of 10 ms
/// beside one of 1 ms steps every tenth tick, so the two balls fly side by side, and a lane of 3 ms beside one of
/// 2 ms steps on two ticks of three. A tick advances the run by the smallest h of the lanes that still step.
/// Returns whether any lane stepped.
pub fn step_lanes(lanes: &mut [&mut LaneWorld], end: Option<f64>) -> bool {
    let Some(tick) = next_tick(lanes.iter().map(|l| LaneClock::of(l)), end) else {
        return false;
    };
    let mut stepped = false;
    for lane in lanes.iter_mut() {
        if steps_on_tick(&LaneClock::of(lane), end, tick) {
            stepped |= lane.step().is_some();
        }
    }
    stepped
}

/// The rate a tick of lanes standing as `lanes` plays at in a replay or a clip [Hz]: 1 / the smallest h of the lanes
/// that can step (what the tick advances the run by), or of all of them when none can (paused, faulted, after the
/// run's end), at the window's fixed rates ([`crate::demo::rate_for_step`]): real time down to h = 1 ms. A demo
/// stores only the rate it began at, so a lane edited or thrown at another h part-way used to play at the first
/// rate, ten times too slow after 10 ms became 1 ms. `fallback_hz` when there are no lanes.
pub fn play_rate_hz<'a>(
    lanes: impl Iterator<Item = &'a LaneWorld> + Clone,
    end: Option<f64>,
    fallback_hz: f64,
) -> f64 {
    let h = tick_h(lanes.clone(), end).or_else(|| lanes.map(|l| l.settings.h).reduce(f64::min));
    match h {
        Some(h) => crate::demo::rate_for_step(Some(h)),
        None => fallback_hz,
    }
}

/// What the next tick advances the run by: the smallest h of the lanes that can step ([`step_lanes`]'s driver);
/// none when no lane can.
pub fn tick_h<'a>(lanes: impl Iterator<Item = &'a LaneWorld>, end: Option<f64>) -> Option<f64> {
    next_tick(lanes.map(LaneClock::of), end).map(|(_, h)| h)
}

/// The ticks [`step_lanes`] takes before no lane can step by `end`, when no lane faults on the way: a lane's last
/// step can fall on a tick of its own, after a finer lane has ended, so this is not simply the most steps a lane has
/// left. Counted by running the clocks alone, up to `limit` ticks; beyond that (a run of millions of fine steps),
/// the most steps any lane has left, which undercounts by at most one tick a lane.
pub fn ticks_until(clocks: &[LaneClock], end: f64, limit: u64) -> u64 {
    let mut clocks = clocks.to_vec();
    let mut ticks = 0;
    while let Some(tick) = next_tick(clocks.iter().copied(), Some(end)) {
        if ticks == limit {
            return clocks
                .iter()
                .filter(|c| c.live)
                .map(|c| ticks + clock_steps_left(c, end))
                .max()
                .unwrap_or(ticks);
        }
        for clock in clocks.iter_mut() {
            if steps_on_tick(clock, Some(end), tick) {
                clock.time += clock.h;
            }
        }
        ticks += 1;
    }
    ticks
}

/// A 64-bit FNV-1a hash: stable across runs, builds and platforms (unlike `std`'s `DefaultHasher`).
#[derive(Clone, Copy, Debug)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv64 {
    pub fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// The exact bits: `-0.0` and `0.0` differ, and so does every NaN payload.
    pub fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }

    pub fn vec(&mut self, v: DVec2) {
        self.f64(v.x);
        self.f64(v.y);
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// Hashes everything that decides a lane's future: settings, walls, every body's full state, the clock,
/// the step count, the fault and the tunnelling record (the run's end reads the clock).
pub fn hash_lane(hasher: &mut Fnv64, lane: &LaneWorld) {
    hasher.bytes(lane.name.as_bytes());
    hasher.u64(lane.name.len() as u64);
    // The settings' RON text is deterministic and covers every field, including ones added later.
    hasher.bytes(
        ron::to_string(&lane.settings)
            .unwrap_or_else(|e| format!("unserialisable settings: {e}"))
            .as_bytes(),
    );
    hasher.u64(lane.walls.len() as u64);
    for w in &lane.walls {
        hasher.vec(w.center);
        hasher.vec(w.half_extents);
        hasher.f64(w.angle);
    }
    hasher.u64(lane.balls.len() as u64);
    for (i, b) in lane.balls.iter().enumerate() {
        hasher.vec(b.position);
        hasher.vec(b.velocity);
        hasher.f64(b.radius);
        hasher.f64(b.mass);
        hasher.u64(u64::from(lane.ball_tunneled(i)));
    }
    hasher.u64(lane.rods.len() as u64);
    for r in &lane.rods {
        hasher.vec(r.center);
        hasher.f64(r.angle);
        hasher.f64(r.length);
        hasher.f64(r.mass);
        hasher.f64(r.restitution);
        hasher.vec(r.velocity);
        hasher.f64(r.omega);
    }
    hasher.f64(lane.rod_floor_y);
    hasher.f64(lane.time);
    hasher.u64(lane.stats.steps);
    hasher.u64(u64::from(lane.fault.is_some()));
}

/// The state hash of a set of lanes, in lane order.
pub fn hash_lanes<'a>(lanes: impl IntoIterator<Item = &'a LaneWorld>) -> u64 {
    let mut hasher = Fnv64::default();
    let mut count = 0u64;
    for lane in lanes {
        hash_lane(&mut hasher, lane);
        count += 1;
    }
    hasher.u64(count);
    hasher.finish()
}

/// The lanes of a scene and the actions applied to them, advanced one fixed tick at a time.
#[derive(Clone, Debug)]
pub struct Session {
    /// The scene a restart rebuilds (a throw or a scene switch replaces it).
    pub scene: Scene,
    /// The scene as the demo's start or its last scene switch gave it, before any throw: what the lanes' names
    /// describe (a throw's k or d̂ leaves a name like "penalty k=1e4" quoting it).
    pub loaded: Scene,
    pub lanes: Vec<LaneWorld>,
    /// Fixed ticks taken so far (a tick in which every lane had reached the run's end still counts).
    pub tick: u64,
    /// Bumped whenever the lanes are rebuilt, so a viewer knows to rebuild its entities.
    pub generation: u64,
    /// Is the recorded user paused at this point? (The replay viewer shows it; the physics ignores it.)
    pub paused: bool,
    /// One [`SpawnGrid`] per lane while only spawns have changed the lanes since it was built (empty otherwise),
    /// so that a tick with many spawns checks each against its neighbours only.
    spawn_grids: Vec<SpawnGrid>,
    /// The run ends at this time [s]: the scene's `steps` ([`run_seconds`]), extended by spawns
    /// ([`end_after_spawn`]).
    run_end: Option<f64>,
}

impl Session {
    /// A session on a validated scene.
    pub fn new(scene: Scene) -> Session {
        let lanes = scene.build();
        Session {
            run_end: run_seconds(&scene),
            loaded: scene.clone(),
            scene,
            lanes,
            tick: 0,
            generation: 0,
            paused: false,
            spawn_grids: Vec::new(),
        }
    }

    /// Applies one action; a refused action changes nothing and says why.
    pub fn apply(&mut self, action: &Action) -> Result<(), String> {
        if !matches!(action, Action::Spawn(_)) {
            self.spawn_grids.clear();
        }
        let effect = self.effect(action)?;
        match effect {
            Effect::Rebuild(scene) => {
                if matches!(action, Action::Scene(_)) {
                    self.loaded = scene.clone();
                }
                self.lanes = scene.build();
                self.run_end = run_seconds(&scene);
                self.scene = scene;
                self.generation += 1;
            }
            Effect::InPlace if matches!(action, Action::Spawn(_) | Action::Rod(_)) => {
                let now = lanes_time(&self.lanes);
                self.run_end = end_after_spawn(self.run_end, run_seconds(&self.scene), now);
            }
            Effect::InPlace => {}
        }
        Ok(())
    }

    fn effect(&mut self, action: &Action) -> Result<Effect, String> {
        match action {
            Action::Spawn(ball) => {
                let mut lanes: Vec<&mut LaneWorld> = self.lanes.iter_mut().collect();
                spawn_ball_everywhere(&mut lanes, ball, Some(&mut self.spawn_grids))?;
            }
            Action::Rod(rod) => {
                let mut lanes: Vec<&mut LaneWorld> = self.lanes.iter_mut().collect();
                spawn_rod_everywhere(&mut lanes, rod)?;
            }
            Action::Throw {
                v0,
                h,
                stiffness,
                dhat,
                steps,
            } => {
                let scene = thrown_scene(
                    &self.scene,
                    *v0,
                    (*h, *stiffness, *dhat),
                    *steps,
                    "the throw",
                )
                .map_err(|e| format!("throw refused: {}: {}", throw_field(&e.place), e.problem))?;
                return Ok(Effect::Rebuild(scene));
            }
            Action::Restart => return Ok(Effect::Rebuild(self.scene.clone())),
            Action::Scene(scene) => {
                scene
                    .validate("the scene switched to")
                    .map_err(|e| e.to_string())?;
                return Ok(Effect::Rebuild((**scene).clone()));
            }
            Action::Settings { lane, settings } => {
                let count = self.lanes.len();
                let Some(world) = self.lanes.get_mut(*lane) else {
                    return Err(format!(
                        "lane {lane} does not exist (the scene has {count} lanes)"
                    ));
                };
                apply_settings(world, settings)?;
            }
            Action::Pause => self.paused = true,
            Action::Resume => self.paused = false,
            Action::SingleStep => {}
        }
        Ok(Effect::InPlace)
    }

    /// The rate the next tick plays at in a replay or a clip ([`play_rate_hz`]) [Hz].
    pub fn play_rate_hz(&self, fallback_hz: f64) -> f64 {
        play_rate_hz(self.lanes.iter(), self.run_end, fallback_hz)
    }

    /// One fixed tick.
    pub fn step(&mut self) {
        let mut lanes: Vec<&mut LaneWorld> = self.lanes.iter_mut().collect();
        step_lanes(&mut lanes, self.run_end);
        self.spawn_grids.clear();
        self.tick += 1;
    }

    /// The state hash of every lane.
    pub fn hash(&self) -> u64 {
        hash_lanes(&self.lanes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped wall throw with lane `k`'s h set to `h[k]` and a run of `steps`.
    fn wall_throw_at(h: [f64; 2], steps: u64) -> Scene {
        let mut scene = Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
            .expect("the shipped scene");
        for (lane, h) in scene.lanes.iter_mut().zip(h) {
            lane.contact.h = h;
        }
        scene.steps = Some(steps);
        scene
    }

    /// Lanes of 1 ms and 10 ms keep time together: the fine lane steps every tick, the coarse one every tenth,
    /// never ahead of the fine one and never a whole step behind it; both end at the run's 0.8 s (800 steps of
    /// the smallest h), and a tick after the end steps nothing. Each lane used to take a step every tick, so the
    /// 10 ms ball flew ten times as fast on screen and its lane ran 8 s.
    #[test]
    fn lanes_of_different_h_keep_time_together() {
        let mut session = Session::new(wall_throw_at([0.001, 0.01], 800));
        assert_eq!(session.run_end, Some(0.8));
        for tick in 1..=800u64 {
            session.step();
            let (fine, coarse) = (&session.lanes[0], &session.lanes[1]);
            assert_eq!(fine.stats.steps, tick);
            assert_eq!(coarse.stats.steps, tick / 10, "tick {tick}");
            assert!(coarse.time <= fine.time + 1e-12, "tick {tick}");
            assert!(fine.time - coarse.time < 0.01 - 1e-12, "tick {tick}");
        }
        assert!((session.lanes[1].time - 0.8).abs() < 1e-12);
        assert!(
            session
                .lanes
                .iter()
                .all(|l| !lane_can_step(l, session.run_end))
        );
        let mut lanes: Vec<&mut LaneWorld> = session.lanes.iter_mut().collect();
        assert!(!step_lanes(&mut lanes, Some(0.8)), "the run is over");
        // `run` counts the same steps per lane.
        assert_eq!(steps_until(0.001, 0.8), 800);
        assert_eq!(steps_until(0.01, 0.8), 80);
    }

    /// A lane of 3 ms beside one of 2 ms steps on two ticks of three, when its step ends by the fine lane's
    /// time; lanes of one h step together every tick, as they always have.
    #[test]
    fn a_lane_whose_h_is_no_multiple_steps_when_its_step_ends_by_the_tick() {
        let mut session = Session::new(wall_throw_at([0.002, 0.003], 6));
        let mut coarse_steps = Vec::new();
        for _ in 0..6 {
            session.step();
            coarse_steps.push(session.lanes[1].stats.steps);
        }
        assert_eq!(session.lanes[0].stats.steps, 6);
        assert_eq!(coarse_steps, [0, 1, 2, 2, 3, 4], "at 4, 6, 10 and 12 ms");
        assert_eq!(steps_until(0.003, 0.012), 4);
        let mut same = Session::new(wall_throw_at([0.01, 0.01], 80));
        for tick in 1..=81u64 {
            same.step();
            assert!(same.lanes.iter().all(|l| l.stats.steps == tick.min(80)));
        }
    }

    /// A lane that has faulted no longer sets the clock: the other lanes run on to the end without it.
    #[test]
    fn a_faulted_fine_lane_leaves_the_clock_to_the_others() {
        let mut session = Session::new(wall_throw_at([0.001, 0.01], 800));
        for _ in 0..100 {
            session.step();
        }
        session.lanes[0].fault = Some("a test's fault".into());
        let mut ticks = 0;
        while session.lanes[1].stats.steps < 80 && ticks < 1000 {
            session.step();
            ticks += 1;
        }
        assert_eq!(ticks, 70, "one coarse step a tick");
        assert_eq!(session.lanes[0].stats.steps, 100);
        session.step();
        assert_eq!(
            session.lanes[1].stats.steps, 80,
            "and not beyond the run's end"
        );
    }

    /// The ticks counted by running the clocks alone are the ticks the lanes take. With 2 ms and 3 ms lanes and
    /// the run's end at 9 ms, the coarse lane's last step (at 9 ms) falls after the fine lane's last (8 ms), on a
    /// tick of its own: 5 ticks, where the most steps a lane has left is 4 (the status line's old count).
    #[test]
    fn the_ticks_counted_from_the_clocks_are_the_ticks_the_lanes_take() {
        for (h, end) in [
            ([0.002, 0.003], 0.009),
            ([0.001, 0.01], 0.8),
            ([0.01, 0.01], 0.8),
            ([0.003, 0.002], 0.0125),
            ([0.007, 0.0025], 0.1),
        ] {
            let mut session = Session::new(wall_throw_at(h, 1));
            let clocks: Vec<LaneClock> = session.lanes.iter().map(LaneClock::of).collect();
            let counted = ticks_until(&clocks, end, 1_000_000);
            let mut lanes: Vec<&mut LaneWorld> = session.lanes.iter_mut().collect();
            let mut taken = 0;
            while step_lanes(&mut lanes, Some(end)) {
                taken += 1;
            }
            assert_eq!(counted, taken, "h {h:?}, end {end}");
        }
        let clocks = [0.002, 0.003].map(|h| LaneClock {
            time: 0.0,
            h,
            live: true,
        });
        assert_eq!(ticks_until(&clocks, 0.009, 1_000), 5);
        assert_eq!(
            ticks_until(&clocks, 0.009, 0),
            4,
            "past the limit, the most steps a lane has left"
        );
        let faulted = [
            clocks[0],
            LaneClock {
                live: false,
                ..clocks[1]
            },
        ];
        assert_eq!(
            ticks_until(&faulted, 0.009, 1_000),
            4,
            "a faulted lane takes no tick"
        );
    }

    /// A scene file whose lanes differ in h is told that its steps count the smallest h (the window says it on
    /// load, `run` on stderr); one whose lanes agree, or without `steps`, says nothing.
    #[test]
    fn a_scene_whose_lanes_differ_in_h_is_told_its_run_counts_the_smallest() {
        assert_eq!(
            mixed_h_note(&wall_throw_at([0.01, 0.001], 80), None).as_deref(),
            Some(
                "the lanes' h differ (0.001 s to 0.01 s); they keep time together for 80 steps of the smallest, 0.08 s"
            )
        );
        assert_eq!(mixed_h_note(&wall_throw_at([0.01, 0.01], 80), None), None);
        let mut endless = wall_throw_at([0.01, 0.001], 80);
        endless.steps = None;
        assert_eq!(mixed_h_note(&endless, None), None);
        assert!(mixed_h_note(&endless, Some(5)).is_some_and(|n| n.contains("5 steps")));
    }

    /// A tick plays at 1 / the smallest h of the lanes that can still step, of all lanes once none can, and at
    /// the recorded rate without lanes.
    #[test]
    fn a_tick_plays_at_the_rate_of_the_lanes_that_step() {
        let mut session = Session::new(wall_throw_at([0.001, 0.01], 800));
        assert_eq!(
            play_rate_hz(session.lanes.iter(), session.run_end, 60.0),
            1000.0
        );
        session.lanes[0].fault = Some("a test's fault".into());
        assert_eq!(
            play_rate_hz(session.lanes.iter(), session.run_end, 60.0),
            100.0
        );
        session.lanes[1].fault = Some("a test's fault".into());
        assert_eq!(
            play_rate_hz(session.lanes.iter(), session.run_end, 60.0),
            1000.0,
            "none steps: all lanes"
        );
        assert_eq!(play_rate_hz([].iter(), None, 60.0), 60.0);
        let fine = Session::new(wall_throw_at([1e-4, 1e-4], 8));
        assert_eq!(
            play_rate_hz(fine.lanes.iter(), fine.run_end, 60.0),
            1000.0,
            "the window's fastest rate"
        );
    }

    #[test]
    fn an_overlap_too_shallow_for_millimetres_is_told_in_a_unit_that_shows_it() {
        assert_eq!(overlap_depth_text(3.25e-3), "3.250 mm");
        assert_eq!(overlap_depth_text(2e-7), "200.0 nm");
        assert_eq!(overlap_depth_text(1.4e-11), "1.4e-11 m");
        assert_eq!(overlap_depth_text(0.0), "0 m (they touch)");
    }

    fn two_lane_scene() -> Scene {
        Scene::parse(
            r#"Scene(name: "spawns", lanes: [
                LaneSpec(name: "ipc", contact: ContactSettings(method: Ipc, dhat: Some(1e-4), gravity: (0.0, 0.0))),
                LaneSpec(name: "penalty", contact: ContactSettings(method: Penalty, gravity: (0.0, 0.0))),
            ])"#,
            "spawns.ron",
        )
        .expect("the test scene is valid")
    }

    fn spawn(x: f64, y: f64) -> Action {
        Action::Spawn(BallSpec {
            position: DVec2::new(x, y),
            velocity: DVec2::ZERO,
            radius: 1e-3,
            mass: 1.0,
        })
    }

    #[test]
    fn a_throw_changes_the_scene_but_not_the_one_the_names_describe() {
        let scene = two_lane_scene();
        let mut session = Session::new(scene.clone());
        session
            .apply(&Action::Throw {
                v0: 2.0,
                h: None,
                stiffness: Some(1e6),
                dhat: None,
                steps: None,
            })
            .expect("a valid throw");
        assert_eq!(session.scene.lanes[1].contact.stiffness, 1e6);
        assert_eq!(session.loaded, scene);
        let mut other = scene.clone();
        other.name = "other".into();
        session
            .apply(&Action::Scene(Box::new(other.clone())))
            .expect("a valid scene");
        assert_eq!(session.loaded, other);
        session.apply(&Action::Restart).expect("restarts");
        assert_eq!(session.loaded, other);
    }

    /// A script's `Settings` that changes more than one setting (a field left out takes its default) is noted
    /// with every setting it changes from what the lane runs then; one that changes a single setting is not.
    #[test]
    fn a_script_settings_action_that_changes_more_than_it_names_is_noted() {
        let loaded = Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
            .expect("the shipped scene");
        let at = |tick: u64, action: Action| TimedAction { tick, action };
        let only_method = ContactSettings {
            method: ContactMethod::Ipc,
            ..ContactSettings::default()
        };
        let mut one_edit = loaded.lanes[1].contact.clone();
        one_edit.kappa = 1e5;
        let actions = [
            at(
                0,
                Action::Settings {
                    lane: 0,
                    settings: only_method.clone(),
                },
            ),
            at(
                5,
                Action::Settings {
                    lane: 1,
                    settings: one_edit,
                },
            ),
            at(9, Action::Restart),
            at(
                10,
                Action::Settings {
                    lane: 1,
                    settings: only_method,
                },
            ),
        ];
        let notes = settings_replaced_notes(&loaded, &actions, "s.ron");
        assert_eq!(notes.len(), 2, "{notes:#?}");
        assert!(
            notes[0].starts_with(
                "s.ron: actions[0] (tick 0): Settings replaces lane 0's whole settings, a field left out taking its \
                 default: it changes method ipc, "
            ),
            "{}",
            notes[0]
        );
        assert!(notes[0].contains("g = (0, -9.81)"), "{}", notes[0]);
        // After the restart lane 1 runs its scene's settings again: the default ones change its gravity and more.
        assert!(
            notes[1].starts_with("s.ron: actions[3] (tick 10): "),
            "{}",
            notes[1]
        );
    }

    /// A script's throw at a smaller h without steps runs the scene's 80 steps, a tenth of the window's run at
    /// 1 ms (a review's script at h = 1 ms ended "flying" 103 mm short): `record` says so, naming the action and
    /// the steps that would run the window's length. The seed's throws at 10 ms, throws with steps and throws
    /// after a scene switch get no note.
    #[test]
    fn a_script_throw_that_runs_shorter_than_the_window_s_is_noted() {
        let loaded = Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
            .expect("the shipped scene");
        let throw = |h: Option<f64>, steps: Option<u64>| Action::Throw {
            v0: 5.0,
            h,
            stiffness: None,
            dhat: None,
            steps,
        };
        let at = |tick: u64, action: Action| TimedAction { tick, action };
        let actions = [
            at(0, throw(None, None)),
            at(10, throw(Some(0.001), None)),
            at(20, throw(Some(0.001), Some(800))),
            at(30, throw(Some(0.02), None)),
            at(35, throw(Some(0.01), Some(80))),
            at(38, throw(None, None)),
            at(40, Action::Scene(Box::new(loaded.clone()))),
            at(50, throw(Some(0.001), None)),
        ];
        let notes = throws_without_steps_notes(&loaded, &actions, "s.ron");
        // Each throw applies to the scene the last one left, as a session applies it: after `steps: Some(800)`
        // a throw at 20 ms without steps runs 800 steps, 16 s.
        assert_eq!(
            notes,
            [
                "s.ron: actions[1] (tick 10): this Throw has no steps, so it runs the current scene's 80 steps (0.08 \
                 s at h = 0.001 s); the window's Throw would run 800: add `steps: Some(800)` to run that",
                "s.ron: actions[3] (tick 30): this Throw has no steps, so it runs the current scene's 800 steps (16 s \
                 at h = 0.02 s); the window's Throw would run 40: add `steps: Some(40)` to run that",
            ]
        );
        // Checked against what a session runs: the throw at tick 30 runs 800 steps.
        let mut session = Session::new(loaded.clone());
        for timed in &actions[..4] {
            session.apply(&timed.action).expect("applies");
        }
        assert_eq!(session.scene.steps, Some(800));
    }

    /// The window's throw keeps the scene's run length in seconds at the smallest h a lane runs, and a throw too
    /// slow to reach the wall in that time runs long enough to arrive and turn; the run length comes from the
    /// loaded scene, so it does not compound over throws; a replay runs the steps its action holds.
    #[test]
    fn a_throw_runs_the_scene_s_seconds_at_its_h_and_long_enough_to_reach_the_wall() {
        let loaded = Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
            .expect("the shipped scene");
        assert_eq!(loaded.steps, Some(80));
        assert!(loaded.lanes.iter().all(|lane| lane.contact.h == 0.01));
        let steps = |current: &Scene, v0: f64, h: f64| {
            let thrown =
                thrown_scene(current, v0, (Some(h), None, None), None, "t").expect("a valid throw");
            thrown_steps(&loaded, &thrown, v0)
        };
        // The seed's throws, 1 to 50 m/s at 10 ms, keep its 80 steps.
        for v0 in [1.0, 2.0, 5.0, 10.0, 20.0, 50.0] {
            assert_eq!(steps(&loaded, v0, 0.01), Some(80), "v0 = {v0}");
        }
        assert_eq!(steps(&loaded, 5.0, 0.005), Some(160));
        assert_eq!(steps(&loaded, 5.0, 0.001), Some(800));
        assert_eq!(
            steps(&loaded, 5.0, 0.003),
            Some(267),
            "0.8 s / 3 ms, rounded up"
        );
        assert_eq!(steps(&loaded, 5.0, 0.02), Some(40));
        // 0.5 m/s: the point ball's 0.503 m to the wall take 1.006 s; 1.5 times that is 150.9 steps.
        assert_eq!(steps(&loaded, 0.5, 0.01), Some(151));
        // Thrown again from a thrown scene: the run length comes from the loaded one.
        let slow = thrown_scene(&loaded, 0.5, (None, None, None), Some(151), "t").expect("valid");
        assert_eq!(slow.steps, Some(151), "the action's steps");
        assert_eq!(steps(&slow, 5.0, 0.01), Some(80));
        // Without the throw's h the run is counted in the scene's 10 ms: a lane the panel edited to 1 ms keeps
        // time with it (`lanes_of_different_h_keep_time_together`) and takes 800.
        let thrown = thrown_scene(&loaded, 5.0, (None, None, None), None, "t").expect("valid");
        assert_eq!(thrown_steps(&loaded, &thrown, 5.0), Some(80));
        // Without steps in the action (a demo recorded before them), the current scene's run length.
        assert_eq!(
            thrown_scene(&loaded, 5.0, (Some(0.001), None, None), None, "t")
                .expect("valid")
                .steps,
            Some(80)
        );
        // A scene that runs without a limit still does.
        let mut open = loaded.clone();
        open.steps = None;
        assert_eq!(thrown_steps(&open, &open, 5.0), None);
        // A tiny step keeps to the limit on a run's steps.
        assert_eq!(steps(&loaded, 1e-3, 1e-6), Some(MAX_RUN_STEPS));
    }

    #[test]
    fn the_spawns_of_one_tick_share_a_grid_per_lane_that_a_step_or_a_rebuild_drops() {
        let mut session = Session::new(two_lane_scene());
        for k in 0..500 {
            session
                .apply(&spawn(0.01 * f64::from(k % 25), 0.01 * f64::from(k / 25)))
                .expect("apart from the others");
        }
        // Without the grids every spawn compared the ball with every ball of the lane: n²/2 in all.
        assert_eq!(session.spawn_grids.len(), 2);
        for (grid, lane) in session.spawn_grids.iter().zip(&session.lanes) {
            assert_eq!(grid.len(), 500);
            assert_eq!(lane.balls.len(), 500);
        }
        session.step();
        assert!(session.spawn_grids.is_empty(), "a step moves the balls");
        session.apply(&spawn(1.0, 1.0)).expect("apart");
        assert_eq!(session.spawn_grids.len(), 2);
        session.apply(&Action::Restart).expect("restarts");
        assert!(
            session.spawn_grids.is_empty(),
            "a rebuild replaces the balls"
        );
    }
}
