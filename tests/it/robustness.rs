//! Robustness (issue 8, SPEC §1.3, §1.6, §7): random throws at IPC and penalty lanes, fuzzed scene text, and
//! a long ball-pit soak.
//!
//! The property tests run a modest number of cases in `cargo test`; set `CONTACT_SANDBOX_PROPTEST_CASES=N` to
//! run `N` cases of each (see `docs/robustness.md` for the large runs and their figures). The soak is
//! `#[ignore]`d: `cargo test --release --test it soak -- --ignored --nocapture`.

use std::cell::RefCell;
use std::f64::consts::{FRAC_PI_2, PI, TAU};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use contact_sandbox::physics::geometry::{Ball, Wall, ball_wall_gap};
use contact_sandbox::physics::newton::StopReason;
use contact_sandbox::physics::world::{ContactMethod, ContactSettings, LaneWorld};
use contact_sandbox::scene::{MAX_LANES, Scene};
use glam::DVec2;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Cases per property: the env var when set, else the modest default that keeps `cargo test` quick.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("CONTACT_SANDBOX_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Proptest with shrinking, but without regression files written into the source tree.
fn config(default: u32) -> Config {
    Config {
        failure_persistence: None,
        ..Config::with_cases(cases(default))
    }
}

pub(crate) fn runner(default: u32) -> TestRunner {
    TestRunner::new(config(default))
}

/// `10^U(log₁₀ lo, log₁₀ hi)`: every decade of the range equally likely.
fn log_uniform(lo: f64, hi: f64) -> impl Strategy<Value = f64> + Clone {
    (lo.log10()..=hi.log10()).prop_map(|e| 10f64.powf(e))
}

/// Axis-aligned angles take a separate code path in the geometry, so they are drawn on purpose.
fn angle() -> impl Strategy<Value = f64> + Clone {
    prop_oneof![1 => Just(0.0), 1 => Just(FRAC_PI_2), 4 => 0.0..TAU]
}

#[derive(Clone, Debug)]
struct WallCase {
    center: DVec2,
    half_length: f64,
    thickness: f64,
    angle: f64,
}

impl WallCase {
    fn wall(&self) -> Wall {
        Wall {
            center: self.center,
            half_extents: DVec2::new(0.5 * self.thickness, self.half_length),
            angle: self.angle,
        }
    }
}

fn wall_case() -> impl Strategy<Value = WallCase> {
    (
        (-2.0..2.0f64, -2.0..2.0f64),
        log_uniform(0.05, 2.0),
        log_uniform(1e-4, 1.0),
        angle(),
    )
        .prop_map(|((x, y), half_length, thickness, angle)| WallCase {
            center: DVec2::new(x, y),
            half_length: half_length.max(thickness),
            thickness,
            angle,
        })
}

/// A ball placed relative to one wall: in front of or behind it at a gap `offset`, somewhere along its length,
/// thrown at it (with a jitter) or in an arbitrary direction.
#[derive(Clone, Debug)]
struct BallCase {
    wall: Index,
    behind: bool,
    offset: f64,
    lateral: f64,
    radius: f64,
    mass: f64,
    speed: f64,
    aimed: bool,
    direction: f64,
    /// Penalty only: start inside the wall instead.
    inside: bool,
}

fn ball_case() -> impl Strategy<Value = BallCase> {
    (
        any::<Index>(),
        any::<bool>(),
        log_uniform(1e-7, 2.0),
        -1.3..1.3f64,
        prop_oneof![1 => Just(0.0), 3 => log_uniform(1e-4, 1.0)],
        log_uniform(1e-2, 1e2),
        prop_oneof![1 => Just(0.0), 6 => log_uniform(1e-3, 1e4)],
        prop_oneof![3 => Just(true), 1 => Just(false)],
        -PI..PI,
        prop_oneof![5 => Just(false), 1 => Just(true)],
    )
        .prop_map(
            |(wall, behind, offset, lateral, radius, mass, speed, aimed, direction, inside)| {
                BallCase {
                    wall,
                    behind,
                    offset,
                    lateral,
                    radius,
                    mass,
                    speed,
                    aimed,
                    direction,
                    inside,
                }
            },
        )
}

impl BallCase {
    fn ball(&self, walls: &[Wall], allow_inside: bool) -> Ball {
        let wall = &walls[self.wall.index(walls.len())];
        let axis = wall.thickness_axis();
        let mut normal_local = DVec2::ZERO;
        normal_local[axis] = if self.behind { -1.0 } else { 1.0 };
        let mut lateral_local = DVec2::ZERO;
        lateral_local[1 - axis] = self.lateral * wall.half_extents[1 - axis];
        let distance = if allow_inside && self.inside {
            wall.half_extents[axis] * (self.offset / 2.0).min(1.0)
        } else {
            wall.half_extents[axis] + self.radius + self.offset
        };
        let normal = wall.to_world_direction(normal_local);
        let position = wall.center + normal * distance + wall.to_world_direction(lateral_local);
        let heading = if self.aimed {
            // Towards the wall, within ±π/2 · 0.8 of head-on.
            let towards = -normal;
            let a = 0.8 * self.direction / 2.0;
            DVec2::new(
                towards.x * a.cos() - towards.y * a.sin(),
                towards.x * a.sin() + towards.y * a.cos(),
            )
        } else {
            DVec2::new(self.direction.cos(), self.direction.sin())
        };
        Ball {
            position,
            velocity: heading * self.speed,
            radius: self.radius,
            mass: self.mass,
        }
    }
}

#[derive(Clone, Debug)]
struct SettingsCase {
    h: f64,
    dhat: f64,
    /// `None`: adaptive κ.
    kappa: Option<f64>,
    stiffness: f64,
    gravity: bool,
    friction: f64,
    friction_iterations: u32,
    newton_max_iterations: u32,
    ccd_factor: f64,
}

fn settings_case() -> impl Strategy<Value = SettingsCase> {
    (
        log_uniform(1e-4, 0.05),
        log_uniform(1e-5, 1e-2),
        prop_oneof![3 => log_uniform(1e2, 1e8).prop_map(Some), 1 => Just(None)],
        log_uniform(1e2, 1e8),
        any::<bool>(),
        prop_oneof![1 => Just(0.0), 1 => 0.0..=1.0f64],
        prop_oneof![4 => Just(1u32), 1 => Just(2u32)],
        prop_oneof![4 => Just(59u32), 1 => 1..=6u32],
        prop_oneof![3 => Just(0.9), 1 => 0.1..0.99f64],
    )
        .prop_map(
            |(
                h,
                dhat,
                kappa,
                stiffness,
                gravity,
                friction,
                friction_iterations,
                newton_max_iterations,
                ccd_factor,
            )| SettingsCase {
                h,
                dhat,
                kappa,
                stiffness,
                gravity,
                friction,
                friction_iterations,
                newton_max_iterations,
                ccd_factor,
            },
        )
}

impl SettingsCase {
    fn contact(&self, method: ContactMethod) -> ContactSettings {
        ContactSettings {
            method,
            stiffness: self.stiffness,
            dhat: Some(self.dhat),
            kappa: self.kappa.unwrap_or(1e4),
            adaptive_kappa: self.kappa.is_none(),
            ccd_factor: self.ccd_factor,
            h: self.h,
            gravity: if self.gravity {
                DVec2::new(0.0, -9.81)
            } else {
                DVec2::ZERO
            },
            newton_max_iterations: self.newton_max_iterations,
            friction: self.friction,
            friction_iterations: self.friction_iterations,
            ..ContactSettings::default()
        }
    }
}

#[derive(Clone, Debug)]
struct ThrowCase {
    settings: SettingsCase,
    walls: Vec<WallCase>,
    balls: Vec<BallCase>,
    steps: u32,
}

fn throw_case() -> impl Strategy<Value = ThrowCase> {
    (
        settings_case(),
        prop::collection::vec(wall_case(), 1..=3),
        prop::collection::vec(ball_case(), 1..=5),
        1..=12u32,
    )
        .prop_map(|(settings, walls, balls, steps)| ThrowCase {
            settings,
            walls,
            balls,
            steps,
        })
}

/// Builds a lane through `LaneWorld::new` + `add_ball`; balls `add_ball` refuses (infeasible starts) are
/// skipped. Returns the lane and how many balls were refused.
fn build_lane(case: &ThrowCase, method: ContactMethod) -> (LaneWorld, usize) {
    let walls: Vec<Wall> = case.walls.iter().map(WallCase::wall).collect();
    let mut lane = LaneWorld::new(
        "robustness",
        case.settings.contact(method),
        walls.clone(),
        Vec::new(),
    );
    let mut refused = 0;
    for b in &case.balls {
        if lane
            .add_ball(b.ball(&walls, method == ContactMethod::Penalty))
            .is_err()
        {
            refused += 1;
        }
    }
    (lane, refused)
}

/// Coordinates' resolution in units of their last place, as the solver's CCD trusts no separation below it
/// (`RESOLUTION_ULPS` in `src/physics/ccd.rs`).
const RESOLUTION_ULPS: f64 = 64.0;

/// Does the straight segment `a → b` enter the box of `wall` by more than its coordinates resolve (64 units in
/// the last place of the largest coordinate involved)? Slab clipping in the box's frame, from the start's
/// box-local coordinates with their rounding error, as `ball_wall_gap` measures a distance to a face. A point ball
/// sliding up a face 2·10⁻¹⁶ m outside it and round the wall's end clipped the box's corner by 10⁻²¹ m (its piece's
/// end rounded 5 units in the last place towards the face) and was reported through the wall; no position near
/// 1 m tells such a depth, and a tunnel crosses the whole wall (10⁻⁴ m or more in these cases).
fn segment_meets_box(a: DVec2, b: DVec2, wall: &Wall) -> bool {
    let scale = a
        .abs()
        .max_element()
        .max(b.abs().max_element())
        .max(wall.center.abs().max_element());
    let resolution = RESOLUTION_ULPS * f64::EPSILON * scale;
    let (o, error) = wall.to_local_with_error(a);
    let d = wall.to_local_direction(b - a);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for axis in 0..2 {
        let (o_a, e_a, d_a) = (o[axis], error[axis], d[axis]);
        let h = (wall.half_extents[axis] - resolution).max(0.0);
        // How far the start lies past the low and the high face along this axis (> 0: outside).
        let below = (-h - o_a) - e_a;
        let above = (o_a - h) + e_a;
        if d_a == 0.0 {
            if below > 0.0 || above > 0.0 {
                return false;
            }
            continue;
        }
        let (enter, exit) = if d_a > 0.0 {
            (below / d_a, -above / d_a)
        } else {
            (-above / d_a, below / d_a)
        };
        t0 = t0.max(enter);
        t1 = t1.min(exit);
        if t0 > t1 {
            return false;
        }
    }
    true
}

/// A point ball thrown at 9 710 m/s slides up a wall's face 2·10⁻¹⁶ m outside it and round its end within one
/// step (a case a 100 000-case run of the random throws drew): one Newton piece clips the box's corner by
/// 10⁻²¹ m, below what its coordinates resolve, and the tunnelling check took it for a crossing. The step's path
/// goes round the end, and no piece enters the wall by a resolvable depth.
#[test]
fn a_ball_sliding_up_a_face_closer_than_a_coordinate_resolves_goes_round_the_end() {
    use proptest::strategy::ValueTree;
    // One wall: every index picks it.
    let wall = any::<Index>()
        .new_tree(&mut TestRunner::default())
        .expect("an index")
        .current();
    let ball = |offset, lateral, mass, speed, direction| BallCase {
        wall,
        behind: false,
        offset,
        lateral,
        radius: 0.0,
        mass,
        speed,
        aimed: true,
        direction,
        inside: false,
    };
    let case = ThrowCase {
        settings: SettingsCase {
            h: 0.00020191122675598642,
            dhat: 1.0779150789154681e-5,
            kappa: Some(604.8131533516054),
            stiffness: 100.0,
            gravity: false,
            friction: 0.0,
            friction_iterations: 1,
            newton_max_iterations: 59,
            ccd_factor: 0.9,
        },
        walls: vec![WallCase {
            center: DVec2::new(-1.1397851199705695, 0.0),
            half_length: 0.18010834362559483,
            thickness: 0.18010834362559483,
            angle: 0.0,
        }],
        balls: vec![
            ball(1.0, 0.0, 1.0, 0.0, 0.0),
            ball(
                0.034613107380935634,
                -0.7246387721802191,
                57.834485921519864,
                9709.634898384387,
                -1.7635800119044234,
            ),
        ],
        steps: 1,
    };
    let tally = RefCell::new(Tally::new());
    let checked = check_ipc_throw(&case, &tally).map_err(|e| e.to_string());
    assert_eq!(checked, Ok(()));
    // The piece the old check took for a crossing: it starts outside the face and ends beside the wall.
    let wall = case.walls[0].wall();
    let start = DVec2::new(-1.049730948157772, -0.04154925402539912);
    assert!(ball_wall_gap(start, 0.0, &wall) > 0.0);
    assert!(!segment_meets_box(
        start,
        DVec2::new(-1.049730948157773, 1.1405915752088271),
        &wall
    ));
    assert!(
        segment_meets_box(start, DVec2::new(-1.2, 0.0), &wall),
        "a real crossing still meets it"
    );
}

/// One step's Newton path: every piece `(ball, from, to)` the solver accepted for the state it kept (islands that
/// were merged and re-solved contribute the pieces of their final solve), recorded by the lane itself
/// (`LaneWorld::record_newton_path`), and where the step ended.
struct NewtonPath {
    pieces: Vec<(u32, DVec2, DVec2)>,
    end: Vec<DVec2>,
}

fn newton_path(before: &LaneWorld, _iterations: u32) -> NewtonPath {
    let mut copy = before.clone();
    copy.record_newton_path = true;
    copy.step();
    NewtonPath {
        pieces: copy.last.map(|d| d.newton_path).unwrap_or_default(),
        end: copy.balls.iter().map(|b| b.position).collect(),
    }
}

/// The first piece of ball `i`'s Newton path that passes through `wall`, if any.
fn path_through_wall(path: &NewtonPath, i: usize, wall: &Wall) -> Option<(usize, DVec2, DVec2)> {
    path.pieces
        .iter()
        .filter(|p| p.0 as usize == i)
        .enumerate()
        .find(|(_, (_, a, b))| segment_meets_box(*a, *b, wall))
        .map(|(k, &(_, a, b))| (k, a, b))
}

/// Smallest surface distance over every ball–wall and ball–ball pair, all pairs, no broad phase.
fn brute_force_min_gap(lane: &LaneWorld) -> Option<(f64, String)> {
    let mut min: Option<(f64, String)> = None;
    let mut keep = |d: f64, what: String| {
        if min.as_ref().is_none_or(|(m, _)| d < *m) {
            min = Some((d, what));
        }
    };
    for (i, b) in lane.balls.iter().enumerate() {
        for (k, w) in lane.walls.iter().enumerate() {
            keep(
                ball_wall_gap(b.position, b.radius, w),
                format!("ball {i}–wall {k}"),
            );
        }
        for (j, o) in lane.balls.iter().enumerate().skip(i + 1) {
            keep(
                (b.position - o.position).length() - b.radius - o.radius,
                format!("ball {i}–ball {j}"),
            );
        }
    }
    min
}

fn all_finite(lane: &LaneWorld) -> bool {
    lane.balls
        .iter()
        .all(|b| b.position.is_finite() && b.velocity.is_finite())
}

/// What the random throws exercised, printed at the end (visible with `--nocapture`).
#[derive(Default, Debug)]
struct Tally {
    cases: u64,
    balls: u64,
    refused: u64,
    steps: u64,
    steps_in_contact: u64,
    fast_balls_in_contact: u64,
    went_around: u64,
    false_tunnel_reports: u64,
    converged: u64,
    iteration_cap: u64,
    line_search_stalled: u64,
    linear_solve_failed: u64,
    min_gap: f64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            min_gap: f64::INFINITY,
            ..Tally::default()
        }
    }
}

/// One IPC throw: every step must keep the state finite and strictly feasible, never cross a wall, and end
/// Newton within its cap with the cap reported.
fn check_ipc_throw(case: &ThrowCase, tally: &RefCell<Tally>) -> Result<(), TestCaseError> {
    // One friction pass, so the Newton path can be rebuilt (see `newton_path`); penalty lanes try two.
    let mut case = case.clone();
    case.settings.friction_iterations = 1;
    let case = &case;
    let (mut lane, refused) = build_lane(case, ContactMethod::Ipc);
    {
        let mut t = tally.borrow_mut();
        t.cases += 1;
        t.balls += lane.balls.len() as u64;
        t.refused += refused as u64;
    }
    if let Some((gap, pair)) = brute_force_min_gap(&lane) {
        prop_assert!(
            gap > 0.0,
            "add_ball accepted an infeasible start: {pair} at {gap:e}"
        );
    }
    let dhat = case.settings.dhat;
    let cap = case.settings.newton_max_iterations;
    let passes = if case.settings.friction > 0.0 {
        case.settings.friction_iterations
    } else {
        1
    };
    for step in 1..=case.steps {
        let before = lane.clone();
        let diagnostics = lane.step().cloned();
        prop_assert!(
            lane.fault.is_none(),
            "step {step}: lane fault {:?}",
            lane.fault
        );
        let Some(diagnostics) = diagnostics else {
            return Err(TestCaseError::fail(format!(
                "step {step}: step returned no diagnostics"
            )));
        };
        prop_assert!(all_finite(&lane), "step {step}: non-finite ball state");
        prop_assert!(
            diagnostics.energy.is_finite(),
            "step {step}: energy {}",
            diagnostics.energy
        );
        if let Some((gap, pair)) = brute_force_min_gap(&lane) {
            prop_assert!(gap > 0.0, "step {step}: {pair} surface distance {gap:e}");
            let mut t = tally.borrow_mut();
            t.min_gap = t.min_gap.min(gap);
            if gap < dhat {
                t.steps_in_contact += 1;
            }
        }
        // Both ends of every ball's move are outside every wall (checked above), so a move whose chord still
        // meets a wall either tunnelled through it or went round an end of it within the step (Newton moves
        // piecewise, and only each piece is CCD-checked). The rebuilt Newton path tells which. The lane's own
        // tunnelling report is checked against the path too.
        let mut chords = Vec::new();
        for (i, (b0, b1)) in before.balls.iter().zip(&lane.balls).enumerate() {
            for (k, w) in lane.walls.iter().enumerate() {
                if segment_meets_box(b0.position, b1.position, w) {
                    chords.push((i, k));
                }
            }
        }
        if !chords.is_empty() || diagnostics.tunneled > 0 {
            let path = newton_path(&before, diagnostics.newton_iterations);
            prop_assert_eq!(
                &path.end,
                &lane.balls.iter().map(|b| b.position).collect::<Vec<_>>(),
                "step {}: the rebuilt Newton path does not end where the step did",
                step
            );
            for (i, k) in chords {
                if let Some((piece, a, b)) = path_through_wall(&path, i, &lane.walls[k]) {
                    return Err(TestCaseError::fail(format!(
                        "step {step}: ball {i} went through wall {k} on Newton piece {piece}: {a} -> {b}"
                    )));
                }
                tally.borrow_mut().went_around += 1;
            }
            if diagnostics.tunneled > 0 {
                let through = (0..lane.balls.len()).find_map(|i| {
                    lane.walls
                        .iter()
                        .enumerate()
                        .find_map(|(k, w)| path_through_wall(&path, i, w).map(|p| (i, k, p)))
                });
                if let Some((i, k, (piece, a, b))) = through {
                    return Err(TestCaseError::fail(format!(
                        "step {step}: ball {i} went through wall {k} on Newton piece {piece}: {a} -> {b}"
                    )));
                }
                // No piece of the path meets a wall: the lane's report is false (see the ignored test
                // `the_tunnelling_report_ignores_a_newton_path_round_a_wall_corner`).
                tally.borrow_mut().false_tunnel_reports += 1;
            }
        }
        for (b0, b1) in before.balls.iter().zip(&lane.balls) {
            if b0.velocity.length() > 100.0
                && lane
                    .walls
                    .iter()
                    .any(|w| ball_wall_gap(b1.position, b1.radius, w) < dhat)
            {
                tally.borrow_mut().fast_balls_in_contact += 1;
            }
        }
        let n = diagnostics.newton_iterations;
        // A lane whose every ball was refused has nothing to solve: 0 directions.
        let least = u32::from(!lane.balls.is_empty());
        prop_assert!(
            n >= least && n <= cap * passes,
            "step {step}: {n} Newton iterations, cap {cap} × {passes} passes"
        );
        if passes == 1 {
            if diagnostics.stop == StopReason::IterationCap {
                prop_assert_eq!(n, cap, "step {}: stopped on the cap early", step);
            }
            if n < cap {
                prop_assert!(
                    diagnostics.stop != StopReason::IterationCap,
                    "step {step}: IterationCap reported after {n} < {cap} iterations"
                );
            }
        }
        let mut t = tally.borrow_mut();
        t.steps += 1;
        match diagnostics.stop {
            StopReason::Converged => t.converged += 1,
            StopReason::IterationCap => t.iteration_cap += 1,
            StopReason::LineSearchStalled => t.line_search_stalled += 1,
            StopReason::LinearSolveFailed(_) => t.linear_solve_failed += 1,
        }
    }
    Ok(())
}

#[test]
fn ipc_random_throws_stay_feasible_finite_and_never_tunnel() {
    let tally = RefCell::new(Tally::new());
    let start = Instant::now();
    let result = runner(48).run(&throw_case(), |case| check_ipc_throw(&case, &tally));
    let t = tally.borrow();
    eprintln!(
        "ipc throws: {} cases, {} balls ({} refused), {} steps ({} in contact, {} fast-ball contacts, {} round a wall end, {} false tunnel reports), stops: \
         {} converged / {} cap / {} stalled / {} linear-solve failed, min gap {:.3e} m, {:.1} s",
        t.cases,
        t.balls,
        t.refused,
        t.steps,
        t.steps_in_contact,
        t.fast_balls_in_contact,
        t.went_around,
        t.false_tunnel_reports,
        t.converged,
        t.iteration_cap,
        t.line_search_stalled,
        t.linear_solve_failed,
        t.min_gap,
        start.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn penalty_random_throws_never_produce_nan() {
    let steps = RefCell::new((0u64, 0u64, 0u64));
    let start = Instant::now();
    let result = runner(32).run(&throw_case(), |case| {
        let (mut lane, _) = build_lane(&case, ContactMethod::Penalty);
        for step in 1..=case.steps {
            let diagnostics = lane.step().cloned();
            prop_assert!(
                lane.fault.is_none(),
                "step {step}: lane fault {:?}",
                lane.fault
            );
            prop_assert!(all_finite(&lane), "step {step}: non-finite ball state");
            let energy = diagnostics.map_or(f64::NAN, |d| d.energy);
            prop_assert!(energy.is_finite(), "step {step}: energy {energy}");
        }
        let mut s = steps.borrow_mut();
        s.0 += 1;
        s.1 += u64::from(case.steps);
        s.2 += u64::from(lane.stats.tunneled);
        Ok(())
    });
    let (cases, steps, tunneled) = *steps.borrow();
    eprintln!(
        "penalty throws: {cases} cases, {steps} steps, {tunneled} balls tunnelled (allowed), {:.1} s",
        start.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn add_ball_accepts_exactly_the_feasible_balls() {
    let strategy = (
        prop::collection::vec(wall_case(), 1..=3),
        prop::collection::vec(ball_case(), 1..=6),
    );
    let result = runner(64).run(&strategy, |(walls, balls)| {
        let walls: Vec<Wall> = walls.iter().map(WallCase::wall).collect();
        let mut lane = LaneWorld::new("spawn", ContactSettings::default(), walls.clone(), vec![]);
        for b in &balls {
            // About one in six is pushed into its wall, to be refused.
            let ball = b.ball(&walls, true);
            let feasible = walls
                .iter()
                .all(|w| ball_wall_gap(ball.position, ball.radius, w) > 0.0)
                && lane
                    .balls
                    .iter()
                    .all(|o| (o.position - ball.position).length() - o.radius - ball.radius > 0.0);
            let accepted = lane.add_ball(ball);
            prop_assert_eq!(accepted.is_ok(), feasible, "{:?} for {:?}", accepted, ball);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn add_ball_refuses_non_finite_and_non_positive_values() {
    let mut lane = LaneWorld::new("spawn", ContactSettings::default(), vec![], vec![]);
    let good = Ball {
        position: DVec2::ZERO,
        velocity: DVec2::ZERO,
        radius: 0.1,
        mass: 1.0,
    };
    for bad in [
        Ball {
            position: DVec2::new(f64::NAN, 0.0),
            ..good
        },
        Ball {
            velocity: DVec2::new(0.0, f64::INFINITY),
            ..good
        },
        Ball {
            radius: -1e-9,
            ..good
        },
        Ball {
            radius: f64::NAN,
            ..good
        },
        Ball { mass: 0.0, ..good },
        Ball {
            mass: f64::NEG_INFINITY,
            ..good
        },
    ] {
        let refused = lane.add_ball(bad);
        assert!(refused.is_err(), "{bad:?} was accepted");
        let message = refused.map(|_| ()).unwrap_err().to_string();
        assert!(!message.contains('\n'), "{message}");
    }
    assert!(lane.balls.is_empty());
}

/// The headline case by hand: a point ball at 10 km/s, h = 50 ms, a 0.1 mm wall, d̂ = 10 µm, at several angles
/// and Newton caps. No gravity and a long wall, so the ball cannot legitimately slide off an end and around.
#[test]
fn ipc_never_crosses_a_wall_at_any_speed() {
    for angle in [0.0, 0.3, FRAC_PI_2, 2.0, 4.0] {
        for cap in [1, 3, 59] {
            let wall = Wall {
                center: DVec2::ZERO,
                half_extents: DVec2::new(5e-5, 100.0),
                angle,
            };
            let normal = wall.to_world_direction(DVec2::X);
            let settings = ContactSettings {
                dhat: Some(1e-5),
                kappa: 1e8,
                h: 0.05,
                newton_max_iterations: cap,
                gravity: DVec2::ZERO,
                ..ContactSettings::default()
            };
            let mut lane = LaneWorld::new("fast", settings, vec![wall], vec![]);
            lane.add_ball(Ball {
                position: normal * 0.5,
                velocity: -normal * 1e4,
                radius: 0.0,
                mass: 1.0,
            })
            .expect("feasible");
            for _ in 0..20 {
                lane.step().expect("steps");
                let b = lane.balls[0];
                assert!(ball_wall_gap(b.position, 0.0, &wall) > 0.0);
                assert!(
                    b.position.dot(normal) > 0.0,
                    "angle {angle}, cap {cap}: crossed"
                );
            }
            assert_eq!(lane.stats.tunneled, 0);
        }
    }
}

/// A ball of radius 1 thrown past the end of a 2 m wall (its surface overlaps the wall's extent by 6 cm, so it
/// meets the corner) goes round the corner within one implicit step, as the incremental potential's minimiser
/// lies beyond the wall. Every Newton piece stays clear of the wall. Before 50b8b58 `LaneWorld::update_tunnelling`
/// counted the ball as tunnelled (it accepted any end position within `half-length + radius` laterally).
/// (Found by `ipc_random_throws_stay_feasible_finite_and_never_tunnel`, shrunk by hand.)
#[test]
fn the_tunnelling_report_ignores_a_ball_going_round_a_wall_end() {
    let wall = Wall {
        center: DVec2::ZERO,
        half_extents: DVec2::new(0.5, 1.0),
        angle: 0.0,
    };
    let settings = ContactSettings {
        dhat: Some(1e-2),
        kappa: 100.0,
        h: 0.01,
        gravity: DVec2::ZERO,
        ..ContactSettings::default()
    };
    let mut lane = LaneWorld::new("corner", settings, vec![wall], vec![]);
    lane.add_ball(Ball {
        position: DVec2::new(1.6, -1.94),
        velocity: DVec2::new(-400.0, 0.0),
        radius: 1.0,
        mass: 1.0,
    })
    .expect("feasible");
    let before = lane.clone();
    let n = lane.step().expect("steps").newton_iterations;
    let path = newton_path(&before, n);
    assert_eq!(
        path_through_wall(&path, 0, &wall),
        None,
        "the path crosses the wall"
    );
    for &(_, from, to) in path.pieces.iter().filter(|p| p.0 == 0) {
        // Every piece keeps the ball's surface off the wall (sampled; the CCD guarantee, checked from outside).
        for s in 0..=100 {
            let p = from.lerp(to, f64::from(s) / 100.0);
            assert!(
                ball_wall_gap(p, 1.0, &wall) > 0.0,
                "piece touches the wall at {p}"
            );
        }
    }
    let end = lane.balls[0].position;
    assert!(end.x < -0.5, "the ball went round: {end}");
    assert_eq!(
        lane.stats.tunneled, 0,
        "tunnelling reported; the ball went round to {end}"
    );
}

/// A point ball thrown at a wall at 1345 m/s, 42° below head-on, with h = 50 ms: the first Newton piece stops
/// at the face, later pieces slide it down the face and round the bottom corner, and the step ends at `x̃`,
/// beyond the wall. No piece touches the wall, but the straight chord from start to end passes through it, and
/// `LaneWorld::update_tunnelling` (after 50b8b58) judges by that chord, so it still reports tunnelling.
/// (Found by `ipc_random_throws_stay_feasible_finite_and_never_tunnel`, counted there as a false report.)
#[test]
fn the_tunnelling_report_ignores_a_newton_path_round_a_wall_corner() {
    let wall = Wall {
        center: DVec2::ZERO,
        half_extents: DVec2::new(0.5, 1.0),
        angle: 0.0,
    };
    let settings = ContactSettings {
        dhat: Some(1e-2),
        kappa: 100.0,
        h: 0.05,
        gravity: DVec2::ZERO,
        ..ContactSettings::default()
    };
    let mut lane = LaneWorld::new("corner", settings, vec![wall], vec![]);
    lane.add_ball(Ball {
        position: DVec2::new(-1.5, 0.0),
        velocity: DVec2::new(1000.0, -900.0),
        radius: 0.0,
        mass: 1.0,
    })
    .expect("feasible");
    let before = lane.clone();
    let n = lane.step().expect("steps").newton_iterations;
    let path = newton_path(&before, n);
    assert_eq!(
        path_through_wall(&path, 0, &wall),
        None,
        "the path crosses the wall"
    );
    let end = lane.balls[0].position;
    assert!(end.x > 0.5, "the ball went round: {end}");
    assert!(
        segment_meets_box(before.balls[0].position, end, &wall),
        "the chord meets the wall"
    );
    assert_eq!(
        lane.stats.tunneled, 0,
        "tunnelling reported; the Newton path went round to {end}"
    );
}

// ---------------------------------------------------------------------------------------------------------
// Scene parser fuzzing.

fn scenes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes")
}

/// The shipped scenes, read at test time so new ones are fuzzed too.
fn shipped_scenes() -> Vec<(String, Vec<u8>)> {
    let mut scenes: Vec<(String, Vec<u8>)> = std::fs::read_dir(scenes_dir())
        .expect("assets/scenes")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("ron"))
        .map(|p| {
            let name = p
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            (name, std::fs::read(&p).expect("readable"))
        })
        .collect();
    scenes.sort();
    assert!(!scenes.is_empty());
    scenes
}

const FILE: &str = "fuzz.ron";

/// The parser's contract for an error: one line, starting with the file name, saying something.
fn check_error_message(message: &str) -> Result<(), String> {
    if !message.starts_with(&format!("{FILE}: ")) {
        return Err(format!(
            "error does not start with the file name: {message:?}"
        ));
    }
    if message.chars().any(char::is_control) {
        return Err(format!("error is not one clean line: {message:?}"));
    }
    if message.len() <= FILE.len() + 2 {
        return Err(format!("empty error: {message:?}"));
    }
    Ok(())
}

/// `Scene::parse` under its contract: `Ok`, or an error message that passes [`check_error_message`].
fn parse_checked(text: &str) -> Result<Option<Scene>, TestCaseError> {
    match Scene::parse(text, FILE) {
        Ok(scene) => Ok(Some(scene)),
        Err(e) => {
            check_error_message(&e.to_string()).map_err(TestCaseError::fail)?;
            Ok(None)
        }
    }
}

/// A scene that parsed is used: built and stepped twice; this must not panic (a non-finite step pauses the
/// lane with a one-line fault instead).
fn build_and_step(scene: &Scene) -> Result<(), TestCaseError> {
    let mut lanes = scene.build();
    for lane in &mut lanes {
        // Stepping a mutated file with thousands of bodies would only test patience.
        if lane.balls.len() > 200 {
            continue;
        }
        lane.step();
        lane.step();
        if let Some(fault) = &lane.fault {
            prop_assert!(!fault.contains('\n'), "fault: {fault:?}");
        }
    }
    Ok(())
}

/// Spans of numbers (`-12.5e-3`, `59`) in RON text.
fn number_spans(text: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let starts = text[i].is_ascii_digit()
            || (text[i] == b'-' && text.get(i + 1).is_some_and(u8::is_ascii_digit));
        let inside_word = i > 0 && (text[i - 1].is_ascii_alphanumeric() || text[i - 1] == b'_');
        if starts && !inside_word {
            let mut j = i + 1;
            while j < text.len()
                && (text[j].is_ascii_digit()
                    || text[j] == b'.'
                    || text[j] == b'e'
                    || text[j] == b'E'
                    || ((text[j] == b'-' || text[j] == b'+') && matches!(text[j - 1], b'e' | b'E')))
            {
                j += 1;
            }
            spans.push((i, j));
            i = j;
        } else {
            i += 1;
        }
    }
    spans
}

const NUMBER_REPLACEMENTS: &[&str] = &[
    "NaN",
    "inf",
    "-inf",
    "-1",
    "0",
    "-0.0",
    "1e308",
    "-1e308",
    "1e999",
    "5e-324",
    "4294967296",
    "18446744073709551616",
    "99999999999999999999999999999",
    "1_000_000",
    "0x7fffffff",
    "1.",
    ".5",
    "--1",
    "1e",
];

pub(crate) const TOKENS: &[&str] = &[
    "Scene(",
    "LaneSpec(",
    "ContactSettings(",
    "WallSpec(",
    "BallSpec(",
    "RodSpec(",
    "name:",
    "lanes:",
    "balls:",
    "walls:",
    "rods:",
    "contact:",
    "method:",
    "Ipc",
    "Penalty",
    "Magic",
    "position:",
    "velocity:",
    "radius:",
    "mass:",
    "h:",
    "dhat:",
    "kappa:",
    "steps:",
    "Some(",
    "None",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "\"x\"",
    "\"a\\nb\"",
    "\"\n\"",
    "'\\n'",
    "'\u{1b}'",
    "'x'",
    "r#\"raw\"#",
    "b\"bytes\"",
    "#![enable(implicit_some)]",
    "/*",
    "*/",
    "//",
    "\n",
    "0",
    "1",
    "-1",
    "1e308",
    "NaN",
    "inf",
    "true",
    "()",
    "(0.0, 0.0)",
    "\u{feff}",
    "é",
    "\0",
];

#[derive(Clone, Debug)]
pub(crate) enum Mutation {
    FlipByte(Index, u8),
    Truncate(Index),
    DeleteRange(Index, usize),
    ReplaceNumber(Index, &'static str),
    DeleteBracket(Index),
    InsertToken(Index, &'static str),
    DuplicateRange(Index, usize),
}

pub(crate) fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => (any::<Index>(), 1..=255u8).prop_map(|(i, x)| Mutation::FlipByte(i, x)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        1 => (any::<Index>(), 1..64usize).prop_map(|(i, n)| Mutation::DeleteRange(i, n)),
        3 => (any::<Index>(), prop::sample::select(NUMBER_REPLACEMENTS))
            .prop_map(|(i, s)| Mutation::ReplaceNumber(i, s)),
        2 => any::<Index>().prop_map(Mutation::DeleteBracket),
        2 => (any::<Index>(), prop::sample::select(TOKENS)).prop_map(|(i, t)| Mutation::InsertToken(i, t)),
        1 => (any::<Index>(), 1..400usize).prop_map(|(i, n)| Mutation::DuplicateRange(i, n)),
    ]
}

pub(crate) fn apply(text: &mut Vec<u8>, m: &Mutation) {
    if text.is_empty() {
        return;
    }
    let n = text.len();
    match m {
        Mutation::FlipByte(i, x) => text[i.index(n)] ^= x,
        Mutation::Truncate(i) => text.truncate(i.index(n)),
        Mutation::DeleteRange(i, len) => {
            let a = i.index(n);
            text.drain(a..(a + len).min(n));
        }
        Mutation::ReplaceNumber(i, with) => {
            let spans = number_spans(text);
            if !spans.is_empty() {
                let (a, b) = spans[i.index(spans.len())];
                text.splice(a..b, with.bytes());
            }
        }
        Mutation::DeleteBracket(i) => {
            let brackets: Vec<usize> = (0..n)
                .filter(|&k| matches!(text[k], b'(' | b')' | b'[' | b']'))
                .collect();
            if !brackets.is_empty() {
                text.remove(brackets[i.index(brackets.len())]);
            }
        }
        Mutation::InsertToken(i, token) => {
            let at = i.index(n + 1);
            text.splice(at..at, token.bytes());
        }
        Mutation::DuplicateRange(i, len) => {
            let a = i.index(n);
            let b = (a + len).min(n);
            let copy = text[a..b].to_vec();
            text.splice(b..b, copy);
        }
    }
}

#[test]
fn the_parser_survives_arbitrary_bytes_and_strings() {
    let strategy = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..2048)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        any::<String>(),
        prop::collection::vec(prop::sample::select(TOKENS), 0..200).prop_map(|t| t.concat()),
    ];
    let result = runner(256).run(&strategy, |text| {
        if let Some(scene) = parse_checked(&text)? {
            build_and_step(&scene)?;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn the_parser_survives_mutated_shipped_scenes() {
    let scenes = shipped_scenes();
    let strategy = (any::<Index>(), prop::collection::vec(mutation(), 1..=4));
    let counts = RefCell::new((0u64, 0u64));
    let start = Instant::now();
    let result = runner(256).run(&strategy, |(which, mutations)| {
        let mut text = scenes[which.index(scenes.len())].1.clone();
        for m in &mutations {
            apply(&mut text, m);
        }
        let parsed = parse_checked(&String::from_utf8_lossy(&text))?;
        let mut c = counts.borrow_mut();
        if let Some(scene) = parsed {
            c.0 += 1;
            drop(c);
            build_and_step(&scene)?;
        } else {
            c.1 += 1;
        }
        Ok(())
    });
    let (ok, refused) = *counts.borrow();
    eprintln!(
        "mutated scenes: {ok} parsed and stepped, {refused} refused with one-line errors, {:.1} s",
        start.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// The one-line error for text that must be refused.
fn expect_refusal(text: &str) -> String {
    let Err(error) = Scene::parse(text, FILE) else {
        panic!("accepted");
    };
    let message = error.to_string();
    if let Err(problem) = check_error_message(&message) {
        panic!("{problem}");
    }
    message
}

#[test]
fn truncating_a_shipped_scene_at_every_length_gives_ok_or_one_line() {
    let scenes = shipped_scenes();
    let (name, text) = scenes
        .iter()
        .find(|(n, _)| n == "wall_throw.ron")
        .unwrap_or(&scenes[0]);
    let mut accepted = 0;
    for len in 0..=text.len() {
        match parse_checked(&String::from_utf8_lossy(&text[..len])) {
            Ok(Some(_)) => accepted += 1,
            Ok(None) => {}
            Err(e) => panic!("{name} truncated to {len} bytes: {e}"),
        }
    }
    // Only the whole file (and the file without trailing whitespace/comment) parses.
    assert!(accepted >= 1, "{name}: not even the whole file parsed");
}

#[test]
fn deep_nesting_is_refused_without_overflowing_the_stack() {
    for text in [
        "[".repeat(100_000),
        "(".repeat(100_000),
        format!("Scene(name: \"n\", lanes: {}", "[".repeat(100_000)),
        format!("Scene(name: \"n\", steps: {}", "Some(".repeat(100_000)),
        format!(
            "Scene(name: \"n\", lanes: [LaneSpec(name: \"l\", balls: [BallSpec(position: {}",
            "(".repeat(100_000)
        ),
    ] {
        let message = expect_refusal(&text);
        assert!(message.len() < 300, "{message}");
    }
}

fn lane_text(name: &str) -> String {
    format!("LaneSpec(name: \"{name}\")")
}

#[test]
fn a_scene_with_more_lanes_than_the_limit_is_refused_naming_it() {
    let at_limit: Vec<String> = (0..MAX_LANES).map(|i| lane_text(&i.to_string())).collect();
    let ok = format!("Scene(name: \"many\", lanes: [{}])", at_limit.join(", "));
    assert!(matches!(parse_checked(&ok), Ok(Some(_))));
    let over: Vec<String> = (0..=MAX_LANES).map(|i| lane_text(&i.to_string())).collect();
    let message = expect_refusal(&format!(
        "Scene(name: \"many\", lanes: [{}])",
        over.join(", ")
    ));
    assert_eq!(
        message,
        format!("{FILE}: lanes: 65 lanes; at most {MAX_LANES} are allowed")
    );
}

#[test]
fn a_scene_with_200001_balls_is_refused_quickly_naming_the_limit() {
    let mut text = String::from(
        "Scene(name: \"flood\", lanes: [LaneSpec(name: \"l\", contact: ContactSettings(method: Penalty), balls: [",
    );
    for i in 0..200_001 {
        text.push_str(&format!("(position: ({}, 0)),", i % 1000));
    }
    text.push_str("])])");
    let start = Instant::now();
    let message = expect_refusal(&text);
    let elapsed = start.elapsed();
    assert_eq!(
        message,
        format!("{FILE}: lanes[0].balls: 200001 balls; at most 200000 are allowed")
    );
    // A debug-built RON parser reads the 4.6 MB text in a second or two; the check itself is instant. The bound
    // only catches a check that grew with the balls' count (minutes), with room for a loaded machine.
    assert!(elapsed < Duration::from_secs(90), "took {elapsed:?}");
}

#[test]
fn walls_over_the_limit_are_refused_naming_it() {
    let walls = "(center: (0, 0), half_extents: (1, 1)),".repeat(10_001);
    let message = expect_refusal(&format!(
        "Scene(name: \"w\", lanes: [LaneSpec(name: \"l\", walls: [{walls}])])"
    ));
    assert!(
        message.ends_with("walls: 10001 walls; at most 10000 are allowed"),
        "{message}"
    );
}

/// Balls and walls within their own limits can still ask for one tracked side per ball–wall pair: 200 000 balls
/// and 10 000 walls (a 5 MB demo) aborted record, replay and export on a 6 GB allocation. The product is limited
/// per lane and per scene, and a spawn that would pass the lane's limit is refused.
#[test]
fn ball_wall_pairs_over_the_limit_are_refused_before_any_memory_is_spent() {
    let lane = |balls: usize, walls: usize| {
        format!(
            "LaneSpec(name: \"l\", contact: ContactSettings(method: Penalty), walls: [{}], balls: [{}])",
            "(center: (0, -10), half_extents: (1, 1)),".repeat(walls),
            (0..balls)
                .map(|i| format!("(position: ({}, 0)),", i as f64 * 0.5))
                .collect::<String>()
        )
    };
    let scene = |lanes: &[String]| format!("Scene(name: \"w\", lanes: [{}])", lanes.join(", "));
    // 2 000 000 pairs in a lane are allowed; one ball more is not.
    assert!(matches!(
        parse_checked(&scene(&[lane(2000, 1000)])),
        Ok(Some(_))
    ));
    let message = expect_refusal(&scene(&[lane(2001, 1000)]));
    assert_eq!(
        message,
        format!(
            "{FILE}: lanes[0].balls: 2001 balls and 1000 walls make 2001000 ball–wall pairs; a lane tracks at \
             most 2000000 (each pair's side of its wall, to report tunnelling)"
        )
    );
    // Six lanes at the lane's limit pass the scene's 10⁷.
    let six: Vec<String> = (0..6).map(|_| lane(2000, 1000)).collect();
    let message = expect_refusal(&scene(&six));
    assert!(
        message.starts_with(&format!(
            "{FILE}: lanes: the lanes hold 12000000 ball–wall pairs"
        )),
        "{message}"
    );
    // A spawn that would pass the lane's limit.
    let mut world = Scene::parse(&scene(&[lane(2000, 1000)]), FILE)
        .expect("parses")
        .build()
        .remove(0);
    let refused = world
        .add_ball(contact_sandbox::physics::geometry::Ball {
            position: contact_sandbox::physics::DVec2::new(5.0, 5.0),
            velocity: contact_sandbox::physics::DVec2::ZERO,
            radius: 0.1,
            mass: 1.0,
        })
        .expect_err("over the limit");
    assert!(
        refused
            .to_string()
            .contains("more than 2000000 ball–wall pairs"),
        "{refused}"
    );
    // Spawned into every lane of a scene near its limit (5 lanes of 1 999 balls and 1 000 walls), one ball fits
    // and a second is refused whole, by the scene's limit, before any lane takes it.
    let five: Vec<String> = (0..5).map(|_| lane(1999, 1000)).collect();
    let mut worlds = Scene::parse(&scene(&five), FILE).expect("parses").build();
    let mut lanes: Vec<&mut contact_sandbox::physics::world::LaneWorld> =
        worlds.iter_mut().collect();
    let ball = contact_sandbox::scene::BallSpec {
        position: contact_sandbox::physics::DVec2::new(-5.0, 5.0),
        velocity: contact_sandbox::physics::DVec2::ZERO,
        radius: 0.0,
        mass: 1.0,
    };
    contact_sandbox::demo::spawn_ball_everywhere(&mut lanes, &ball, None)
        .expect("one ball more makes 10⁷ pairs, the scene's limit");
    let message = contact_sandbox::demo::spawn_ball_everywhere(&mut lanes, &ball, None)
        .expect_err("a second passes it");
    assert!(
        message.contains("10005000 ball–wall pairs") && message.contains("10000000"),
        "{message}"
    );
    assert!(
        lanes.iter().all(|l| l.balls.len() == 2000),
        "no lane took it"
    );
}

#[test]
fn scene_files_too_large_unreadable_or_not_utf8_are_refused_in_one_line() {
    let dir =
        std::env::temp_dir().join(format!("contact-sandbox-robustness-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let huge = dir.join("huge.ron");
    // Sparse: the size check must refuse it from its metadata, before reading 65 MB.
    std::fs::File::create(&huge)
        .and_then(|f| f.set_len(65 * 1024 * 1024))
        .expect("sparse file");
    let binary = dir.join("binary.ron");
    std::fs::write(&binary, [0xff, 0xfe, 0x00, 0x80]).expect("write");
    let missing = dir.join("missing.ron");
    for path in [&huge, &binary, &missing, &dir] {
        let message = Scene::load(path).map(|_| ()).unwrap_err().to_string();
        assert!(
            message.starts_with(&format!("{}: ", path.display())),
            "{message}"
        );
        assert!(!message.chars().any(char::is_control), "{message:?}");
    }
    let message = Scene::load(&huge).map(|_| ()).unwrap_err().to_string();
    assert!(message.contains("limited to 67108864 bytes"), "{message}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------------------
// Soak.

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// A small deterministic generator (the soak needs reproducible spawns, not proptest).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
    }
}

/// End RSS may exceed the middle RSS by at most this much (the spawned balls and their contacts need a few
/// hundred kB; anything past this is a leak).
const SOAK_RSS_MARGIN_KIB: u64 = 16 * 1024;

/// 10⁵ steps (`CONTACT_SANDBOX_SOAK_STEPS` to change) of the reference IPC ball pit (the bench's scene and
/// settings, N = 1000 in a 20 m box), with spawns and setting changes every few thousand steps: no fault, no
/// NaN, no ball lost, energy bounded by what was put in, memory flat.
#[test]
#[ignore = "soak: cargo test --release --test it soak -- --ignored --nocapture"]
fn soak_ipc_ball_pit_stays_finite_bounded_and_flat() {
    let steps: u64 = std::env::var("CONTACT_SANDBOX_SOAK_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let half_width = contact_sandbox::cli::bench::PIT_WIDTH * 0.5;
    let mut lane = contact_sandbox::cli::bench::pit_lane(
        1000,
        ContactMethod::Ipc,
        contact_sandbox::cli::bench::PIT_WIDTH,
    );
    lane.name = "soak".into();
    let mut rng = Lcg(0x5eed);
    // Spawned balls: the pit's sizes and density, thrown in at up to 1 m/s.
    let random_ball = |rng: &mut Lcg, x: f64, y: f64| {
        let radius = contact_sandbox::cli::bench::PIT_RADIUS * (0.8 + 0.4 * rng.next());
        Ball {
            position: DVec2::new(x, y),
            velocity: DVec2::new(rng.next() * 2.0 - 1.0, rng.next() * 2.0 - 1.0),
            radius,
            mass: PI * radius * radius * 1000.0,
        }
    };
    let mut injected = 0.0;
    let energy_start = lane.energy();
    let scale = energy_start.abs();
    let mut max_energy = energy_start;
    let mut spawned = 0;
    let mut refused = 0;
    let mut rss_start = 0;
    let mut rss_middle = 0;
    let started = Instant::now();
    let settings_cycle = [
        (1e4, 1e-3, 0.0),
        (1e5, 2e-3, 0.3),
        (1e3, 5e-4, 0.6),
        (1e4, 1e-3, 0.1),
    ];
    for step in 1..=steps {
        if step % 2_500 == 0 {
            // Spawn ten balls above the pile; the energy they bring is budgeted.
            let before = lane.energy();
            for _ in 0..10 {
                let (x, y) = (-9.0 + 18.0 * rng.next(), 3.0 + 2.0 * rng.next());
                let ball = random_ball(&mut rng, x, y);
                if lane.add_ball(ball).is_ok() {
                    spawned += 1;
                } else {
                    refused += 1;
                }
            }
            injected += (lane.energy() - before).max(0.0);
        }
        if step % 4_000 == 0 {
            let (kappa, dhat, friction) =
                settings_cycle[(step / 4_000) as usize % settings_cycle.len()];
            let before = lane.energy();
            lane.settings.kappa = kappa;
            lane.settings.dhat = Some(dhat);
            lane.settings.friction = friction;
            injected += (lane.energy() - before).max(0.0);
        }
        let diagnostics = lane.step();
        assert!(diagnostics.is_some(), "step {step}: {:?}", lane.fault);
        let energy = lane.energy();
        assert!(energy.is_finite(), "step {step}: energy {energy}");
        max_energy = max_energy.max(energy);
        assert!(
            energy <= energy_start + injected + 0.05 * scale,
            "step {step}: energy {energy} J above the start {energy_start} J + injected {injected} J"
        );
        if step == 100 {
            rss_start = rss_kib();
        }
        if step == steps / 2 {
            rss_middle = rss_kib();
        }
        if step % 10_000 == 0 || step == steps {
            assert!(all_finite(&lane), "step {step}: non-finite state");
            for (i, b) in lane.balls.iter().enumerate() {
                assert!(
                    b.position.x.abs() < half_width && b.position.y > 0.0,
                    "step {step}: ball {i} left the box at {}",
                    b.position
                );
            }
            eprintln!(
                "soak step {step}: {} balls, energy {energy:.1} J, mean Newton {:.2}, min gap {:.3e} m, \
                 {:.2} ms/step, RSS {} KiB",
                lane.balls.len(),
                lane.stats.mean_newton(),
                lane.stats.min_gap.unwrap_or(f64::NAN),
                started.elapsed().as_secs_f64() * 1e3 / step as f64,
                rss_kib()
            );
        }
    }
    let rss_end = rss_kib();
    let elapsed = started.elapsed().as_secs_f64();
    eprintln!(
        "soak: {steps} steps in {elapsed:.0} s ({:.1} steps/s), {} balls ({spawned} spawned, {refused} refused), \
         energy start {energy_start:.1} J, max {max_energy:.1} J, injected {injected:.1} J, end {:.1} J; \
         Newton mean {:.2} max {}, caps {}, stalls {}; min gap {:.3e} m; tunnelled {}; \
         RSS start {rss_start} / middle {rss_middle} / end {rss_end} KiB",
        steps as f64 / elapsed,
        lane.balls.len(),
        lane.energy(),
        lane.stats.mean_newton(),
        lane.stats.max_newton,
        lane.stats.iteration_caps,
        lane.stats.stalled_line_searches,
        lane.stats.min_gap.unwrap_or(f64::NAN),
        lane.stats.tunneled,
    );
    assert_eq!(lane.stats.tunneled, 0);
    assert!(lane.stats.min_gap.is_some_and(|g| g > 0.0));
    assert!(
        rss_end <= rss_middle + SOAK_RSS_MARGIN_KIB,
        "RSS grew from {rss_middle} KiB (middle) to {rss_end} KiB (end)"
    );
}

/// Found by `the_parser_survives_mutated_shipped_scenes`: the gauntlet with one ball's radius replaced by 2⁶⁴ m
/// parsed, and its first step tripped the line search's check that the cached energy at `x` equals the energy
/// recomputed there. Lengths and speeds beyond ±1e6 are refused now, with the field named; 1e6 itself steps.
#[test]
fn a_ball_of_radius_two_to_the_64_metres_is_refused_and_one_of_1e6_steps() {
    let (_, bytes) = shipped_scenes()
        .into_iter()
        .find(|(name, _)| name == "gauntlet.ron")
        .expect("the gauntlet ships");
    let spans = number_spans(&bytes);
    // The fuzzer's span: the first lane's radius of 0.005 m.
    let (a, b) = spans[62];
    assert_eq!(&bytes[a..b], b"0.005");
    let with = |number: &str| {
        let mut text = bytes.clone();
        text.splice(a..b, number.bytes());
        String::from_utf8_lossy(&text).into_owned()
    };
    let message = expect_refusal(&with("18446744073709551616"));
    assert!(
        message.contains("radius") && message.contains("1e6") && message.contains(FILE),
        "{message}"
    );
    let scene = parse_checked(&with("1e6"))
        .expect("a clear message")
        .expect("1e6 m is accepted");
    build_and_step(&scene).expect("steps");
}

/// The seed's lane (SPEC §2: point ball, h = 10 ms, d̂ = 1 mm, κ = 10⁴, tol 10⁻¹⁰) with one ball or two.
fn ipc_lane(walls: Vec<Wall>, balls: Vec<Ball>) -> LaneWorld {
    let settings = ContactSettings {
        method: ContactMethod::Ipc,
        h: 0.01,
        gravity: DVec2::ZERO,
        dhat: Some(1e-3),
        kappa: 1e4,
        newton_tolerance: 1e-10,
        newton_max_iterations: 59,
        ..ContactSettings::default()
    };
    LaneWorld::new("exact arrival", settings, walls, balls)
}

fn point_ball(x: f64, v: f64) -> Ball {
    Ball {
        position: DVec2::new(x, 0.0),
        velocity: DVec2::new(v, 0.0),
        radius: 0.0,
        mass: 1.0,
    }
}

/// A point ball whose free flight ends on a wall's face to the last bit (from 0 in steps of 0.05 m onto a face
/// at 0.5 m) used to stop 8.7·10⁻¹⁸ m from it for good, its speed gone: a Newton step that small cannot move a
/// position near 0.5 m, so the solve "converged" at once. Now it stops short and bounces like any other throw.
#[test]
fn a_ball_landing_exactly_on_a_wall_face_bounces_off_it() {
    for (face, v0) in [
        (0.5, 5.0),
        (0.5, 50.0),
        (0.1, 1.0),
        (0.25, 2.5),
        (1.0, 10.0),
    ] {
        let wall = Wall {
            center: DVec2::new(face + 0.01, 0.0),
            half_extents: DVec2::new(0.01, 1.0),
            angle: 0.0,
        };
        let mut lane = ipc_lane(vec![wall], vec![point_ball(0.0, v0)]);
        let mut min_gap = f64::INFINITY;
        for _ in 0..80 {
            lane.step().expect("steps");
            min_gap = min_gap.min(ball_wall_gap(lane.balls[0].position, 0.0, &lane.walls[0]));
        }
        let ball = &lane.balls[0];
        assert!(
            min_gap > 1e-7,
            "face {face}, v0 {v0}: came within {min_gap:e} m of the wall"
        );
        assert!(
            ball.velocity.x < 0.0 && ball.position.x < face,
            "face {face}, v0 {v0}: stuck at {:?} with velocity {:?}",
            ball.position,
            ball.velocity
        );
    }
}

/// Two point balls thrown head-on, meeting exactly halfway: they used to pass through each other (the time of
/// impact rounded to a miss) and freeze in swapped order. Along an axis they keep their order and separate.
/// Along a slant they never meet either, but they may end up in swapped order: once rounding puts them a
/// nanometre out of line, a step's minimiser can take one round the other (points have no size, and the
/// incremental potential is lower near the inertial targets, which lie past each other), so only their
/// separation is checked there.
#[test]
fn point_balls_meeting_head_on_keep_their_order() {
    let slants = [0.6435011087932844, 1.0, 2.5, -0.3, FRAC_PI_2].map(|a: f64| (a.cos(), a.sin()));
    for (course, (cos, sin)) in [(0.0, (1.0, 0.0)), (-1.0, (0.0, -1.0))].into_iter().chain(
        slants
            .into_iter()
            .enumerate()
            .map(|(i, cs)| (i as f64 + 1.0, cs)),
    ) {
        let u = DVec2::new(cos, sin);
        let along_an_axis = u.x == 0.0 || u.y == 0.0;
        for (gap, v) in [(1.0, 5.0), (1.0, 50.0), (0.3, 1.5), (2.0, 10.0)] {
            let ball = |at: f64, speed: f64| Ball {
                position: u * at,
                velocity: u * speed,
                radius: 0.0,
                mass: 1.0,
            };
            let mut lane = ipc_lane(vec![], vec![ball(0.0, v), ball(gap, -v)]);
            for step in 1..=40 {
                lane.step().expect("steps");
                let (a, b) = (lane.balls[0].position, lane.balls[1].position);
                let apart = if along_an_axis {
                    (b - a).dot(u)
                } else {
                    (b - a).length()
                };
                assert!(
                    apart > 1e-7,
                    "course {course} ({u}), gap {gap}, v {v}, step {step}: the balls are at {a} and {b}"
                );
            }
            if along_an_axis {
                let (va, vb) = (lane.balls[0].velocity, lane.balls[1].velocity);
                assert!(va.dot(u) < 0.0 && vb.dot(u) > 0.0, "{va} {vb}");
            }
        }
    }
}

/// A rod whose step leaves it non-finite pauses its lane with a fault naming it, and the lane keeps its state as it
/// was before that step, balls and rods alike (a rod of 1e-300 m printed `energy NaN J` with no fault). Scene
/// files and spawns can no longer start such a rod, so it is put in directly here.
#[test]
fn a_rod_that_becomes_non_finite_pauses_its_lane_with_its_state_kept() {
    use contact_sandbox::physics::rod_flight::Rod;
    let ball = Ball {
        position: DVec2::new(0.0, 2.0),
        velocity: DVec2::new(1.0, 0.0),
        radius: 0.05,
        mass: 1.0,
    };
    let mut lane = LaneWorld::new("rods", ContactSettings::default(), vec![], vec![ball]);
    lane.rods.push(Rod {
        center: DVec2::new(0.0, 1.0),
        angle: 0.5,
        length: 1e-300,
        mass: 1.0,
        restitution: 0.5,
        velocity: DVec2::ZERO,
        omega: 3.0,
    });
    for step in 0.. {
        assert!(step < 1000, "the rod never faulted");
        let before = (lane.balls.clone(), lane.rods.clone());
        if lane.step().is_none() {
            assert_eq!((lane.balls.clone(), lane.rods.clone()), before);
            break;
        }
        assert!(lane.rods.iter().all(|r| r.validate().is_ok()));
    }
    let fault = lane.fault.clone().expect("a fault");
    assert!(
        fault.ends_with(
            "rod 0 reached a non-finite state; the lane is paused (restart to continue)"
        ),
        "{fault}"
    );
}

/// Limitation 6: the lane's tunnelling counter judged by the straight line from where a ball was last seen. In the
/// ball pit with d̂ set to 1 m the barrier throws ball 7 over the right wall's top within one step: its Newton path
/// goes round the wall's end, every piece clear of it, and the counter said "tunnelled 1". An IPC ball whose path
/// over the step reached beyond a wall's end is now taken to have gone round it.
#[test]
fn an_ipc_ball_thrown_round_a_wall_s_end_within_a_step_is_not_counted_as_tunnelled() {
    let text = std::fs::read_to_string("assets/scenes/ball_pit.ron").expect("the shipped scene");
    let text = text.replacen("dhat: Some(1e-3)", "dhat: Some(1.0)", 1);
    let scene = Scene::parse(&text, "pit with dhat 1 m").expect("parses");
    let mut lane = scene.build().remove(1);
    assert_eq!(lane.settings.method, ContactMethod::Ipc);
    for _ in 0..3 {
        let path = newton_path(&lane, 0);
        for wall in &lane.walls {
            for i in 0..lane.balls.len() {
                assert_eq!(path_through_wall(&path, i, wall), None, "ball {i}");
            }
        }
        lane.step().expect("a step");
    }
    let right = lane.walls[2];
    assert!(
        lane.balls[7].position.x > right.center.x + right.half_extents.x,
        "ball 7 went over the right wall: {:?}",
        lane.balls[7].position
    );
    assert_eq!(lane.stats.tunneled, 0);
}

/// The shipped ball pit's IPC lane at rest: at step 8 625 its Newton direction stood at 1.1·10⁻¹⁰ m, just above the
/// lane's tolerance (10⁻¹⁰ m), and E could no longer be lowered to the last bit; the solve took that direction 48
/// times at α ≈ 6·10⁻⁸ until its cap of 59. A line search that backtracks and finds only an equal energy now ends the
/// solve: no step of the 9 000 reaches the cap, and every gap stays open.
#[test]
fn a_solve_at_the_energy_s_rounding_ends_instead_of_repeating_its_direction_to_the_cap() {
    let scene = Scene::load(Path::new("assets/scenes/ball_pit.ron")).expect("the shipped ball pit");
    let mut lanes = scene.build();
    let ipc = &mut lanes[1];
    for _ in 0..9_000 {
        ipc.step().expect("steps");
    }
    assert_eq!(ipc.stats.iteration_caps, 0, "{:?}", ipc.stats);
    assert!(ipc.stats.max_newton < 59, "{:?}", ipc.stats);
    assert!(ipc.stats.max_penetration == 0.0, "{:?}", ipc.stats);
}
