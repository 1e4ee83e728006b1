//! `contact-sandbox throw`: the seed's wall experiment (SPEC §2), run by the general 2D solver.
//!
//! For every `v0` it builds a [`Scene`] with one penalty lane per `k` and one IPC lane, each holding a point
//! ball at the origin moving at `v0` toward a wall whose front face is at `--wall`, and steps the lanes.

use anyhow::{Result, anyhow, bail};
use glam::DVec2;
use serde_json::{Value, json};

use crate::physics::geometry::difference_with_error;
use crate::physics::world::{
    ContactMethod, ContactSettings, LaneWorld, MAX_LENGTH, MAX_MASS, MAX_SPEED, MIN_MASS,
    WITHIN_MASS,
};
use crate::scene::{
    BallSpec, DHAT_RANGE, KAPPA_RANGE, LaneSpec, MAX_LANES, MAX_RUN_STEPS, STIFFNESS_RANGE, Scene,
    WallSpec,
};
use crate::text::number;

use super::compact_number;
use super::run::lane_steps_bar;
use super::stdout::{out, outln};

/// Arguments of `contact-sandbox throw` (defaults are the seed's experiment).
#[derive(clap::Args, Debug, Clone)]
pub struct ThrowArgs {
    /// Throw speeds [m/s], comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,5,10,20,50",
        allow_hyphen_values = true,
        value_parser = super::parse_listed_number
    )]
    pub v0: Vec<f64>,
    /// Penalty stiffnesses k [N/m], comma separated, each above 0 and at most 1e12; one penalty lane each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1e4,1e6",
        allow_hyphen_values = true,
        value_parser = super::parse_listed_number
    )]
    pub k: Vec<f64>,
    /// Time step h [s], from 1e-6 to 10.
    #[arg(long, default_value_t = 0.01, allow_hyphen_values = true)]
    pub h: f64,
    /// Barrier activation distance d̂ [m], from 1e-9 to 1.
    #[arg(long, default_value_t = 1e-3, allow_hyphen_values = true)]
    pub dhat: f64,
    /// Barrier stiffness κ, above 0 and at most 1e12.
    #[arg(long, default_value_t = 1e4, allow_hyphen_values = true)]
    pub kappa: f64,
    /// Where the wall starts along x [m]: it spans --wall to --wall + --thickness. The ball starts at 0, so a wall
    /// ahead of it (positive x) is met at --wall, and one behind it (negative x, by a negative speed) at --wall +
    /// --thickness.
    #[arg(long, default_value_t = 0.503, allow_hyphen_values = true)]
    pub wall: f64,
    /// Wall thickness [m].
    #[arg(long, default_value_t = 0.02, allow_hyphen_values = true)]
    pub thickness: f64,
    /// Ball mass [kg], from 1e-6 to 1e6.
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true)]
    pub mass: f64,
    /// Number of steps.
    #[arg(
        long,
        default_value_t = 80,
        allow_negative_numbers = true,
        value_parser = super::count_between::<u64>(1, MAX_RUN_STEPS)
    )]
    pub steps: u64,
    /// CCD safety factor s in (0, 1).
    #[arg(long = "ccd-factor", default_value_t = 0.9, allow_hyphen_values = true)]
    pub ccd_factor: f64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

impl Outcome {
    /// Steps whose Newton solve stopped at its cap (0 for a lane that failed).
    pub fn iteration_caps(&self) -> u32 {
        match self {
            Outcome::Stopped { iteration_caps, .. }
            | Outcome::Missed { iteration_caps, .. }
            | Outcome::Through { iteration_caps, .. } => *iteration_caps,
            Outcome::Failed { .. } => 0,
        }
    }
}

/// What happened to one lane's ball.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Never went through; `depth` is the deepest penetration, `gap` the smallest gap [m].
    Stopped {
        depth: f64,
        gap: f64,
        max_newton: u32,
        mean_newton: f64,
        /// Steps whose Newton solve stopped at the iteration cap, unconverged.
        iteration_caps: u32,
        /// The ball's speed into the wall when the run ended with it still in contact and moving on (`None` when it
        /// had turned back or come to rest): the seed's "stop" is then only where the steps ran out, and more
        /// `--steps` may end "through".
        moving_in: Option<f64>,
    },
    /// Never came within reach of the wall's contact (penalty: never overlapped it; IPC: never within d̂), so the
    /// wall never acted: thrown away from it, too slowly, or from behind it. `gap` is the smallest gap [m].
    Missed {
        gap: f64,
        max_newton: u32,
        mean_newton: f64,
        iteration_caps: u32,
        /// The ball's speed towards the wall when the steps ran out (`None` when it was moving away or at rest): it
        /// was cut short on its way, and more `--steps` may reach the wall.
        approaching: Option<f64>,
    },
    /// Ended a step beyond the back face; the Newton counts are of the steps up to then.
    /// An unconverged step (one on the cap) may be why it went through.
    Through {
        step: u64,
        max_newton: u32,
        mean_newton: f64,
        iteration_caps: u32,
    },
    /// The lane faulted (non-finite state).
    Failed { reason: String },
}

/// One `v0`: the penalty outcomes (one per `k`) and the IPC outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct ThrowRow {
    pub v0: f64,
    pub penalty: Vec<(f64, Outcome)>,
    pub ipc: Outcome,
}

/// The seed's Newton cap (its listing's `for it in range(1, 60)`), which every lane of `throw` uses.
pub const THROW_NEWTON_CAP: u32 = 59;
/// The seed's Newton tolerance on the direction's largest component [m].
pub const THROW_NEWTON_TOLERANCE: f64 = 1e-10;

impl ThrowArgs {
    /// Checks every parameter against what the scene accepts, so the error names the option and its value rather
    /// than a field of the scene built from it (SPEC §2). Values are quoted as typed, in their shortest form: `1e300`,
    /// not 301 digits, and `10.0000001`, not `10`.
    pub fn validate(&self) -> Result<()> {
        if !self.thickness.is_finite() || self.thickness <= 0.0 {
            bail!(
                "invalid --thickness: must be a finite number > 0, got {}",
                number(self.thickness)
            );
        }
        // One message for every step out of range, 0 and NaN included.
        if !(crate::scene::MIN_STEP..=crate::scene::MAX_STEP).contains(&self.h) {
            bail!(
                "invalid --h: must be from {} s to {} s (a shorter step stands a slow ball still, a longer one is no \
                 time step), got {}",
                number(crate::scene::MIN_STEP),
                number(crate::scene::MAX_STEP),
                number(self.h)
            );
        }
        // The scene's own ranges (scene files and the window check the same), in the same words.
        if !(MIN_MASS..=MAX_MASS).contains(&self.mass) {
            bail!(
                "invalid --mass: must be {WITHIN_MASS}, got {}",
                number(self.mass)
            );
        }
        DHAT_RANGE
            .check(self.dhat)
            .map_err(|problem| anyhow!("invalid --dhat: {problem}"))?;
        KAPPA_RANGE
            .check(self.kappa)
            .map_err(|problem| anyhow!("invalid --kappa: {problem}"))?;

        if !self.wall.is_finite() {
            bail!(
                "invalid --wall: must be a finite number, got {}",
                number(self.wall)
            );
        }
        // The wall spans [wall, wall + thickness] on x; the scene keeps every coordinate within ±MAX_LENGTH.
        if self.wall.abs() > MAX_LENGTH {
            bail!(
                "invalid --wall: must be within ±{MAX_LENGTH:e} m (gaps of micrometres are not resolved beyond that), \
                 got {}",
                number(self.wall)
            );
        }
        let back = self.wall + self.thickness;
        if back.abs() > MAX_LENGTH {
            bail!(
                "invalid --thickness: the wall's back face (--wall {} + --thickness {} = {} m) must be within \
                 ±{MAX_LENGTH:e} m (gaps of micrometres are not resolved beyond that)",
                number(self.wall),
                number(self.thickness),
                number(back)
            );
        }
        // The ball starts at x = 0; IPC needs it strictly outside the wall.
        if self.wall <= 0.0 && back >= 0.0 {
            bail!(
                "invalid --wall: the ball starts at x = 0, inside or touching the wall (--wall {} to {} m); \
                 IPC needs a positive gap",
                number(self.wall),
                number(back)
            );
        }
        // A face about 2⁵³ times closer to the ball than the wall is thick is lost in the rounding of the wall's
        // centre: the lane would find the ball touching it.
        let gap =
            crate::physics::geometry::ball_wall_gap(DVec2::ZERO, 0.0, &self.wall_spec().to_wall());
        if gap.is_nan() || gap <= 0.0 {
            bail!(
                "invalid --wall: a wall from {} to {} m lies closer to the ball's start (x = 0) than positions \
                 there resolve, so the ball would start touching it; IPC needs a positive gap (move the wall \
                 further off, or make it thinner)",
                number(self.wall),
                number(back)
            );
        }
        if !(self.ccd_factor > 0.0 && self.ccd_factor < 1.0) {
            bail!(
                "invalid --ccd-factor: must be in (0, 1), got {}",
                number(self.ccd_factor)
            );
        }
        for &k in &self.k {
            STIFFNESS_RANGE
                .check(k)
                .map_err(|problem| anyhow!("invalid --k: every stiffness {problem}"))?;
        }
        // One penalty lane per k, plus the IPC lane.
        if self.k.len() >= MAX_LANES {
            bail!(
                "invalid --k: at most {} stiffnesses (one lane each, plus the IPC lane, and a scene holds at most \
                 {MAX_LANES} lanes), got {}",
                MAX_LANES - 1,
                self.k.len()
            );
        }
        for &v in &self.v0 {
            if !v.is_finite() {
                bail!(
                    "invalid --v0: every speed must be a finite number, got {}",
                    number(v)
                );
            }
            if v.abs() > MAX_SPEED {
                bail!(
                    "invalid --v0: every speed must be within ±{MAX_SPEED:e} m/s (gaps of micrometres are not \
                     resolved beyond that), got {}",
                    number(v)
                );
            }
        }
        if self.v0.is_empty() {
            bail!("invalid --v0: give at least one speed");
        }
        if !(1..=MAX_RUN_STEPS).contains(&self.steps) {
            bail!(
                "invalid --steps: must be between 1 and {MAX_RUN_STEPS}, got {}",
                self.steps
            );
        }
        Ok(())
    }

    /// The throw's wall, its faces at `--wall` and `--wall + --thickness` ([`wall_between_faces`]). The seed's wall
    /// is 1D: its faces are the two ends. Taller than thick, so that a ball inside is always nearer an end face
    /// than the top or bottom (a 4 m thick wall 2 m tall pushed its ball out sideways).
    fn wall_spec(&self) -> WallSpec {
        let (center, half) = wall_between_faces(self.wall, self.thickness);
        WallSpec {
            center: DVec2::new(center, 0.0),
            half_extents: DVec2::new(half, self.thickness.max(1.0)),
            angle: 0.0,
        }
    }

    /// The scene for one throw speed: penalty lanes (one per `k`), then the IPC lane.
    pub fn scene(&self, v0: f64) -> Scene {
        let settings = ContactSettings {
            h: self.h,
            gravity: DVec2::ZERO,
            newton_tolerance: THROW_NEWTON_TOLERANCE,
            newton_max_iterations: THROW_NEWTON_CAP,
            ccd_factor: self.ccd_factor,
            ..ContactSettings::default()
        };
        let wall = self.wall_spec();
        let ball = BallSpec {
            position: DVec2::ZERO,
            velocity: DVec2::new(v0, 0.0),
            radius: 0.0,
            mass: self.mass,
        };
        let lane = |name: String, contact: ContactSettings| LaneSpec {
            name,
            contact,
            walls: vec![wall],
            balls: vec![ball],
            rods: Vec::new(),
            rod_floor_y: 0.0,
        };
        let mut lanes: Vec<LaneSpec> = self
            .k
            .iter()
            .map(|&k| {
                lane(
                    format!("penalty k={}", compact_number(k)),
                    ContactSettings {
                        method: ContactMethod::Penalty,
                        stiffness: k,
                        ..settings.clone()
                    },
                )
            })
            .collect();
        lanes.push(lane(
            format!("ipc dhat={}", compact_number(self.dhat)),
            ContactSettings {
                method: ContactMethod::Ipc,
                dhat: Some(self.dhat),
                kappa: self.kappa,
                ..settings
            },
        ));
        Scene {
            name: format!("wall throw at {} m/s", compact_number(v0)),
            description: "SPEC §2: a point ball thrown at a 20 mm wall".into(),
            steps: Some(self.steps),
            lanes,
        }
    }
}

/// The centre and half-thickness of the wall `[front, front + thickness]`, with the face the ball meets (the ball
/// starts at 0: the front face, or the back face of a wall behind it) exactly where the seed has it (`WALL`, or
/// `WALL + W` rounded once), as the seed measures from its faces (`WALL − x`). A centre and a half rounded
/// separately put that face up to an ulp off: a ball landing on it to the last bit (at 50 m/s, after four steps
/// of 0.5 m, on a wall at 2 m) was found inside it, and penalty stopped a ball the seed sends through.
///
/// The far face is moved by at most three ulps towards the near one where that lets both faces be exact. Where it
/// does not, the centre is rounded from the near face and the half-thickness taken as their exact difference, so
/// the near face is still exact; only where that difference does not fit a double either (a wall much thicker than
/// its distance from 0) is the near face off, by at most half an ulp of the centre.
pub fn wall_between_faces(front: f64, thickness: f64) -> (f64, f64) {
    let back = front + thickness;
    let near_is_front = front > 0.0;
    let (near, far) = if near_is_front {
        (front, back)
    } else {
        (back, front)
    };
    // Both faces exact: their sum and difference are, and so are the halves of each.
    let both_exact = |far: f64| {
        let (lo, hi) = (near.min(far), near.max(far));
        let (sum, sum_error) = difference_with_error(lo, -hi);
        let (width, width_error) = difference_with_error(hi, lo);
        let (center, half) = (sum * 0.5, width * 0.5);
        (hi > lo
            && sum_error == 0.0
            && width_error == 0.0
            && center.is_finite()
            && half > 0.0
            && center * 2.0 == sum
            && half * 2.0 == width)
            .then_some((center, half))
    };
    let mut candidate = far;
    for _ in 0..4 {
        if let Some(faces) = both_exact(candidate) {
            return faces;
        }
        candidate = if near_is_front {
            candidate.next_down()
        } else {
            candidate.next_up()
        };
    }
    // The near face exact: a rounded centre, and the half-thickness as its exact distance from that face.
    let half = thickness * 0.5;
    let center = if near_is_front {
        near + half
    } else {
        near - half
    };
    let (offset, offset_error) = difference_with_error(center, near);
    if offset_error == 0.0 && offset != 0.0 && offset.is_finite() {
        return (center, offset.abs());
    }
    (front + half, half)
}

/// Steps a lane until the step budget runs out or its ball goes through (as the seed's `throw` returns).
pub fn run_lane(lane: &mut LaneWorld, steps: u64) -> Outcome {
    run_lane_with(lane, steps, |_| {})
}

/// [`run_lane`], telling `progress` how many of this lane's steps are done every 256 of them.
pub fn run_lane_with(lane: &mut LaneWorld, steps: u64, mut progress: impl FnMut(u64)) -> Outcome {
    // How close the ball came includes where it started (a ball thrown away from the wall is closest there).
    lane.measure_gaps();
    for step in 0..steps {
        if lane.step().is_none() {
            return Outcome::Failed {
                reason: lane
                    .fault
                    .clone()
                    .unwrap_or_else(|| "the lane stopped".into()),
            };
        }
        if let Some(step) = lane.stats.first_tunnel_step {
            return Outcome::Through {
                step,
                max_newton: lane.stats.max_newton,
                mean_newton: lane.stats.mean_newton(),
                iteration_caps: lane.stats.iteration_caps,
            };
        }
        if step % 256 == 255 {
            progress(step + 1);
        }
    }
    let gap = lane.stats.min_gap.unwrap_or(f64::INFINITY);
    let (max_newton, mean_newton) = (lane.stats.max_newton, lane.stats.mean_newton());
    let iteration_caps = lane.stats.iteration_caps;
    if gap >= lane.contact_reach() {
        return Outcome::Missed {
            gap,
            max_newton,
            mean_newton,
            iteration_caps,
            // In free flight any speed the solve resolves carries the ball on (a ball slower than the Newton
            // tolerance over h stops dead: README, "Newton's resolution"); 1 mm/s is the threshold of contact.
            approaching: speed_towards_wall(lane, lane.settings.newton_tolerance / lane.settings.h),
        };
    }
    Outcome::Stopped {
        depth: lane.stats.max_penetration,
        gap,
        max_newton,
        mean_newton,
        iteration_caps,
        moving_in: moving_into_wall(lane),
    }
}

/// Below this speed into the wall a ball in contact has come to rest [m/s] (IPC holds a stopped ball micrometres
/// short, where its speed is of the order of the Newton tolerance over `h`).
const STOPPED_SPEED: f64 = 1e-3;

/// The throw's ball's speed on into the wall ([`speed_towards_wall`]) when the last step left it in contact:
/// overlapping the wall under penalty, within `d̂` of it under IPC.
fn moving_into_wall(lane: &LaneWorld) -> Option<f64> {
    let last = lane.last.as_ref()?;
    let in_contact = match lane.settings.method {
        ContactMethod::Penalty => last.max_penetration > 0.0,
        ContactMethod::Ipc => last.min_gap.is_some_and(|gap| gap < lane.contact_reach()),
    };
    speed_towards_wall(lane, STOPPED_SPEED).filter(|_| in_contact)
}

/// The throw's ball's speed towards the wall, along x towards the side the wall lies on from the ball's start at
/// x = 0 (+x for a wall ahead, −x for one behind), if above `least` [m/s].
fn speed_towards_wall(lane: &LaneWorld, least: f64) -> Option<f64> {
    let ball = lane.balls.first()?;
    let wall = lane.walls.first()?;
    let towards = ball.velocity.x * wall.center.x.signum();
    (towards > least).then_some(towards)
}

/// Runs the whole experiment.
pub fn run_throws(args: &ThrowArgs) -> Result<Vec<ThrowRow>> {
    run_throws_with(args, |_| {})
}

/// [`run_throws`], telling `progress` how many lane steps are done (of `--steps` per lane, per speed) every 256
/// of them and at the end of each lane; a lane that stops early (its ball went through) counts in full.
pub fn run_throws_with(args: &ThrowArgs, mut progress: impl FnMut(u64)) -> Result<Vec<ThrowRow>> {
    args.validate()?;
    let mut rows = Vec::with_capacity(args.v0.len());
    let mut done = 0u64;
    for &v0 in &args.v0 {
        let scene = args.scene(v0);
        scene.validate("throw").map_err(anyhow::Error::msg)?;
        let mut lanes = scene.build();
        let mut outcomes: Vec<Outcome> = lanes
            .iter_mut()
            .map(|lane| {
                let outcome = run_lane_with(lane, args.steps, |step| progress(done + step));
                done += args.steps;
                progress(done);
                outcome
            })
            .collect();
        let ipc = outcomes.pop().unwrap_or(Outcome::Failed {
            reason: "no IPC lane".into(),
        });
        let penalty = args.k.iter().copied().zip(outcomes).collect();
        rows.push(ThrowRow { v0, penalty, ipc });
    }
    Ok(rows)
}

/// An IPC gap in the table's 9 characters: in µm as the seed prints it, in nm below 0.05 µm and in metres below
/// 0.05 nm, so that a gap never reads "0.0" (a d̂ may be as small as 1 nm).
fn gap_cell(gap: f64) -> String {
    if gap * 1e6 >= 0.05 {
        format!("{:6.1} um", gap * 1e6)
    } else if gap * 1e9 >= 0.05 {
        format!("{:6.1} nm", gap * 1e9)
    } else {
        format!("{:>9}", format!("{gap:.1e} m"))
    }
}

/// A penalty depth in the table's 8 characters: in mm as the seed prints it, in µm and nm below 0.005 of the
/// unit before, and in metres below 0.005 nm, so that a depth never reads "0.00" unless it is zero.
fn depth_cell(depth: f64) -> String {
    if depth == 0.0 || depth * 1e3 >= 0.005 {
        format!("{:5.2} mm", depth * 1e3)
    } else if depth * 1e6 >= 0.005 {
        format!("{:5.2} um", depth * 1e6)
    } else if depth * 1e9 >= 0.005 {
        format!("{:5.2} nm", depth * 1e9)
    } else {
        format!("{:>8}", format!("{depth:.0e} m"))
    }
}

/// The seed's table, line for line.
pub fn format_table(args: &ThrowArgs, rows: &[ThrowRow]) -> String {
    let mut out = format!(
        "wall at {} m, thickness {} mm, h = {} ms\n",
        args.wall,
        compact_number(args.thickness * 1000.0),
        compact_number(args.h * 1000.0)
    );
    // The seed's 7 characters for v0, wider where a speed is (`--v0 123456.789` reads 1.23456789e5).
    let v0_text = |v0: f64| {
        if v0.fract() == 0.0 {
            format!("{v0:.0}")
        } else {
            compact_number(v0)
        }
    };
    let v0_width = rows
        .iter()
        .map(|row| v0_text(row.v0).chars().count())
        .fold(7, usize::max);
    let mut header = format!(" {:>v0_width$} | ", "v0[m/s]");
    // The seed's 13 characters a penalty column, wider where its heading is (`--k 123456.789`).
    let titles: Vec<String> = args
        .k
        .iter()
        .map(|&k| format!("pen k={}", compact_number(k)))
        .collect();
    let widths: Vec<usize> = titles.iter().map(|t| t.chars().count().max(13)).collect();
    for (title, &width) in titles.iter().zip(&widths) {
        header.push_str(&format!("{title:width$} | "));
    }
    header.push_str(&format!("IPC d^={}mm", compact_number(args.dhat * 1000.0)));
    out.push_str(&header);
    out.push('\n');
    for row in rows {
        let v0 = format!("{:>v0_width$}", v0_text(row.v0));
        let mut cells: Vec<String> = row
            .penalty
            .iter()
            .zip(&widths)
            .map(|((_, outcome), &width)| {
                let cell = match outcome {
                    Outcome::Stopped { depth, .. } => format!("stop {}", depth_cell(*depth)),
                    Outcome::Missed { .. } => "never reached".into(),
                    Outcome::Through { .. } => "through".into(),
                    Outcome::Failed { .. } => "failed".into(),
                };
                format!("{cell:width$}")
            })
            .collect();
        cells.push(match &row.ipc {
            Outcome::Stopped {
                gap, max_newton, ..
            } => {
                format!("gap {}, newton {:2}", gap_cell(*gap), max_newton)
            }
            Outcome::Missed { .. } => "never reached the wall".into(),
            Outcome::Through { .. } => "through".into(),
            Outcome::Failed { reason } => format!("failed: {reason}"),
        });
        out.push_str(&format!(" {v0} | {}\n", cells.join(" | ")));
    }
    // A capped solve is not converged: its numbers are not the seed's, whatever they read.
    for row in rows {
        let lanes = || {
            row.penalty
                .iter()
                .map(|(k, outcome)| (format!("penalty k={}", compact_number(*k)), outcome))
                .chain([("IPC".to_string(), &row.ipc)])
        };
        // Every lane's ball flies the same until it nears the wall, so the lanes cut short on the way share a note.
        let short: Vec<(String, f64)> = lanes()
            .filter_map(|(lane, outcome)| match outcome {
                Outcome::Missed {
                    approaching: Some(speed),
                    ..
                } => Some((lane, *speed)),
                _ => None,
            })
            .collect();
        if let Some((_, speed)) = short.first() {
            let names: Vec<&str> = short.iter().map(|(lane, _)| lane.as_str()).collect();
            out.push_str(&format!(
                "note: at v0 = {} m/s, {}: the steps ran out before the ball reached the wall, still moving towards it \
                 at {speed:.3} m/s; more --steps may reach it\n",
                compact_number(row.v0),
                names.join(", "),
            ));
        }
        for (lane, outcome) in lanes() {
            if let Outcome::Stopped {
                moving_in: Some(speed),
                ..
            } = outcome
            {
                out.push_str(&format!(
                    "note: at v0 = {} m/s, {lane}: the steps ran out with the ball in contact and still moving into \
                     the wall at {speed:.3} m/s; more --steps may end otherwise\n",
                    compact_number(row.v0),
                ));
            }
            let caps = outcome.iteration_caps();
            if caps > 0 {
                out.push_str(&format!(
                    "note: at v0 = {} m/s, {lane}: Newton hit its cap of {} iterations in {caps} step{} (not \
                     converged)\n",
                    compact_number(row.v0),
                    THROW_NEWTON_CAP,
                    if caps == 1 { "" } else { "s" },
                ));
            }
        }
    }
    out
}

/// One lane's cell of the `--json` rows. Every row of a kind has the same keys (`null` where not applicable), so a
/// reader indexes them without checking the outcome first: penalty rows `depth_m`, `min_gap_m`, `max_newton`,
/// `mean_newton`, `iteration_caps` (steps whose Newton solve stopped unconverged at its cap), `through_step`,
/// `error`, `reached_wall` (`false` for a ball the wall never acted on), `moving_in_m_s` (a "stopped" ball's speed
/// into the wall where the run ended with it still in contact and moving on, else `null`), `approaching_m_s` (the
/// speed towards the wall of a ball that never reached it, where the steps ran out on its way, else `null`); IPC
/// rows also `gap_m` (the smallest gap, `null` unless stopped).
///
/// SPEC §2 has two outcomes, "stopped" and "through" ("failed" is a lane whose state turned non-finite). A ball
/// that never reached the wall did not go through it, so it is "stopped" with `reached_wall: false`: its deepest
/// penetration (`depth_m`) is 0, and IPC's `gap_m` is how close it came. The table says "never reached" instead.
fn outcome_json(outcome: &Outcome, penalty: bool) -> Value {
    let mut row = json!({"outcome": null, "depth_m": null, "min_gap_m": null, "max_newton": null,
                         "mean_newton": null, "iteration_caps": null, "through_step": null, "error": null,
                         "reached_wall": null, "moving_in_m_s": null, "approaching_m_s": null});
    if !penalty {
        row["gap_m"] = Value::Null;
    }
    match outcome {
        Outcome::Stopped {
            depth,
            gap,
            max_newton,
            mean_newton,
            iteration_caps,
            moving_in,
        } => {
            row["outcome"] = json!("stopped");
            row["reached_wall"] = json!(true);
            row["depth_m"] = json!(depth);
            row["min_gap_m"] = json!(gap);
            if !penalty {
                row["gap_m"] = json!(gap);
            }
            row["max_newton"] = json!(max_newton);
            row["mean_newton"] = json!(mean_newton);
            row["iteration_caps"] = json!(iteration_caps);
            row["moving_in_m_s"] = json!(moving_in);
        }
        // The wall never acted: nothing penetrated it, and the smallest gap is how close the ball came.
        Outcome::Missed {
            gap,
            max_newton,
            mean_newton,
            iteration_caps,
            approaching,
        } => {
            row["outcome"] = json!("stopped");
            row["reached_wall"] = json!(false);
            row["depth_m"] = json!(0.0);
            row["min_gap_m"] = json!(gap);
            if !penalty {
                row["gap_m"] = json!(gap);
            }
            row["max_newton"] = json!(max_newton);
            row["mean_newton"] = json!(mean_newton);
            row["iteration_caps"] = json!(iteration_caps);
            row["approaching_m_s"] = json!(approaching);
        }
        // The solves ran until the ball went through: their counts are reported as for the other outcomes.
        Outcome::Through {
            step,
            max_newton,
            mean_newton,
            iteration_caps,
        } => {
            row["max_newton"] = json!(max_newton);
            row["mean_newton"] = json!(mean_newton);
            row["iteration_caps"] = json!(iteration_caps);
            row["outcome"] = json!("through");
            row["reached_wall"] = json!(true);
            row["through_step"] = json!(step);
        }
        Outcome::Failed { reason } => {
            row["outcome"] = json!("failed");
            row["error"] = json!(reason);
        }
    }
    row
}

/// The `--json` object of SPEC §2 (with extra fields).
pub fn format_json(args: &ThrowArgs, rows: &[ThrowRow]) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|row| {
            let penalty: Vec<Value> = row
                .penalty
                .iter()
                .map(|(k, outcome)| {
                    let mut v = outcome_json(outcome, true);
                    v["k"] = json!(k);
                    v
                })
                .collect();
            json!({"v0": row.v0, "penalty": penalty, "ipc": outcome_json(&row.ipc, false)})
        })
        .collect();
    json!({
        "parameters": {
            "h": args.h, "dhat": args.dhat, "kappa": args.kappa, "wall": args.wall,
            "thickness": args.thickness, "mass": args.mass, "steps": args.steps, "ccd_factor": args.ccd_factor,
            "v0": args.v0, "k": args.k, "newton_tolerance": THROW_NEWTON_TOLERANCE,
            "newton_max_iterations": THROW_NEWTON_CAP,
        },
        "rows": rows,
    })
}

/// Entry point of the subcommand.
pub fn run_throw(args: &ThrowArgs) -> Result<()> {
    let lanes = (args.k.len() as u64 + 1).saturating_mul(args.v0.len() as u64);
    let bar = lane_steps_bar("throwing", lanes.saturating_mul(args.steps));
    let rows = run_throws_with(args, |done| bar.set_position(done));
    bar.finish_and_clear();
    let rows = rows?;
    if args.json {
        outln!("{}", format_json(args, &rows))?;
    } else {
        out!("{}", format_table(args, &rows))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: ThrowArgs,
    }

    fn args(extra: &[&str]) -> ThrowArgs {
        Wrapper::parse_from(["throw"].iter().chain(extra)).args
    }

    #[test]
    fn a_tiny_gap_or_depth_is_told_in_a_unit_that_shows_it_and_keeps_the_column() {
        // The seed's figures are printed as the seed prints them.
        assert_eq!(gap_cell(166.39e-6), " 166.4 um");
        assert_eq!(gap_cell(2.1e-6), "   2.1 um");
        assert_eq!(depth_cell(5e-3), " 5.00 mm");
        assert_eq!(depth_cell(0.0), " 0.00 mm");
        // A review found "gap 0.0 um" for d̂ = 1 nm (2.9976e-14 m) and for 5e-9 m.
        assert_eq!(gap_cell(5.0e-9), "   5.0 nm");
        assert_eq!(gap_cell(2.9976e-14), "3.0e-14 m");
        assert_eq!(depth_cell(1.4e-6), " 1.40 um");
        assert_eq!(depth_cell(2e-10), " 0.20 nm");
        for gap in [1e-3, 1e-6, 4.9e-8, 1e-9, 4.9e-11, 1e-14, 1e-17] {
            assert_eq!(gap_cell(gap).chars().count(), 9, "{gap}");
            assert!(!gap_cell(gap).contains(" 0.0 "), "{gap}: {}", gap_cell(gap));
        }
        assert_eq!(depth_cell(1e-12), " 1e-12 m");
        for depth in [1e-2, 4.9e-6, 4.9e-9, 1e-12, 4.9e-12, 1e-300] {
            assert_eq!(depth_cell(depth).chars().count(), 8, "{depth}");
            assert!(
                !depth_cell(depth).contains(" 0.00 "),
                "{depth}: {}",
                depth_cell(depth)
            );
        }
    }

    /// A penalty column is as wide as its heading: `--k 123456.789` gave "pen k=1.23456789e5", wider than the
    /// seed's 13 characters, and the rows' separators no longer stood under the heading's.
    #[test]
    fn a_wide_penalty_heading_widens_its_column() {
        let a = args(&["--k", "123456.789,1.5e6", "--v0", "1,5"]);
        let rows = run_throws(&a).map_err(|e| e.to_string());
        let table = format_table(&a, rows.as_deref().unwrap_or_default());
        let bars =
            |line: &str| -> Vec<usize> { line.match_indices(" | ").map(|(i, _)| i).collect() };
        let lines: Vec<&str> = table.lines().skip(1).take(3).collect();
        assert!(lines[0].contains("pen k=1.23456789e5 | "), "{table}");
        for line in &lines[1..] {
            assert_eq!(bars(line), bars(lines[0]), "{table}");
        }
        // So does a long speed its v0 column (a review's 123456.789 m/s ran past the seed's 7 characters).
        let a = args(&["--v0", "123456.789,1", "--steps", "2"]);
        let rows = run_throws(&a).map_err(|e| e.to_string());
        let table = format_table(&a, rows.as_deref().unwrap_or_default());
        let lines: Vec<&str> = table.lines().skip(1).take(3).collect();
        assert!(lines[1].starts_with(" 1.23456789e5 | "), "{table}");
        for line in &lines[1..] {
            assert_eq!(bars(line), bars(lines[0]), "{table}");
        }
    }

    #[test]
    fn a_ball_that_never_reaches_the_wall_is_never_reached_in_the_table_and_stopped_short_in_json()
    {
        for extra in [
            &["--v0", "0"][..],
            &["--v0", "-5"],
            &["--wall", "-1", "--v0", "3"],
            &["--v0", "0.5"],
            &["--v0", "1e-4"],
        ] {
            let a = args(extra);
            let rows = run_throws(&a).map_err(|e| e.to_string());
            let rows = rows.as_deref().unwrap_or_default();
            assert_eq!(rows.len(), 1, "{extra:?}");
            for outcome in rows[0].penalty.iter().map(|(_, o)| o).chain([&rows[0].ipc]) {
                assert!(
                    matches!(outcome, Outcome::Missed { gap, .. } if *gap > 0.0),
                    "{extra:?}: {outcome:?}"
                );
            }
            let table = format_table(&a, rows);
            assert!(!table.contains("stop"), "{extra:?}: {table}");
            assert!(
                table.lines().any(
                    |l| l.ends_with("| never reached | never reached | never reached the wall")
                ),
                "{extra:?}: {table}"
            );
            // Only the slow throws at the wall were on their way when the steps ran out (0.4 m of 0.503 m, and
            // 80 µm at 0.1 mm/s, which was counted as at rest).
            assert_eq!(
                table.contains("the steps ran out before the ball reached the wall"),
                extra == ["--v0", "0.5"] || extra == ["--v0", "1e-4"],
                "{extra:?}: {table}"
            );
            let json = format_json(&a, rows);
            for cell in [&json["rows"][0]["penalty"][0], &json["rows"][0]["ipc"]] {
                // SPEC §2's outcomes are "stopped" and "through": it did not go through.
                assert_eq!(cell["outcome"], "stopped", "{extra:?}: {cell}");
                assert_eq!(cell["reached_wall"], false, "{extra:?}: {cell}");
                assert_eq!(cell["depth_m"], 0.0, "{extra:?}: {cell}");
                if cell.get("gap_m").is_some() {
                    assert_eq!(cell["gap_m"], cell["min_gap_m"], "IPC, {extra:?}: {cell}");
                }
                assert!(
                    cell["min_gap_m"].as_f64().is_some_and(|g| g > 0.0),
                    "{cell}"
                );
            }
        }
    }

    /// A ball thrown away from the wall came closest where it started.
    #[test]
    fn a_ball_thrown_away_is_missed_at_its_starting_gap() {
        let a = args(&["--v0", "-1,-5", "--steps", "20"]);
        let rows = run_throws(&a).expect("runs");
        for row in &rows {
            for outcome in row.penalty.iter().map(|(_, o)| o).chain([&row.ipc]) {
                match outcome {
                    Outcome::Missed { gap, .. } => {
                        assert!((gap - a.wall).abs() < 1e-12, "v0 {}: {gap}", row.v0)
                    }
                    other => panic!("v0 {}: {other:?}", row.v0),
                }
            }
        }
    }

    #[test]
    fn out_of_range_options_are_named_with_their_value() {
        let many_k = vec!["1e4"; 66].join(",");
        for (extra, option, value) in [
            (vec!["--v0", "1e300"], "--v0", "1e300"),
            (vec!["--v0", "1,-2e6"], "--v0", "-2e6"),
            (vec!["--thickness", "1e10"], "--thickness", "1e10"),
            (vec!["--wall", "-1e7"], "--wall", "-1e7"),
            (vec!["--wall", "-0.01"], "--wall", "-0.01"),
            (vec!["--wall", "1e-100"], "--wall", "from 1e-100 to 0.02 m"),
            (vec!["--wall", "5e-324"], "--wall", "from 5e-324 to 0.02 m"),
            (vec!["--k", many_k.as_str()], "--k", "66"),
            (vec!["--h", "-1e300"], "--h", "-1e300"),
            (vec!["--h", "11"], "--h", "11"),
            (vec!["--h", "0"], "--h", "from 1e-6 s to 10 s"),
            (vec!["--h", "NaN"], "--h", "got NaN"),
            (
                vec!["--dhat", "1e7"],
                "--dhat",
                "between 1e-9 m and 1 m, got 1e7 m",
            ),
            (vec!["--dhat", "1e200"], "--dhat", "got 1e200 m"),
            (vec!["--dhat", "1e-20"], "--dhat", "got 1e-20 m"),
            (vec!["--dhat", "-1"], "--dhat", "got -1 m"),
            (
                vec!["--k", "1e4,1e300"],
                "--k",
                "at most 1e12 N/m, got 1e300 N/m",
            ),
            (
                vec!["--kappa", "1e300"],
                "--kappa",
                "at most 1e12, got 1e300",
            ),
            (vec!["--kappa", "0"], "--kappa", "got 0"),
        ] {
            let message =
                run_throws(&args(&extra)).map_or_else(|e| e.to_string(), |_| "accepted".into());
            assert!(
                message.starts_with(&format!("invalid {option}:")) && message.contains(value),
                "{extra:?}: {message}"
            );
            assert!(message.len() < 240, "{extra:?}: {message}");
        }
    }

    #[test]
    fn a_throw_reports_its_progress_in_lane_steps_and_the_same_rows() {
        // At 0 m/s every lane steps to the end; at 50 m/s both penalty lanes stop early, when the ball goes
        // through, and count in full.
        let a = args(&["--v0", "0,50", "--steps", "600"]);
        let mut seen = Vec::new();
        let with = run_throws_with(&a, |done| seen.push(done)).map_err(|e| e.to_string());
        assert_eq!(
            seen.last(),
            Some(&3600),
            "two speeds, three lanes, 600 steps"
        );
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
        assert!(seen.len() >= 6 + 2 * 3, "{seen:?}");
        assert_eq!(with, run_throws(&a).map_err(|e| e.to_string()));
        assert!(
            matches!(
                with.as_deref().map(|r| &r[1].penalty[0].1),
                Ok(Outcome::Through { .. })
            ),
            "{with:?}"
        );
    }

    /// "through" rows used to leave out max_newton and mean_newton that "stopped" rows have.
    #[test]
    fn json_rows_of_a_kind_have_the_same_keys_whatever_the_outcome() {
        let a = args(&["--v0", "0,1,50", "--steps", "80"]);
        let rows = run_throws(&a).map_err(|e| e.to_string());
        let json = format_json(&a, rows.as_deref().unwrap_or_default());
        let keys = |cell: &Value| {
            let mut keys: Vec<String> = cell
                .as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            keys.sort();
            keys
        };
        let rows = json["rows"].as_array().cloned().unwrap_or_default();
        assert_eq!(rows.len(), 3);
        let outcomes: Vec<&Value> = rows.iter().map(|r| &r["penalty"][0]["outcome"]).collect();
        assert_eq!(
            outcomes,
            [&json!("stopped"), &json!("stopped"), &json!("through")]
        );
        let reached: Vec<&Value> = rows.iter().map(|r| &r["ipc"]["reached_wall"]).collect();
        assert_eq!(reached, [&json!(false), &json!(true), &json!(true)]);
        for kind in ["penalty", "ipc"] {
            let cells: Vec<Value> = rows
                .iter()
                .map(|r| {
                    let cell = &r[kind];
                    cell.get(0).unwrap_or(cell).clone()
                })
                .collect();
            for cell in &cells {
                assert_eq!(
                    keys(cell),
                    keys(&cells[0]),
                    "{kind}: {cell} vs {}",
                    cells[0]
                );
                assert!(cell.get("max_newton").is_some(), "{cell}");
            }
        }
        // A lane that went through ran its solves up to then, and says how many directions they took.
        assert!(rows[2]["penalty"][0]["max_newton"].as_u64() >= Some(1));
        assert!(rows[2]["penalty"][0]["mean_newton"].as_f64() >= Some(1.0));
        assert!(rows[2]["penalty"][0]["through_step"].as_u64().is_some());
    }

    /// The face the ball meets is exactly where the seed has it, for walls in front of the ball and behind it,
    /// thin and thick (the review's cases, and a sweep); the other face is within three ulps of its place.
    #[test]
    fn the_wall_s_near_face_is_exact_and_the_far_one_within_three_ulps() {
        let ulps_apart = |a: f64, b: f64| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs();
        let mut next = crate::testing::uniform(0xFACE5);
        let mut cases: Vec<(f64, f64)> = vec![
            (0.503, 0.02),
            (2.0, 0.02),
            (0.503, 0.6),
            (0.503, 1.0),
            (0.503, 10.0),
            (-2.02, 0.02),
            (-0.523, 0.02),
            (0.1, 0.02),
        ];
        cases.extend((0..20_000).map(|i| {
            let front = (next() * 20.0 - 10.0) * 10f64.powi((next() * 4.0) as i32 - 2);
            let thickness = 10f64.powi((next() * 6.0) as i32 - 3) * (0.5 + next());
            // Keep the ball at 0 outside the wall.
            let front = if front <= 0.0 && front + thickness >= 0.0 {
                -thickness - 1.0 - i as f64 * 1e-6
            } else {
                front
            };
            (front, thickness)
        }));
        let mut near_exact = 0;
        for &(front, thickness) in &cases {
            let (center, half) = wall_between_faces(front, thickness);
            let (near, lo_or_hi) = if front > 0.0 {
                (front, difference_with_error(center, half))
            } else {
                (front + thickness, difference_with_error(center, -half))
            };
            if lo_or_hi == (near, 0.0) {
                near_exact += 1;
            }
            // Otherwise off by at most the centre's rounding.
            assert!(
                (lo_or_hi.0 - near).abs() + lo_or_hi.1.abs() <= 2.3e-16 * center.abs().max(half),
                "{front} {thickness}: near face {lo_or_hi:?} against {near}"
            );
            let far = if front > 0.0 {
                center + half
            } else {
                center - half
            };
            let seed_far = if front > 0.0 {
                front + thickness
            } else {
                front
            };
            assert!(half > 0.0, "{front} {thickness}");
            assert!(
                ulps_apart(far, seed_far) <= 3 || (far - seed_far).abs() <= 4e-16 * center.abs(),
                "{front} {thickness}: far face {far} against {seed_far}"
            );
        }
        // Walls thinner than their distance from 0 have both halves on the near face's grid: exact. (A wall 10 m
        // thick at 0.503 m cannot be: its centre's ulp is 8 times the front's.)
        for &(front, thickness) in [&cases[..2], &cases[5..8]].concat().iter() {
            let (center, half) = wall_between_faces(front, thickness);
            let (face, error) = if front > 0.0 {
                difference_with_error(center, half)
            } else {
                difference_with_error(center, -half)
            };
            let near = if front > 0.0 {
                front
            } else {
                front + thickness
            };
            assert_eq!((face, error), (near, 0.0), "{front} {thickness}");
        }
        // 17 603 of the 20 008 (the sweep holds walls up to a thousand times thicker than their distance from 0).
        assert!(
            near_exact * 100 >= cases.len() * 85,
            "{near_exact} of {}",
            cases.len()
        );
    }

    #[test]
    fn tiny_and_large_speeds_make_short_names() {
        let a = args(&["--v0", "1e-320,1e6", "--steps", "2"]);
        assert_eq!(a.scene(1e-320).name, "wall throw at 1e-320 m/s");
        let rows = run_throws(&a).map_err(|e| e.to_string());
        assert!(rows.is_ok(), "{rows:?}");
    }
}
