//! `contact-sandbox run --scene FILE [--steps N] [--json]`: steps every lane of a scene headless and reports.

use std::path::PathBuf;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use glam::DVec2;

use crate::physics::geometry::ball_wall_distance;
use crate::physics::world::LaneWorld;
use crate::scene::{MAX_RUN_STEPS, Scene};

use super::stdout::{out, outln};

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
    /// Steps per lane (default: the scene's `steps`, else 600).
    #[arg(long)]
    pub steps: Option<u64>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Loads the scene and steps every lane `steps` times.
pub fn run_scene(scene: &Scene, steps: u64) -> Vec<LaneWorld> {
    run_scene_measured(scene, steps)
        .into_iter()
        .map(|(lane, _)| lane)
        .collect()
}

/// As [`run_scene`], also keeping each ball's velocity and the lane time at the half-way step, so the mean
/// acceleration over the second half (after start-up transients) can be measured.
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
    for mut lane in scene.build() {
        let mut snapshot = HalfwaySnapshot::default();
        for step in 0..steps {
            if step == steps / 2 {
                snapshot = HalfwaySnapshot {
                    time: lane.time,
                    velocities: lane.balls.iter().map(|b| b.velocity).collect(),
                };
            }
            if lane.step().is_none() {
                break;
            }
            if step % 256 == 255 {
                progress(done + step + 1);
            }
        }
        done += steps;
        progress(done);
        out.push((lane, snapshot));
    }
    out
}

/// The progress bar of a command that steps lanes, `what [=====>    ] pos/len lane steps, rate, ETA`, for
/// `lane_steps` steps in all. On a terminal a long run shows how far it has got; indicatif draws nothing when
/// stderr is not one (a pipe, a file, a test that captures it), so the library functions take a progress
/// callback and only the subcommands' entry points make a bar.
pub fn lane_steps_bar(what: &str, lane_steps: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(lane_steps);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg} [{bar:40}] {pos}/{len} lane steps, {per_sec}, ETA {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}

/// Ball velocities at the half-way step.
#[derive(Clone, Debug, Default)]
pub struct HalfwaySnapshot {
    pub time: f64,
    pub velocities: Vec<DVec2>,
}

/// A ball resting on (or sliding along) a wall face, compared with Coulomb's law for a block on an incline.
#[derive(Clone, Debug, PartialEq)]
pub struct SlopeCheck {
    pub wall: usize,
    /// Surface inclination θ [rad] (0 = level).
    pub slope_angle: f64,
    /// `g (sin θ − μ cos θ)` when positive (sliding), else 0 (sticking) [m/s²].
    pub coulomb_accel: f64,
    /// Measured mean acceleration down the slope over the second half of the run [m/s²].
    pub measured_accel: f64,
    pub sticking_predicted: bool,
}

/// For a ball touching a wall (gap below `max(10 d̂, 1 mm)`), the Coulomb prediction beside the measurement.
pub fn slope_check(lane: &LaneWorld, ball: usize, halfway: &HalfwaySnapshot) -> Option<SlopeCheck> {
    let b = lane.balls.get(ball)?;
    let v_half = *halfway.velocities.get(ball)?;
    let dt = lane.time - halfway.time;
    if dt <= 0.0 {
        return None;
    }
    let reach = (10.0 * lane.dhat()).max(1e-3);
    let (wall, distance) = lane
        .walls
        .iter()
        .enumerate()
        .map(|(k, w)| (k, ball_wall_distance(b.position, b.radius, w)))
        .min_by(|a, b| a.1.value.total_cmp(&b.1.value))?;
    if distance.value > reach {
        return None;
    }
    let g = lane.settings.gravity;
    let normal = distance.gradient;
    let pressing = -g.dot(normal);
    if pressing <= 0.0 {
        return None;
    }
    let along = g - normal * g.dot(normal);
    let downhill = along.normalize_or_zero();
    let slope_angle = along.length().atan2(pressing);
    let drive = along.length();
    let coulomb = (drive - lane.settings.friction * pressing).max(0.0);
    let measured = (b.velocity - v_half).dot(downhill) / dt;
    Some(SlopeCheck {
        wall,
        slope_angle,
        coulomb_accel: coulomb,
        measured_accel: measured,
        sticking_predicted: coulomb == 0.0,
    })
}

fn null_if_not_finite(x: Option<f64>) -> Value {
    match x {
        Some(v) if v.is_finite() => json!(v),
        _ => Value::Null,
    }
}

/// The per-lane report of `run --json`.
pub fn lane_json(lane: &LaneWorld, halfway: &HalfwaySnapshot) -> Value {
    let balls: Vec<Value> = lane
        .balls
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut v = json!({"pos": [b.position.x, b.position.y], "vel": [b.velocity.x, b.velocity.y],
                   "radius": b.radius, "mass": b.mass, "tunneled": lane.ball_tunneled(i)});
            if let Some(c) = slope_check(lane, i, halfway) {
                v["slope"] = json!({"wall": c.wall, "angle_rad": c.slope_angle,
                    "coulomb_accel_m_s2": c.coulomb_accel, "measured_accel_m_s2": c.measured_accel,
                    "sticking_predicted": c.sticking_predicted,
                    "speed_m_s": b.velocity.length()});
            }
            v
        })
        .collect();
    let g = lane.settings.gravity;
    let rods: Vec<Value> = lane
        .rods
        .iter()
        .map(|r| {
            let at_rest = r.velocity.length() < ROD_REST_SPEED && r.omega.abs() < ROD_REST_SPEED;
            json!({"center": [r.center.x, r.center.y], "angle": r.angle, "vel": [r.velocity.x, r.velocity.y],
                   "omega": r.omega, "energy_j": r.energy(g, lane.rod_floor_y),
                   "lowest_end_height_m": r.lowest_end_height() - lane.rod_floor_y, "at_rest": at_rest})
        })
        .collect();
    let s = &lane.stats;
    let kappa = lane.last.as_ref().and_then(|d| d.kappa);
    json!({
        "name": lane.name,
        "method": lane.settings.method.label(),
        "steps": s.steps,
        "time_s": lane.time,
        "min_gap_m": null_if_not_finite(s.min_gap),
        "max_penetration_m": s.max_penetration,
        "max_newton": s.max_newton,
        "mean_newton": s.mean_newton(),
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

/// A readable per-lane summary.
pub fn lane_table(lane: &LaneWorld, halfway: &HalfwaySnapshot) -> String {
    let s = &lane.stats;
    let gap = match s.min_gap {
        Some(g) if g.is_finite() => format!("{:.4e} m", g),
        _ => "n/a".into(),
    };
    let mut out = format!(
        "lane \"{}\" ({}): {} steps, t = {:.4} s\n  min gap {gap}, max penetration {:.4e} m, Newton max {} mean {:.2}, tunneled {}, energy {:.6e} J\n",
        lane.name,
        lane.settings.method.label(),
        s.steps,
        lane.time,
        s.max_penetration,
        s.max_newton,
        s.mean_newton(),
        s.tunneled,
        lane.energy()
    );
    if let Some(fault) = &lane.fault {
        out.push_str(&format!("  FAULT: {fault}\n"));
    }
    for (i, b) in lane.balls.iter().enumerate().take(20) {
        out.push_str(&format!(
            "  ball {i}: pos ({:.6}, {:.6}) vel ({:.6}, {:.6}){}\n",
            b.position.x,
            b.position.y,
            b.velocity.x,
            b.velocity.y,
            if lane.ball_tunneled(i) {
                " TUNNELED"
            } else {
                ""
            }
        ));
        if let Some(c) = slope_check(lane, i, halfway) {
            out.push_str(&format!(
                "    on wall {} at {:.4} rad: Coulomb predicts {} (a = {:.6} m/s²); measured a = {:.6} m/s² down the slope, speed {:.3e} m/s\n",
                c.wall,
                c.slope_angle,
                if c.sticking_predicted { "sticking" } else { "sliding" },
                c.coulomb_accel,
                c.measured_accel,
                b.velocity.length()
            ));
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
            "  rod {i}: centre ({:.6}, {:.6}) angle {:.6} vel ({:.3e}, {:.3e}) omega {:.3e}\n",
            r.center.x, r.center.y, r.angle, r.velocity.x, r.velocity.y, r.omega
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

/// Entry point of the subcommand.
pub fn run_run(args: &RunArgs) -> Result<()> {
    let scene = Scene::load(&args.scene)?;
    let steps = args.steps.or(scene.steps).unwrap_or(DEFAULT_STEPS);
    if !(1..=MAX_RUN_STEPS).contains(&steps) {
        bail!("invalid --steps: must be between 1 and {MAX_RUN_STEPS}, got {steps}");
    }
    let bar = lane_steps_bar("running", steps.saturating_mul(scene.lanes.len() as u64));
    let lanes = run_scene_measured_with(&scene, steps, |done| bar.set_position(done));
    bar.finish_and_clear();
    if args.json {
        let lanes: Vec<Value> = lanes
            .iter()
            .map(|(lane, half)| lane_json(lane, half))
            .collect();
        outln!("{}", json!({"scene": scene.name, "lanes": lanes}))?;
    } else {
        outln!("scene \"{}\"", scene.name)?;
        for (lane, half) in &lanes {
            out!("{}", lane_table(lane, half))?;
        }
    }
    Ok(())
}
