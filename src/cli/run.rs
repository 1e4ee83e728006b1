//! `contact-sandbox run --scene FILE [--steps N] [--json]`: steps every lane of a scene headless and reports.

use std::path::PathBuf;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use glam::DVec2;

use crate::physics::geometry::ball_wall_distance;
use crate::physics::rod_flight::wrapped_angle;
use crate::physics::world::LaneWorld;
use crate::scene::{MAX_RUN_STEPS, Scene};

use super::stdout::{out, outln, write_json};

/// Steps used when neither `--steps` nor the scene's `steps` says.
pub const DEFAULT_STEPS: u64 = 600;

/// A rod counts as at rest below these speeds (m/s, rad/s).
pub const ROD_REST_SPEED: f64 = 1e-3;

/// Arguments of `contact-sandbox run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// The scene file (RON; see docs/scenes.md).
    #[arg(long)]
    pub scene: PathBuf,
    /// Steps of the scene's finest lane (default: the scene's `steps`, else 600); a lane of a larger h takes as
    /// many as fit in the same time.
    #[arg(long, allow_negative_numbers = true, value_parser = super::count_between::<u64>(1, MAX_RUN_STEPS))]
    pub steps: Option<u64>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Runs every lane of `scene` for `steps` steps of its smallest h ([`lane_steps`]).
pub fn run_scene(scene: &Scene, steps: u64) -> Vec<LaneWorld> {
    run_scene_measured(scene, steps)
        .into_iter()
        .map(|(lane, _)| lane)
        .collect()
}

/// As [`run_scene`], also keeping each ball's position and velocity and the lane time at the half-way step, so
/// the mean acceleration over the second half (after start-up transients) can be measured.
pub fn run_scene_measured(scene: &Scene, steps: u64) -> Vec<(LaneWorld, HalfwaySnapshot)> {
    run_scene_measured_with(scene, steps, |_| {})
}

/// [`run_scene_measured`], telling `progress` how many lane steps are done every 256 of them.
pub fn run_scene_measured_with(
    scene: &Scene,
    steps: u64,
    mut progress: impl FnMut(u64),
) -> Vec<(LaneWorld, HalfwaySnapshot)> {
    let mut out = Vec::new();
    let mut done = 0u64;
    for (lane, steps) in scene.build().into_iter().zip(lane_steps(scene, steps)) {
        out.push(run_lane_measured(lane, steps, |lane_done| {
            progress(done + lane_done)
        }));
        done += steps;
    }
    out
}

/// The steps each lane of `scene` takes in a run of `steps` steps of its smallest h: lanes keep time together as
/// in the window ([`crate::demo::step_lanes`]), so a lane of 10 ms beside one of 1 ms takes a tenth as many.
pub fn lane_steps(scene: &Scene, steps: u64) -> Vec<u64> {
    let end = crate::demo::seconds_of(steps, scene).unwrap_or(0.0);
    scene
        .lanes
        .iter()
        .map(|lane| crate::demo::steps_until(lane.contact.h, end))
        .collect()
}

/// The progress bar of a command that steps lanes, `what [=====>    ] pos/len lane steps, rate, ETA`, for
/// `lane_steps` steps in all. On a terminal a long run shows how far it has got; indicatif draws nothing when
/// stderr is not one (a pipe, a file, a test that captures it), so the library functions take a progress
/// callback and only the subcommands' entry points make a bar.
pub fn lane_steps_bar(what: &str, lane_steps: u64) -> indicatif::ProgressBar {
    super::progress_bar(
        lane_steps,
        "{msg} [{bar:40}] {pos}/{len} lane steps, {rate}, ETA {eta}",
        what,
    )
}

/// Steps one lane `steps` times as `run` does, keeping the [`HalfwaySnapshot`] at step `steps / 2`; tells
/// `progress` how many steps are done every 256 of them and at the end.
pub fn run_lane_measured(
    mut lane: LaneWorld,
    steps: u64,
    mut progress: impl FnMut(u64),
) -> (LaneWorld, HalfwaySnapshot) {
    let mut snapshot = HalfwaySnapshot::default();
    // The extremes include the starting state (a penalty ball that starts inside a wall).
    lane.measure_gaps();
    for step in 0..steps {
        if step == steps / 2 {
            snapshot = HalfwaySnapshot::of(&lane);
        }
        if lane.step().is_none() {
            break;
        }
        if step % 256 == 255 {
            progress(step + 1);
        }
    }
    progress(steps);
    (lane, snapshot)
}

/// Ball positions and velocities and the lane time at the half-way step.
#[derive(Clone, Debug, Default)]
pub struct HalfwaySnapshot {
    pub time: f64,
    pub positions: Vec<DVec2>,
    pub velocities: Vec<DVec2>,
}

impl HalfwaySnapshot {
    /// `lane`'s balls and time now.
    pub fn of(lane: &LaneWorld) -> HalfwaySnapshot {
        HalfwaySnapshot {
            time: lane.time,
            positions: lane.balls.iter().map(|b| b.position).collect(),
            velocities: lane.balls.iter().map(|b| b.velocity).collect(),
        }
    }
}

/// How a ball moves along the wall face it touches, at one instant: the regime Coulomb's law depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SurfaceMotion {
    /// Not within reach of the wall (the measured window began in flight).
    OffTheWall,
    /// Tangential speed below the friction's `ε_v`: the smoothed static regime (SPEC §1.5).
    AtRest,
    /// Sliding down an incline.
    SlidingDown,
    /// Sliding up an incline.
    SlidingUp,
    /// Sliding along a level surface.
    SlidingLevel,
}

impl SurfaceMotion {
    /// The words of `run`'s text output.
    pub fn label(self) -> &'static str {
        match self {
            SurfaceMotion::OffTheWall => "off the wall",
            SurfaceMotion::AtRest => "at rest",
            SurfaceMotion::SlidingDown => "sliding down the slope",
            SurfaceMotion::SlidingUp => "sliding up the slope",
            SurfaceMotion::SlidingLevel => "sliding along the floor",
        }
    }

    /// The name in `run --json`.
    pub fn key(self) -> &'static str {
        match self {
            SurfaceMotion::OffTheWall => "off_the_wall",
            SurfaceMotion::AtRest => "at_rest",
            SurfaceMotion::SlidingDown => "sliding_down",
            SurfaceMotion::SlidingUp => "sliding_up",
            SurfaceMotion::SlidingLevel => "sliding_level",
        }
    }
}

/// Coulomb's law for a block on a surface, as an acceleration along an axis tangent to it [m/s²].
///
/// `gravity_along` = g sin θ, gravity's component along the axis (0 on a level surface); `pressing` = g cos θ,
/// its component into the surface; `velocity_sign` = sign of the velocity along the axis, `None` at rest.
/// At rest the block sticks (a = 0) if |g sin θ| ≤ μ g cos θ (tan θ ≤ μ), else slides from rest at
/// g sin θ − μ g cos θ sign(g sin θ); sliding, kinetic friction opposes the velocity:
/// a = g sin θ − μ g cos θ · sign(v).
pub fn coulomb_acceleration(
    gravity_along: f64,
    pressing: f64,
    mu: f64,
    velocity_sign: Option<f64>,
) -> f64 {
    let friction = mu * pressing;
    match velocity_sign {
        None if gravity_along.abs() <= friction => 0.0,
        None => gravity_along - friction * gravity_along.signum(),
        Some(sign) => gravity_along - friction * sign,
    }
}

/// A ball resting on or sliding along a wall face, compared with Coulomb's law for a block on an incline.
///
/// Accelerations are along `axis`: down the slope on an incline; on a level surface the direction the ball
/// slides in (the face's tangent when it does not). They are measured as the mean over the second half of the
/// run, `(v(t) − v(t/2)) · axis / (t/2)`, and compared only when Coulomb's acceleration is the same at both
/// ends of that window (`comparable`).
#[derive(Clone, Debug, PartialEq)]
pub struct SlopeCheck {
    pub wall: usize,
    /// Surface inclination θ [rad] (0 = level).
    pub slope_angle: f64,
    /// Unit tangent the accelerations are measured along.
    pub axis: DVec2,
    /// `axis` in words: "down the slope", "along the motion" or "along the floor".
    pub axis_name: &'static str,
    /// The ball's regime at the end of the run.
    pub motion: SurfaceMotion,
    /// The regime at the half-way step, where the measured window starts.
    pub motion_at_halfway: SurfaceMotion,
    /// Coulomb's acceleration along `axis` for `motion` [m/s²].
    pub coulomb_accel: f64,
    /// The same for `motion_at_halfway` (`None` off the wall) [m/s²].
    pub coulomb_accel_at_halfway: Option<f64>,
    /// Measured mean acceleration along `axis` over the second half of the run [m/s²].
    pub measured_accel: f64,
    /// At rest with tan θ ≤ μ.
    pub sticking_predicted: bool,
    /// Coulomb's acceleration is the same at both ends of the measured window, so the two can be compared.
    pub comparable: bool,
    /// The measured window (start, end), s.
    pub window: (f64, f64),
}

/// A surface inclined less than this [rad] is level: it has no downhill to measure along.
const LEVEL_ANGLE: f64 = 1e-12;

/// For a ball touching a wall (its gap within the lane's [`LaneWorld::contact_reach`], where the wall pushes:
/// overlap under penalty, `d̂` under the barrier), the Coulomb prediction for its regime beside the
/// measurement.
pub fn slope_check(lane: &LaneWorld, ball: usize, halfway: &HalfwaySnapshot) -> Option<SlopeCheck> {
    let b = lane.balls.get(ball)?;
    let v_half = *halfway.velocities.get(ball)?;
    let x_half = *halfway.positions.get(ball)?;
    let dt = lane.time - halfway.time;
    if dt <= 0.0 {
        return None;
    }
    let reach = lane.contact_reach();
    let (wall, distance) = lane
        .walls
        .iter()
        .enumerate()
        .map(|(k, w)| (k, ball_wall_distance(b.position, b.radius, w)))
        .min_by(|a, b| a.1.value.total_cmp(&b.1.value))?;
    // At the reach itself the wall pushes no more (the barrier is 0 from d̂ on), as `throw` counts it.
    if distance.value >= reach {
        return None;
    }
    let g = lane.settings.gravity;
    let normal = distance.gradient;
    let pressing = -g.dot(normal);
    if pressing <= 0.0 {
        return None;
    }
    let along = g - normal * g.dot(normal);
    let drive = along.length();
    let slope_angle = drive.atan2(pressing);
    let level = slope_angle < LEVEL_ANGLE;
    let tangential = |v: DVec2| v - normal * v.dot(normal);
    let epsilon_v = lane.settings.friction_epsilon_v;
    let sliding = |v: DVec2| tangential(v).length() >= epsilon_v;
    let (axis, axis_name, gravity_along) = if !level {
        (along / drive, "down the slope", drive)
    } else if sliding(b.velocity) {
        (tangential(b.velocity).normalize(), "along the motion", 0.0)
    } else if sliding(v_half) {
        (tangential(v_half).normalize(), "along the motion", 0.0)
    } else {
        (-normal.perp(), "along the floor", 0.0)
    };
    let motion_of = |v: DVec2| {
        if !sliding(v) {
            SurfaceMotion::AtRest
        } else if level {
            SurfaceMotion::SlidingLevel
        } else if v.dot(axis) > 0.0 {
            SurfaceMotion::SlidingDown
        } else {
            SurfaceMotion::SlidingUp
        }
    };
    let mu = lane.settings.friction;
    let predict = |v: DVec2| {
        let sign = sliding(v).then(|| if v.dot(axis) >= 0.0 { 1.0 } else { -1.0 });
        coulomb_acceleration(gravity_along, pressing, mu, sign)
    };
    let motion = motion_of(b.velocity);
    let coulomb_accel = predict(b.velocity);
    let on_wall_at_halfway = ball_wall_distance(x_half, b.radius, &lane.walls[wall]).value < reach;
    let (motion_at_halfway, coulomb_accel_at_halfway) = if on_wall_at_halfway {
        (motion_of(v_half), Some(predict(v_half)))
    } else {
        (SurfaceMotion::OffTheWall, None)
    };
    Some(SlopeCheck {
        wall,
        slope_angle,
        axis,
        axis_name,
        motion,
        motion_at_halfway,
        coulomb_accel,
        coulomb_accel_at_halfway,
        measured_accel: (b.velocity - v_half).dot(axis) / dt,
        sticking_predicted: motion == SurfaceMotion::AtRest && coulomb_accel == 0.0,
        comparable: coulomb_accel_at_halfway == Some(coulomb_accel),
        window: (halfway.time, lane.time),
    })
}

fn null_if_not_finite(x: Option<f64>) -> Value {
    match x {
        Some(v) if v.is_finite() => json!(v),
        _ => Value::Null,
    }
}

/// Ball `i` of `lane` in `run --json`.
fn ball_json(lane: &LaneWorld, i: usize, halfway: &HalfwaySnapshot) -> Value {
    let b = &lane.balls[i];
    let mut v = json!({"pos": [b.position.x, b.position.y], "vel": [b.velocity.x, b.velocity.y],
           "radius": b.radius, "mass": b.mass, "tunneled": lane.ball_tunneled(i)});
    if let Some(c) = slope_check(lane, i, halfway) {
        v["slope"] = json!({"wall": c.wall, "angle_rad": c.slope_angle,
            "axis": [c.axis.x, c.axis.y], "axis_name": c.axis_name,
            "motion": c.motion.key(), "motion_at_halfway": c.motion_at_halfway.key(),
            "coulomb_accel_m_s2": c.coulomb_accel,
            "coulomb_accel_at_halfway_m_s2": c.coulomb_accel_at_halfway,
            "measured_accel_m_s2": c.measured_accel, "comparable": c.comparable,
            "window_s": [c.window.0, c.window.1],
            "sticking_predicted": c.sticking_predicted,
            "speed_m_s": b.velocity.length()});
    } else {
        // Every ball has the key: `null` when it rests on no wall.
        v["slope"] = Value::Null;
    }
    v
}

/// Rod `i` of `lane` in `run --json`.
fn rod_json(lane: &LaneWorld, i: usize) -> Value {
    let r = &lane.rods[i];
    let g = lane.settings.gravity;
    let at_rest = r.velocity.length() < ROD_REST_SPEED && r.omega.abs() < ROD_REST_SPEED;
    json!({"center": [r.center.x, r.center.y], "angle": wrapped_angle(r.angle), "vel": [r.velocity.x, r.velocity.y],
           "omega": r.omega, "energy_j": r.energy(g, lane.rod_floor_y),
           "lowest_end_height_m": r.lowest_end_height() - lane.rod_floor_y, "at_rest": at_rest})
}

/// The per-lane report of `run --json`.
pub fn lane_json(lane: &LaneWorld, halfway: &HalfwaySnapshot) -> Value {
    let balls: Vec<Value> = (0..lane.balls.len())
        .map(|i| ball_json(lane, i, halfway))
        .collect();
    let rods: Vec<Value> = (0..lane.rods.len()).map(|i| rod_json(lane, i)).collect();
    lane_json_with(lane, Value::Array(balls), Value::Array(rods))
}

/// [`lane_json`] with its `balls` and `rods` given.
fn lane_json_with(lane: &LaneWorld, balls: Value, rods: Value) -> Value {
    let s = &lane.stats;
    let kappa = lane.last.as_ref().and_then(|d| d.kappa);
    json!({
        "name": lane.name,
        "method": lane.settings.method.label(),
        // The settings the lane ran with at the end (an edit or a demo's `Settings` may have changed its scene's).
        "h_s": lane.settings.h,
        "stiffness_n_m": lane.settings.stiffness,
        "friction_mu": lane.settings.friction,
        "steps": s.steps,
        "time_s": lane.time,
        "min_gap_m": null_if_not_finite(s.min_gap),
        "max_penetration_m": s.max_penetration,
        // Null where no step ran a Newton solve (a lane that took no step).
        "max_newton": (s.newton_steps > 0).then_some(s.max_newton),
        "mean_newton": (s.newton_steps > 0).then(|| s.mean_newton()),
        "newton_cap_hits": s.iteration_caps,
        "stalled_line_searches": s.stalled_line_searches,
        "tunneled": s.tunneled > 0,
        "tunneled_balls": s.tunneled,
        "energy_j": lane.energy(),
        "dhat_m": lane.dhat(),
        "kappa": kappa,
        "fault": lane.fault,
        "balls": balls,
        "rods": rods,
        "rod_impacts": s.rod_impacts,
        "rod_max_sink_m": s.rod_max_sink,
    })
}

/// Coulomb's law, in words, for the regime a [`SlopeCheck`] found at the end of the run.
fn coulomb_words(c: &SlopeCheck) -> String {
    let a = fixed(c.coulomb_accel, 6);
    match c.motion {
        SurfaceMotion::AtRest if c.slope_angle < LEVEL_ANGLE => {
            format!("staying at rest (level), a = {a}")
        }
        SurfaceMotion::AtRest if c.sticking_predicted => format!("sticking (tan θ ≤ μ), a = {a}"),
        SurfaceMotion::AtRest => {
            format!("sliding from rest (tan θ > μ), a = g (sin θ − μ cos θ) = {a}")
        }
        SurfaceMotion::SlidingDown => format!("a = g (sin θ − μ cos θ) = {a}"),
        SurfaceMotion::SlidingUp => format!("a = g (sin θ + μ cos θ) = {a}"),
        SurfaceMotion::SlidingLevel | SurfaceMotion::OffTheWall => format!("a = −μ g cos θ = {a}"),
    }
}

/// The text lines of a [`SlopeCheck`]: the regime, Coulomb's acceleration for it and the measured one, both
/// along the named axis; a measurement whose window spans two regimes is shown but not compared.
fn slope_line(c: &SlopeCheck, speed: f64) -> String {
    let mut line = format!(
        "    on wall {} at {} rad, {}: Coulomb predicts {} m/s² {}\n      ",
        c.wall,
        fixed(c.slope_angle, 4),
        c.motion.label(),
        coulomb_words(c),
        c.axis_name,
    );
    let measured = fixed(c.measured_accel, 6);
    let (start, end) = (fixed(c.window.0, 3), fixed(c.window.1, 3));
    if c.comparable {
        line.push_str(&format!(
            "measured a = {measured} m/s² {} over t = {start}..{end} s",
            c.axis_name
        ));
    } else {
        let before = c.coulomb_accel_at_halfway.map_or(String::new(), |a| {
            format!(", Coulomb a = {} m/s²", fixed(a, 6))
        });
        line.push_str(&format!(
            "not compared: measured mean a = {measured} m/s² over t = {start}..{end} s, which began {}{before}",
            c.motion_at_halfway.label()
        ));
    }
    line.push_str(&format!(", speed {:.3e} m/s\n", speed));
    line
}

/// `x` with `decimals` decimals, never as a negative zero ("-0.000000" is 0.000000).
pub fn fixed(x: f64, decimals: usize) -> String {
    let text = format!("{x:.decimals$}");
    match text.strip_prefix('-') {
        Some(magnitude) if magnitude.bytes().all(|b| b == b'0' || b == b'.') => {
            magnitude.to_string()
        }
        _ => text,
    }
}

/// A readable per-lane summary.
pub fn lane_table(lane: &LaneWorld, halfway: &HalfwaySnapshot) -> String {
    let s = &lane.stats;
    let gap = match s.min_gap {
        Some(g) if g.is_finite() => format!("{:.4e} m", g),
        _ => "n/a".into(),
    };
    // A lane that took no step has no Newton figures (`null` in the JSON), not a maximum and mean of 0.
    let newton = if s.newton_steps == 0 {
        "Newton n/a (no step)".to_string()
    } else {
        format!("Newton max {} mean {:.2}", s.max_newton, s.mean_newton())
    };
    let mut out = format!(
        "lane {} ({}): {} step{}, t = {:.4} s\n  min gap {gap}, max penetration {:.4e} m, {newton}, tunneled {}, energy {:.6e} J\n",
        crate::text::quoted(&lane.name),
        lane.settings.method.label(),
        s.steps,
        if s.steps == 1 { "" } else { "s" },
        lane.time,
        s.max_penetration,
        s.tunneled,
        lane.energy()
    );
    if s.tunneled > 0 && s.min_gap.is_some_and(|g| g >= 0.0) {
        out.push_str(
            "  the min gap is measured at the ends of steps: a ball that tunneled passed a wall between two steps\n",
        );
    }
    if s.iteration_caps > 0 {
        out.push_str(&format!(
            "  Newton hit its cap of {} iterations in {} of {} steps (those steps are not converged)\n",
            lane.settings.newton_max_iterations, s.iteration_caps, s.steps
        ));
    }
    if s.stalled_line_searches > 0 {
        out.push_str(&format!(
            "  the line search stalled {} times\n",
            s.stalled_line_searches
        ));
    }
    if let Some(fault) = &lane.fault {
        out.push_str(&format!("  FAULT: {fault}\n"));
    }
    for (i, b) in lane.balls.iter().enumerate().take(20) {
        out.push_str(&format!(
            "  ball {i}: pos ({}, {}) vel ({}, {}){}\n",
            fixed(b.position.x, 6),
            fixed(b.position.y, 6),
            fixed(b.velocity.x, 6),
            fixed(b.velocity.y, 6),
            if lane.ball_tunneled(i) {
                " TUNNELED"
            } else {
                ""
            }
        ));
        if let Some(c) = slope_check(lane, i, halfway) {
            out.push_str(&slope_line(&c, b.velocity.length()));
        }
    }
    if lane.balls.len() > 20 {
        out.push_str(&format!(
            "  ... {} more balls (use --json for all)\n",
            lane.balls.len() - 20
        ));
    }
    for (i, r) in lane.rods.iter().enumerate() {
        out.push_str(&format!(
            "  rod {i}: centre ({}, {}) angle {} vel ({:.3e}, {:.3e}) omega {:.3e} energy {:.6e} J\n",
            fixed(r.center.x, 6),
            fixed(r.center.y, 6),
            fixed(wrapped_angle(r.angle), 6),
            r.velocity.x,
            r.velocity.y,
            r.omega,
            r.energy(lane.settings.gravity, lane.rod_floor_y)
        ));
    }
    if !lane.rods.is_empty() {
        out.push_str(&format!(
            "  rod impacts {}, max sink {:.3e} m\n",
            s.rod_impacts, s.rod_max_sink
        ));
    }
    out
}

/// Notes on lanes that end the run before its `end` by more than a hundredth of the smallest h: a lane of a
/// larger h takes only the steps that fit (none where its h is longer than the run), which would otherwise pass
/// unsaid beside lanes that ran the whole time. A lane that faulted has its own line.
pub fn short_lane_notes<'a>(
    lanes: impl Iterator<Item = &'a LaneWorld> + Clone,
    end: f64,
    steps: u64,
) -> Vec<String> {
    let Some(smallest) = lanes.clone().map(|l| l.settings.h).reduce(f64::min) else {
        return Vec::new();
    };
    let seconds = crate::text::significant;
    let run = format!(
        "the run's {} s ({} of h = {} s)",
        seconds(end),
        crate::text::counted(steps, "step", "steps"),
        seconds(smallest)
    );
    lanes
        .filter(|lane| {
            lane.fault.is_none() && end - lane.time > crate::demo::CLOCK_SLACK * smallest
        })
        .map(|lane| {
            let h = seconds(lane.settings.h);
            if lane.stats.steps == 0 {
                format!(
                    "lane '{}' takes no step: its h = {h} s is longer than {run}",
                    lane.name
                )
            } else {
                format!(
                    "lane '{}' ends at {} s, before {run}: its h = {h} s does not divide it",
                    lane.name,
                    seconds(lane.time)
                )
            }
        })
        .collect()
}

/// Entry point of the subcommand.
pub fn run_run(args: &RunArgs) -> Result<()> {
    let scene = Scene::load(&args.scene)?;
    let steps = args.steps.or(scene.steps).unwrap_or(DEFAULT_STEPS);
    if !(1..=MAX_RUN_STEPS).contains(&steps) {
        bail!("invalid --steps: must be between 1 and {MAX_RUN_STEPS}, got {steps}");
    }
    let bar = lane_steps_bar("running", lane_steps(&scene, steps).iter().sum());
    let lanes = run_scene_measured_with(&scene, steps, |done| bar.set_position(done));
    bar.finish_and_clear();
    let end = crate::demo::seconds_of(steps, &scene).unwrap_or(0.0);
    // A scene file's `steps` count steps of its smallest h: a lane edited to 1 ms shortens the run tenfold.
    if let Some(note) = crate::demo::mixed_h_note(&scene, Some(steps)) {
        crate::cli::stdout::errln!("note: {}: {note}", args.scene.display());
    }
    for note in short_lane_notes(lanes.iter().map(|(lane, _)| lane), end, steps) {
        crate::cli::stdout::errln!("note: {}: {note}", args.scene.display());
    }
    if args.json {
        write_json(&run_report(&scene.name, &lanes), false)?;
    } else {
        outln!("scene {}", crate::text::quoted(&scene.name))?;
        for (lane, half) in &lanes {
            out!("{}", lane_table(lane, half))?;
        }
    }
    Ok(())
}

/// `run --json`'s object, `{"lanes": [...], "scene": name}`: the same as serialising [`lane_json`] of every lane,
/// but each lane's balls and rods are serialised as they are written instead of held (about 1.7 KB of `Value` a
/// ball, 4 GB for 64 lanes of 30 000 balls).
pub fn run_report<'a>(
    scene_name: &str,
    lanes: &'a [(LaneWorld, HalfwaySnapshot)],
) -> WithParts<Vec<WithParts<LanePart<'a>>>> {
    let lanes = lanes
        .iter()
        .map(|(lane, half)| lane_streamed(lane, half, |_| {}))
        .collect();
    WithParts::new(json!({ "scene": scene_name }), vec![("lanes", lanes)])
}

/// [`lane_json`] as an object that serialises its balls and rods as it writes them; `more` adds fields to the
/// lane's own.
pub fn lane_streamed<'a>(
    lane: &'a LaneWorld,
    halfway: &'a HalfwaySnapshot,
    more: impl FnOnce(&mut Value),
) -> WithParts<LanePart<'a>> {
    let mut shape = lane_json_with(lane, Value::Null, Value::Null);
    more(&mut shape);
    WithParts::new(
        shape,
        vec![
            ("balls", LanePart::Balls(lane, halfway)),
            ("rods", LanePart::Rods(lane)),
        ],
    )
}

/// An object that serialises as serde_json serialises `shape` (its keys in the same order, compact or pretty),
/// except that the value of each key in `parts` comes from that part, serialised as it is written.
pub struct WithParts<T> {
    shape: Value,
    parts: Vec<(&'static str, T)>,
}

impl<T> WithParts<T> {
    /// `shape`, an object, with `parts` for some of its keys: a key it does not hold yet joins it, where serde_json
    /// puts a new key.
    pub fn new(mut shape: Value, parts: Vec<(&'static str, T)>) -> Self {
        debug_assert!(shape.is_object(), "a shape with parts is an object");
        if let Value::Object(map) = &mut shape {
            for (key, _) in &parts {
                map.entry(*key).or_insert(Value::Null);
            }
        }
        WithParts { shape, parts }
    }
}

impl<T: serde::Serialize> serde::Serialize for WithParts<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Value::Object(map) = &self.shape else {
            return self.shape.serialize(serializer);
        };
        // As serde_json serialises a `Value::Object`.
        let mut out = serializer.serialize_map(Some(map.len()))?;
        for (key, value) in map {
            match self.parts.iter().find(|(part, _)| part == key) {
                Some((_, part)) => out.serialize_entry(key, part)?,
                None => out.serialize_entry(key, value)?,
            }
        }
        out.end()
    }
}

/// A lane's balls or rods, each serialised as [`lane_json`] holds it when it is written.
pub enum LanePart<'a> {
    Balls(&'a LaneWorld, &'a HalfwaySnapshot),
    Rods(&'a LaneWorld),
}

impl serde::Serialize for LanePart<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        match *self {
            LanePart::Balls(lane, halfway) => {
                let mut out = serializer.serialize_seq(Some(lane.balls.len()))?;
                for i in 0..lane.balls.len() {
                    out.serialize_element(&ball_json(lane, i, halfway))?;
                }
                out.end()
            }
            LanePart::Rods(lane) => {
                let mut out = serializer.serialize_seq(Some(lane.rods.len()))?;
                for i in 0..lane.rods.len() {
                    out.serialize_element(&rod_json(lane, i))?;
                }
                out.end()
            }
        }
    }
}
