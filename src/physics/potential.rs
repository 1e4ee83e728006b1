//! The incremental potential of one implicit-Euler step (SPEC §1):
//!
//! ```text
//! E(x) = ½ (x − x̃)ᵀ M (x − x̃) + h² B(x),      x̃ = xᵗ + h vᵗ + h² g
//! ```
//!
//! with `B` the contact energy: penalty `Σ ½ k p²` or the IPC barrier `κ Σ b(d, d̂)`. Every contact term is a
//! scalar function `φ(d)` of one pair distance `d`, so its Hessian is `φ'' ∇d ∇dᵀ + φ' ∇²d`, projected to
//! positive semi-definite per pair as IPC does. A ball–ball pair's 4×4 Hessian is `[[S, −S], [−S, S]]`, whose
//! PSD projection is the same pattern with `S` projected, so projecting the 2×2 `S` is exact.

use glam::DVec2;

use super::barrier::{
    barrier, barrier_first_derivative, barrier_log, barrier_second_derivative, barrier_with_log,
    first_derivative_with_log, second_derivative_with_log,
};
use super::broad_phase::BroadPhase;
use super::friction::{FrictionContact, FrictionTerm, tangent_of};
use super::geometry::{Sym2, Wall, ball_ball_distance, ball_wall_distance};
use super::penalty::{penalty_energy, penalty_first_derivative, penalty_second_derivative};

/// Which contact energy `B` the step uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ContactModel {
    /// `½ k p²` per overlapping pair.
    Penalty { stiffness: f64 },
    /// `κ b(d, d̂)` per pair within `d̂`; `+∞` for any `d ≤ 0`.
    Barrier { dhat: f64, kappa: f64 },
}

impl ContactModel {
    /// Pairs farther apart than this contribute nothing.
    pub fn reach(&self) -> f64 {
        match *self {
            ContactModel::Penalty { .. } => 0.0,
            ContactModel::Barrier { dhat, .. } => dhat,
        }
    }

    /// `(φ, φ', φ'')` at distance `d`.
    pub fn scalar(&self, d: f64) -> (f64, f64, f64) {
        match *self {
            ContactModel::Penalty { stiffness } => (
                penalty_energy(d, stiffness),
                penalty_first_derivative(d, stiffness),
                penalty_second_derivative(d, stiffness),
            ),
            ContactModel::Barrier { dhat, kappa } => (
                kappa * barrier(d, dhat),
                kappa * barrier_first_derivative(d, dhat),
                kappa * barrier_second_derivative(d, dhat),
            ),
        }
    }

    fn value(&self, d: f64) -> f64 {
        match *self {
            ContactModel::Penalty { stiffness } => penalty_energy(d, stiffness),
            ContactModel::Barrier { dhat, kappa } => kappa * barrier(d, dhat),
        }
    }

    /// [`Self::value`], and `ln(d/d̂)` where the barrier takes it (`0 < d < d̂`; NaN elsewhere and for penalty).
    #[inline(always)]
    fn value_and_log(&self, d: f64) -> (f64, f64) {
        match *self {
            ContactModel::Barrier { dhat, kappa } if d > 0.0 && d < dhat => {
                let l = barrier_log(d, dhat);
                (kappa * barrier_with_log(d, dhat, l), l)
            }
            _ => (self.value(d), f64::NAN),
        }
    }

    /// `(φ', φ'')` at distance `d`, as [`Self::scalar`] gives them, bit for bit; a barrier takes `ln(d/d̂)` from
    /// `log` where that is a number (what [`Self::value_and_log`] gave for the same `d`). The range test repeats
    /// `value_and_log`'s, so a logarithm passed for some other `d` outside the barrier's range is ignored.
    #[inline(always)]
    fn derivatives(&self, d: f64, log: f64) -> (f64, f64) {
        match *self {
            ContactModel::Barrier { dhat, kappa } if !log.is_nan() && d > 0.0 && d < dhat => (
                kappa * first_derivative_with_log(d, dhat, log),
                kappa * second_derivative_with_log(d, dhat, log),
            ),
            _ => {
                let (_, d1, d2) = self.scalar(d);
                (d1, d2)
            }
        }
    }
}

/// Each candidate pair's distance at the point whose energy was last summed over the candidates, and
/// `ln(d/d̂)` where the barrier took it (NaN elsewhere): ball–wall candidates first, then ball–ball, in the
/// candidates' order. When the line search accepts that point as the next Newton iterate, its contacts, its
/// anticipated couplings and its Hessian need these numbers again, and take them from here instead of
/// computing them a second time (the same expressions, so the same bits).
#[derive(Clone, Debug, Default)]
pub struct CandidateGaps {
    pub distance: Vec<f64>,
    pub log: Vec<f64>,
}

impl CandidateGaps {
    fn clear(&mut self) {
        self.distance.clear();
        self.log.clear();
    }

    #[inline(always)]
    fn push(&mut self, d: f64, log: f64) {
        self.distance.push(d);
        self.log.push(log);
    }
}

/// A Hessian stored as 2×2 blocks: one per ball on the diagonal, one per coupled ball pair `(i < j)`.
#[derive(Clone, Debug, Default)]
pub struct BlockHessian {
    pub diagonal: Vec<Sym2>,
    pub off_diagonal: Vec<(u32, u32, Sym2)>,
}

/// The pairs currently within reach of each other.
#[derive(Clone, Debug, Default)]
pub struct ContactSet {
    pub ball_wall: Vec<(u32, u32)>,
    pub ball_ball: Vec<(u32, u32)>,
}

/// Wall bounds grown by nothing; kept beside the walls so every query skips far walls cheaply.
#[derive(Clone, Debug, Default)]
pub struct WallIndex {
    bounds: Vec<(DVec2, DVec2)>,
}

impl WallIndex {
    pub fn new(walls: &[Wall]) -> WallIndex {
        WallIndex {
            bounds: walls.iter().map(Wall::aabb).collect(),
        }
    }

    /// Does wall `k`'s bound come within `reach` of the circle `(c, r)`? (The test of [`Self::near`].)
    pub fn is_near(&self, k: usize, c: DVec2, r: f64, reach: f64) -> bool {
        let grow = r + reach;
        let (lo, hi) = self.bounds[k];
        c.x + grow >= lo.x && c.x - grow <= hi.x && c.y + grow >= lo.y && c.y - grow <= hi.y
    }

    /// Walls whose bounds come within `reach` of the circle `(c, r)`.
    pub fn near<'a>(&'a self, c: DVec2, r: f64, reach: f64) -> impl Iterator<Item = usize> + 'a {
        let grow = r + reach;
        self.bounds
            .iter()
            .enumerate()
            .filter_map(move |(k, (lo, hi))| {
                (c.x + grow >= lo.x
                    && c.x - grow <= hi.x
                    && c.y + grow >= lo.y
                    && c.y - grow <= hi.y)
                    .then_some(k)
            })
    }
}

/// A Verlet list: the pairs that can come within reach while every ball stays inside its skin, a circle of
/// radius `skin[i]` around `reference[i]`.
#[derive(Clone, Debug, Default)]
pub struct VerletList {
    pub reference: Vec<DVec2>,
    pub skin: Vec<f64>,
    pub pairs: ContactSet,
    /// Each ball's bound `rᵢ + sᵢ` (see `verlet_bound`), the largest of them, and the balls by ascending
    /// reference `x` (for [`IncrementalPotential::widen_verlet_list`]).
    bound: Vec<f64>,
    max_bound: f64,
    by_x: Vec<u32>,
}

impl VerletList {
    /// The balls whose segment `x → x + Δx` leaves their skin, into `out`: those whose segment, bounded by the
    /// circle around its midpoint of radius `|Δx|/2`, does not stay inside the skin (`|mᵢ − pᵢ| + |Δxᵢ|/2 > sᵢ`;
    /// for every other ball, every pair within reach anywhere on its segment is in the list). Stops and returns
    /// `false` once more than `limit` are found (or when the list is for another island).
    pub fn uncovered(
        &self,
        x: &[DVec2],
        direction: &[DVec2],
        limit: usize,
        out: &mut Vec<u32>,
    ) -> bool {
        out.clear();
        if x.len() != self.reference.len() {
            return false;
        }
        for (i, ((&c, &d), (&p, &s))) in x
            .iter()
            .zip(direction)
            .zip(self.reference.iter().zip(&self.skin))
            .enumerate()
        {
            if !segment_inside(c, d, p, s) {
                if out.len() == limit {
                    return false;
                }
                out.push(i as u32);
            }
        }
        true
    }
}

/// Whether the circle around the segment `c → c + d`'s midpoint of radius `|d|/2` lies within `s` of `p`.
fn segment_inside(c: DVec2, d: DVec2, p: DVec2, s: f64) -> bool {
    let half = d * 0.5;
    (c + half - p).length() + half.length() <= s
}

/// A ball's Verlet bound: its radius and skin, grown by a hair so that roundoff in the containment argument can
/// never drop a pair.
fn verlet_bound(radius: f64, skin: f64) -> f64 {
    (radius + skin) * (1.0 + 1e-9) + 1e-12
}

/// One step's incremental potential: the data that stays fixed while Newton iterates on `x`.
pub struct IncrementalPotential<'a> {
    pub x_tilde: &'a [DVec2],
    pub mass: &'a [f64],
    pub radius: &'a [f64],
    pub walls: &'a [Wall],
    pub wall_index: &'a WallIndex,
    pub h: f64,
    pub model: ContactModel,
    /// The lagged friction term `D` and the step-start positions `xᵗ` it measures displacement from.
    pub friction: Option<(&'a FrictionTerm, &'a [DVec2])>,
}

/// Scratch buffers reused across evaluations.
#[derive(Default, Debug, Clone)]
pub struct Workspace {
    pub broad_phase: BroadPhase,
    pub pairs: Vec<(u32, u32)>,
    midpoints: Vec<DVec2>,
    bounds: Vec<f64>,
    merged: Vec<(u32, u32)>,
}

impl<'a> IncrementalPotential<'a> {
    /// A potential without friction.
    pub fn new(
        x_tilde: &'a [DVec2],
        mass: &'a [f64],
        radius: &'a [f64],
        walls: &'a [Wall],
        wall_index: &'a WallIndex,
        h: f64,
        model: ContactModel,
    ) -> Self {
        IncrementalPotential {
            x_tilde,
            mass,
            radius,
            walls,
            wall_index,
            h,
            model,
            friction: None,
        }
    }

    /// The pairs within reach at `x`: ball–wall pairs with `d < reach` and ball–ball pairs with
    /// `d < reach` (for penalty, `reach = 0`: overlaps only).
    pub fn contacts(&self, x: &[DVec2], workspace: &mut Workspace, out: &mut ContactSet) {
        workspace
            .broad_phase
            .near_pairs(x, self.radius, self.model.reach(), &mut workspace.pairs);
        self.contacts_from_near_pairs(x, &workspace.pairs, out);
    }

    /// As [`Self::contacts`], with the ball–ball pairs taken from `near` (sorted; any superset of the pairs
    /// within reach, such as a broad-phase query with a longer reach): the same pairs in the same order.
    pub fn contacts_from_near_pairs(&self, x: &[DVec2], near: &[(u32, u32)], out: &mut ContactSet) {
        out.ball_wall.clear();
        out.ball_ball.clear();
        let reach = self.model.reach();
        for (i, &c) in x.iter().enumerate() {
            for k in self.wall_index.near(c, self.radius[i], reach) {
                let d = ball_wall_distance(c, self.radius[i], &self.walls[k]).value;
                if d < reach {
                    out.ball_wall.push((i as u32, k as u32));
                }
            }
        }
        out.ball_ball.extend(near.iter().copied().filter(|&(i, j)| {
            let (i, j) = (i as usize, j as usize);
            (x[i] - x[j]).length() - self.radius[i] - self.radius[j] < reach
        }));
    }

    /// Pairs that can come within reach anywhere on the segment `x + α Δx`, `α ∈ [0, 1]`: each ball is bounded
    /// by the circle around its segment's midpoint of radius `r + |Δx|/2`. Every line-search trial and the CCD
    /// only need these pairs, so one broad-phase query serves a whole Newton iteration.
    pub fn segment_candidates(
        &self,
        x: &[DVec2],
        direction: &[DVec2],
        workspace: &mut Workspace,
        out: &mut ContactSet,
    ) {
        out.ball_wall.clear();
        out.ball_ball.clear();
        let reach = self.model.reach();
        workspace.midpoints.clear();
        workspace.bounds.clear();
        for (i, (&c, &d)) in x.iter().zip(direction).enumerate() {
            let half = d * 0.5;
            let bound = self.radius[i] + half.length();
            workspace.midpoints.push(c + half);
            workspace.bounds.push(bound);
            for k in self.wall_index.near(c + half, bound, reach) {
                out.ball_wall.push((i as u32, k as u32));
            }
        }
        workspace.broad_phase.near_pairs(
            &workspace.midpoints,
            &workspace.bounds,
            reach,
            &mut out.ball_ball,
        );
    }

    /// Builds a Verlet list: every pair that can be within reach while each ball `i` stays within `skin[i]` of
    /// `reference[i]` (ball–wall pairs whose wall bounds come within reach of the circle `(pᵢ, rᵢ + sᵢ)`,
    /// ball–ball pairs with `|pᵢ − pⱼ| ≤ rᵢ + rⱼ + sᵢ + sⱼ + reach`). One broad-phase query then serves every
    /// Newton iteration and line-search trial whose segments stay inside the skins ([`VerletList::uncovered`]
    /// finds none).
    pub fn verlet_list(
        &self,
        reference: &[DVec2],
        skin: &[f64],
        workspace: &mut Workspace,
        out: &mut VerletList,
    ) {
        let reach = self.model.reach();
        out.reference.clear();
        out.reference.extend_from_slice(reference);
        out.skin.clear();
        out.skin.extend_from_slice(skin);
        out.pairs.ball_wall.clear();
        out.bound.clear();
        for (i, &p) in reference.iter().enumerate() {
            let bound = verlet_bound(self.radius[i], skin[i]);
            out.bound.push(bound);
            for k in self.wall_index.near(p, bound, reach) {
                out.pairs.ball_wall.push((i as u32, k as u32));
            }
        }
        out.max_bound = out.bound.iter().copied().fold(0.0, f64::max);
        out.by_x.clear();
        if reference.iter().all(|p| p.x.is_finite()) {
            out.by_x.extend(0..reference.len() as u32);
            out.by_x.sort_unstable_by(|&a, &b| {
                reference[a as usize]
                    .x
                    .total_cmp(&reference[b as usize].x)
                    .then(a.cmp(&b))
            });
        }
        workspace
            .broad_phase
            .near_pairs(reference, &out.bound, reach, &mut out.pairs.ball_ball);
    }

    /// Grows the skins of a few balls of `list` in place: each `(ball, skin)` of `widened` gets the new, larger
    /// skin around its old reference, and the pairs its larger circle now reaches join the list (kept sorted, so
    /// every filter of the list yields the same pairs in the same order as a list built from scratch would).
    /// For a Newton segment that leaves a handful of skins, this costs a scan of the balls per widened ball
    /// instead of a new grid over all of them.
    pub fn widen_verlet_list(
        &self,
        list: &mut VerletList,
        widened: &[(u32, f64)],
        workspace: &mut Workspace,
    ) {
        let reach = self.model.reach();
        for &(u, skin) in widened {
            let u = u as usize;
            debug_assert!(skin >= list.skin[u]);
            list.skin[u] = skin;
            list.bound[u] = verlet_bound(self.radius[u], skin);
            list.max_bound = list.max_bound.max(list.bound[u]);
        }
        let VerletList {
            reference,
            bound,
            max_bound,
            by_x,
            pairs,
            ..
        } = list;
        let extra = &mut workspace.pairs;
        extra.clear();
        let mut walls_added = false;
        for &(u, _) in widened {
            let u = u as usize;
            let (pu, bu) = (reference[u], bound[u]);
            let mut check = |j: usize| {
                let limit = bu + bound[j] + reach;
                if j != u && pu.distance_squared(reference[j]) <= limit * limit {
                    extra.push((u.min(j) as u32, u.max(j) as u32));
                }
            };
            // Only balls whose x lies within the largest reach of pu.x can pair with u.
            let span = bu + *max_bound + reach;
            let (lo, hi) = (pu.x - span, pu.x + span);
            if lo.is_finite() && hi.is_finite() && by_x.len() == reference.len() {
                let first = by_x.partition_point(|&j| reference[j as usize].x < lo);
                for &j in &by_x[first..] {
                    if reference[j as usize].x > hi {
                        break;
                    }
                    check(j as usize);
                }
            } else {
                (0..reference.len()).for_each(&mut check);
            }
            for k in self.wall_index.near(pu, bu, reach) {
                pairs.ball_wall.push((u as u32, k as u32));
                walls_added = true;
            }
        }
        if walls_added {
            pairs.ball_wall.sort_unstable();
            pairs.ball_wall.dedup();
        }
        if !extra.is_empty() {
            extra.sort_unstable();
            extra.dedup();
            let old = std::mem::take(&mut pairs.ball_ball);
            let merged = &mut pairs.ball_ball;
            *merged = std::mem::take(&mut workspace.merged);
            merged.clear();
            merged.reserve(old.len() + extra.len());
            let (mut a, mut b) = (old.iter().peekable(), extra.iter().peekable());
            loop {
                let next = match (a.peek(), b.peek()) {
                    (Some(&&p), Some(&&q)) if p < q => a.next(),
                    (Some(&&p), Some(&&q)) if q < p => b.next(),
                    (Some(_), Some(_)) => {
                        b.next();
                        a.next()
                    }
                    (Some(_), None) => a.next(),
                    (None, Some(_)) => b.next(),
                    (None, None) => break,
                };
                merged.extend(next);
            }
            workspace.merged = old;
        }
    }

    /// Ball pairs of `list` predicted to couple during the step: their straight motions `x → x̃` bring the
    /// surfaces within `reach + margin`, `margin = reach + 5 % of the radii` (a seed for the Hessian's sparsity
    /// pattern; pairs the prediction misses are added when they appear).
    pub fn predicted_pairs(&self, x: &[DVec2], list: &VerletList, out: &mut Vec<(u32, u32)>) {
        out.clear();
        let reach = self.model.reach();
        for &(i, j) in &list.pairs.ball_ball {
            let (iu, ju) = (i as usize, j as usize);
            let p = x[iu] - x[ju];
            let dp = (self.x_tilde[iu] - x[iu]) - (self.x_tilde[ju] - x[ju]);
            let a = dp.length_squared();
            let t = if a > 0.0 {
                (-p.dot(dp) / a).clamp(0.0, 1.0)
            } else {
                0.0
            };
            let radii = self.radius[iu] + self.radius[ju];
            let gap = (p + dp * t).length() - radii;
            if gap < 2.0 * reach + 0.05 * radii {
                out.push((i, j));
            }
        }
    }

    /// As [`Self::segment_candidates`], filtered out of a Verlet list that covers the segment (no ball
    /// [`VerletList::uncovered`]): the same pairs in the same order, without a broad-phase query.
    pub fn segment_candidates_among(
        &self,
        x: &[DVec2],
        direction: &[DVec2],
        list: &VerletList,
        workspace: &mut Workspace,
        out: &mut ContactSet,
    ) {
        out.ball_wall.clear();
        out.ball_ball.clear();
        let reach = self.model.reach();
        workspace.midpoints.clear();
        workspace.bounds.clear();
        for (i, (&c, &d)) in x.iter().zip(direction).enumerate() {
            let half = d * 0.5;
            workspace.midpoints.push(c + half);
            workspace.bounds.push(self.radius[i] + half.length());
        }
        for &(i, k) in &list.pairs.ball_wall {
            let iu = i as usize;
            if self.wall_index.is_near(
                k as usize,
                workspace.midpoints[iu],
                workspace.bounds[iu],
                reach,
            ) {
                out.ball_wall.push((i, k));
            }
        }
        for &(i, j) in &list.pairs.ball_ball {
            let (iu, ju) = (i as usize, j as usize);
            let limit = workspace.bounds[iu] + workspace.bounds[ju] + reach;
            if workspace.midpoints[iu].distance_squared(workspace.midpoints[ju]) <= limit * limit {
                out.ball_ball.push((i, j));
            }
        }
    }

    /// `E(x)` summed over the given candidate pairs (pairs beyond reach contribute exactly 0).
    pub fn energy_over(&self, x: &[DVec2], candidates: &ContactSet) -> f64 {
        self.energy_over_with(x, candidates, None)
    }

    /// [`Self::energy_over`] (the same sum, bit for bit), keeping each candidate's distance and barrier logarithm
    /// in `gaps`.
    pub fn energy_over_recording(
        &self,
        x: &[DVec2],
        candidates: &ContactSet,
        gaps: &mut CandidateGaps,
    ) -> f64 {
        gaps.clear();
        self.energy_over_with(x, candidates, Some(gaps))
    }

    fn energy_over_with(
        &self,
        x: &[DVec2],
        candidates: &ContactSet,
        gaps: Option<&mut CandidateGaps>,
    ) -> f64 {
        let inertia = self.inertia_energy(x);
        let mut total = if candidates.ball_wall.is_empty() && candidates.ball_ball.is_empty() {
            inertia
        } else {
            inertia + self.h * self.h * self.contact_energy_with(x, candidates, gaps)
        };
        if let Some((friction, x_start)) = self.friction
            && !friction.contacts.is_empty()
        {
            total += self.h * self.h * friction.energy(x, x_start);
        }
        total
    }

    /// The pairs of `candidates` within reach at `x` (as [`Self::contacts`], without a broad-phase query).
    pub fn contacts_among(&self, x: &[DVec2], candidates: &ContactSet, out: &mut ContactSet) {
        out.ball_wall.clear();
        out.ball_ball.clear();
        let reach = self.model.reach();
        for &(i, k) in &candidates.ball_wall {
            let iu = i as usize;
            if ball_wall_distance(x[iu], self.radius[iu], &self.walls[k as usize]).value < reach {
                out.ball_wall.push((i, k));
            }
        }
        for &(i, j) in &candidates.ball_ball {
            let (iu, ju) = (i as usize, j as usize);
            if (x[iu] - x[ju]).length() - self.radius[iu] - self.radius[ju] < reach {
                out.ball_ball.push((i, j));
            }
        }
    }

    /// [`Self::contacts_among`] at the point where `gaps` were recorded over `candidates`
    /// ([`Self::energy_over_recording`]), from the recorded distances; `logs` gets each contact's barrier
    /// logarithm, ball–wall contacts first, for [`Self::gradient_and_hessian_projected`].
    pub fn contacts_from_gaps(
        &self,
        candidates: &ContactSet,
        gaps: &CandidateGaps,
        out: &mut ContactSet,
        logs: &mut Vec<f64>,
    ) {
        out.ball_wall.clear();
        out.ball_ball.clear();
        logs.clear();
        let reach = self.model.reach();
        let walls = candidates.ball_wall.len();
        assert_eq!(
            gaps.distance.len(),
            walls + candidates.ball_ball.len(),
            "gaps recorded over other candidates"
        );
        for (q, &pair) in candidates.ball_wall.iter().enumerate() {
            if gaps.distance[q] < reach {
                out.ball_wall.push(pair);
                logs.push(gaps.log[q]);
            }
        }
        for (q, &pair) in candidates.ball_ball.iter().enumerate() {
            if gaps.distance[walls + q] < reach {
                out.ball_ball.push(pair);
                logs.push(gaps.log[walls + q]);
            }
        }
    }

    /// `½ (x − x̃)ᵀ M (x − x̃)`.
    pub fn inertia_energy(&self, x: &[DVec2]) -> f64 {
        x.iter()
            .zip(self.x_tilde)
            .zip(self.mass)
            .map(|((x, xt), m)| 0.5 * m * (*x - *xt).length_squared())
            .sum()
    }

    /// `B(x)` over the given contacts (not scaled by `h²`); `+∞` if any barrier pair has `d ≤ 0`.
    pub fn contact_energy(&self, x: &[DVec2], contacts: &ContactSet) -> f64 {
        self.contact_energy_with(x, contacts, None)
    }

    /// [`Self::contact_energy`], appending each pair's distance and barrier logarithm to `gaps` when given.
    fn contact_energy_with(
        &self,
        x: &[DVec2],
        contacts: &ContactSet,
        mut gaps: Option<&mut CandidateGaps>,
    ) -> f64 {
        let mut term = |d: f64| match gaps.as_deref_mut() {
            None => self.model.value(d),
            Some(gaps) => {
                let (value, log) = self.model.value_and_log(d);
                gaps.push(d, log);
                value
            }
        };
        let mut total = 0.0;
        for &(i, k) in &contacts.ball_wall {
            let i = i as usize;
            let d = ball_wall_distance(x[i], self.radius[i], &self.walls[k as usize]).value;
            total += term(d);
        }
        for &(i, j) in &contacts.ball_ball {
            let (i, j) = (i as usize, j as usize);
            let d = (x[i] - x[j]).length() - self.radius[i] - self.radius[j];
            total += term(d);
        }
        total
    }

    /// `E(x)`, finding its own contacts.
    pub fn energy(&self, x: &[DVec2], workspace: &mut Workspace, contacts: &mut ContactSet) -> f64 {
        self.contacts(x, workspace, contacts);
        let inertia = self.inertia_energy(x);
        let contact = self.contact_energy(x, contacts);
        let mut total = if contacts.ball_wall.is_empty() && contacts.ball_ball.is_empty() {
            inertia
        } else {
            inertia + self.h * self.h * contact
        };
        if let Some((friction, x_start)) = self.friction
            && !friction.contacts.is_empty()
        {
            total += self.h * self.h * friction.energy(x, x_start);
        }
        total
    }

    /// `∇E(x)` and the PSD-projected Hessian over the given contacts.
    pub fn gradient_and_hessian(
        &self,
        x: &[DVec2],
        contacts: &ContactSet,
        gradient: &mut Vec<DVec2>,
        hessian: &mut BlockHessian,
    ) {
        self.gradient_and_hessian_projected(x, contacts, None, gradient, hessian, true);
    }

    /// As [`Self::gradient_and_hessian`]; `project = false` keeps the exact (possibly indefinite) Hessian,
    /// which is what finite differences check. `logs`, when given, holds each contact's barrier logarithm at `x`
    /// ([`Self::contacts_from_gaps`]), which then need not be computed again.
    pub fn gradient_and_hessian_projected(
        &self,
        x: &[DVec2],
        contacts: &ContactSet,
        logs: Option<&[f64]>,
        gradient: &mut Vec<DVec2>,
        hessian: &mut BlockHessian,
        project: bool,
    ) {
        let projection = if project {
            Projection::Psd
        } else {
            Projection::Exact
        };
        self.assemble(x, contacts, logs, gradient, hessian, projection);
    }

    /// As [`Self::gradient_and_hessian`], but each ball–ball contact block `S` keeps negative curvature down
    /// to `−β/2 · min(mᵢ/cᵢ, mⱼ/cⱼ)` (`cᵢ`: ball–ball contacts of ball `i`) instead of being clamped at 0.
    ///
    /// A pair adds `(vᵢ − vⱼ)ᵀ S (vᵢ − vⱼ) ≥ 2 λ_min(S) (|vᵢ|² + |vⱼ|²)` to `vᵀ H v`, so summed over every pair
    /// the contacts take away at most `β vᵀ M v`: `H ⪰ (1 − β) M` stays positive definite, while most of the
    /// tangential curvature `φ'/|p|` of a loaded contact (which plain projection drops, slowing Newton to
    /// linear convergence in a pile) is kept. Ball–wall blocks are projected to PSD as usual.
    pub fn gradient_and_hessian_mass_floored(
        &self,
        x: &[DVec2],
        contacts: &ContactSet,
        logs: Option<&[f64]>,
        gradient: &mut Vec<DVec2>,
        hessian: &mut BlockHessian,
        beta: f64,
    ) {
        let projection = Projection::MassShare(beta);
        self.assemble(x, contacts, logs, gradient, hessian, projection);
    }

    fn assemble(
        &self,
        x: &[DVec2],
        contacts: &ContactSet,
        logs: Option<&[f64]>,
        gradient: &mut Vec<DVec2>,
        hessian: &mut BlockHessian,
        projection: Projection,
    ) {
        let project = projection != Projection::Exact;
        let psd = |b: Sym2| if project { b.project_psd() } else { b };
        let h2 = self.h * self.h;
        let mut contact_count = Vec::new();
        if let Projection::MassShare(_) = projection {
            contact_count.resize(x.len(), 0u32);
            for &(i, j) in &contacts.ball_ball {
                contact_count[i as usize] += 1;
                contact_count[j as usize] += 1;
            }
        }
        // Scaled by h² (the floor compares with the unscaled masses of H = M + h² ∇²B).
        let pair_projection = |b: Sym2, i: usize, j: usize| match projection {
            Projection::Exact => b.scale(h2),
            Projection::Psd => b.project_psd().scale(h2),
            Projection::MassShare(beta) => {
                let share_i = self.mass[i] / f64::from(contact_count[i].max(1));
                let share_j = self.mass[j] / f64::from(contact_count[j].max(1));
                b.scale(h2)
                    .clamp_eigenvalues(-0.5 * beta * share_i.min(share_j))
            }
        };
        gradient.clear();
        gradient.extend(
            x.iter()
                .zip(self.x_tilde)
                .zip(self.mass)
                .map(|((x, xt), m)| (*x - *xt) * *m),
        );
        hessian.diagonal.clear();
        hessian
            .diagonal
            .extend(self.mass.iter().map(|m| Sym2::scaled_identity(*m)));
        hessian.off_diagonal.clear();
        let walls = contacts.ball_wall.len();
        if let Some(logs) = logs {
            assert_eq!(
                logs.len(),
                walls + contacts.ball_ball.len(),
                "a log per contact"
            );
        }
        let log = |q: usize| logs.map_or(f64::NAN, |logs| logs[q]);
        for (q, &(i, k)) in contacts.ball_wall.iter().enumerate() {
            let i = i as usize;
            let dist = ball_wall_distance(x[i], self.radius[i], &self.walls[k as usize]);
            let (d1, d2) = self.model.derivatives(dist.value, log(q));
            gradient[i] += (dist.gradient * d1) * h2;
            let projected = psd(pair_block(d1, d2, dist.gradient, dist.hessian)).scale(h2);
            add_block(&mut hessian.diagonal[i], projected);
        }
        for (q, &(i, j)) in contacts.ball_ball.iter().enumerate() {
            let (i_, j_) = (i as usize, j as usize);
            let dist = ball_ball_distance(x[i_], self.radius[i_], x[j_], self.radius[j_]);
            let (d1, d2) = self.model.derivatives(dist.value, log(walls + q));
            let force = dist.gradient * d1 * h2;
            gradient[i_] += force;
            gradient[j_] -= force;
            let projected =
                pair_projection(pair_block(d1, d2, dist.gradient, dist.hessian), i_, j_);
            hessian.diagonal[i_] = hessian.diagonal[i_].plus(projected);
            hessian.diagonal[j_] = hessian.diagonal[j_].plus(projected);
            hessian.off_diagonal.push((i, j, projected.scale(-1.0)));
        }
        if let Some((friction, x_start)) = self.friction {
            for c in &friction.contacts {
                let (d1, d2) = friction.derivatives(c, x, x_start);
                let i = c.i as usize;
                let force = c.tangent * (d1 * h2);
                let block = Sym2::outer(c.tangent).scale(d2 * h2);
                gradient[i] += force;
                hessian.diagonal[i] = hessian.diagonal[i].plus(block);
                if let Some(j) = c.j {
                    gradient[j as usize] -= force;
                    hessian.diagonal[j as usize] = hessian.diagonal[j as usize].plus(block);
                    if d2 != 0.0 {
                        hessian
                            .off_diagonal
                            .push((c.i.min(j), c.i.max(j), block.scale(-1.0)));
                    }
                }
            }
        }
    }

    /// The largest relative change `|∇d_k · Δx| / d_k` that the direction `Δx` would make, to first order, to the
    /// distance of a contact of `contacts` at `x` that is at least `floor` (0 without such contacts; infinite for a
    /// change that is not a number). Contacts closer than `floor` are left out: below the CCD's smallest
    /// separation a gap is not resolved further (pursued to 10⁻¹⁷ m, a point ball's next step passed a thin wall).
    pub fn largest_relative_gap_change(
        &self,
        x: &[DVec2],
        contacts: &ContactSet,
        direction: &[DVec2],
        floor: f64,
    ) -> f64 {
        let mut largest = 0.0f64;
        for &(i, k) in &contacts.ball_wall {
            let i = i as usize;
            let dist = ball_wall_distance(x[i], self.radius[i], &self.walls[k as usize]);
            if dist.value >= floor {
                let change = dist.gradient.dot(direction[i]).abs();
                largest = largest.max(relative(change, dist.value));
            }
        }
        for &(i, j) in &contacts.ball_ball {
            let (i, j) = (i as usize, j as usize);
            let dist = ball_ball_distance(x[i], self.radius[i], x[j], self.radius[j]);
            if dist.value >= floor {
                let change = dist.gradient.dot(direction[i] - direction[j]).abs();
                largest = largest.max(relative(change, dist.value));
            }
        }
        largest
    }

    /// Freezes friction at `x` (SPEC §1.5): per contact within reach, `λ = −φ'(d)` (the normal force magnitude:
    /// `−κ b'(d)` for IPC, `k p` for penalty) and the tangent `t ⊥ ∇d`. `epsilon` is `ε_u = ε_v h` [m].
    pub fn lagged_friction(
        &self,
        x: &[DVec2],
        contacts: &ContactSet,
        mu: f64,
        epsilon: f64,
    ) -> FrictionTerm {
        let mut term = FrictionTerm {
            contacts: Vec::new(),
            epsilon,
        };
        if mu <= 0.0 {
            return term;
        }
        for &(i, k) in &contacts.ball_wall {
            let iu = i as usize;
            let dist = ball_wall_distance(x[iu], self.radius[iu], &self.walls[k as usize]);
            let lambda = -self.model.scalar(dist.value).1;
            if lambda > 0.0 && lambda.is_finite() {
                term.contacts.push(FrictionContact {
                    i,
                    j: None,
                    tangent: tangent_of(dist.gradient),
                    mu_lambda: mu * lambda,
                });
            }
        }
        for &(i, j) in &contacts.ball_ball {
            let (iu, ju) = (i as usize, j as usize);
            let dist = ball_ball_distance(x[iu], self.radius[iu], x[ju], self.radius[ju]);
            let lambda = -self.model.scalar(dist.value).1;
            if lambda > 0.0 && lambda.is_finite() {
                term.contacts.push(FrictionContact {
                    i,
                    j: Some(j),
                    tangent: tangent_of(dist.gradient),
                    mu_lambda: mu * lambda,
                });
            }
        }
        term
    }

    /// `∇B(x)` over the given contacts without `κ` (for the adaptive-stiffness balance, SPEC §1.4).
    pub fn unit_barrier_gradient(&self, x: &[DVec2], contacts: &ContactSet) -> Vec<DVec2> {
        let dhat = match self.model {
            ContactModel::Barrier { dhat, .. } => dhat,
            ContactModel::Penalty { .. } => return vec![DVec2::ZERO; x.len()],
        };
        let mut g = vec![DVec2::ZERO; x.len()];
        for &(i, k) in &contacts.ball_wall {
            let i = i as usize;
            let dist = ball_wall_distance(x[i], self.radius[i], &self.walls[k as usize]);
            g[i] += dist.gradient * barrier_first_derivative(dist.value, dhat);
        }
        for &(i, j) in &contacts.ball_ball {
            let (i, j) = (i as usize, j as usize);
            let dist = ball_ball_distance(x[i], self.radius[i], x[j], self.radius[j]);
            let f = dist.gradient * barrier_first_derivative(dist.value, dhat);
            g[i] += f;
            g[j] -= f;
        }
        g
    }
}

/// How contact Hessian blocks are made positive (semi-)definite.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Projection {
    Exact,
    Psd,
    MassShare(f64),
}

/// `φ'' ∇d ∇dᵀ + φ' ∇²d`, written so that an axis-aligned contact adds exactly `φ''` (no stray roundoff).
fn pair_block(d1: f64, d2: f64, gradient: DVec2, hessian: Sym2) -> Sym2 {
    let curvature = Sym2::outer(gradient).scale(d2);
    if hessian == Sym2::ZERO {
        curvature
    } else {
        curvature.plus(hessian.scale(d1))
    }
}

fn add_block(target: &mut Sym2, block: Sym2) {
    *target = target.plus(block);
}

/// `change / distance` (`distance > 0`), infinite for a NaN change.
fn relative(change: f64, distance: f64) -> f64 {
    if change.is_nan() {
        f64::INFINITY
    } else {
        change / distance
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `H v` for a block Hessian (both triangles of each coupled pair).
    fn hessian_times(hess: &BlockHessian, v: &[DVec2]) -> Vec<DVec2> {
        let mut hv: Vec<DVec2> = hess
            .diagonal
            .iter()
            .zip(v)
            .map(|(b, v)| b.mul_vec(*v))
            .collect();
        for &(i, j, b) in &hess.off_diagonal {
            let (i, j) = (i as usize, j as usize);
            hv[i] += b.mul_vec(v[j]);
            hv[j] += b.mul_vec(v[i]);
        }
        hv
    }

    fn scene() -> (Vec<DVec2>, Vec<f64>, Vec<f64>, Vec<Wall>) {
        let x_tilde = vec![
            DVec2::new(0.1, 0.02),
            DVec2::new(0.13, 0.035),
            DVec2::new(-0.2, 0.3),
        ];
        let mass = vec![1.0, 2.0, 0.5];
        let radius = vec![0.01, 0.015, 0.0];
        let walls = vec![
            Wall {
                center: DVec2::new(0.0, -0.5),
                half_extents: DVec2::new(2.0, 0.5),
                angle: 0.0,
            },
            Wall {
                center: DVec2::new(-0.25, 0.3),
                half_extents: DVec2::new(0.04, 0.2),
                angle: 0.3,
            },
        ];
        (x_tilde, mass, radius, walls)
    }

    fn check_whole_energy(model: ContactModel, x: Vec<DVec2>, mu: f64) {
        let (x_tilde, mass, radius, walls) = scene();
        let index = WallIndex::new(&walls);
        let mut p =
            IncrementalPotential::new(&x_tilde, &mass, &radius, &walls, &index, 0.01, model);
        // Friction frozen at a start state a little away from x, so |u| spans both mollifier branches.
        let x_start: Vec<DVec2> = x
            .iter()
            .enumerate()
            .map(|(i, x)| *x - DVec2::new(3e-6 + 6e-6 * i as f64, 1e-6))
            .collect();
        let mut start_contacts = ContactSet::default();
        p.contacts(&x_start, &mut Workspace::default(), &mut start_contacts);
        let friction = p.lagged_friction(&x_start, &start_contacts, mu, 1e-3 * 0.01);
        if mu > 0.0 {
            assert!(!friction.contacts.is_empty());
            p.friction = Some((&friction, &x_start));
        }
        let mut ws = Workspace::default();
        let mut contacts = ContactSet::default();
        let e0 = p.energy(&x, &mut ws, &mut contacts);
        assert!(e0.is_finite());
        assert!(
            !contacts.ball_wall.is_empty() && !contacts.ball_ball.is_empty(),
            "test must exercise both pair kinds: {contacts:?}"
        );
        let mut g = Vec::new();
        let mut projected = BlockHessian::default();
        p.gradient_and_hessian(&x, &contacts, &mut g, &mut projected);
        for block in &projected.diagonal {
            assert!(
                block.eigen().0 >= 0.0,
                "projected diagonal block is not PSD: {block:?}"
            );
        }
        let mut hess = BlockHessian::default();
        p.gradient_and_hessian_projected(&x, &contacts, None, &mut g, &mut hess, false);
        let eps = 1e-9;
        for i in 0..x.len() {
            for axis in 0..2 {
                let mut xp = x.clone();
                let mut xm = x.clone();
                xp[i][axis] += eps;
                xm[i][axis] -= eps;
                let mut c = ContactSet::default();
                let fd =
                    (p.energy(&xp, &mut ws, &mut c) - p.energy(&xm, &mut ws, &mut c)) / (2.0 * eps);
                let scale = g[i][axis].abs().max(1e-6);
                assert!(
                    (fd - g[i][axis]).abs() < 1e-5 * scale,
                    "dE/dx[{i}][{axis}]: fd {fd} vs {}",
                    g[i][axis]
                );
            }
        }
        // Hessian: compare the exact (unprojected) H·v with the finite difference of the gradient along v.
        let v: Vec<DVec2> = (0..x.len())
            .map(|i| DVec2::new(0.3 + i as f64, -0.7 + 0.5 * i as f64))
            .collect();
        let hv = hessian_times(&hess, &v);
        let t = 1e-8;
        let xp: Vec<DVec2> = x.iter().zip(&v).map(|(x, v)| *x + *v * t).collect();
        let xm: Vec<DVec2> = x.iter().zip(&v).map(|(x, v)| *x - *v * t).collect();
        let (mut gp, mut gm) = (Vec::new(), Vec::new());
        let mut cp = ContactSet::default();
        let mut cm = ContactSet::default();
        p.contacts(&xp, &mut ws, &mut cp);
        p.contacts(&xm, &mut ws, &mut cm);
        p.gradient_and_hessian(&xp, &cp, &mut gp, &mut hess.clone());
        p.gradient_and_hessian(&xm, &cm, &mut gm, &mut hess.clone());
        for i in 0..x.len() {
            let fd = (gp[i] - gm[i]) / (2.0 * t);
            assert!(
                (fd - hv[i]).length() < 1e-4 * hv[i].length().max(1.0),
                "H v at ball {i}: fd {fd} vs {}",
                hv[i]
            );
        }
    }

    /// Signed distance to a box by clamping in box coordinates (independent of [`Wall::signed_distance`]).
    fn reference_box_distance(wall: &Wall, p: DVec2) -> f64 {
        let (s, c) = wall.angle.sin_cos();
        let d = p - wall.center;
        let q = DVec2::new(c * d.x + s * d.y, -s * d.x + c * d.y);
        let excess = q.abs() - wall.half_extents;
        excess.max(DVec2::ZERO).length() + excess.max_element().min(0.0)
    }

    /// SPEC §1.2's barrier, written out here: `(d̂ − d)² ln(d̂/d)` inside `(0, d̂)`.
    fn reference_barrier(d: f64, dhat: f64) -> f64 {
        if d >= dhat {
            0.0
        } else if d <= 0.0 {
            f64::INFINITY
        } else {
            (dhat - d) * (dhat - d) * (dhat / d).ln()
        }
    }

    /// `(x, x̃, masses, radii, walls)`.
    type Layout = (Vec<DVec2>, Vec<DVec2>, Vec<f64>, Vec<f64>, Vec<Wall>);

    /// A random layout of `n` balls above a floor and beside a tilted slab, every surface distance at least
    /// `min_gap`, with `x̃` a random displacement of it; masses and radii random.
    fn random_layout(next: &mut impl FnMut() -> f64, n: usize, min_gap: f64) -> Layout {
        let walls = vec![
            Wall {
                center: DVec2::new(0.2, -0.5),
                half_extents: DVec2::new(2.0, 0.5),
                angle: 0.0,
            },
            Wall {
                center: DVec2::new(0.1 + 0.2 * next(), 0.15),
                half_extents: DVec2::new(0.02 + 0.05 * next(), 0.1),
                angle: 3.0 * next() - 1.5,
            },
        ];
        let (mut x, mut radius) = (Vec::new(), Vec::new());
        while x.len() < n {
            let c = DVec2::new(0.4 * next(), 0.3 * next());
            let r = 0.01 + 0.03 * next();
            let clear_walls = walls
                .iter()
                .all(|w| reference_box_distance(w, c) - r >= min_gap);
            let clear_balls = x
                .iter()
                .zip(&radius)
                .all(|(o, ro): (&DVec2, &f64)| (c - *o).length() - r - ro >= min_gap);
            if clear_walls && clear_balls {
                x.push(c);
                radius.push(r);
            }
        }
        let x_tilde = x
            .iter()
            .map(|c| *c + DVec2::new(0.02 * next() - 0.01, 0.02 * next() - 0.01))
            .collect();
        let mass = (0..n).map(|_| 0.1 + 2.0 * next()).collect();
        (x, x_tilde, mass, radius, walls)
    }

    /// The distances and logarithms the line search records at its trial point give, at that point, the same
    /// energy, the same contacts and the same gradient and Hessian (exact, projected and mass-floored) as
    /// computing them afresh, to the bit: random layouts, both models, every pair a candidate.
    #[test]
    fn gaps_recorded_by_the_energy_give_the_contacts_and_derivatives_computed_afresh() {
        let mut next = crate::testing::uniform(0x6A_7051);
        let bits = |h: &BlockHessian| -> Vec<u64> {
            let block = |b: &Sym2| [b.xx.to_bits(), b.xy.to_bits(), b.yy.to_bits()];
            let mut out: Vec<u64> = h.diagonal.iter().flat_map(block).collect();
            for (i, j, b) in &h.off_diagonal {
                out.extend([u64::from(*i), u64::from(*j)]);
                out.extend(block(b));
            }
            out
        };
        let gradient_bits = |g: &[DVec2]| -> Vec<u64> {
            g.iter()
                .flat_map(|v| [v.x.to_bits(), v.y.to_bits()])
                .collect()
        };
        let (mut logged, mut penalty_contacts) = (0, 0);
        for case in 0..60 {
            let barrier = case % 3 != 0;
            // Penalty layouts overlap by up to 5 mm, so that it has contacts.
            let min_gap = if barrier { 1e-4 } else { -5e-3 };
            let (x, x_tilde, mass, radius, walls) = random_layout(&mut next, 4 + case % 6, min_gap);
            let h = 10f64.powf(-3.0 + 1.5 * next());
            let model = if barrier {
                ContactModel::Barrier {
                    dhat: 10f64.powf(-2.5 + 1.5 * next()),
                    kappa: 10f64.powf(2.0 + 3.0 * next()),
                }
            } else {
                ContactModel::Penalty {
                    stiffness: 10f64.powf(2.0 + 4.0 * next()),
                }
            };
            let index = WallIndex::new(&walls);
            let p = IncrementalPotential::new(&x_tilde, &mass, &radius, &walls, &index, h, model);
            let n = x.len() as u32;
            let candidates = ContactSet {
                ball_wall: (0..n)
                    .flat_map(|i| (0..walls.len() as u32).map(move |k| (i, k)))
                    .collect(),
                ball_ball: (0..n)
                    .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
                    .collect(),
            };
            let mut gaps = CandidateGaps::default();
            let recorded = p.energy_over_recording(&x, &candidates, &mut gaps);
            assert_eq!(
                recorded.to_bits(),
                p.energy_over(&x, &candidates).to_bits(),
                "case {case}"
            );
            let (mut afresh, mut from_gaps, mut logs) =
                (ContactSet::default(), ContactSet::default(), Vec::new());
            p.contacts_among(&x, &candidates, &mut afresh);
            p.contacts_from_gaps(&candidates, &gaps, &mut from_gaps, &mut logs);
            assert_eq!(afresh.ball_wall, from_gaps.ball_wall, "case {case}");
            assert_eq!(afresh.ball_ball, from_gaps.ball_ball, "case {case}");
            if barrier {
                logged += logs.iter().filter(|l| !l.is_nan()).count();
            } else {
                assert!(
                    logs.iter().all(|l| l.is_nan()),
                    "penalty takes no logarithm"
                );
                penalty_contacts += logs.len();
            }
            for variant in 0..3 {
                let (mut g0, mut h0) = (Vec::new(), BlockHessian::default());
                let (mut g1, mut h1) = (Vec::new(), BlockHessian::default());
                for (with, g, hess) in [
                    (None, &mut g0, &mut h0),
                    (Some(&logs[..]), &mut g1, &mut h1),
                ] {
                    match variant {
                        0 => p.gradient_and_hessian_projected(&x, &afresh, with, g, hess, false),
                        1 => p.gradient_and_hessian_projected(&x, &afresh, with, g, hess, true),
                        _ => p.gradient_and_hessian_mass_floored(&x, &afresh, with, g, hess, 0.5),
                    }
                }
                assert_eq!(
                    gradient_bits(&g0),
                    gradient_bits(&g1),
                    "case {case} {variant}"
                );
                assert_eq!(bits(&h0), bits(&h1), "case {case} {variant}");
            }
        }
        assert!(
            logged > 100,
            "only {logged} barrier contacts took a recorded logarithm"
        );
        assert!(
            penalty_contacts > 10,
            "only {penalty_contacts} penalty contacts"
        );
    }

    /// On random layouts with random `h`, `κ`, `d̂` and `k` (none the spec's), `E(x)` equals a brute-force sum
    /// written here from SPEC §1: `½ Σ mᵢ |xᵢ − x̃ᵢ|² + h² Σ φ(d)` over **every** ball–wall and ball–ball pair (no
    /// broad phase, clamp-based box distances, the barrier or `½ k p²` written out), and the contact set is
    /// exactly the pairs with `d < d̂` (IPC) or `d < 0` (penalty). Tolerance 10⁻¹² relative: the sums differ only in
    /// the order and rounding of a few dozen terms.
    #[test]
    fn energy_matches_a_brute_force_sum_over_every_pair_on_random_layouts() {
        let mut next = crate::testing::uniform(0xE_2024);
        let (mut barrier_pairs, mut penalty_pairs) = (0, 0);
        for case in 0..60 {
            let ipc = case % 2 == 0;
            let n = 6 + case % 7;
            let (x, x_tilde, mass, radius, walls) =
                random_layout(&mut next, n, if ipc { 1e-4 } else { -0.02 });
            let h = 10f64.powf(-3.0 + 1.5 * next());
            let (dhat, kappa, stiffness) = (
                0.01 + 0.05 * next(),
                10f64.powf(2.0 + 4.0 * next()),
                10f64.powf(3.0 + 4.0 * next()),
            );
            let model = if ipc {
                ContactModel::Barrier { dhat, kappa }
            } else {
                ContactModel::Penalty { stiffness }
            };
            let phi = |d: f64| {
                if ipc {
                    kappa * reference_barrier(d, dhat)
                } else {
                    0.5 * stiffness * d.min(0.0) * d.min(0.0)
                }
            };
            let reach = if ipc { dhat } else { 0.0 };
            let mut expected_wall = Vec::new();
            let mut expected_ball = Vec::new();
            let mut contact = 0.0;
            for (i, c) in x.iter().enumerate() {
                for (k, w) in walls.iter().enumerate() {
                    let d = reference_box_distance(w, *c) - radius[i];
                    contact += phi(d);
                    if d < reach {
                        expected_wall.push((i as u32, k as u32));
                    }
                }
                for j in i + 1..x.len() {
                    let d = (*c - x[j]).length() - radius[i] - radius[j];
                    contact += phi(d);
                    if d < reach {
                        expected_ball.push((i as u32, j as u32));
                    }
                }
            }
            let inertia: f64 = (0..n)
                .map(|i| 0.5 * mass[i] * (x[i] - x_tilde[i]).length_squared())
                .sum();
            let expected = inertia + h * h * contact;
            let index = WallIndex::new(&walls);
            let p = IncrementalPotential::new(&x_tilde, &mass, &radius, &walls, &index, h, model);
            let mut contacts = ContactSet::default();
            let e = p.energy(&x, &mut Workspace::default(), &mut contacts);
            assert!(
                (e - expected).abs() <= 1e-12 * expected,
                "case {case}: E = {e}, brute force {expected}"
            );
            let mut got_wall = contacts.ball_wall.clone();
            let mut got_ball = contacts.ball_ball.clone();
            got_wall.sort_unstable();
            got_ball.sort_unstable();
            assert_eq!(got_wall, expected_wall, "case {case}: ball–wall contacts");
            assert_eq!(got_ball, expected_ball, "case {case}: ball–ball contacts");
            let pairs = expected_wall.len() + expected_ball.len();
            if ipc {
                barrier_pairs += pairs;
            } else {
                penalty_pairs += pairs;
            }
        }
        assert!(
            barrier_pairs > 100 && penalty_pairs > 100,
            "barrier pairs {barrier_pairs}, penalty pairs {penalty_pairs}"
        );
    }

    /// On random layouts (random `h`, `κ`, `d̂`, masses, radii), `∇E` matches central differences of `E` in every
    /// coordinate, and the exact Hessian times a random vector matches the central difference of `∇E` along it.
    /// Steps of 10⁻⁷ m: distances are ≥ 10⁻³ m, so truncation (`~ step²/d²`) stays below 10⁻⁸ relative.
    /// Tolerance: 10⁻⁵ relative, plus the roundoff of a central difference, 16 ulps of the differenced quantity
    /// divided by the step.
    #[test]
    fn gradient_and_hessian_match_finite_differences_on_random_layouts() {
        let mut next = crate::testing::uniform(0xF_D2024);
        let mut checked = 0;
        for case in 0..40 {
            let (x, x_tilde, mass, radius, walls) = random_layout(&mut next, 5 + case % 4, 1e-3);
            let h = 10f64.powf(-3.0 + 1.5 * next());
            let model = ContactModel::Barrier {
                dhat: 0.01 + 0.05 * next(),
                kappa: 10f64.powf(2.0 + 3.0 * next()),
            };
            let index = WallIndex::new(&walls);
            let p = IncrementalPotential::new(&x_tilde, &mass, &radius, &walls, &index, h, model);
            let mut ws = Workspace::default();
            let mut contacts = ContactSet::default();
            let e0 = p.energy(&x, &mut ws, &mut contacts);
            if contacts.ball_wall.is_empty() && contacts.ball_ball.is_empty() {
                continue;
            }
            checked += 1;
            let (mut g, mut hess) = (Vec::new(), BlockHessian::default());
            p.gradient_and_hessian_projected(&x, &contacts, None, &mut g, &mut hess, false);
            let eps = 1e-7;
            let roundoff = |value: f64| 16.0 * f64::EPSILON * value.abs() / eps;
            let mut c = ContactSet::default();
            for i in 0..x.len() {
                for axis in 0..2 {
                    let (mut xp, mut xm) = (x.clone(), x.clone());
                    xp[i][axis] += eps;
                    xm[i][axis] -= eps;
                    let fd = (p.energy(&xp, &mut ws, &mut c) - p.energy(&xm, &mut ws, &mut c))
                        / (2.0 * eps);
                    assert!(
                        (fd - g[i][axis]).abs() <= 1e-5 * g[i][axis].abs() + roundoff(e0),
                        "case {case}: dE/dx[{i}][{axis}] = {}, fd {fd}",
                        g[i][axis]
                    );
                }
            }
            let v: Vec<DVec2> = (0..x.len())
                .map(|_| DVec2::new(2.0 * next() - 1.0, 2.0 * next() - 1.0))
                .collect();
            let hv = hessian_times(&hess, &v);
            let shifted = |sign: f64| -> Vec<DVec2> {
                let y: Vec<DVec2> = x
                    .iter()
                    .zip(&v)
                    .map(|(x, v)| *x + *v * (sign * eps))
                    .collect();
                let mut cy = ContactSet::default();
                p.contacts(&y, &mut Workspace::default(), &mut cy);
                let (mut gy, mut hy) = (Vec::new(), BlockHessian::default());
                p.gradient_and_hessian_projected(&y, &cy, None, &mut gy, &mut hy, false);
                gy
            };
            let (gp, gm) = (shifted(1.0), shifted(-1.0));
            let largest = g.iter().fold(0.0f64, |m, g| m.max(g.length()));
            for i in 0..x.len() {
                let fd = (gp[i] - gm[i]) / (2.0 * eps);
                assert!(
                    (fd - hv[i]).length() <= 1e-5 * hv[i].length() + roundoff(largest),
                    "case {case}: (Hv)[{i}] = {}, fd {fd}",
                    hv[i]
                );
            }
        }
        assert!(checked >= 25, "{checked} layouts with contacts");
    }

    /// Friction frozen at a random start state (SPEC §1.5): one contact per pair within reach, with
    /// `μλ = μ κ |b'(d)|` (IPC; `b'` written out here) or `μ k p` (penalty), and a unit tangent orthogonal to the
    /// contact normal (the distance gradient, taken here from the clamp-based distance by central differences).
    /// Once sliding (`|u| ≥ ε_u`) the friction force is exactly `μλ` against the slip.
    #[test]
    fn lagged_friction_freezes_mu_lambda_and_the_tangent_of_each_contact() {
        let mut next = crate::testing::uniform(0x1A66ED);
        let mut checked = 0;
        for case in 0..40 {
            let ipc = case % 2 == 0;
            let (x, x_tilde, mass, radius, walls) =
                random_layout(&mut next, 8, if ipc { 1e-4 } else { -0.005 });
            let (dhat, kappa, stiffness) = (
                0.01 + 0.04 * next(),
                10f64.powf(2.0 + 3.0 * next()),
                10f64.powf(3.0 + 3.0 * next()),
            );
            let mu = 0.05 + next();
            let model = if ipc {
                ContactModel::Barrier { dhat, kappa }
            } else {
                ContactModel::Penalty { stiffness }
            };
            let index = WallIndex::new(&walls);
            let p =
                IncrementalPotential::new(&x_tilde, &mass, &radius, &walls, &index, 0.01, model);
            let mut contacts = ContactSet::default();
            p.contacts(&x, &mut Workspace::default(), &mut contacts);
            let epsilon = 1e-5;
            let term = p.lagged_friction(&x, &contacts, mu, epsilon);
            assert_eq!(term.epsilon, epsilon);
            let force = |d: f64| {
                if ipc {
                    let b1 = -2.0 * (d - dhat) * (d / dhat).ln() - (d - dhat) * (d - dhat) / d;
                    -kappa * b1
                } else {
                    stiffness * (-d).max(0.0)
                }
            };
            let mut expected = Vec::new();
            for &(i, k) in &contacts.ball_wall {
                let (c, r, w) = (x[i as usize], radius[i as usize], &walls[k as usize]);
                let f = |q: DVec2| reference_box_distance(w, q) - r;
                let e = 1e-7;
                let normal = DVec2::new(
                    f(c + DVec2::X * e) - f(c - DVec2::X * e),
                    f(c + DVec2::Y * e) - f(c - DVec2::Y * e),
                ) / (2.0 * e);
                expected.push((i, None, normal, mu * force(f(c))));
            }
            for &(i, j) in &contacts.ball_ball {
                let (ci, cj) = (x[i as usize], x[j as usize]);
                let d = (ci - cj).length() - radius[i as usize] - radius[j as usize];
                expected.push((i, Some(j), (ci - cj).normalize(), mu * force(d)));
            }
            expected.retain(|e| e.3 > 0.0);
            assert_eq!(term.contacts.len(), expected.len(), "case {case}");
            for (got, (i, j, normal, mu_lambda)) in term.contacts.iter().zip(expected) {
                assert_eq!((got.i, got.j), (i, j), "case {case}");
                assert!(
                    (got.mu_lambda - mu_lambda).abs() <= 1e-10 * mu_lambda,
                    "case {case}: μλ = {}, expected {mu_lambda}",
                    got.mu_lambda
                );
                assert!((got.tangent.length() - 1.0).abs() <= 1e-12);
                assert!(got.tangent.dot(normal).abs() <= 1e-6, "case {case}: t·n");
                // Sliding by 3 ε_u along ±t: the force is μλ against the slip, exactly.
                for sign in [1.0, -1.0] {
                    let mut moved = x.clone();
                    moved[i as usize] += got.tangent * (3.0 * epsilon * sign);
                    let (first, second) = term.derivatives(got, &moved, &x);
                    assert_eq!(first, sign * got.mu_lambda);
                    assert_eq!(second, 0.0);
                }
                checked += 1;
            }
        }
        assert!(checked > 50, "{checked} contacts checked");
    }

    #[test]
    fn barrier_potential_derivatives_match_finite_differences() {
        let dhat = 1e-2;
        // Ball 0 sits 4 mm above the floor, ball 1 is 5 mm from ball 0, ball 2 is 6 mm from the tilted wall.
        let x0 = DVec2::new(0.1, 0.014);
        let x1 = x0 + DVec2::new(0.024, 0.018).normalize() * (0.01 + 0.015 + 0.005);
        let wall = scene().3[1];
        let corner_free = wall.center + wall.to_world_direction(DVec2::new(0.04 + 0.006, 0.0));
        check_whole_energy(
            ContactModel::Barrier { dhat, kappa: 1e3 },
            vec![x0, x1, corner_free],
            0.0,
        );
        check_whole_energy(
            ContactModel::Barrier { dhat, kappa: 1e3 },
            vec![x0, x1, corner_free],
            0.4,
        );
    }

    #[test]
    fn mass_floored_hessian_keeps_at_least_one_minus_beta_of_the_mass() {
        // Two heavily loaded ball–ball contacts (ball 1 between 0 and 2, all deep inside d̂): their tangential
        // curvature φ'/|p| is strongly negative, yet vᵀHv ≥ (1 − β) vᵀMv for every v.
        let dhat = 1e-2;
        let radius = vec![0.01, 0.01, 0.01];
        let mass = vec![1.0, 0.5, 2.0];
        let x = vec![
            DVec2::new(0.0, 0.0),
            DVec2::new(0.0201, 0.0005),
            DVec2::new(0.0402, 0.0),
        ];
        let x_tilde = x.clone();
        let walls: Vec<Wall> = Vec::new();
        let index = WallIndex::new(&walls);
        let p = IncrementalPotential::new(
            &x_tilde,
            &mass,
            &radius,
            &walls,
            &index,
            0.01,
            ContactModel::Barrier { dhat, kappa: 1e9 },
        );
        let mut contacts = ContactSet::default();
        p.contacts(&x, &mut Workspace::default(), &mut contacts);
        assert_eq!(contacts.ball_ball.len(), 2);
        let beta = 0.9;
        let (mut g, mut floored, mut exact) =
            (Vec::new(), BlockHessian::default(), BlockHessian::default());
        p.gradient_and_hessian_mass_floored(&x, &contacts, None, &mut g, &mut floored, beta);
        p.gradient_and_hessian_projected(&x, &contacts, None, &mut g, &mut exact, false);
        let quadratic = |h: &BlockHessian, v: &[DVec2]| -> f64 {
            let mut q: f64 = h
                .diagonal
                .iter()
                .zip(v)
                .map(|(b, v)| v.dot(b.mul_vec(*v)))
                .sum();
            for &(i, j, b) in &h.off_diagonal {
                q += 2.0 * v[i as usize].dot(b.mul_vec(v[j as usize]));
            }
            q
        };
        let mut exact_went_below = false;
        for k in 0..200 {
            let a = k as f64 * 0.7;
            // Every other v moves the balls only across the line of centres (the tangential directions).
            let along = if k % 2 == 0 { 0.0 } else { 1.0 };
            let v: Vec<DVec2> = (0..3)
                .map(|i| DVec2::new(along * (a + i as f64).sin(), (1.3 * a - i as f64).cos()))
                .collect();
            let mv: f64 = v
                .iter()
                .zip(&mass)
                .map(|(v, m)| m * v.length_squared())
                .sum();
            // Relative tolerance: the quadratic forms sum terms of size ~κ h² b'' |v|².
            let scale = quadratic(&exact, &v).abs().max(mv);
            assert!(
                quadratic(&floored, &v) >= (1.0 - beta) * mv - 1e-9 * scale,
                "vᵀHv below (1 − β) vᵀMv for v = {v:?}"
            );
            exact_went_below |= quadratic(&exact, &v) < (1.0 - beta) * mv;
        }
        assert!(exact_went_below, "the case must need the floor");
    }

    #[test]
    fn penalty_potential_derivatives_match_finite_differences() {
        let x0 = DVec2::new(0.1, 0.004);
        let x1 = x0 + DVec2::new(0.02, 0.005);
        let wall = scene().3[1];
        let inside = wall.center + wall.to_world_direction(DVec2::new(0.03, 0.05));
        check_whole_energy(
            ContactModel::Penalty { stiffness: 1e4 },
            vec![x0, x1, inside],
            0.0,
        );
        check_whole_energy(
            ContactModel::Penalty { stiffness: 1e4 },
            vec![x0, x1, inside],
            0.3,
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Widening a few skins in place gives exactly the list (pairs and their order) that a list built from
        /// scratch with the wider skins holds, so the Newton solve is the same bit for bit either way.
        #[test]
        fn a_widened_verlet_list_equals_one_built_from_scratch(
            balls in proptest::collection::vec((-1.0f64..1.0, -0.2f64..1.0, 0.0f64..0.08, 0.0f64..0.05), 2..60),
            widen in proptest::collection::vec((0usize..60, 0.0f64..0.6), 1..6),
        ) {
            let (_, mass, _, walls) = scene();
            let index = WallIndex::new(&walls);
            let x: Vec<DVec2> = balls.iter().map(|b| DVec2::new(b.0, b.1)).collect();
            let radius: Vec<f64> = balls.iter().map(|b| b.2).collect();
            let skin: Vec<f64> = balls.iter().map(|b| b.3).collect();
            let mass = vec![mass[0]; x.len()];
            let model = ContactModel::Barrier { dhat: 1e-3, kappa: 1e4 };
            let potential = IncrementalPotential::new(&x, &mass, &radius, &walls, &index, 0.01, model);
            let mut ws = Workspace::default();
            let mut list = VerletList::default();
            potential.verlet_list(&x, &skin, &mut ws, &mut list);
            let mut wider = skin.clone();
            let mut widened = Vec::new();
            for &(k, extra) in &widen {
                let i = k % x.len();
                wider[i] += extra;
                widened.retain(|&(j, _)| j != i as u32);
                widened.push((i as u32, wider[i]));
            }
            potential.widen_verlet_list(&mut list, &widened, &mut ws);
            let mut fresh = VerletList::default();
            potential.verlet_list(&x, &wider, &mut ws, &mut fresh);
            proptest::prop_assert_eq!(&list.pairs.ball_ball, &fresh.pairs.ball_ball);
            proptest::prop_assert_eq!(&list.pairs.ball_wall, &fresh.pairs.ball_wall);
            proptest::prop_assert_eq!(&list.skin, &fresh.skin);
        }
    }
}
