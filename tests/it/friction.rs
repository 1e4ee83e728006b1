//! Friction (SPEC §1.5) against the slope law, the stopping distance, and energy: both lanes.

use contact_sandbox::physics::DVec2;
use contact_sandbox::physics::barrier::barrier_first_derivative;
use contact_sandbox::physics::geometry::{Ball, Wall};
use contact_sandbox::physics::world::{ContactMethod, ContactSettings, LaneWorld};

const G: f64 = 9.81;
const RADIUS: f64 = 0.05;
const DHAT: f64 = 1e-3;
const KAPPA: f64 = 1e4;
const STIFFNESS: f64 = 1e5;
const EPSILON_V: f64 = 1e-3;

fn settings(method: ContactMethod, mu: f64) -> ContactSettings {
    ContactSettings {
        method,
        stiffness: STIFFNESS,
        dhat: Some(DHAT),
        kappa: KAPPA,
        h: 0.01,
        gravity: DVec2::new(0.0, -G),
        friction: mu,
        friction_epsilon_v: EPSILON_V,
        ..ContactSettings::default()
    }
}

/// The gap (IPC, positive) or overlap (penalty, negative) at which the contact force carries `normal_force`.
fn resting_distance(method: ContactMethod, normal_force: f64) -> f64 {
    match method {
        ContactMethod::Penalty => -normal_force / STIFFNESS,
        ContactMethod::Ipc => {
            let (mut lo, mut hi) = (1e-12, DHAT * (1.0 - 1e-12));
            for _ in 0..200 {
                let mid = 0.5 * (lo + hi);
                if -KAPPA * barrier_first_derivative(mid, DHAT) > normal_force {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            lo
        }
    }
}

/// A unit-mass ball resting on an incline `tan θ = slope`, near its upper end.
fn slope_lane(method: ContactMethod, slope: f64, mu: f64) -> LaneWorld {
    slope_lane_at(method, slope, mu, 2.0)
}

/// As [`slope_lane`], with the ball `along` metres up the 6 m incline from its middle.
fn slope_lane_at(method: ContactMethod, slope: f64, mu: f64, along: f64) -> LaneWorld {
    let theta = slope.atan();
    let (s, c) = theta.sin_cos();
    let normal = DVec2::new(-s, c);
    let tangent = DVec2::new(c, s);
    let half = 0.05;
    let gap = resting_distance(method, G * c);
    let wall = Wall {
        center: DVec2::ZERO,
        half_extents: DVec2::new(3.0, half),
        angle: theta,
    };
    let ball = Ball {
        position: normal * (half + RADIUS + gap) + tangent * along,
        velocity: DVec2::ZERO,
        radius: RADIUS,
        mass: 1.0,
    };
    LaneWorld::new("slope", settings(method, mu), vec![wall], vec![ball])
}

/// Mean acceleration down the slope over `[t/2, t]`, and the final speed.
fn slide(lane: &mut LaneWorld, steps: u32, slope: f64) -> (f64, f64) {
    let theta = slope.atan();
    let downhill = -DVec2::new(theta.cos(), theta.sin());
    for _ in 0..steps / 2 {
        lane.step().expect("steps");
    }
    let (t0, v0) = (lane.time, lane.balls[0].velocity);
    for _ in steps / 2..steps {
        lane.step().expect("steps");
    }
    let v1 = lane.balls[0].velocity;
    ((v1 - v0).dot(downhill) / (lane.time - t0), v1.length())
}

#[test]
fn a_ball_on_a_half_slope_slides_at_the_coulomb_rate_below_tan_theta_and_sticks_at_it() {
    for method in [ContactMethod::Ipc, ContactMethod::Penalty] {
        let slope: f64 = 0.5;
        let theta = slope.atan();
        let mu = 0.49;
        let expected = G * (theta.sin() - mu * theta.cos());
        let (a, _) = slide(&mut slope_lane(method, slope, mu), 400, slope);
        // Tolerance: 1 %, for the lag of λ at start-up; measured error is far smaller.
        assert!(
            (a - expected).abs() <= 0.01 * expected,
            "{method:?} μ = {mu}: a = {a}, expected {expected}"
        );
        let (_, speed) = slide(&mut slope_lane(method, slope, 0.5), 400, slope);
        // Smoothed static friction holds up to creep at ε_v.
        assert!(
            speed <= 1.05 * EPSILON_V,
            "{method:?} μ = 0.5: creeping at {speed} m/s"
        );
    }
}

#[test]
fn a_ball_on_a_shallow_slope_sticks_whenever_mu_reaches_tan_theta() {
    for method in [ContactMethod::Ipc, ContactMethod::Penalty] {
        for mu in [0.1, 0.11, 0.2] {
            let (_, speed) = slide(&mut slope_lane(method, 0.1, mu), 300, 0.1);
            assert!(
                speed <= 1.05 * EPSILON_V,
                "{method:?} μ = {mu}: moving at {speed} m/s"
            );
        }
    }
}

#[test]
fn a_ball_thrown_along_a_floor_stops_at_v_squared_over_two_mu_g_and_never_gains_energy() {
    for method in [ContactMethod::Ipc, ContactMethod::Penalty] {
        let mu = 0.2;
        let v0 = 2.0;
        let mut lane = slope_lane_at(method, 0.0, mu, -2.5);
        let start = lane.balls[0].position;
        lane.balls[0].velocity = DVec2::new(v0, 0.0);
        let mut kinetic = 0.5 * v0 * v0;
        let mut steps = 0;
        while lane.balls[0].velocity.length() > 2.0 * EPSILON_V && steps < 1000 {
            lane.step().expect("steps");
            let k = 0.5 * lane.balls[0].velocity.length_squared();
            assert!(
                k <= kinetic * (1.0 + 1e-9) + 1e-12,
                "{method:?}: kinetic energy rose {kinetic} -> {k}"
            );
            kinetic = k;
            steps += 1;
        }
        let distance = lane.balls[0].position.x - start.x;
        let expected = v0 * v0 / (2.0 * mu * G);
        // Implicit Euler shortens the slide by about h v0 / 2 = 1 cm; allow 2 %.
        assert!(
            (distance - expected).abs() <= 0.02 * expected,
            "{method:?}: {distance} m vs {expected} m"
        );
    }
}

#[test]
fn frictionless_lanes_are_unchanged_by_the_friction_code() {
    let mut a = slope_lane(ContactMethod::Ipc, 0.3, 0.0);
    let mut b = slope_lane(ContactMethod::Ipc, 0.3, 0.0);
    b.settings.friction_iterations = 3;
    for _ in 0..100 {
        a.step().expect("steps");
        b.step().expect("steps");
    }
    assert_eq!(a.balls, b.balls);
    let (a_measured, _) = slide(&mut slope_lane(ContactMethod::Ipc, 0.3, 0.0), 100, 0.3);
    let expected = G * 0.3f64.atan().sin();
    assert!(
        (a_measured - expected).abs() < 1e-3 * expected,
        "{a_measured} vs {expected}"
    );
}

// ---------------------------------------------------------------------------------------------------------------
// `run`'s Coulomb check: the prediction for the ball's regime, beside the measured acceleration on the same axis.
// References are computed here by hand from tan θ: on the half slope sin θ = 1/√5 and cos θ = 2/√5.

use contact_sandbox::cli::run::{
    SlopeCheck, SurfaceMotion, fixed, lane_table, run_lane_measured, run_scene_measured,
    slope_check,
};

/// Runs `lane` as `run` does and returns its Coulomb check for ball 0, with the text `run` prints.
fn coulomb_check(lane: LaneWorld, steps: u64) -> (SlopeCheck, String) {
    let (lane, halfway) = run_lane_measured(lane, steps, |_| {});
    let check = slope_check(&lane, 0, &halfway).expect("ball 0 touches its wall");
    (check, lane_table(&lane, &halfway))
}

/// Relative tolerance of a measured mean acceleration against Coulomb's: λ and the tangents are lagged one
/// step, which is a few parts in 10⁵ here; 10⁻³ leaves room and is far below the errors this check caught.
const MEASURED_TOLERANCE: f64 = 1e-3;

#[test]
fn coulombs_check_decelerates_a_ball_thrown_up_the_slope_by_gravity_and_friction() {
    let mu = 0.49;
    let mut lane = slope_lane(ContactMethod::Ipc, 0.5, mu);
    let up = DVec2::new(2.0, 1.0) / 5f64.sqrt();
    lane.balls[0].velocity = 2.0 * up;
    // 2 m/s up, slowing at ≈ 8.7 m/s²: still going up after 0.2 s.
    let (check, text) = coulomb_check(lane, 20);
    // Down the slope: g sin θ + μ g cos θ (friction opposes the upward slide).
    let expected = G * (1.0 + 2.0 * mu) / 5f64.sqrt();
    assert_eq!(check.motion, SurfaceMotion::SlidingUp);
    assert_eq!(check.motion_at_halfway, SurfaceMotion::SlidingUp);
    assert!((check.axis + up).length() < 1e-12, "{:?}", check.axis);
    assert!((check.coulomb_accel - expected).abs() < 1e-12, "{check:?}");
    assert!(check.comparable && !check.sticking_predicted);
    assert!(
        (check.measured_accel - expected).abs() < MEASURED_TOLERANCE * expected,
        "{check:?} vs {expected}"
    );
    assert!(
        text.contains("sliding up the slope: Coulomb predicts a = g (sin θ + μ cos θ) = 8.686")
            && text.contains("m/s² down the slope\n      measured a = 8.686"),
        "{text}"
    );
}

#[test]
fn coulombs_check_slows_a_ball_sliding_along_a_level_floor_at_mu_g() {
    let mu = 0.3;
    let mut lane = slope_lane_at(ContactMethod::Ipc, 0.0, mu, -2.5);
    lane.balls[0].velocity = DVec2::new(3.0, 0.0);
    // 3 m/s, slowing at 2.94 m/s²: 2.1 m/s after 0.3 s.
    let (check, text) = coulomb_check(lane, 30);
    let expected = -mu * G;
    assert_eq!(check.motion, SurfaceMotion::SlidingLevel);
    assert_eq!(check.axis, DVec2::X);
    assert_eq!(check.axis_name, "along the motion");
    assert!((check.coulomb_accel - expected).abs() < 1e-12, "{check:?}");
    assert!(check.comparable);
    assert!(
        (check.measured_accel - expected).abs() < MEASURED_TOLERANCE * -expected,
        "{check:?} vs {expected}"
    );
    assert!(
        text.contains("sliding along the floor: Coulomb predicts a = −μ g cos θ = -2.943000 m/s² along the motion\n      measured a = -2.94"),
        "{text}"
    );
}

#[test]
fn a_ball_that_stops_within_the_measured_window_is_shown_not_compared() {
    let mut lane = slope_lane_at(ContactMethod::Ipc, 0.0, 0.3, -2.5);
    lane.balls[0].velocity = DVec2::new(3.0, 0.0);
    // It stops after 3 / 2.943 ≈ 1.02 s, between the half-way step (0.75 s) and the end (1.5 s).
    let (check, text) = coulomb_check(lane, 150);
    assert_eq!(check.motion_at_halfway, SurfaceMotion::SlidingLevel);
    assert_eq!(check.motion, SurfaceMotion::AtRest);
    assert!(!check.comparable, "{check:?}");
    assert!(
        text.contains("not compared") && text.contains("which began sliding along the floor"),
        "{text}"
    );
    assert!(!text.contains("-0.000"), "{text}");
}

#[test]
fn coulombs_check_predicts_sticking_for_a_ball_at_rest_below_the_friction_angle() {
    // tan θ = 0.1 ≤ μ = 0.3.
    let (check, text) = coulomb_check(slope_lane(ContactMethod::Ipc, 0.1, 0.3), 200);
    assert_eq!(check.motion, SurfaceMotion::AtRest);
    assert_eq!(check.motion_at_halfway, SurfaceMotion::AtRest);
    assert!(check.sticking_predicted && check.comparable);
    assert_eq!(check.coulomb_accel, 0.0);
    // A sticking ball creeps below ε_v = 1 mm/s; over 1 s its mean acceleration is below 10⁻³ m/s².
    assert!(check.measured_accel.abs() < 1e-3, "{check:?}");
    assert!(
        text.contains(
            "at rest: Coulomb predicts sticking (tan θ ≤ μ), a = 0.000000 m/s² down the slope"
        ),
        "{text}"
    );
}

#[test]
fn coulombs_check_predicts_a_ball_at_rest_above_the_friction_angle_slides_from_rest() {
    let mu = 0.3;
    // One step: the window starts with the ball at rest (v = 0) and ends with it sliding down.
    let (check, text) = coulomb_check(slope_lane(ContactMethod::Ipc, 0.5, mu), 1);
    let expected = G * (1.0 - 2.0 * mu) / 5f64.sqrt();
    assert_eq!(check.motion_at_halfway, SurfaceMotion::AtRest);
    assert_eq!(check.motion, SurfaceMotion::SlidingDown);
    assert!(!check.sticking_predicted && check.comparable, "{check:?}");
    assert_eq!(check.coulomb_accel_at_halfway, Some(check.coulomb_accel));
    assert!((check.coulomb_accel - expected).abs() < 1e-12, "{check:?}");
    assert!(
        (check.measured_accel - expected).abs() < MEASURED_TOLERANCE * expected,
        "{check:?} vs {expected}"
    );
    assert!(text.contains("sliding down the slope"), "{text}");
}

#[test]
fn the_shipped_slope_scene_keeps_spec_numbers_in_both_columns() {
    use contact_sandbox::scene::Scene;
    let scene = Scene::load(std::path::Path::new("assets/scenes/slope.ron")).expect("loads");
    let expected = G * (1.0 - 2.0 * 0.49) / 5f64.sqrt();
    for (lane, halfway) in run_scene_measured(&scene, 400) {
        let check = slope_check(&lane, 0, &halfway).expect("on the slope");
        assert!(check.comparable, "{}: {check:?}", lane.name);
        if lane.settings.friction == 0.49 {
            assert_eq!(check.motion, SurfaceMotion::SlidingDown);
            assert!((check.coulomb_accel - expected).abs() < 1e-12);
            assert_eq!(fixed(check.measured_accel, 6), "0.087743", "{}", lane.name);
        } else {
            assert_eq!(check.motion, SurfaceMotion::AtRest, "{}", lane.name);
            assert!(check.sticking_predicted, "{}", lane.name);
            assert_eq!(fixed(check.measured_accel, 6), "0.000000", "{}", lane.name);
        }
    }
}

fn wall_box(center: DVec2, half_extents: DVec2) -> Wall {
    Wall {
        center,
        half_extents,
        angle: 0.0,
    }
}

fn ball_at(position: DVec2, velocity: DVec2, radius: f64, mass: f64) -> Ball {
    Ball {
        position,
        velocity,
        radius,
        mass,
    }
}

#[test]
fn a_ball_in_flight_over_a_wide_floor_gets_no_coulomb_check() {
    // A 100 m floor makes the default d̂ 0.1 m; the check took "within 10 d̂" (1 m) as touching, and a ball
    // 0.44 m up, still rising, was reported "sliding along the floor" at a = −μ g, "comparable".
    for method in [ContactMethod::Penalty, ContactMethod::Ipc] {
        let lane = LaneWorld::new(
            "fly",
            ContactSettings {
                method,
                stiffness: 1e6,
                h: 0.01,
                gravity: DVec2::new(0.0, -9.81),
                friction: 0.5,
                ..ContactSettings::default()
            },
            vec![wall_box(DVec2::new(0.0, -0.5), DVec2::new(50.0, 0.5))],
            vec![ball_at(
                DVec2::new(0.0, 0.15),
                DVec2::new(1.0, 3.0),
                0.1,
                1.0,
            )],
        );
        assert!(
            lane.dhat() > 0.05,
            "the default d̂ is wide here: {}",
            lane.dhat()
        );
        let (lane, halfway) = run_lane_measured(lane, 20, |_| {});
        assert!(
            lane.balls[0].position.y > 0.5,
            "{:?}",
            lane.balls[0].position
        );
        assert_eq!(slope_check(&lane, 0, &halfway), None, "{method:?}");
        assert!(
            !lane_table(&lane, &halfway).contains("Coulomb"),
            "{method:?}"
        );
    }
}

#[test]
fn run_s_extremes_include_the_starting_state() {
    // A penalty ball that starts 5 cm into the floor, and an IPC ball that starts 0.1 mm above it, leaving.
    let settings = |method| ContactSettings {
        method,
        stiffness: 1e6,
        dhat: Some(1e-4),
        h: 0.01,
        gravity: DVec2::ZERO,
        ..ContactSettings::default()
    };
    let floor = || vec![wall_box(DVec2::new(0.0, -0.5), DVec2::new(5.0, 0.5))];
    let penalty = LaneWorld::new(
        "pen",
        settings(ContactMethod::Penalty),
        floor(),
        vec![ball_at(DVec2::new(0.0, 0.05), DVec2::ZERO, 0.1, 1.0)],
    );
    let (penalty, _) = run_lane_measured(penalty, 50, |_| {});
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(
        close(penalty.stats.max_penetration, 0.05),
        "{:?}",
        penalty.stats
    );
    assert!(
        close(penalty.stats.min_gap.expect("a gap"), -0.05),
        "{:?}",
        penalty.stats
    );
    let ipc = LaneWorld::new(
        "ipc",
        settings(ContactMethod::Ipc),
        floor(),
        vec![ball_at(
            DVec2::new(0.0, 0.1001),
            DVec2::new(0.0, 10.0),
            0.1,
            1.0,
        )],
    );
    let (ipc, _) = run_lane_measured(ipc, 50, |_| {});
    let gap = ipc.stats.min_gap.expect("a gap");
    assert!((gap - 1e-4).abs() < 1e-15, "{gap}");
    // Steps taken by hand count the start too, and a ball spawned later counts from where it appeared.
    let mut lane = LaneWorld::new("pen", settings(ContactMethod::Penalty), floor(), Vec::new());
    lane.step();
    assert_eq!(lane.stats.max_penetration, 0.0);
    lane.add_ball(ball_at(DVec2::new(1.0, 0.03), DVec2::ZERO, 0.1, 1.0))
        .expect("penalty lanes take overlapping balls");
    lane.step();
    assert!(close(lane.stats.max_penetration, 0.07), "{:?}", lane.stats);
    // The fastest speed counts a ball from where it was spawned, though the step after it stops it: the
    // window's pre-flight v·h then quotes the throw, not what is left of it.
    lane.add_ball(ball_at(
        DVec2::new(-2.0, 0.2),
        DVec2::new(0.0, -20.0),
        0.1,
        1.0,
    ))
    .expect("a throw at the floor");
    assert!(lane.stats.max_speed < 20.0, "{:?}", lane.stats);
    lane.step();
    assert_eq!(lane.stats.max_speed, 20.0);
    assert!(lane.balls[1].velocity.length() < 20.0);
}

#[test]
fn run_says_when_newton_hit_its_cap_and_prints_no_negative_zero() {
    let mut lane = slope_lane(ContactMethod::Ipc, 0.1, 0.3);
    lane.settings.newton_max_iterations = 1;
    let (lane, halfway) = run_lane_measured(lane, 10, |_| {});
    assert!(lane.stats.iteration_caps > 0);
    let text = lane_table(&lane, &halfway);
    assert!(
        text.contains(&format!(
            "Newton hit its cap of 1 iterations in {} of 10 steps",
            lane.stats.iteration_caps
        )),
        "{text}"
    );
    assert_eq!(fixed(-1e-9, 6), "0.000000");
    assert_eq!(fixed(-0.0, 3), "0.000");
    assert_eq!(fixed(-0.5, 2), "-0.50");
}
