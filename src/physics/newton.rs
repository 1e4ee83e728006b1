//! Newton's method on the incremental potential with the CCD-clamped backtracking line search (SPEC §1.3).
//!
//! Each iteration: gradient `g`, Hessian `H` (the exact one while it is positive definite, else contacts
//! projected as IPC does, ball–ball blocks down to a share of the mass, until that fallback converges only
//! linearly), direction `Δx = −H⁻¹ g`. Stop when `‖Δx‖∞ < tol` (that direction counts but is not taken; with the
//! barrier, only once it also changes no contact's gap by a tenth of that gap, [`SETTLED_GAP_CHANGE`], or no
//! representable step is left) or at the iteration cap. Otherwise `α = 1`; with the barrier, `α = s · t*` where
//! `t*` is the earliest time of impact of `x → x + Δx` over all pairs; then halve `α` while `E(x + αΔx) > E(x)` and
//! `α > 10⁻¹²` (plain decrease, as the seed). A trial with infinite energy is never accepted, so a solve that
//! starts feasible stays feasible.
//!
//! Pairs come from one Verlet list per solve (a broad-phase query with each ball's skin covering its predicted
//! motion). When a Newton segment leaves a few skins they are widened in place, when it leaves many the list is
//! rebuilt, and a list far larger than the segments need is rebuilt tighter; the CCD, the line search and the
//! next iteration's contacts all filter the segment's candidates out of it, so they see the same pairs in the
//! same order whichever list holds them.

use std::time::Instant;

use glam::DVec2;

use super::ccd::{time_of_impact_ball_ball_within, time_of_impact_ball_wall_within};
use super::linear::{LinearSolveError, LinearWorkspace, solve_newton_direction};
use super::potential::{
    BlockHessian, CandidateGaps, ContactModel, ContactSet, IncrementalPotential, VerletList,
    Workspace,
};
use super::stiffness::AdaptiveKappa;
use super::union_find::UnionFind;

/// Share `β` of the mass matrix that the negative curvature kept by the fallback Hessian may take away
/// ([`IncrementalPotential::gradient_and_hessian_mass_floored`]); `H ⪰ (1 − β) M`.
pub const MASS_FLOOR_SHARE: f64 = 0.9;

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
    /// Times the solve left the projected fallback Hessian for the exact one again (see [`SLOW_CONVERGENCE`]).
    pub exact_retries: u32,
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
            exact_retries: 0,
        }
    }

    /// Appends a later solve of the same step (a friction lagging pass): counts add, the last stop wins.
    pub fn absorb(&mut self, later: NewtonReport) {
        self.iterations += later.iterations;
        self.alphas.extend(later.alphas);
        self.stalled_line_searches += later.stalled_line_searches;
        self.exact_retries += later.exact_retries;
        self.stop = later.stop;
        self.kappa = later.kappa;
    }
}

/// Wall-clock time spent in each phase of the Newton solves, accumulated over the workspace's life [s]
/// (for `bench`'s profile; reading the clock does not change any result).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseTimes {
    /// Verlet lists (grid broad phase) and each segment's candidate pairs.
    pub broad_phase: f64,
    /// Contact sets: the candidate pairs within reach at the iterate.
    pub contacts: f64,
    /// Gradient and Hessian assembly.
    pub assembly: f64,
    /// Linear solves: pattern analysis, factorisation, substitution.
    pub linear_solve: f64,
    /// Time of impact over the candidate pairs.
    pub ccd: f64,
    /// Energy evaluations of the backtracking line search.
    pub line_search: f64,
    /// Everything inside the Newton loop (the phases above and the rest).
    pub newton_total: f64,
}

/// Buffers reused from step to step.
#[derive(Default, Debug, Clone)]
pub struct NewtonWorkspace {
    /// Time per phase, accumulated.
    pub times: PhaseTimes,
    pub potential: Workspace,
    contacts: ContactSet,
    trial_contacts: ContactSet,
    gradient: Vec<DVec2>,
    hessian: BlockHessian,
    direction: Vec<DVec2>,
    /// The last Newton direction before its step lengths.
    full_direction: Vec<DVec2>,
    trial: Vec<DVec2>,
    pub linear: LinearWorkspace,
    candidates: ContactSet,
    /// The candidates' distances and barrier logarithms at the current iterate, which the line search recorded
    /// at the point it took (valid when `gaps_valid`: from the line search's end until the candidates change).
    gaps: CandidateGaps,
    gaps_valid: bool,
    /// The same at the line search's latest trial point.
    trial_gaps: CandidateGaps,
    /// Each contact's barrier logarithm, when the contacts came from `gaps`.
    contact_logs: Vec<f64>,
    verlet: VerletList,
    skin: Vec<f64>,
    uncovered: Vec<u32>,
    /// The list's size after its last tightening in this solve (0: not tightened).
    tightened_pairs: usize,
    widened: Vec<(u32, f64)>,
    seed_pairs: Vec<(u32, u32)>,
    /// Contact groups of the current iterate: the sets, each ball's group (its root), sizes and step lengths.
    sets: UnionFind,
    group: Vec<u32>,
    group_size: Vec<u32>,
    group_length: Vec<f64>,
    /// The last direction's collisions on its full segment (`t` of first contact), and the segment candidates
    /// between two contact groups.
    wall_hits: Vec<(u32, f64)>,
    pair_hits: Vec<(u32, u32, f64)>,
    between: Vec<(u32, u32)>,
    /// When set, every accepted Newton piece `(ball, from, to)` is appended to `pieces` (for tests that check
    /// the path itself, not only its end).
    pub record_pieces: bool,
    pub pieces: Vec<(u32, DVec2, DVec2)>,
    /// Each ball's path over the solves since the caller last set it: the corners (least, greatest) of the box
    /// that holds every iterate it took (kept by IPC solves only; the caller starts it at the step's start, one
    /// entry a ball). The lane's tunnelling counter tells from it a ball that went round a wall's end within a
    /// step from one that went through.
    pub path_extent: Vec<(DVec2, DVec2)>,
    /// When set, the projected fallback Hessian is kept for the rest of a solve once taken (the behaviour
    /// before [`SLOW_CONVERGENCE`]; for comparisons in tests and measurements).
    pub keep_fallback: bool,
}

/// Minimises `potential` starting from `x` (which must be feasible for the barrier), in place.
pub fn minimize(
    potential: &mut IncrementalPotential<'_>,
    x: &mut Vec<DVec2>,
    settings: &NewtonSettings,
    adaptive: Option<&mut AdaptiveKappa>,
    ws: &mut NewtonWorkspace,
) -> NewtonReport {
    let report = NewtonReport {
        stop: StopReason::IterationCap,
        ..NewtonReport::nothing_solved(potential.model)
    };
    let started = Instant::now();
    let clock = Instant::now();
    build_verlet_list(potential, x, Skins::Predicted, ws);
    ws.tightened_pairs = 0;
    potential.predicted_pairs(x, &ws.verlet, &mut ws.seed_pairs);
    if let Some((friction, _)) = potential.friction {
        ws.seed_pairs.extend(
            friction
                .contacts
                .iter()
                .filter_map(|c| c.j.map(|j| (c.i.min(j), c.i.max(j)))),
        );
    }
    ws.times.broad_phase += clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    ws.linear.reset_pattern(x.len(), &ws.seed_pairs);
    ws.times.linear_solve += clock.elapsed().as_secs_f64();
    let report = newton_loop(potential, x, settings, adaptive, ws, report);
    ws.times.newton_total += started.elapsed().as_secs_f64();
    report
}

/// The iterations of [`minimize`] after its set-up.
fn newton_loop(
    potential: &mut IncrementalPotential<'_>,
    x: &mut Vec<DVec2>,
    settings: &NewtonSettings,
    mut adaptive: Option<&mut AdaptiveKappa>,
    ws: &mut NewtonWorkspace,
    mut report: NewtonReport,
) -> NewtonReport {
    let mut project = false;
    let use_ccd = matches!(potential.model, ContactModel::Barrier { .. });
    let mut previous_min_distance = f64::INFINITY;
    // The previous iteration's step: taken in full (every group at length 1, no backtracking), and its size.
    let mut previous_full = false;
    let mut previous_size = f64::INFINITY;
    // E(x) when known (the last accepted trial's energy, under the same κ).
    let mut last_energy: Option<f64> = None;
    ws.gaps_valid = false;
    for iteration in 1..=settings.max_iterations {
        let clock = Instant::now();
        // Whether `contact_logs` holds each contact's barrier logarithm.
        let mut have_logs = false;
        if iteration == 1 {
            // x is the list's reference, so every pair within reach is in it.
            potential.contacts_among(x, &ws.verlet.pairs, &mut ws.contacts);
        } else if ws.gaps_valid {
            // x is the line search's last trial point, whose candidates' distances it kept.
            potential.contacts_from_gaps(
                &ws.candidates,
                &ws.gaps,
                &mut ws.contacts,
                &mut ws.contact_logs,
            );
            have_logs = true;
            debug_assert!(
                {
                    let mut fresh = ContactSet::default();
                    potential.contacts_among(x, &ws.candidates, &mut fresh);
                    fresh.ball_wall == ws.contacts.ball_wall
                        && fresh.ball_ball == ws.contacts.ball_ball
                },
                "the kept distances are not the iterate's"
            );
        } else {
            // Not reached while every iteration that goes on ends on the line search (which keeps the gaps);
            // kept so that one which did not would still be right. x lies on the previous segment, so every
            // pair within reach is one of its candidates.
            potential.contacts_among(x, &ws.candidates, &mut ws.contacts);
        }
        ws.times.contacts += clock.elapsed().as_secs_f64();
        report.iterations = iteration;
        // The exact Hessian first: where it is positive definite its direction descends and converges
        // quadratically. Projecting each contact to PSD drops the negative tangential curvature `φ'/|p|` of
        // every loaded ball–ball contact, which in a pile leaves Newton converging only linearly. When the
        // exact system is not positive definite, fall back to the projected Hessian (SPEC §1), as PolyFEM falls
        // back from Newton to projected Newton, here with each ball–ball block's negative curvature clamped at
        // its share of the mass instead of at 0, which keeps H positive definite; the fallback lasts until it
        // converges only linearly (below).
        anticipate_couplings(potential, x, iteration, ws);
        let mut solved = Err(LinearSolveError::Cholesky(String::new()));
        if !project {
            let clock = Instant::now();
            potential.gradient_and_hessian_projected(
                x,
                &ws.contacts,
                have_logs.then_some(ws.contact_logs.as_slice()),
                &mut ws.gradient,
                &mut ws.hessian,
                false,
            );
            ws.times.assembly += clock.elapsed().as_secs_f64();
            let clock = Instant::now();
            solved = solve_newton_direction(
                &ws.hessian,
                &ws.gradient,
                &mut ws.linear,
                &mut ws.direction,
            );
            ws.times.linear_solve += clock.elapsed().as_secs_f64();
            project = solved.is_err();
        }
        if project {
            let clock = Instant::now();
            potential.gradient_and_hessian_mass_floored(
                x,
                &ws.contacts,
                have_logs.then_some(ws.contact_logs.as_slice()),
                &mut ws.gradient,
                &mut ws.hessian,
                MASS_FLOOR_SHARE,
            );
            ws.times.assembly += clock.elapsed().as_secs_f64();
            let clock = Instant::now();
            solved = solve_newton_direction(
                &ws.hessian,
                &ws.gradient,
                &mut ws.linear,
                &mut ws.direction,
            );
            ws.times.linear_solve += clock.elapsed().as_secs_f64();
        }
        if let Err(e) = solved {
            report.stop = StopReason::LinearSolveFailed(e.to_string());
            return report;
        }
        // A NaN component makes the size infinite (`f64::max` would drop it, and an all-NaN direction would pass
        // for a converged one).
        let step_size = ws.direction.iter().fold(0.0f64, |m, d| {
            if d.is_nan() {
                f64::INFINITY
            } else {
                m.max(d.x.abs()).max(d.y.abs())
            }
        });
        if !step_size.is_finite() {
            report.stop = StopReason::LinearSolveFailed("non-finite Newton direction".into());
            return report;
        }
        // A direction below the tolerance has converged only if it is also small beside the gaps it moves: with
        // contacts closer than the tolerance itself (a d̂ of 1 µm or less), a direction of 10⁻¹⁰ m can still
        // double a gap, and stopping there left a ball glued to a wall under an unbalanced barrier force. Gaps
        // below the CCD's smallest separation are not pursued.
        let below_tolerance = step_size < settings.tolerance;
        if below_tolerance
            && (!use_ccd
                || potential.largest_relative_gap_change(
                    x,
                    &ws.contacts,
                    &ws.direction,
                    min_separation(potential),
                ) < SETTLED_GAP_CHANGE)
        {
            report.stop = StopReason::Converged;
            return report;
        }
        let clock = Instant::now();
        if !ws
            .verlet
            .uncovered(x, &ws.direction, MAX_WIDENED_SKINS, &mut ws.uncovered)
        {
            build_verlet_list(potential, x, Skins::Forced, ws);
        } else if !ws.uncovered.is_empty() {
            widen_skins(potential, x, ws);
        }
        potential.segment_candidates_among(
            x,
            &ws.direction,
            &ws.verlet,
            &mut ws.potential,
            &mut ws.candidates,
        );
        // The kept gaps were the old candidates'; the line search below records the new ones'.
        ws.gaps_valid = false;
        let listed = ws.verlet.pairs.ball_ball.len();
        if listed >= TIGHTEN_MIN_PAIRS
            && listed > TIGHTEN_RATIO * ws.candidates.ball_ball.len()
            && listed > 2 * ws.tightened_pairs
        {
            // The candidates stay the same pairs in the same order: a list built around x covers the segment.
            build_verlet_list(potential, x, Skins::Tight, ws);
            // A list that stays large after tightening (balls moving together in one island, few candidates
            // among them) is tightened again only once it has doubled.
            ws.tightened_pairs = ws.verlet.pairs.ball_ball.len();
        }
        ws.times.broad_phase += clock.elapsed().as_secs_f64();
        // Kept for the next iteration's anticipated couplings (the group lengths scale `direction` in place).
        ws.full_direction.clear();
        ws.full_direction.extend_from_slice(&ws.direction);
        let clock = Instant::now();
        let mut alpha = 1.0;
        // With a length per contact group, the shortest of them (the direction itself is scaled).
        let mut shortest_length = 1.0;
        if use_ccd && let Some(t) = earliest_time_of_impact(potential, x, ws) {
            alpha = settings.ccd_factor * t;
            if let Some(shortest) =
                scale_direction_by_contact_group(potential, x, settings.ccd_factor, alpha, ws)
            {
                alpha = 1.0;
                shortest_length = shortest;
            }
        }
        ws.times.ccd += clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        // The energy at x is the one accepted last iteration: every pair within reach at x is a candidate of
        // both segments, in the same (sorted) order, and the others add exact zeros, so it is the same sum.
        let e0 = match last_energy {
            Some(e) => {
                debug_assert_eq!(
                    e.to_bits(),
                    potential.energy_over(x, &ws.candidates).to_bits()
                );
                e
            }
            None => potential.energy_over(x, &ws.candidates),
        };
        let mut e_trial = trial_energy(potential, x, alpha, ws);
        let backtracked = e_trial > e0;
        while e_trial > e0 && alpha > MIN_ALPHA {
            alpha *= 0.5;
            e_trial = trial_energy(potential, x, alpha, ws);
        }
        ws.times.line_search += clock.elapsed().as_secs_f64();
        if !e_trial.is_finite() {
            report.stop = StopReason::LineSearchStalled;
            report.stalled_line_searches += 1;
            return report;
        }
        if alpha <= MIN_ALPHA {
            report.stalled_line_searches += 1;
        }
        std::mem::swap(x, &mut ws.trial);
        // The last trial is the point taken.
        std::mem::swap(&mut ws.gaps, &mut ws.trial_gaps);
        ws.gaps_valid = true;
        if use_ccd && ws.path_extent.len() == x.len() {
            for (extent, p) in ws.path_extent.iter_mut().zip(x.iter()) {
                *extent = (extent.0.min(*p), extent.1.max(*p));
            }
        }
        // Beside a gap finer than a position resolves (a d̂ of a nanometre), the gap rule above can keep a direction
        // below the tolerance that no representable step takes: the line search then accepts x itself (its
        // energy does not rise), and every later iteration would repeat it up to the cap. Nothing representable
        // is left to do.
        if below_tolerance && *x == ws.trial {
            report.stop = StopReason::Converged;
            return report;
        }
        // A line search that had to backtrack and then found an energy equal to E(x) to the last bit, and none
        // lower, before α reached its floor, has met the energy's rounding: the direction descends (H is positive
        // definite, and each contact group's part is scaled by a positive length), but by less than E resolves.
        // Every later direction would be the same, taken as short (a resting 10-ball pit took a direction of
        // 1.1·10⁻¹⁰ m, just above the seed's tolerance, 48 times at α = 6·10⁻⁸ until the cap). The solve ends
        // below, once this step is recorded and unless adaptive stiffness changed κ.
        let at_rounding = backtracked && e_trial == e0 && alpha > MIN_ALPHA;
        last_energy = Some(e_trial);
        if ws.record_pieces {
            for (i, (from, to)) in ws.trial.iter().zip(x.iter()).enumerate() {
                if from != to {
                    ws.pieces.push((i as u32, *from, *to));
                }
            }
        }
        report.alphas.push(alpha * shortest_length);
        // Back to the exact Hessian once the fallback crawls: two full steps in a row and a direction that
        // shrank by less than half, the fallback's linear convergence. Near a stable minimiser the exact Hessian
        // is positive definite again, and its quadratic convergence ends the tail; if it is not, the next
        // iteration falls back as before (one factorisation lost).
        let full = alpha * shortest_length == 1.0;
        if project
            && !ws.keep_fallback
            && full
            && previous_full
            && step_size > SLOW_CONVERGENCE * previous_size
        {
            project = false;
            report.exact_retries += 1;
        }
        previous_full = full;
        previous_size = step_size;
        let mut kappa_changed = false;
        if let (Some(adaptive), ContactModel::Barrier { kappa, dhat }) =
            (adaptive.as_deref_mut(), potential.model)
        {
            let min_distance = min_contact_distance(potential, x, ws);
            let updated = adaptive.update(previous_min_distance, min_distance, kappa);
            kappa_changed = updated != kappa;
            potential.model = ContactModel::Barrier {
                dhat,
                kappa: updated,
            };
            report.kappa = Some(updated);
            last_energy = None;
            previous_min_distance = min_distance;
        }
        if at_rounding && !kappa_changed {
            report.stop = StopReason::Converged;
            return report;
        }
    }
    report
}

/// The largest share of a contact's distance that a direction below the tolerance may still change it by
/// for the solve to stop (see [`minimize`]); contacts closer than the CCD's smallest separation are left out.
pub const SETTLED_GAP_CHANGE: f64 = 0.1;

/// A full Newton step whose direction is still more than this share of the previous full step's is converging
/// only linearly, so the exact Hessian is tried again (see [`newton_loop`]).
const SLOW_CONVERGENCE: f64 = 0.5;

/// Multiple of the reach `d̂` within which a segment candidate pair is expected to couple soon.
const ANTICIPATION_REACHES: f64 = 3.0;

/// Multiple of a pair's planned relative motion (the last full Newton direction) added to that allowance: a
/// pair that the plan brings together is expected to couple too, even while the step is still clamped short.
const ANTICIPATION_MOTIONS: f64 = 3.0;

/// Tells the linear solver which pairs will likely couple in the next iterations: the last segment's candidate
/// pairs already within [`ANTICIPATION_REACHES`] `× d̂` plus [`ANTICIPATION_MOTIONS`] × their planned relative
/// motion. When a new coupling forces the sparsity pattern to grow (a new ordering and symbolic analysis),
/// these join it at the same time, so a landing pile needs fewer analyses per step; pairs that never couple only
/// hold zero blocks.
fn anticipate_couplings(
    potential: &IncrementalPotential<'_>,
    x: &[DVec2],
    iteration: u32,
    ws: &mut NewtonWorkspace,
) {
    let anticipated = &mut ws.linear.anticipated;
    anticipated.clear();
    if iteration == 1 {
        // The candidates are the previous solve's (another island's numbering).
        return;
    }
    let within = ANTICIPATION_REACHES * potential.model.reach();
    let r = potential.radius;
    let plan = &ws.full_direction;
    // The distances at x, where the line search kept them.
    let kept = ws
        .gaps_valid
        .then(|| &ws.gaps.distance[ws.candidates.ball_wall.len()..]);
    // A plain loop: as an iterator adapter the test was called out of line for every pair, every direction.
    for (q, &(i, j)) in ws.candidates.ball_ball.iter().enumerate() {
        let (iu, ju) = (i as usize, j as usize);
        let allowance = within + ANTICIPATION_MOTIONS * (plan[iu] - plan[ju]).length();
        let d = match kept {
            Some(kept) => kept[q],
            None => (x[iu] - x[ju]).length() - r[iu] - r[ju],
        };
        if d < allowance {
            anticipated.push((i.min(j), i.max(j)));
        }
    }
}

/// `E(x + α Δx)`, leaving the trial point in `ws.trial`.
fn trial_energy(
    potential: &IncrementalPotential<'_>,
    x: &[DVec2],
    alpha: f64,
    ws: &mut NewtonWorkspace,
) -> f64 {
    ws.trial.clear();
    ws.trial
        .extend(x.iter().zip(&ws.direction).map(|(x, d)| *x + *d * alpha));
    // Every pair within reach anywhere on the segment is a candidate; the others contribute exactly 0.
    potential.energy_over_recording(&ws.trial, &ws.candidates, &mut ws.trial_gaps)
}

/// What a rebuilt Verlet list's skins cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Skins {
    /// Each ball's predicted motion `|x̃ᵢ − xᵢ|` (the solve's first list).
    Predicted,
    /// The predicted motion, and 1.5 × the current direction (a segment left too many skins).
    Forced,
    /// 1.5 × the current direction alone (the list had grown far beyond the segments' needs).
    Tight,
}

/// Rebuilds the Verlet list around `x`. Each ball's skin covers what `skins` says plus a margin (a quarter radius
/// and twice the reach) for the Newton iterates' wandering.
fn build_verlet_list(
    potential: &IncrementalPotential<'_>,
    x: &[DVec2],
    skins: Skins,
    ws: &mut NewtonWorkspace,
) {
    ws.skin.clear();
    ws.skin.extend(x.iter().enumerate().map(|(i, &c)| {
        let margin = skin_margin(potential, i);
        let motion = || (potential.x_tilde[i] - c).length();
        let along = || 1.5 * ws.direction[i].length();
        margin
            + match skins {
                Skins::Predicted => motion(),
                Skins::Forced => motion().max(along()),
                Skins::Tight => along(),
            }
    }));
    potential.verlet_list(x, &ws.skin, &mut ws.potential, &mut ws.verlet);
}

/// The part of ball `i`'s skin beyond the motion it must cover: a quarter radius and twice the reach, for the
/// Newton iterates' wandering.
fn skin_margin(potential: &IncrementalPotential<'_>, i: usize) -> f64 {
    0.25 * potential.radius[i] + 2.0 * potential.model.reach()
}

/// A Verlet list holding more than this many times the segment's candidate pairs (and at least
/// [`TIGHTEN_MIN_PAIRS`]) is rebuilt with [`Skins::Tight`]: in a landing pile the predicted motions of the
/// falling balls make the first list hold ten times the pairs any clamped Newton segment reaches, and every
/// iteration filters all of them.
const TIGHTEN_RATIO: usize = 4;
const TIGHTEN_MIN_PAIRS: usize = 8192;

/// At most this many balls whose Newton segment leaves its skin get a wider skin in place
/// ([`widen_skins`]); more, and the Verlet list is rebuilt around the iterate. A rebuild grids every ball
/// (about 2.3 ms at N = 10 000 on the reference pit); widening scans, per widened ball, the balls within reach
/// of it in x.
const MAX_WIDENED_SKINS: usize = 32;

/// Widens the skins of the balls in `ws.uncovered` to hold their segment, with the same allowance as a forced
/// rebuild ([`build_verlet_list`]): 1.5 × the direction and the margin, here measured from the old reference.
fn widen_skins(potential: &IncrementalPotential<'_>, x: &[DVec2], ws: &mut NewtonWorkspace) {
    ws.widened.clear();
    ws.widened.extend(ws.uncovered.iter().map(|&i| {
        let iu = i as usize;
        let margin = skin_margin(potential, iu);
        let offset = (x[iu] - ws.verlet.reference[iu]).length();
        let skin = offset + 1.5 * ws.direction[iu].length() + margin;
        (i, skin.max(ws.verlet.skin[iu]))
    }));
    potential.widen_verlet_list(&mut ws.verlet, &ws.widened, &mut ws.potential);
}

/// A segment ending (or a pair passing) closer to contact than this share of `d̂` counts as an impact (see
/// [`time_of_impact_ball_wall_within`]): 1 nm under the seed's `d̂ = 1 mm`, far below the gaps of the seed's
/// table (the smallest is 2.1 µm) and of the reference pit (0.31 µm at 10 000 balls), and far above a position's
/// resolution near the origin (10⁻¹⁶ m at 1 m; the CCD never goes below that resolution either way).
const MIN_SEPARATION_SHARE: f64 = 1e-6;

/// The separation the CCD treats as touching under `potential`'s model (none under penalty, which has no CCD).
fn min_separation(potential: &IncrementalPotential<'_>) -> f64 {
    match potential.model {
        ContactModel::Barrier { dhat, .. } => MIN_SEPARATION_SHARE * dhat,
        ContactModel::Penalty { .. } => 0.0,
    }
}

/// Earliest `t* ∈ [0, 1]` over all ball–wall and ball–ball pairs for the motion `x → x + Δx`; only the
/// segment candidates can touch.
fn earliest_time_of_impact(
    potential: &IncrementalPotential<'_>,
    x: &[DVec2],
    ws: &mut NewtonWorkspace,
) -> Option<f64> {
    let NewtonWorkspace {
        candidates,
        direction,
        wall_hits,
        pair_hits,
        ..
    } = ws;
    wall_hits.clear();
    pair_hits.clear();
    let min_separation = min_separation(potential);
    let mut earliest: Option<f64> = None;
    let mut keep = |t: f64| {
        if earliest.is_none_or(|e| t < e) {
            earliest = Some(t);
        }
    };
    for &(i, k) in &candidates.ball_wall {
        let iu = i as usize;
        let d = direction[iu];
        if d != DVec2::ZERO
            && let Some(t) = time_of_impact_ball_wall_within(
                x[iu],
                d,
                potential.radius[iu],
                &potential.walls[k as usize],
                min_separation,
            )
        {
            keep(t);
            wall_hits.push((i, t));
        }
    }
    for &(i, j) in &candidates.ball_ball {
        let (iu, ju) = (i as usize, j as usize);
        if let Some(t) = time_of_impact_ball_ball_within(
            x[iu],
            direction[iu],
            potential.radius[iu],
            x[ju],
            direction[ju],
            potential.radius[ju],
            min_separation,
        ) {
            keep(t);
            pair_hits.push((i, j, t));
        }
    }
    earliest
}

/// A CCD-clamped step length per contact group instead of one for the whole island (SPEC §1.3).
///
/// A contact group is a connected component of the balls the Hessian couples (the pairs within `d̂`, and the
/// friction pairs). The Hessian is block-diagonal over the groups, so each group's part of `Δx` is its own
/// Newton direction `−H_g⁻¹ g_g`, and any positive scaling `t_g` of it still descends. Within a group every ball
/// takes the same `t_g`, so the pairs that are in contact move exactly as Newton planned, shortened, as under
/// the uniform step: nothing is squeezed. Between groups (pairs at `d ≥ d̂`, which Newton does not see) a
/// collision on the way shortens only the smaller group when that suffices, so a ball falling onto a pile no
/// longer throttles the pile.
///
/// A wall or a pair inside one group that the full segment meets at `τ` (recorded by the earliest-impact pass)
/// limits its group to `s τ`. Pairs between two groups can then meet under the shortened lengths, so passes of
/// exact CCD over them under the current lengths shorten a length to `s ×` its time of impact until none
/// collides. The lengths only decrease and
/// every ball moves along a prefix of its own segment, so the candidates of the full direction still cover the
/// motion, and every later backtracking step is a prefix again: the step is collision-free.
///
/// On success the direction is scaled in place (the caller then starts its line search from `α = 1`) and the
/// shortest length of a moving group is returned. With a single group, when no group gets a longer step than
/// the uniform `uniform = s · t*`, or when the passes do not settle, nothing changes (`None`): the uniform
/// step is used, bit for bit as before.
fn scale_direction_by_contact_group(
    potential: &IncrementalPotential<'_>,
    x: &[DVec2],
    s: f64,
    uniform: f64,
    ws: &mut NewtonWorkspace,
) -> Option<f64> {
    const MAX_PASSES: usize = 32;
    const MAX_SHRINKS: usize = 64;
    let n = x.len();
    let min_separation = min_separation(potential);
    let NewtonWorkspace {
        sets,
        group,
        group_size,
        group_length,
        hessian,
        candidates,
        direction,
        wall_hits,
        pair_hits,
        between,
        ..
    } = ws;
    sets.reset(n);
    for &(i, j, _) in &hessian.off_diagonal {
        sets.union(i as usize, j as usize);
    }
    group.clear();
    group_size.clear();
    group_size.resize(n, 0);
    let mut groups = 0;
    for i in 0..n {
        let root = sets.find(i);
        group.push(root as u32);
        if group_size[root] == 0 {
            groups += 1;
        }
        group_size[root] += 1;
    }
    if groups < 2 {
        return None;
    }
    group_length.clear();
    group_length.resize(n, 1.0);
    // A wall, or a pair inside one group, first met at τ of the full segment is met at τ / t on a segment
    // shortened to t, so s·τ is the group's longest safe length against it, and any shorter one stays safe.
    for &(i, tau) in wall_hits.iter() {
        let g = group[i as usize] as usize;
        group_length[g] = group_length[g].min(s * tau);
    }
    for &(i, j, tau) in pair_hits.iter() {
        let g = group[i as usize] as usize;
        if g == group[j as usize] as usize {
            group_length[g] = group_length[g].min(s * tau);
        }
    }
    // Pairs between two groups can meet once either group is shortened, so they are checked in passes under
    // the current lengths until none collides (lengths only decrease).
    between.clear();
    between.extend(
        candidates
            .ball_ball
            .iter()
            .filter(|&&(i, j)| group[i as usize] != group[j as usize]),
    );
    let radius = potential.radius;
    let mut settled = false;
    for _ in 0..MAX_PASSES {
        let mut changed = false;
        for &(i, j) in between.iter() {
            let (i, j) = (i as usize, j as usize);
            let (gi, gj) = (group[i] as usize, group[j] as usize);
            let (ti, tj) = (group_length[gi], group_length[gj]);
            let hit = time_of_impact_ball_ball_within(
                x[i],
                direction[i] * ti,
                radius[i],
                x[j],
                direction[j] * tj,
                radius[j],
                min_separation,
            );
            let Some(tau) = hit else { continue };
            changed = true;
            // Shorten the smaller group alone when the other one's motion, by itself, misses it.
            let (p, q, gp, gq) = if group_size[gi] <= group_size[gj] {
                (i, j, gi, gj)
            } else {
                (j, i, gj, gi)
            };
            let tq = group_length[gq];
            let toi = |u: f64| {
                time_of_impact_ball_ball_within(
                    x[p],
                    direction[p] * u,
                    radius[p],
                    x[q],
                    direction[q] * tq,
                    radius[q],
                    min_separation,
                )
            };
            if toi(0.0).is_none() {
                let mut u = group_length[gp];
                for _ in 0..MAX_SHRINKS {
                    match toi(u) {
                        Some(tau) => u *= s * tau,
                        None => break,
                    }
                }
                if toi(u).is_some() {
                    u = 0.0;
                }
                group_length[gp] = u;
            } else {
                group_length[gi] = ti * s * tau;
                group_length[gj] = tj * s * tau;
            }
        }
        if !changed {
            settled = true;
            break;
        }
    }
    if !settled {
        return None;
    }
    let mut gains = false;
    let mut shortest = 1.0f64;
    for (d, g) in direction.iter().zip(group.iter()) {
        if *d != DVec2::ZERO {
            let t = group_length[*g as usize];
            gains |= t > uniform;
            shortest = shortest.min(t);
        }
    }
    if !gains {
        return None;
    }
    for (d, g) in direction.iter_mut().zip(group.iter()) {
        *d *= group_length[*g as usize];
    }
    Some(shortest)
}

fn min_contact_distance(
    potential: &IncrementalPotential<'_>,
    x: &[DVec2],
    ws: &mut NewtonWorkspace,
) -> f64 {
    // x lies on the last segment, so every pair within reach is a candidate.
    potential.contacts_among(x, &ws.candidates, &mut ws.trial_contacts);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::physics::geometry::Wall;
    use crate::physics::potential::WallIndex;

    /// The seed's barrier: `d̂ = 1 mm`, `κ = 10⁴`.
    const SEED_BARRIER: ContactModel = ContactModel::Barrier {
        dhat: 1e-3,
        kappa: 1e4,
    };

    /// Ball 0 is thrown through a thin wall (its step is clamped by CCD); ball 1 flies freely far away, in the
    /// same minimisation. Under one step length for everything, ball 1 would crawl towards its minimiser in
    /// CCD-clamped pieces; with a length per contact group it reaches it in one Newton piece.
    #[test]
    fn a_collision_elsewhere_does_not_throttle_a_free_ball() {
        let walls = [Wall {
            center: DVec2::new(1.0, 0.0),
            half_extents: DVec2::new(0.01, 1.0),
            angle: 0.0,
        }];
        let wall_index = WallIndex::new(&walls);
        let x_tilde = [DVec2::new(2.0, 0.0), DVec2::new(0.3, 5.0)];
        let mass = [1.0, 1.0];
        let radius = [0.05, 0.05];
        let mut potential = IncrementalPotential::new(
            &x_tilde,
            &mass,
            &radius,
            &walls,
            &wall_index,
            0.01,
            SEED_BARRIER,
        );
        let mut x = vec![DVec2::new(0.0, 0.0), DVec2::new(0.0, 5.0)];
        let settings = NewtonSettings {
            tolerance: 1e-10,
            max_iterations: 100,
            ccd_factor: 0.9,
        };
        let mut ws = NewtonWorkspace {
            record_pieces: true,
            ..NewtonWorkspace::default()
        };
        let report = minimize(&mut potential, &mut x, &settings, None, &mut ws);
        assert_eq!(report.stop, StopReason::Converged);
        assert!(
            report.iterations > 3,
            "the thrown ball needs several clamped pieces"
        );
        let free: Vec<_> = ws.pieces.iter().filter(|p| p.0 == 1).collect();
        assert_eq!(free.len(), 1, "the free ball's pieces: {free:?}");
        assert!((free[0].2 - x_tilde[1]).length() < 1e-12);
        assert!(
            x[0].x + radius[0] < 1.0 - 0.01,
            "ball 0 stopped short of the wall: {}",
            x[0]
        );
    }

    /// A pyramid of 10 balls (rows of 4, 3, 2, 1, gaps of 0.3 mm) on a floor, pushed down as if landing at
    /// 4 m/s. The loaded contacts make the exact Hessian indefinite at first, so Newton falls back to the
    /// projected one, which converges only linearly; returning to the exact Hessian once the fallback crawls
    /// gives quadratic convergence: 32 directions, against 56 kept on the fallback. (With the floor's distance
    /// measured from its centre, rounded, the fallback was still crawling at 200.)
    #[test]
    fn the_exact_hessian_returns_once_the_fallback_crawls() {
        let walls = [Wall {
            center: DVec2::new(0.0, -0.5),
            half_extents: DVec2::new(5.0, 0.5),
            angle: 0.0,
        }];
        let wall_index = WallIndex::new(&walls);
        let (r, gap, h, rows) = (0.05, 1e-4, 1.0 / 60.0, 4usize);
        let mut x = Vec::new();
        for row in 0..rows {
            for k in 0..rows - row {
                let across = (k as f64 - (rows - row - 1) as f64 * 0.5) * (2.0 * r + gap);
                let up = r + gap + row as f64 * (2.0 * r + gap) * 0.75f64.sqrt();
                x.push(DVec2::new(
                    across + 2e-5 * ((k * 7 + row * 3) % 5) as f64,
                    up,
                ));
            }
        }
        let x_tilde: Vec<DVec2> = x
            .iter()
            .enumerate()
            .map(|(i, p)| *p + DVec2::new(0.0, -h * 4.0 * (1.0 + 0.1 * (i % 3) as f64)))
            .collect();
        let (mass, radius) = (vec![7.85; x.len()], vec![r; x.len()]);
        let settings = NewtonSettings {
            tolerance: 1e-10,
            max_iterations: 200,
            ccd_factor: 0.9,
        };
        let solve = |keep_fallback: bool| {
            let mut potential = IncrementalPotential::new(
                &x_tilde,
                &mass,
                &radius,
                &walls,
                &wall_index,
                h,
                SEED_BARRIER,
            );
            let mut y = x.clone();
            let mut ws = NewtonWorkspace {
                keep_fallback,
                ..NewtonWorkspace::default()
            };
            let report = minimize(&mut potential, &mut y, &settings, None, &mut ws);
            (report, y)
        };
        let (report, y) = solve(false);
        assert_eq!(report.stop, StopReason::Converged);
        assert!(report.exact_retries >= 1, "{report:?}");
        assert!(report.iterations <= 60, "{} iterations", report.iterations);
        for (i, p) in y.iter().enumerate() {
            assert!(p.y - r > 0.0, "ball {i} reached the floor");
            for q in &y[i + 1..] {
                assert!((*p - *q).length() - 2.0 * r > 0.0);
            }
        }
        let (kept, _) = solve(true);
        assert_eq!(kept.exact_retries, 0);
        assert!(
            kept.iterations >= report.iterations + 20,
            "{} iterations kept on the fallback, {} returning: {kept:?}",
            kept.iterations,
            report.iterations
        );
    }
}
