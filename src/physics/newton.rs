//! Newton's method on the incremental potential with the CCD-clamped backtracking line search (SPEC §1.3).
//!
//! Each iteration: gradient `g`, PSD-projected Hessian `H`, direction `Δx = −H⁻¹ g`. Stop when
//! `‖Δx‖∞ < tol` (that direction counts but is not taken) or at the iteration cap. Otherwise `α = 1`; with the
//! barrier, `α = s · t*` where `t*` is the earliest time of impact of `x → x + Δx` over all pairs; then halve `α`
//! while `E(x + αΔx) > E(x)` and `α > 10⁻¹²` (plain decrease, as the seed). A trial with infinite energy is never
//! accepted, so a solve that starts feasible stays feasible.

use glam::DVec2;

use super::ccd::{time_of_impact_ball_ball, time_of_impact_ball_wall};
use super::linear::{LinearWorkspace, solve_newton_direction};
use super::potential::{BlockHessian, ContactModel, ContactSet, IncrementalPotential, Workspace};
use super::stiffness::AdaptiveKappa;

/// The smallest line-search step before the search gives up (SPEC §1.3).
pub const MIN_ALPHA: f64 = 1e-12;

/// Solver controls for one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NewtonSettings {
    /// Stop when `‖Δx‖∞ <` this, in metres.
    pub tolerance: f64,
    /// At most this many Newton directions per step.
    pub max_iterations: u32,
    /// CCD safety factor `s ∈ (0, 1)`: the first trial step is `s · t*`.
    pub ccd_factor: f64,
}

/// Why Newton stopped.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    Converged,
    IterationCap,
    /// No decrease down to `α = 10⁻¹²`, or no feasible trial at all: the last feasible iterate is kept.
    LineSearchStalled,
    LinearSolveFailed(String),
}

/// What one minimisation did.
#[derive(Clone, Debug, PartialEq)]
pub struct NewtonReport {
    /// Newton directions computed, including the one that met the tolerance (the seed's count).
    pub iterations: u32,
    /// The step length accepted at each iteration that moved.
    pub alphas: Vec<f64>,
    pub stop: StopReason,
    /// `κ` at the end of the solve (changes only with adaptive stiffness).
    pub kappa: Option<f64>,
    /// Line searches that ended at `α ≤ 10⁻¹²`.
    pub stalled_line_searches: u32,
}

impl NewtonReport {
    /// The report of a solve that computed no direction (an empty problem).
    pub fn nothing_solved(model: ContactModel) -> NewtonReport {
        NewtonReport {
            iterations: 0,
            alphas: Vec::new(),
            stop: StopReason::Converged,
            kappa: match model {
                ContactModel::Barrier { kappa, .. } => Some(kappa),
                ContactModel::Penalty { .. } => None,
            },
            stalled_line_searches: 0,
        }
    }

    /// Appends a later solve of the same step (a friction lagging pass): counts add, the last stop wins.
    pub fn absorb(&mut self, later: NewtonReport) {
        self.iterations += later.iterations;
        self.alphas.extend(later.alphas);
        self.stalled_line_searches += later.stalled_line_searches;
        self.stop = later.stop;
        self.kappa = later.kappa;
    }
}

/// Buffers reused from step to step.
#[derive(Default, Debug, Clone)]
pub struct NewtonWorkspace {
    pub potential: Workspace,
    contacts: ContactSet,
    trial_contacts: ContactSet,
    gradient: Vec<DVec2>,
    hessian: BlockHessian,
    direction: Vec<DVec2>,
    trial: Vec<DVec2>,
    linear: LinearWorkspace,
    candidates: ContactSet,
    /// When set, every accepted Newton piece `(ball, from, to)` is appended to `pieces` (for tests that check
    /// the path itself, not only its end).
    pub record_pieces: bool,
    pub pieces: Vec<(u32, DVec2, DVec2)>,
}

/// Minimises `potential` starting from `x` (which must be feasible for the barrier), in place.
pub fn minimize(
    potential: &mut IncrementalPotential<'_>,
    x: &mut Vec<DVec2>,
    settings: &NewtonSettings,
    mut adaptive: Option<&mut AdaptiveKappa>,
    ws: &mut NewtonWorkspace,
) -> NewtonReport {
    let mut report = NewtonReport {
        stop: StopReason::IterationCap,
        ..NewtonReport::nothing_solved(potential.model)
    };
    let use_ccd = matches!(potential.model, ContactModel::Barrier { .. });
    let mut previous_min_distance = f64::INFINITY;
    for iteration in 1..=settings.max_iterations {
        if iteration == 1 {
            potential.contacts(x, &mut ws.potential, &mut ws.contacts);
        } else {
            // x lies on the previous segment, so every pair within reach is one of its candidates.
            potential.contacts_among(x, &ws.candidates, &mut ws.contacts);
        }
        potential.gradient_and_hessian(x, &ws.contacts, &mut ws.gradient, &mut ws.hessian);
        report.iterations = iteration;
        if let Err(e) =
            solve_newton_direction(&ws.hessian, &ws.gradient, &mut ws.linear, &mut ws.direction)
        {
            report.stop = StopReason::LinearSolveFailed(e.to_string());
            return report;
        }
        let step_size = ws
            .direction
            .iter()
            .fold(0.0f64, |m, d| m.max(d.x.abs()).max(d.y.abs()));
        if step_size < settings.tolerance {
            report.stop = StopReason::Converged;
            return report;
        }
        if !step_size.is_finite() {
            report.stop = StopReason::LinearSolveFailed("non-finite Newton direction".into());
            return report;
        }
        potential.segment_candidates(x, &ws.direction, &mut ws.potential, &mut ws.candidates);
        let mut alpha = 1.0;
        if use_ccd && let Some(t) = earliest_time_of_impact(potential, x, ws) {
            alpha = settings.ccd_factor * t;
        }
        let e0 = potential.energy_over(x, &ws.candidates);
        let mut e_trial = trial_energy(potential, x, alpha, ws);
        while e_trial > e0 && alpha > MIN_ALPHA {
            alpha *= 0.5;
            e_trial = trial_energy(potential, x, alpha, ws);
        }
        if !e_trial.is_finite() {
            report.stop = StopReason::LineSearchStalled;
            report.stalled_line_searches += 1;
            return report;
        }
        if alpha <= MIN_ALPHA {
            report.stalled_line_searches += 1;
        }
        std::mem::swap(x, &mut ws.trial);
        if ws.record_pieces {
            for (i, (from, to)) in ws.trial.iter().zip(x.iter()).enumerate() {
                if from != to {
                    ws.pieces.push((i as u32, *from, *to));
                }
            }
        }
        report.alphas.push(alpha);
        if let (Some(adaptive), ContactModel::Barrier { kappa, dhat }) =
            (adaptive.as_deref_mut(), potential.model)
        {
            let min_distance = min_contact_distance(potential, x, ws);
            let updated = adaptive.update(previous_min_distance, min_distance, kappa);
            potential.model = ContactModel::Barrier {
                dhat,
                kappa: updated,
            };
            report.kappa = Some(updated);
            previous_min_distance = min_distance;
        }
    }
    report
}

fn trial_energy(
    potential: &IncrementalPotential<'_>,
    x: &[DVec2],
    alpha: f64,
    ws: &mut NewtonWorkspace,
) -> f64 {
    ws.trial.clear();
    ws.trial
        .extend(x.iter().zip(&ws.direction).map(|(x, d)| *x + *d * alpha));
    potential.energy(&ws.trial, &mut ws.potential, &mut ws.trial_contacts)
}

/// Earliest `t* ∈ [0, 1]` over all ball–wall and ball–ball pairs for the motion `x → x + Δx`; only the
/// segment candidates can touch.
fn earliest_time_of_impact(
    potential: &IncrementalPotential<'_>,
    x: &[DVec2],
    ws: &NewtonWorkspace,
) -> Option<f64> {
    let mut earliest: Option<f64> = None;
    let mut keep = |t: Option<f64>| {
        if let Some(t) = t
            && earliest.is_none_or(|e| t < e)
        {
            earliest = Some(t);
        }
    };
    for &(i, k) in &ws.candidates.ball_wall {
        let i = i as usize;
        let d = ws.direction[i];
        if d != DVec2::ZERO {
            keep(time_of_impact_ball_wall(
                x[i],
                d,
                potential.radius[i],
                &potential.walls[k as usize],
            ));
        }
    }
    for &(i, j) in &ws.candidates.ball_ball {
        let (i, j) = (i as usize, j as usize);
        keep(time_of_impact_ball_ball(
            x[i],
            ws.direction[i],
            potential.radius[i],
            x[j],
            ws.direction[j],
            potential.radius[j],
        ));
    }
    earliest
}

fn min_contact_distance(
    potential: &IncrementalPotential<'_>,
    x: &[DVec2],
    ws: &mut NewtonWorkspace,
) -> f64 {
    potential.contacts(x, &mut ws.potential, &mut ws.trial_contacts);
    let mut min = f64::INFINITY;
    for &(i, k) in &ws.trial_contacts.ball_wall {
        let i = i as usize;
        min = min.min(super::geometry::ball_wall_gap(
            x[i],
            potential.radius[i],
            &potential.walls[k as usize],
        ));
    }
    for &(i, j) in &ws.trial_contacts.ball_ball {
        let (i, j) = (i as usize, j as usize);
        min = min.min((x[i] - x[j]).length() - potential.radius[i] - potential.radius[j]);
    }
    min
}
