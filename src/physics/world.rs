//! A lane: one independent physics world with its own contact settings, stepped by the incremental-potential
//! Newton solver. The CLI, the GUI and the tests all step lanes through [`LaneWorld::step`].

use glam::DVec2;
use serde::{Deserialize, Serialize};

use super::broad_phase::BroadPhase;
use super::geometry::{Ball, Wall, ball_wall_gap};
use super::linear::LinearCounters;
use super::newton::{
    NewtonReport, NewtonSettings, NewtonWorkspace, PhaseTimes, StopReason, minimize,
};
use super::potential::{ContactModel, ContactSet, IncrementalPotential, WallIndex};
use super::rod_flight::{Rod, RodStepReport, step_rod};
use super::spawn_grid::SpawnGrid;
use super::stiffness::{AdaptiveKappa, default_dhat};
use super::union_find::UnionFind;

/// Hard cap on balls per lane, so a hostile scene or a runaway spawner gets a clear error, not an OOM.
pub const MAX_BALLS_PER_LANE: usize = 200_000;
/// Hard cap on a lane's balls × walls. Each ball–wall pair's side of the wall is kept (24 bytes) and looked at
/// every step to report tunnelling: 200 000 balls and 10 000 walls, each within its own limit, asked for 48 GB.
/// 2·10⁶ pairs are 48 MB and a few milliseconds a step.
pub const MAX_BALL_WALL_PAIRS_PER_LANE: usize = 2_000_000;
/// Largest coordinate, radius or half extent a lane accepts [m]. Gaps matter down to micrometres and below, and
/// `f64` keeps about 16 digits: at 1e6 m a gap is still resolved to about 2e-10 m. Far beyond it the contact
/// sums lose terms: a fuzzed scene with a ball of radius 1.8e19 m broke the line search's energy bookkeeping,
/// while 1e15 m still stepped cleanly.
pub const MAX_LENGTH: f64 = 1e6;
/// Largest velocity component a lane accepts [m/s]: a step of 1 s at this speed stays within [`MAX_LENGTH`].
pub const MAX_SPEED: f64 = 1e6;
const WITHIN_LENGTH: &str = "within ±1e6 m (gaps of micrometres are not resolved beyond that)";
const WITHIN_SPEED: &str =
    "within ±1e6 m/s (one second at that speed reaches the ±1e6 m a lane resolves)";
/// Lightest and heaviest ball a lane accepts [kg]. The contact stiffnesses (k, κ ≤ 1e12) are fixed per lane,
/// so the masses set the Newton system's scale: a checker's ball of 1e300 kg on a floor was accepted and
/// stepped with gaps squeezed to 4e-17 m and its line search stalled on most steps.
pub const MIN_MASS: f64 = 1e-6;
pub const MAX_MASS: f64 = 1e6;
pub const WITHIN_MASS: &str =
    "between 1e-6 kg and 1e6 kg (the contact stiffnesses cannot hold balls outside that range)";

/// The contact model of a lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContactMethod {
    /// `½ k p²` per overlap (SPEC §1.1).
    Penalty,
    /// The IPC log barrier with CCD-clamped line search (SPEC §1.2–1.3).
    Ipc,
}

impl ContactMethod {
    pub fn label(self) -> &'static str {
        match self {
            ContactMethod::Penalty => "penalty",
            ContactMethod::Ipc => "ipc",
        }
    }
}

/// Everything that configures how a lane steps. Every field has a default, so a scene writes only what it
/// changes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContactSettings {
    pub method: ContactMethod,
    /// Penalty stiffness `k` [N/m].
    pub stiffness: f64,
    /// Barrier activation distance `d̂` [m]; `None` = 10⁻³ × the lane's bounding-box diagonal.
    pub dhat: Option<f64>,
    /// Barrier stiffness `κ`; unused when `adaptive_kappa` is on (each step then starts κ from the gradient balance).
    pub kappa: f64,
    /// Adaptive `κ` (SPEC §1.4) instead of the fixed value.
    pub adaptive_kappa: bool,
    /// CCD safety factor `s ∈ (0, 1)`.
    pub ccd_factor: f64,
    /// Time step `h` [s].
    pub h: f64,
    /// Gravity [m/s²].
    pub gravity: DVec2,
    /// Newton stops when `‖Δx‖∞` falls below this [m].
    pub newton_tolerance: f64,
    /// Newton stops after this many directions.
    pub newton_max_iterations: u32,
    /// Friction coefficient `μ ≥ 0` (0: frictionless, the seed's setting).
    pub friction: f64,
    /// Friction smoothing speed `ε_v` [m/s]: slower relative sliding is treated as (creeping) sticking.
    pub friction_epsilon_v: f64,
    /// Lagging passes: 1 freezes `λ` and the tangents at the step start; more re-solve with them updated.
    pub friction_iterations: u32,
}

impl Default for ContactSettings {
    fn default() -> Self {
        ContactSettings {
            method: ContactMethod::Ipc,
            stiffness: 1e4,
            dhat: None,
            kappa: 1e4,
            adaptive_kappa: false,
            ccd_factor: 0.9,
            h: 0.01,
            gravity: DVec2::new(0.0, -9.81),
            newton_tolerance: 1e-10,
            newton_max_iterations: 59,
            friction: 0.0,
            friction_epsilon_v: 1e-3,
            friction_iterations: 1,
        }
    }
}

/// What one step did.
#[derive(Clone, Debug, PartialEq)]
pub struct StepDiagnostics {
    pub step: u64,
    pub newton_iterations: u32,
    pub stop: StopReason,
    pub alphas: Vec<f64>,
    pub kappa: Option<f64>,
    /// Smallest signed surface distance over all pairs at the end of the step (negative = overlap).
    pub min_gap: Option<f64>,
    pub max_penetration: f64,
    pub energy: f64,
    /// Balls that ended this step on the far side of a wall they were in front of.
    pub tunneled: u32,
    /// What each rod did this step (impacts with their impulses, sink depth).
    pub rods: Vec<RodStepReport>,
    /// Every accepted Newton piece `(ball, from, to)` of the solves that produced this step's state; filled only
    /// while [`LaneWorld::record_newton_path`] is set.
    pub newton_path: Vec<(u32, DVec2, DVec2)>,
}

/// Totals over every step since the lane was built. The gap and the penetration also cover the state each
/// step started from, so a lane's starting state and every ball spawned into it count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaneStats {
    pub steps: u64,
    pub min_gap: Option<f64>,
    pub max_penetration: f64,
    pub max_newton: u32,
    pub total_newton: u64,
    /// Steps whose Newton counts `total_newton` and `max_newton` hold: every step, unless the lane's method was
    /// switched since (the counts then restart, as the gap and depth record does).
    pub newton_steps: u64,
    pub tunneled: u32,
    pub first_tunnel_step: Option<u64>,
    pub iteration_caps: u32,
    pub stalled_line_searches: u32,
    /// Rod–floor impacts (impulses at approaching contacts) so far.
    pub rod_impacts: u64,
    /// Deepest any rod end went below its floor at any step, before any position fix [m].
    pub rod_max_sink: f64,
    /// Fastest any ball moved, at the start of the lane or a spawn and at the end of every step [m/s]: a throw
    /// that IPC stopped still counts. A ball that has tunnelled through a wall counts no more: one that fell out
    /// of a pit would otherwise drive it up without end as it falls.
    pub max_speed: f64,
    /// The settings the run began with, once an edit after its first step changed them (`None` while the lane
    /// runs what it began with, or was edited back to it): the records above then mix two settings' steps.
    pub run_began_with: Option<ContactSettings>,
}

impl LaneStats {
    /// Folds one state into the extremes: its smallest gap, deepest overlap and fastest ball (of those that have
    /// not tunnelled, by `tunneled`, one flag a ball).
    fn note_state(
        &mut self,
        gap: Option<f64>,
        penetration: f64,
        balls: &[Ball],
        tunneled: &[bool],
    ) {
        if let Some(gap) = gap {
            self.min_gap = Some(self.min_gap.map_or(gap, |m| m.min(gap)));
        }
        self.max_penetration = self.max_penetration.max(penetration);
        self.max_speed = balls
            .iter()
            .enumerate()
            .filter(|(i, _)| !tunneled.get(*i).copied().unwrap_or(false))
            .fold(self.max_speed, |m, (_, b)| m.max(b.velocity.length()));
    }

    pub fn mean_newton(&self) -> f64 {
        if self.newton_steps == 0 {
            0.0
        } else {
            self.total_newton as f64 / self.newton_steps as f64
        }
    }
}

/// Why a ball cannot be added to a lane.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpawnError {
    #[error("{field} must be {requirement}, got {}", crate::text::number(*.value))]
    Invalid {
        field: &'static str,
        requirement: &'static str,
        value: f64,
    },
    #[error(
        "the ball overlaps wall {wall} (surface distance {distance:.3e} m); IPC lanes need a positive gap"
    )]
    OverlapsWall { wall: usize, distance: f64 },
    #[error(
        "the ball overlaps ball {other} (surface distance {distance:.3e} m); IPC lanes need a positive gap"
    )]
    OverlapsBall { other: usize, distance: f64 },
    #[error("the lane already holds {MAX_BALLS_PER_LANE} balls, the most it can")]
    TooMany,
    #[error(
        "the lane holds {balls} balls and {walls} walls: another ball would make more than \
         {MAX_BALL_WALL_PAIRS_PER_LANE} ball–wall pairs, the most a lane tracks for tunnelling"
    )]
    TooManyWallPairs { balls: usize, walls: usize },
    #[error(
        "the ball would overlap more than {MAX_OVERLAPS_PER_SPAWN} balls; in a penalty lane a new ball may \
         overlap at most {MAX_OVERLAPS_PER_SPAWN} (a heap of balls at one spot makes every pair a contact)"
    )]
    OverlapsTooMany,
}

/// How many balls a ball spawned into a penalty lane may overlap (IPC lanes refuse any overlap).
pub const MAX_OVERLAPS_PER_SPAWN: usize = 64;

/// One independent physics world.
#[derive(Clone, Debug)]
pub struct LaneWorld {
    pub name: String,
    pub settings: ContactSettings,
    pub walls: Vec<Wall>,
    pub balls: Vec<Ball>,
    /// Rigid rods; they fly under gravity and land on the horizontal floor `y = rod_floor_y`.
    pub rods: Vec<Rod>,
    pub rod_floor_y: f64,
    pub time: f64,
    pub stats: LaneStats,
    pub last: Option<StepDiagnostics>,
    /// Set when a step produced a non-finite state; the lane stops stepping until restarted.
    pub fault: Option<String>,
    /// Record each step's Newton path in [`StepDiagnostics::newton_path`] (tests; costs memory).
    pub record_newton_path: bool,
    bbox_diagonal: f64,
    wall_index: WallIndex,
    /// `sides[i * walls + k]`: which side of wall `k` ball `i` was last seen on (−1, +1, or 0 unknown), and
    /// where its centre was then.
    sides: Vec<(i8, DVec2)>,
    tunneled: Vec<bool>,
    workspace: NewtonWorkspace,
    report_broad_phase: BroadPhase,
    /// The state holds balls whose gaps [`Self::stats`] has not seen yet (the starting state, or a spawn): the
    /// next step measures them before it moves anything.
    unmeasured: bool,
}

impl LaneWorld {
    pub fn new(
        name: impl Into<String>,
        settings: ContactSettings,
        walls: Vec<Wall>,
        balls: Vec<Ball>,
    ) -> LaneWorld {
        let bbox_diagonal = bounding_box_diagonal(&walls, &balls);
        let wall_index = WallIndex::new(&walls);
        let mut lane = LaneWorld {
            name: name.into(),
            settings,
            walls,
            balls: Vec::new(),
            rods: Vec::new(),
            rod_floor_y: 0.0,
            time: 0.0,
            stats: LaneStats::default(),
            last: None,
            fault: None,
            record_newton_path: false,
            bbox_diagonal,
            wall_index,
            sides: Vec::new(),
            tunneled: Vec::new(),
            workspace: NewtonWorkspace::default(),
            report_broad_phase: BroadPhase::default(),
            unmeasured: false,
        };
        for ball in balls {
            lane.push_ball_unchecked(ball);
        }
        lane
    }

    /// The scene's bounding-box diagonal, fixed when the lane was built (sets the default `d̂`).
    pub fn bbox_diagonal(&self) -> f64 {
        self.bbox_diagonal
    }

    /// `d̂` in use: the lane's setting or 10⁻³ × bounding-box diagonal.
    pub fn dhat(&self) -> f64 {
        self.settings
            .dhat
            .unwrap_or_else(|| default_dhat(self.bbox_diagonal))
    }

    /// The contact model this lane's next step uses.
    pub fn contact_model(&self) -> ContactModel {
        match self.settings.method {
            ContactMethod::Penalty => ContactModel::Penalty {
                stiffness: self.settings.stiffness,
            },
            ContactMethod::Ipc => ContactModel::Barrier {
                dhat: self.dhat(),
                kappa: self.settings.kappa,
            },
        }
    }

    /// Adds a ball after checking it: finite values, mass > 0, radius ≥ 0, and for IPC a strictly positive gap
    /// to every wall and ball (SPEC §1.6: spawning into overlap is refused). Under penalty a new ball may
    /// overlap at most [`MAX_OVERLAPS_PER_SPAWN`] others.
    pub fn add_ball(&mut self, ball: Ball) -> Result<usize, SpawnError> {
        self.check_spawn(&ball, None)?;
        Ok(self.push_ball_unchecked(ball))
    }

    /// [`Self::add_ball`] with the ball–ball checks limited to the balls `grid` lists as near, so that many
    /// spawns in a row cost time in proportion to their number, not its square. `grid` must hold this lane's
    /// balls as they are now (build it with [`SpawnGrid::new`] after anything else moved them); the ball is added
    /// to it. A grid holding another number of balls is rebuilt first.
    pub fn add_ball_indexed(
        &mut self,
        ball: Ball,
        grid: &mut SpawnGrid,
    ) -> Result<usize, SpawnError> {
        if grid.len() != self.balls.len() {
            *grid = SpawnGrid::new(&self.balls);
        }
        self.check_spawn(&ball, Some(grid))?;
        let index = self.push_ball_unchecked(ball);
        grid.insert(index as u32, &ball);
        Ok(index)
    }

    /// The verdict of [`Self::add_ball`] without adding the ball. With `grid` (this lane's balls as they are now,
    /// see [`Self::add_ball_indexed`]) only the balls it lists are compared: the same verdict, since every ball
    /// the new one touches is listed, and the same first overlapping ball, since they are compared in index
    /// order. A grid holding another number of balls is ignored.
    pub fn check_spawn(&self, ball: &Ball, grid: Option<&SpawnGrid>) -> Result<(), SpawnError> {
        check_ball(ball)?;
        if self.balls.len() >= MAX_BALLS_PER_LANE {
            return Err(SpawnError::TooMany);
        }
        if (self.balls.len() + 1) * self.walls.len() > MAX_BALL_WALL_PAIRS_PER_LANE {
            return Err(SpawnError::TooManyWallPairs {
                balls: self.balls.len(),
                walls: self.walls.len(),
            });
        }
        let near = grid.filter(|g| g.len() == self.balls.len()).map(|g| {
            let mut near = Vec::new();
            g.candidates(ball.position, ball.radius, &mut near);
            near.sort_unstable();
            near
        });
        match &near {
            Some(near) => self.check_spawn_among(
                ball,
                near.iter()
                    .filter_map(|&j| self.balls.get(j as usize).map(|b| (j as usize, b))),
            ),
            None => self.check_spawn_among(ball, self.balls.iter().enumerate()),
        }
    }

    /// The overlap checks of a spawn against `others` (in index order) and, under IPC, every wall.
    fn check_spawn_among<'a>(
        &self,
        ball: &Ball,
        others: impl Iterator<Item = (usize, &'a Ball)>,
    ) -> Result<(), SpawnError> {
        if self.settings.method == ContactMethod::Penalty {
            let overlapped = others
                .filter(|(_, b)| (b.position - ball.position).length() <= b.radius + ball.radius)
                .take(MAX_OVERLAPS_PER_SPAWN + 1)
                .count();
            if overlapped > MAX_OVERLAPS_PER_SPAWN {
                return Err(SpawnError::OverlapsTooMany);
            }
            return Ok(());
        }
        if let Some((wall, distance)) = self.closest_wall_overlap(ball) {
            return Err(SpawnError::OverlapsWall { wall, distance });
        }
        for (other, b) in others {
            let distance = (b.position - ball.position).length() - b.radius - ball.radius;
            if distance <= 0.0 {
                return Err(SpawnError::OverlapsBall { other, distance });
            }
        }
        Ok(())
    }

    fn closest_wall_overlap(&self, ball: &Ball) -> Option<(usize, f64)> {
        self.walls
            .iter()
            .enumerate()
            .map(|(k, w)| (k, ball_wall_gap(ball.position, ball.radius, w)))
            .find(|(_, d)| *d <= 0.0)
    }

    fn push_ball_unchecked(&mut self, ball: Ball) -> usize {
        let index = self.balls.len();
        self.balls.push(ball);
        for wall in &self.walls {
            self.sides
                .push((side_of(wall, ball.position), ball.position));
        }
        self.tunneled.push(false);
        self.unmeasured = true;
        index
    }

    /// Time spent in each phase of this lane's Newton solves so far (profiling).
    pub fn phase_times(&self) -> PhaseTimes {
        self.workspace.times
    }

    /// How many symbolic and numeric sparse factorisations this lane's solves have done.
    pub fn linear_counters(&self) -> LinearCounters {
        self.workspace.linear.counters
    }

    /// Has ball `i` ever gone through a wall?
    pub fn ball_tunneled(&self, i: usize) -> bool {
        self.tunneled.get(i).copied().unwrap_or(false)
    }

    /// Advances the lane by one step `h`: builds `x̃`, minimises the incremental potential, sets
    /// `v = (x − xᵗ)/h`, then updates diagnostics. Does nothing while the lane holds a fault.
    pub fn step(&mut self) -> Option<&StepDiagnostics> {
        if self.fault.is_some() {
            return None;
        }
        if self.unmeasured {
            self.measure_gaps();
        }
        let h = self.settings.h;
        let g = self.settings.gravity;
        let x_start: Vec<DVec2> = self.balls.iter().map(|b| b.position).collect();
        let x_tilde: Vec<DVec2> = self
            .balls
            .iter()
            .map(|b| b.position + b.velocity * h + g * (h * h))
            .collect();
        let mass: Vec<f64> = self.balls.iter().map(|b| b.mass).collect();
        let radius: Vec<f64> = self.balls.iter().map(|b| b.radius).collect();
        let mut model = self.contact_model();
        let mut adaptive = None;
        if let (true, ContactModel::Barrier { dhat, .. }) = (self.settings.adaptive_kappa, model) {
            let mean_mass = if mass.is_empty() {
                1.0
            } else {
                mass.iter().sum::<f64>() / mass.len() as f64
            };
            let a = AdaptiveKappa::new(self.bbox_diagonal, dhat, mean_mass);
            let probe = IncrementalPotential {
                x_tilde: &x_tilde,
                mass: &mass,
                radius: &radius,
                walls: &self.walls,
                wall_index: &self.wall_index,
                h,
                model,
                friction: None,
            };
            let mut contacts = ContactSet::default();
            probe.contacts(&x_start, &mut self.workspace.potential, &mut contacts);
            let barrier_gradient: Vec<DVec2> = probe
                .unit_barrier_gradient(&x_start, &contacts)
                .into_iter()
                .map(|g| g * (h * h))
                .collect();
            let inertia_gradient: Vec<DVec2> = x_start
                .iter()
                .zip(&x_tilde)
                .zip(&mass)
                .map(|((x, xt), m)| (*x - *xt) * *m)
                .collect();
            model = ContactModel::Barrier {
                dhat,
                kappa: a.initial(&barrier_gradient, &inertia_gradient),
            };
            adaptive = Some(a);
        }
        let newton = NewtonSettings {
            tolerance: self.settings.newton_tolerance,
            max_iterations: self.settings.newton_max_iterations,
            ccd_factor: self.settings.ccd_factor,
        };
        let problem = StepProblem {
            x_start: &x_start,
            x_tilde: &x_tilde,
            mass: &mass,
            radius: &radius,
            walls: &self.walls,
            wall_index: &self.wall_index,
            h,
            mu: self.settings.friction,
            friction_epsilon: self.settings.friction_epsilon_v * h,
            friction_passes: self.settings.friction_iterations.max(1),
            newton,
        };
        self.workspace.record_pieces = self.record_newton_path;
        let (x, report, newton_path, path_extent) =
            solve_by_islands(&problem, model, adaptive, &mut self.workspace);
        if let Some(i) = x.iter().position(|p| !p.is_finite()) {
            self.fault = Some(format!(
                "step {}: ball {i} reached a non-finite position; the lane is paused (restart to continue)",
                self.stats.steps + 1
            ));
            return None;
        }
        // The rods step on copies, so that a lane paused by a rod's fault keeps its last state whole.
        let mut rods = self.rods.clone();
        let rod_reports: Vec<RodStepReport> = rods
            .iter_mut()
            .map(|rod| step_rod(rod, self.rod_floor_y, g, h))
            .collect();
        if let Some(i) = rods.iter().position(|rod| rod.validate().is_err()) {
            self.fault = Some(format!(
                "step {}: rod {i} reached a non-finite state; the lane is paused (restart to continue)",
                self.stats.steps + 1
            ));
            return None;
        }
        self.rods = rods;
        for ((ball, x_new), x_old) in self.balls.iter_mut().zip(&x).zip(&x_start) {
            ball.velocity = (*x_new - *x_old) / h;
            ball.position = *x_new;
        }
        self.time += h;
        let tunneled = self.update_tunnelling(&path_extent);
        let (min_gap, max_penetration, energy) = self.gap_penetration_and_energy();
        let stats = &mut self.stats;
        stats.steps += 1;
        stats.newton_steps += 1;
        stats.max_newton = stats.max_newton.max(report.iterations);
        stats.total_newton += u64::from(report.iterations);
        stats.note_state(min_gap, max_penetration, &self.balls, &self.tunneled);
        stats.tunneled += tunneled;
        if tunneled > 0 && stats.first_tunnel_step.is_none() {
            stats.first_tunnel_step = Some(stats.steps);
        }
        if report.stop == StopReason::IterationCap {
            stats.iteration_caps += 1;
        }
        stats.stalled_line_searches += report.stalled_line_searches;
        for r in &rod_reports {
            stats.rod_impacts += r.impacts.len() as u64;
            stats.rod_max_sink = stats.rod_max_sink.max(r.max_sink_depth);
        }
        self.last = Some(StepDiagnostics {
            step: stats.steps,
            newton_iterations: report.iterations,
            stop: report.stop,
            alphas: report.alphas,
            kappa: report.kappa,
            min_gap,
            max_penetration,
            energy,
            tunneled,
            rods: rod_reports,
            newton_path,
        });
        self.last.as_ref()
    }

    /// Kinetic + gravitational potential + contact energy `B` of the balls, plus the rods' kinetic and
    /// potential energy, in the current state [J].
    pub fn energy(&self) -> f64 {
        let x = self.positions();
        self.motion_energy()
            + self.with_potential(&x, |potential| {
                let mut contacts = ContactSet::default();
                potential.contacts(&x, &mut Default::default(), &mut contacts);
                potential.contact_energy(&x, &contacts)
            })
    }

    /// The balls' centres.
    fn positions(&self) -> Vec<DVec2> {
        self.balls.iter().map(|b| b.position).collect()
    }

    /// [`Self::energy`] without the contact energy: the rods', then the balls' kinetic and gravitational terms.
    fn motion_energy(&self) -> f64 {
        let g = self.settings.gravity;
        let mut total: f64 = self
            .rods
            .iter()
            .map(|r| r.energy(g, self.rod_floor_y))
            .sum();
        for b in &self.balls {
            total += 0.5 * b.mass * b.velocity.length_squared() - b.mass * g.dot(b.position);
        }
        total
    }

    /// Runs `f` on the lane's potential at rest at `x` (no friction): for contacts and contact energy.
    fn with_potential<T>(&self, x: &[DVec2], f: impl FnOnce(&IncrementalPotential<'_>) -> T) -> T {
        let mass: Vec<f64> = self.balls.iter().map(|b| b.mass).collect();
        let radius: Vec<f64> = self.balls.iter().map(|b| b.radius).collect();
        f(&IncrementalPotential {
            x_tilde: x,
            mass: &mass,
            radius: &radius,
            walls: &self.walls,
            wall_index: &self.wall_index,
            h: self.settings.h,
            model: self.contact_model(),
            friction: None,
        })
    }

    /// Folds the present state's gap, penetration and speeds into [`Self::stats`]: `run`'s extremes then include where
    /// the balls started (a penalty ball spawned 5 cm into a wall reports 5 cm, not what one step left of it).
    pub fn measure_gaps(&mut self) {
        let (gap, penetration) = self.gap_and_penetration();
        self.stats
            .note_state(gap, penetration, &self.balls, &self.tunneled);
        self.unmeasured = false;
    }

    /// The surface distance below which a wall or ball pushes: 0 under penalty (it acts on overlap), `d̂` under
    /// the barrier.
    pub fn contact_reach(&self) -> f64 {
        match self.settings.method {
            ContactMethod::Penalty => 0.0,
            ContactMethod::Ipc => self.dhat(),
        }
    }

    /// Smallest signed surface distance over all pairs within reach (every ball–wall pair; ball–ball pairs
    /// within `max(10 d̂, 1 cm)`) and the deepest overlap.
    pub fn gap_and_penetration(&mut self) -> (Option<f64>, f64) {
        let x = self.positions();
        let (gap, penetration, _) = self.gap_pairs(&x);
        (gap, penetration)
    }

    /// [`Self::gap_and_penetration`] and [`Self::energy`] from one broad-phase query: the contacts are the gap's
    /// ball–ball pairs that are within reach (the same pairs in the same order as [`Self::energy`]'s own query),
    /// so the energy is the same to the bit.
    fn gap_penetration_and_energy(&mut self) -> (Option<f64>, f64, f64) {
        let x = self.positions();
        let (gap, penetration, pairs) = self.gap_pairs(&x);
        let contact = self.with_potential(&x, |potential| {
            let mut contacts = ContactSet::default();
            potential.contacts_from_near_pairs(&x, &pairs, &mut contacts);
            potential.contact_energy(&x, &contacts)
        });
        (gap, penetration, self.motion_energy() + contact)
    }

    /// The gap and the deepest overlap with the balls at `x` (their centres), with the ball–ball pairs the gap
    /// looked at (sorted).
    fn gap_pairs(&mut self, x: &[DVec2]) -> (Option<f64>, f64, Vec<(u32, u32)>) {
        let mut min_gap: Option<f64> = None;
        let mut keep = |d: f64| min_gap = Some(min_gap.map_or(d, |m: f64| m.min(d)));
        for b in &self.balls {
            for w in &self.walls {
                keep(ball_wall_gap(b.position, b.radius, w));
            }
        }
        let radius: Vec<f64> = self.balls.iter().map(|b| b.radius).collect();
        let mut pairs = Vec::new();
        let reach = (10.0 * self.dhat()).max(0.01);
        self.report_broad_phase
            .near_pairs(x, &radius, reach, &mut pairs);
        for &(i, j) in &pairs {
            let (i, j) = (i as usize, j as usize);
            keep((x[i] - x[j]).length() - radius[i] - radius[j]);
        }
        let penetration = min_gap.map_or(0.0, |d| (-d).max(0.0));
        (min_gap, penetration, pairs)
    }

    /// Marks balls that crossed a wall during the last step: they were outside the wall's slab on one side of
    /// its thickness axis, are now outside it on the other side, and the centre's straight path from where it was
    /// last seen outside to where it is now crossed the wall's mid-plane where the ball could not have gone round
    /// an end ([`crosses_within_extent`]). A penalty ball that lands inside a wall and is pushed out of the back
    /// a step later counts.
    /// `path_extent` holds each ball's path over the step (the box of its Newton iterates; empty when unknown):
    /// an IPC ball whose path reached beyond a wall's end went round it, since no piece of an IPC path enters a
    /// wall, and is not counted (the straight line from where it was last seen crossed the wall: limitation 6 in
    /// docs/robustness.md).
    fn update_tunnelling(&mut self, path_extent: &[(DVec2, DVec2)]) -> u32 {
        let n_walls = self.walls.len();
        let mut count = 0;
        for (i, ball) in self.balls.iter().enumerate() {
            for (k, wall) in self.walls.iter().enumerate() {
                let now = side_of(wall, ball.position);
                let (before, seen_at) = &mut self.sides[i * n_walls + k];
                let lateral = 1 - wall.thickness_axis();
                if wall.to_local(ball.position)[lateral].abs()
                    > wall.half_extents[lateral] + ball.radius
                {
                    // Beside the wall's end: whichever side it comes back on, it went round, not through.
                    *before = 0;
                    continue;
                }
                if now == 0 {
                    continue;
                }
                let went_round = || {
                    self.settings.method == ContactMethod::Ipc
                        && path_extent
                            .get(i)
                            .is_some_and(|&(lo, hi)| reaches_past_end(wall, lo, hi, ball.radius))
                };
                if *before != 0
                    && now != *before
                    && crosses_within_extent(wall, *seen_at, ball.position, ball.radius)
                    && !went_round()
                {
                    if !self.tunneled[i] {
                        count += 1;
                    }
                    self.tunneled[i] = true;
                }
                *before = now;
                *seen_at = ball.position;
            }
        }
        count
    }
}

/// Checks a ball's own values: finite, position, radius and velocity within [`MAX_LENGTH`] and [`MAX_SPEED`],
/// mass > 0, radius ≥ 0. Spawns and scene files both go through it.
pub fn check_ball(ball: &Ball) -> Result<(), SpawnError> {
    let fields: [(&'static str, f64); 6] = [
        ("position.x", ball.position.x),
        ("position.y", ball.position.y),
        ("velocity.x", ball.velocity.x),
        ("velocity.y", ball.velocity.y),
        ("radius", ball.radius),
        ("mass", ball.mass),
    ];
    for (field, value) in fields {
        if !value.is_finite() {
            return Err(SpawnError::Invalid {
                field,
                requirement: "a finite number",
                value,
            });
        }
    }
    let bounded: [(&'static str, f64, f64, &'static str); 5] = [
        ("position.x", ball.position.x, MAX_LENGTH, WITHIN_LENGTH),
        ("position.y", ball.position.y, MAX_LENGTH, WITHIN_LENGTH),
        ("velocity.x", ball.velocity.x, MAX_SPEED, WITHIN_SPEED),
        ("velocity.y", ball.velocity.y, MAX_SPEED, WITHIN_SPEED),
        ("radius", ball.radius, MAX_LENGTH, WITHIN_LENGTH),
    ];
    for (field, value, limit, requirement) in bounded {
        if value.abs() > limit {
            return Err(SpawnError::Invalid {
                field,
                requirement,
                value,
            });
        }
    }
    if !(MIN_MASS..=MAX_MASS).contains(&ball.mass) {
        return Err(SpawnError::Invalid {
            field: "mass",
            requirement: WITHIN_MASS,
            value: ball.mass,
        });
    }
    if ball.radius < 0.0 {
        return Err(SpawnError::Invalid {
            field: "radius",
            requirement: ">= 0",
            value: ball.radius,
        });
    }
    Ok(())
}

/// Does the centre's straight path `a → b` cross the wall's mid-plane at a point where the whole ball lies within
/// the wall's length (`|lateral| ≤ half-length − r`)? Then the ball cannot have gone round the wall's end: it went
/// through. A ball passing near an end (or a ball longer than the wall) is not counted.
fn crosses_within_extent(wall: &Wall, a: DVec2, b: DVec2, radius: f64) -> bool {
    let axis = wall.thickness_axis();
    let lateral = 1 - axis;
    let (la, lb) = (wall.to_local(a), wall.to_local(b));
    let (ua, ub) = (la[axis], lb[axis]);
    if ua == ub || ua.signum() == ub.signum() {
        return false;
    }
    let t = ua / (ua - ub);
    let crossing = la[lateral] + t * (lb[lateral] - la[lateral]);
    crossing.abs() <= wall.half_extents[lateral] - radius
}

/// Whether the box from `lo` to `hi` reaches beyond the end of `wall` where a ball of `radius` there is clear of
/// it (past its half-length plus the radius, along the wall): a path inside the box that went from one side of
/// the wall to the other without entering it passed there, and the box's corners reach at least as far.
fn reaches_past_end(wall: &Wall, lo: DVec2, hi: DVec2, radius: f64) -> bool {
    let lateral = 1 - wall.thickness_axis();
    [lo, DVec2::new(lo.x, hi.y), DVec2::new(hi.x, lo.y), hi]
        .into_iter()
        .any(|corner| wall.to_local(corner)[lateral].abs() > wall.half_extents[lateral] + radius)
}

/// −1 / +1 when `p` is outside the wall's slab on the negative / positive side of its thickness axis, else 0.
fn side_of(wall: &Wall, p: DVec2) -> i8 {
    let axis = wall.thickness_axis();
    // Measured to the faces to the last bit, as the distances are.
    let (local, error) = wall.to_local_with_error(p);
    let (local, error) = (local[axis], error[axis]);
    let half = wall.half_extents[axis];
    if (local - half) + error > 0.0 {
        1
    } else if (-local - half) - error > 0.0 {
        -1
    } else {
        0
    }
}

/// Everything fixed during one step's solve.
struct StepProblem<'a> {
    x_start: &'a [DVec2],
    x_tilde: &'a [DVec2],
    mass: &'a [f64],
    radius: &'a [f64],
    walls: &'a [Wall],
    wall_index: &'a WallIndex,
    h: f64,
    mu: f64,
    friction_epsilon: f64,
    friction_passes: u32,
    newton: NewtonSettings,
}

/// What [`solve_by_islands`] returns: the positions, the hardest island's report, the Newton pieces (when recorded)
/// and each ball's path extent ([`NewtonWorkspace::path_extent`]).
type IslandSolve = (
    Vec<DVec2>,
    NewtonReport,
    Vec<(u32, DVec2, DVec2)>,
    Vec<(DVec2, DVec2)>,
);

/// Solves the step island by island.
///
/// The incremental potential is a sum of per-ball inertia and per-pair contact terms, so balls that cannot
/// interact during the step are independent problems: solving them apart gives the same minimiser, and the
/// CCD-clamped step length of one island is no longer throttled by a collision elsewhere. Islands are the
/// connected components of "the circles around the predicted motion `xᵗ → x̃` (grown by that motion) come within
/// reach". After the solve, any two balls from different islands whose actual motions `xᵗ → x` come within reach
/// are merged and re-solved together, until none remain; so the result is a minimiser of the whole potential.
/// A single ball (the seed's experiment) is one island solved exactly as before.
fn solve_by_islands(
    problem: &StepProblem<'_>,
    model: ContactModel,
    adaptive: Option<AdaptiveKappa>,
    workspace: &mut NewtonWorkspace,
) -> IslandSolve {
    let n = problem.x_start.len();
    // Each ball's path extent ([`NewtonWorkspace::path_extent`]), from the solve whose result the ball kept.
    let mut extent: Vec<(DVec2, DVec2)> = problem.x_start.iter().map(|&p| (p, p)).collect();
    let start_extent = |workspace: &mut NewtonWorkspace, members: &[usize]| {
        workspace.path_extent.clear();
        workspace.path_extent.extend(
            members
                .iter()
                .map(|&i| (problem.x_start[i], problem.x_start[i])),
        );
    };
    // Pieces per ball, from the solve whose result the ball kept (a re-solved island replaces its pieces).
    let mut pieces: Vec<Vec<(u32, DVec2, DVec2)>> =
        vec![Vec::new(); if workspace.record_pieces { n } else { 0 }];
    let reach = model.reach();
    let mut islands = UnionFind::new(n);
    let mut centre = Vec::with_capacity(n);
    let mut bound = Vec::with_capacity(n);
    for i in 0..n {
        let motion = problem.x_tilde[i] - problem.x_start[i];
        centre.push(problem.x_start[i] + motion * 0.5);
        bound.push(problem.radius[i] + motion.length());
    }
    let mut pairs = Vec::new();
    let mut grid = BroadPhase::default();
    grid.near_pairs(&centre, &bound, reach, &mut pairs);
    for &(i, j) in &pairs {
        islands.union(i as usize, j as usize);
    }
    let mut x = problem.x_start.to_vec();
    let mut report: Option<NewtonReport> = None;
    let mut dirty: Vec<bool> = vec![true; n];
    for round in 0..8 {
        let groups = islands.groups();
        let one_island = groups.len() == 1;
        for members in groups.iter().filter(|m| dirty[m[0]]) {
            workspace.pieces.clear();
            start_extent(workspace, members);
            let (positions, pass) = solve_island(problem, members, model, adaptive, workspace);
            for (&i, p) in members.iter().zip(positions) {
                x[i] = p;
            }
            for (&i, &e) in members.iter().zip(&workspace.path_extent) {
                extent[i] = e;
            }
            if workspace.record_pieces {
                for &i in members {
                    pieces[i].clear();
                }
                for &(local, from, to) in &workspace.pieces {
                    let i = members[local as usize];
                    pieces[i].push((i as u32, from, to));
                }
            }
            report = Some(match report.take() {
                None => pass,
                Some(worst) => worse_of(worst, pass),
            });
        }
        // Cross-island pairs whose actual motions came within reach: merge and re-solve. One island has none
        // (a settled pile is one island at most steps, and this query is a grid over every ball).
        if one_island {
            break;
        }
        for i in 0..n {
            let motion = x[i] - problem.x_start[i];
            centre[i] = problem.x_start[i] + motion * 0.5;
            bound[i] = problem.radius[i] + motion.length() * 0.5;
        }
        grid.near_pairs(&centre, &bound, reach, &mut pairs);
        dirty.iter_mut().for_each(|d| *d = false);
        let mut merged = false;
        for &(i, j) in &pairs {
            let (i, j) = (i as usize, j as usize);
            if islands.find(i) != islands.find(j) {
                islands.union(i, j);
                merged = true;
            }
        }
        if !merged {
            break;
        }
        for members in islands.groups() {
            if members.len() > 1 && (round == 6 || members.iter().any(|&i| islands.was_merged(i))) {
                for &i in &members {
                    dirty[i] = true;
                    x[i] = problem.x_start[i];
                }
            }
        }
        islands.clear_merged();
        if round == 6 {
            // Give up on islands: one solve of everything.
            let all: Vec<usize> = (0..n).collect();
            workspace.pieces.clear();
            start_extent(workspace, &all);
            let (positions, pass) = solve_island(problem, &all, model, adaptive, workspace);
            x = positions;
            extent.clone_from(&workspace.path_extent);
            report = Some(pass);
            if workspace.record_pieces {
                pieces.iter_mut().for_each(Vec::clear);
                for &(i, from, to) in &workspace.pieces {
                    pieces[i as usize].push((i, from, to));
                }
            }
            break;
        }
    }
    let report = report.unwrap_or_else(|| NewtonReport::nothing_solved(model));
    (x, report, pieces.into_iter().flatten().collect(), extent)
}

/// The step's Newton statistics are those of its hardest island (islands are independent solves).
fn worse_of(a: NewtonReport, b: NewtonReport) -> NewtonReport {
    let stalled = a.stalled_line_searches + b.stalled_line_searches;
    let retries = a.exact_retries + b.exact_retries;
    let kappa = match (a.kappa, b.kappa) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    let cap = a.stop == StopReason::IterationCap || b.stop == StopReason::IterationCap;
    let mut worst = if b.iterations > a.iterations { b } else { a };
    worst.stalled_line_searches = stalled;
    worst.exact_retries = retries;
    worst.kappa = kappa;
    if cap && worst.stop == StopReason::Converged {
        worst.stop = StopReason::IterationCap;
    }
    worst
}

/// Minimises the potential restricted to `members` (indices into the lane's balls), with friction lagging.
fn solve_island(
    problem: &StepProblem<'_>,
    members: &[usize],
    model: ContactModel,
    adaptive: Option<AdaptiveKappa>,
    workspace: &mut NewtonWorkspace,
) -> (Vec<DVec2>, NewtonReport) {
    let gather = |v: &[DVec2]| -> Vec<DVec2> { members.iter().map(|&i| v[i]).collect() };
    let x_start = gather(problem.x_start);
    let x_tilde = gather(problem.x_tilde);
    let mass: Vec<f64> = members.iter().map(|&i| problem.mass[i]).collect();
    let radius: Vec<f64> = members.iter().map(|&i| problem.radius[i]).collect();
    let mut adaptive = adaptive;
    let mut model = model;
    let mut x = x_start.clone();
    let mut report: Option<NewtonReport> = None;
    let mut friction_anchor = x_start.clone();
    let passes = if problem.mu > 0.0 {
        problem.friction_passes
    } else {
        1
    };
    for _ in 0..passes {
        let mut potential = IncrementalPotential::new(
            &x_tilde,
            &mass,
            &radius,
            problem.walls,
            problem.wall_index,
            problem.h,
            model,
        );
        let friction = if problem.mu > 0.0 {
            let mut contacts = ContactSet::default();
            potential.contacts(&friction_anchor, &mut workspace.potential, &mut contacts);
            potential.lagged_friction(
                &friction_anchor,
                &contacts,
                problem.mu,
                problem.friction_epsilon,
            )
        } else {
            Default::default()
        };
        if problem.mu > 0.0 {
            potential.friction = Some((&friction, &x_start));
        }
        let pass = minimize(
            &mut potential,
            &mut x,
            &problem.newton,
            adaptive.as_mut(),
            workspace,
        );
        model = potential.model;
        match &mut report {
            None => report = Some(pass),
            Some(total) => total.absorb(pass),
        }
        friction_anchor.clone_from(&x);
    }
    let report = report.unwrap_or_else(|| NewtonReport::nothing_solved(model));
    (x, report)
}

/// Diagonal of the box around every wall and ball (1 m when the lane is empty).
pub fn bounding_box_diagonal(walls: &[Wall], balls: &[Ball]) -> f64 {
    let mut lo = DVec2::splat(f64::INFINITY);
    let mut hi = DVec2::splat(f64::NEG_INFINITY);
    for w in walls {
        let (a, b) = w.aabb();
        lo = lo.min(a);
        hi = hi.max(b);
    }
    for b in balls {
        lo = lo.min(b.position - DVec2::splat(b.radius));
        hi = hi.max(b.position + DVec2::splat(b.radius));
    }
    let diagonal = (hi - lo).length();
    if diagonal.is_finite() && diagonal > 0.0 {
        diagonal
    } else {
        1.0
    }
}
