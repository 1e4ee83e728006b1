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

use contact_sandbox::cli::run::{fixed, lane_table, run_lane_measured};

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
