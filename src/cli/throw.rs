//! `contact-sandbox throw`: the seed's wall experiment (SPEC §2), run by the general 2D solver.
//!
//! For every `v0` it builds a [`Scene`] with one penalty lane per `k` and one IPC lane, each holding a point
//! ball at the origin moving at `v0` toward a wall whose front face is at `--wall`, and steps the lanes.

use anyhow::{Result, bail};
use glam::DVec2;
use serde_json::{Value, json};

use crate::physics::world::{ContactMethod, ContactSettings, LaneWorld};
use crate::scene::{BallSpec, LaneSpec, Scene, WallSpec};

use super::compact_number;

/// Arguments of `contact-sandbox throw` (defaults are the seed's experiment).
#[derive(clap::Args, Debug, Clone)]
pub struct ThrowArgs {
    /// Throw speeds [m/s], comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,5,10,20,50",
        allow_hyphen_values = true
    )]
    pub v0: Vec<f64>,
    /// Penalty stiffnesses k [N/m], comma separated; one penalty lane each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1e4,1e6",
        allow_hyphen_values = true
    )]
    pub k: Vec<f64>,
    /// Time step h [s].
    #[arg(long, default_value_t = 0.01, allow_hyphen_values = true)]
    pub h: f64,
    /// Barrier activation distance d̂ [m].
    #[arg(long, default_value_t = 1e-3, allow_hyphen_values = true)]
    pub dhat: f64,
    /// Barrier stiffness κ.
    #[arg(long, default_value_t = 1e4, allow_hyphen_values = true)]
    pub kappa: f64,
    /// Position of the wall's front face [m].
    #[arg(long, default_value_t = 0.503, allow_hyphen_values = true)]
    pub wall: f64,
    /// Wall thickness [m].
    #[arg(long, default_value_t = 0.02, allow_hyphen_values = true)]
    pub thickness: f64,
    /// Ball mass [kg].
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true)]
    pub mass: f64,
    /// Number of steps.
    #[arg(long, default_value_t = 80)]
    pub steps: u64,
    /// CCD safety factor s in (0, 1).
    #[arg(long = "ccd-factor", default_value_t = 0.9, allow_hyphen_values = true)]
    pub ccd_factor: f64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
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
    },
    /// Ended a step beyond the back face.
    Through { step: u64 },
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

impl ThrowArgs {
    /// Checks every parameter; the error names it (SPEC §2).
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("--h", self.h),
            ("--dhat", self.dhat),
            ("--kappa", self.kappa),
            ("--mass", self.mass),
            ("--thickness", self.thickness),
        ];
        for (name, value) in positive {
            if !value.is_finite() || value <= 0.0 {
                bail!("invalid {name}: must be a finite number > 0, got {value}");
            }
        }
        if !self.wall.is_finite() {
            bail!("invalid --wall: must be a finite number, got {}", self.wall);
        }
        if !(self.ccd_factor > 0.0 && self.ccd_factor < 1.0) {
            bail!(
                "invalid --ccd-factor: must be in (0, 1), got {}",
                self.ccd_factor
            );
        }
        for &k in &self.k {
            if !k.is_finite() || k <= 0.0 {
                bail!("invalid --k: every stiffness must be a finite number > 0, got {k}");
            }
        }
        for &v in &self.v0 {
            if !v.is_finite() {
                bail!("invalid --v0: every speed must be a finite number, got {v}");
            }
        }
        if self.v0.is_empty() {
            bail!("invalid --v0: give at least one speed");
        }
        if self.steps == 0 || self.steps > 10_000_000 {
            bail!(
                "invalid --steps: must be between 1 and 10000000, got {}",
                self.steps
            );
        }
        Ok(())
    }

    /// The scene for one throw speed: penalty lanes (one per `k`), then the IPC lane.
    pub fn scene(&self, v0: f64) -> Scene {
        let settings = ContactSettings {
            h: self.h,
            gravity: DVec2::ZERO,
            newton_tolerance: 1e-10,
            newton_max_iterations: 59,
            ccd_factor: self.ccd_factor,
            ..ContactSettings::default()
        };
        let half = self.thickness * 0.5;
        let wall = WallSpec {
            center: DVec2::new(self.wall + half, 0.0),
            half_extents: DVec2::new(half, 1.0),
            angle: 0.0,
        };
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
            name: format!("wall throw at {v0} m/s"),
            description: "SPEC §2: a point ball thrown at a 20 mm wall".into(),
            steps: Some(self.steps),
            lanes,
        }
    }
}

/// Steps a lane until the step budget runs out or its ball goes through (as the seed's `throw` returns).
pub fn run_lane(lane: &mut LaneWorld, steps: u64) -> Outcome {
    for _ in 0..steps {
        if lane.step().is_none() {
            return Outcome::Failed {
                reason: lane
                    .fault
                    .clone()
                    .unwrap_or_else(|| "the lane stopped".into()),
            };
        }
        if let Some(step) = lane.stats.first_tunnel_step {
            return Outcome::Through { step };
        }
    }
    Outcome::Stopped {
        depth: lane.stats.max_penetration,
        gap: lane.stats.min_gap.unwrap_or(f64::INFINITY),
        max_newton: lane.stats.max_newton,
        mean_newton: lane.stats.mean_newton(),
    }
}

/// Runs the whole experiment.
pub fn run_throws(args: &ThrowArgs) -> Result<Vec<ThrowRow>> {
    args.validate()?;
    let mut rows = Vec::with_capacity(args.v0.len());
    for &v0 in &args.v0 {
        let scene = args.scene(v0);
        scene.validate("throw").map_err(anyhow::Error::msg)?;
        let mut lanes = scene.build();
        let mut outcomes: Vec<Outcome> = lanes
            .iter_mut()
            .map(|lane| run_lane(lane, args.steps))
            .collect();
        let ipc = outcomes.pop().unwrap_or(Outcome::Failed {
            reason: "no IPC lane".into(),
        });
        let penalty = args.k.iter().copied().zip(outcomes).collect();
        rows.push(ThrowRow { v0, penalty, ipc });
    }
    Ok(rows)
}

/// The seed's table, line for line.
pub fn format_table(args: &ThrowArgs, rows: &[ThrowRow]) -> String {
    let mut out = format!(
        "wall at {} m, thickness {} mm, h = {} ms\n",
        args.wall,
        compact_number(args.thickness * 1000.0),
        compact_number(args.h * 1000.0)
    );
    let mut header = String::from(" v0[m/s] | ");
    for &k in &args.k {
        header.push_str(&format!("{:13} | ", format!("pen k={}", compact_number(k))));
    }
    header.push_str(&format!("IPC d^={}mm", compact_number(args.dhat * 1000.0)));
    out.push_str(&header);
    out.push('\n');
    for row in rows {
        let v0 = if row.v0.fract() == 0.0 {
            format!("{:7.0}", row.v0)
        } else {
            format!("{:>7}", compact_number(row.v0))
        };
        let mut cells: Vec<String> = row
            .penalty
            .iter()
            .map(|(_, outcome)| match outcome {
                Outcome::Stopped { depth, .. } => format!("stop {:5.2} mm", depth * 1000.0),
                Outcome::Through { .. } => format!("{:13}", "through"),
                Outcome::Failed { .. } => format!("{:13}", "failed"),
            })
            .collect();
        cells.push(match &row.ipc {
            Outcome::Stopped {
                gap, max_newton, ..
            } => {
                format!("gap {:6.1} um, newton {:2}", gap * 1e6, max_newton)
            }
            Outcome::Through { .. } => "through".into(),
            Outcome::Failed { reason } => format!("failed: {reason}"),
        });
        out.push_str(&format!(" {v0} | {}\n", cells.join(" | ")));
    }
    out
}

fn outcome_json(outcome: &Outcome, penalty: bool) -> Value {
    match outcome {
        Outcome::Stopped {
            depth,
            gap,
            max_newton,
            mean_newton,
        } => {
            if penalty {
                json!({"outcome": "stopped", "depth_m": depth, "min_gap_m": gap,
                       "max_newton": max_newton, "mean_newton": mean_newton})
            } else {
                json!({"outcome": "stopped", "gap_m": gap, "max_newton": max_newton,
                       "mean_newton": mean_newton, "depth_m": depth})
            }
        }
        Outcome::Through { step } => {
            if penalty {
                json!({"outcome": "through", "depth_m": null, "through_step": step})
            } else {
                json!({"outcome": "through", "gap_m": null, "max_newton": null, "through_step": step})
            }
        }
        Outcome::Failed { reason } => {
            json!({"outcome": "failed", "depth_m": null, "gap_m": null, "error": reason})
        }
    }
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
        },
        "rows": rows,
    })
}

/// Entry point of the subcommand.
pub fn run_throw(args: &ThrowArgs) -> Result<()> {
    let rows = run_throws(args)?;
    if args.json {
        println!("{}", format_json(args, &rows));
    } else {
        print!("{}", format_table(args, &rows));
    }
    Ok(())
}
