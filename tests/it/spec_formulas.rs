//! SPEC §1 formulas through a whole lane, each against a reference written here on parameters the spec never
//! uses: the implicit-Euler update without contact (`x̃`, `v = (x − xᵗ)/h`), the default `d̂`, the lane's energy
//! diagnostic, and the seed's wall experiment turned to a random angle.

use contact_sandbox::physics::DVec2;
use contact_sandbox::physics::geometry::{Ball, Wall};
use contact_sandbox::physics::rod_flight::Rod;
use contact_sandbox::physics::world::{ContactMethod, ContactSettings, LaneWorld};
use contact_sandbox::testing::uniform;

use crate::throw::seed_listing;

/// With nothing to touch, one implicit-Euler step minimises `½ |x − x̃|²_M` alone, so `x = x̃ = xᵗ + h vᵗ + h² g`
/// and `v = (x − xᵗ)/h = vᵗ + h g`; after `n` steps `x = x₀ + n h v₀ + h² g n(n + 1)/2` and `v = v₀ + n h g`.
/// Random `h`, gravity, velocities and masses, both methods. Tolerance 10⁻¹¹ of the distance travelled: each
/// step's Newton solve stops within 10⁻¹⁰ of `x̃` only if it has not already landed on it (a quadratic is solved
/// exactly by one Newton step, up to roundoff), and roundoff adds ~10⁻¹⁶ per step.
#[test]
fn free_balls_follow_the_implicit_euler_update_in_closed_form() {
    let mut next = uniform(0x1E_E0E7);
    for case in 0..40 {
        let method = if case % 2 == 0 {
            ContactMethod::Ipc
        } else {
            ContactMethod::Penalty
        };
        let h = 0.001 + 0.03 * next();
        let gravity = DVec2::new(4.0 * next() - 2.0, -20.0 * next());
        let settings = ContactSettings {
            method,
            h,
            gravity,
            dhat: Some(1e-3),
            ..ContactSettings::default()
        };
        // A wall far away from every ball's path, so the lane has one, but nothing touches it.
        let wall = Wall {
            center: DVec2::new(0.0, -100.0),
            half_extents: DVec2::new(1.0, 1.0),
            angle: 0.3,
        };
        let balls: Vec<Ball> = (0..4)
            .map(|k| Ball {
                position: DVec2::new(10.0 * k as f64, 5.0 * next()),
                velocity: DVec2::new(6.0 * next() - 3.0, 6.0 * next() - 3.0),
                radius: 0.5 * next(),
                mass: 0.1 + 3.0 * next(),
            })
            .collect();
        let mut lane = LaneWorld::new("free", settings, vec![wall], balls.clone());
        let steps = 1 + case % 7;
        for _ in 0..steps {
            lane.step().expect("steps");
        }
        let n = steps as f64;
        for (start, now) in balls.iter().zip(&lane.balls) {
            let position =
                start.position + start.velocity * (n * h) + gravity * (h * h * n * (n + 1.0) / 2.0);
            let velocity = start.velocity + gravity * (n * h);
            let travelled = (position - start.position).length().max(1e-3);
            assert!(
                (now.position - position).length() <= 1e-11 * travelled,
                "case {case} {method:?}: x = {}, closed form {position}",
                now.position
            );
            assert!(
                (now.velocity - velocity).length() <= 1e-11 * travelled / h,
                "case {case} {method:?}: v = {}, closed form {velocity}",
                now.velocity
            );
        }
    }
}

/// Random rotated walls and balls: without a `d̂` in the settings the lane uses `10⁻³ ×` the diagonal of the
/// box around every wall corner (computed here from the half-extents and the angle) and every ball's disc.
/// Tolerance 10⁻¹⁴ relative (a few roundings in the corners).
#[test]
fn default_dhat_is_a_thousandth_of_the_scene_bounding_box_diagonal() {
    let mut next = uniform(0xD4A7);
    for case in 0..200 {
        let walls: Vec<Wall> = (0..1 + case % 3)
            .map(|_| Wall {
                center: DVec2::new(20.0 * next() - 10.0, 20.0 * next() - 10.0),
                half_extents: DVec2::new(0.01 + 3.0 * next(), 0.01 + 3.0 * next()),
                angle: 7.0 * next(),
            })
            .collect();
        let balls: Vec<Ball> = (0..case % 4)
            .map(|_| Ball {
                position: DVec2::new(40.0 * next() - 20.0, 40.0 * next() - 20.0),
                velocity: DVec2::ZERO,
                radius: 2.0 * next(),
                mass: 1.0,
            })
            .collect();
        let (mut lo, mut hi) = (DVec2::splat(f64::INFINITY), DVec2::splat(f64::NEG_INFINITY));
        for w in &walls {
            let (s, c) = w.angle.sin_cos();
            for (sx, sy) in [(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)] {
                let local = DVec2::new(sx * w.half_extents.x, sy * w.half_extents.y);
                let corner =
                    w.center + DVec2::new(c * local.x - s * local.y, s * local.x + c * local.y);
                lo = lo.min(corner);
                hi = hi.max(corner);
            }
        }
        for b in &balls {
            lo = lo.min(b.position - DVec2::splat(b.radius));
            hi = hi.max(b.position + DVec2::splat(b.radius));
        }
        let expected = 1e-3 * (hi - lo).length();
        let settings = ContactSettings {
            dhat: None,
            ..ContactSettings::default()
        };
        let lane = LaneWorld::new("bbox", settings, walls, balls);
        assert!(
            (lane.dhat() - expected).abs() <= 1e-14 * expected,
            "case {case}: d̂ = {}, expected {expected}",
            lane.dhat()
        );
    }
}

/// The lane's energy diagnostic is what its documentation says: `Σ ½ m |v|² − m g·x` over the balls, plus the
/// contact energy `B` (`κ Σ b(d)` over every pair within `d̂`, or `Σ ½ k p²`), plus each rod's `½ m |V|² + ½ I ω²
/// − m g·(C − (0, floor))`, `I = m L²/12`. Everything is written out here and summed over every pair (no broad
/// phase), on random states with contacts. Tolerance 10⁻¹² relative (summation order).
#[test]
fn the_energy_diagnostic_is_kinetic_plus_gravitational_plus_contact_energy() {
    let mut next = uniform(0xE4E26);
    let mut contacts = 0;
    for case in 0..60 {
        let ipc = case % 2 == 0;
        let (dhat, kappa, stiffness) = (
            0.005 + 0.02 * next(),
            10f64.powf(2.0 + 4.0 * next()),
            10f64.powf(3.0 + 4.0 * next()),
        );
        let gravity = DVec2::new(next() - 0.5, -15.0 * next());
        let settings = ContactSettings {
            method: if ipc {
                ContactMethod::Ipc
            } else {
                ContactMethod::Penalty
            },
            dhat: Some(dhat),
            kappa,
            stiffness,
            gravity,
            ..ContactSettings::default()
        };
        let floor = Wall {
            center: DVec2::new(0.0, -0.5),
            half_extents: DVec2::new(3.0, 0.5),
            angle: 0.0,
        };
        // Balls in a row just above (IPC) or sunk into (penalty) the floor, some within d̂ of each other.
        let mut balls = Vec::new();
        let mut x = -1.0;
        for _ in 0..8 {
            let radius = 0.02 + 0.05 * next();
            let gap = if ipc {
                dhat * (0.01 + 1.5 * next())
            } else {
                -0.01 * next()
            };
            let spacing = if ipc {
                dhat * (0.01 + 1.5 * next())
            } else {
                0.02 * next() - 0.01
            };
            x += radius;
            balls.push(Ball {
                position: DVec2::new(x, radius + gap),
                velocity: DVec2::new(4.0 * next() - 2.0, 4.0 * next() - 2.0),
                radius,
                mass: 0.1 + 2.0 * next(),
            });
            x += radius + spacing;
        }
        let mut lane = LaneWorld::new("energy", settings, vec![floor], balls.clone());
        let rod = Rod {
            center: DVec2::new(5.0, 1.0 + next()),
            angle: 3.0 * next(),
            length: 0.2 + next(),
            mass: 0.1 + next(),
            restitution: 0.5,
            velocity: DVec2::new(next(), next()),
            omega: 4.0 * next() - 2.0,
        };
        lane.rods.push(rod);
        lane.rod_floor_y = -0.3 * next();

        let phi = |d: f64| {
            if ipc {
                if d >= dhat {
                    0.0
                } else {
                    kappa * (dhat - d) * (dhat - d) * (dhat / d).ln()
                }
            } else {
                0.5 * stiffness * d.min(0.0) * d.min(0.0)
            }
        };
        let mut expected = 0.0;
        for (i, b) in balls.iter().enumerate() {
            expected +=
                0.5 * b.mass * b.velocity.length_squared() - b.mass * gravity.dot(b.position);
            // The floor's top face is y = 0 and every ball is above its ends' reach.
            let d = b.position.y - b.radius;
            expected += phi(d);
            contacts += usize::from(d < if ipc { dhat } else { 0.0 });
            for o in &balls[i + 1..] {
                let d = (b.position - o.position).length() - b.radius - o.radius;
                expected += phi(d);
                contacts += usize::from(d < if ipc { dhat } else { 0.0 });
            }
        }
        let inertia = rod.mass * rod.length * rod.length / 12.0;
        expected += 0.5 * rod.mass * rod.velocity.length_squared()
            + 0.5 * inertia * rod.omega * rod.omega
            - rod.mass * gravity.dot(rod.center - DVec2::new(0.0, lane.rod_floor_y));
        let energy = lane.energy();
        assert!(
            (energy - expected).abs() <= 1e-12 * expected.abs().max(1.0),
            "case {case}: energy {energy}, expected {expected}"
        );
    }
    assert!(contacts > 200, "{contacts} contacts");
}

/// The seed's wall experiment turned by a random angle (the wall's normal, the throw and the ball all rotated;
/// no gravity, as in the seed), with random `v0` (0.5…100 m/s, fast enough that one step's motion often spans
/// the wall, so the CCD must hold it), `d̂`, `κ`, `h`, mass and thickness: the general 2D solver's
/// closest approach equals the seed's 1D listing ([`seed_listing`], an independent transcription) on the same
/// numbers. Tolerance 10⁻⁹ m plus 10⁻⁶ relative: the two solves stop Newton by different norms (‖·‖∞ of a
/// rotated step is smaller than its length), each leaving a last step of up to 10⁻¹⁰ m untaken, and the
/// closest step can differ by that (measured: 1.1·10⁻¹⁰ m); the gaps are 10⁻⁶…10⁻³ m.
#[test]
fn the_wall_experiment_turned_to_any_angle_keeps_the_seed_listings_gap() {
    let mut next = uniform(0x7E_0D1A);
    for case in 0..12 {
        let theta = std::f64::consts::TAU * next();
        let normal = DVec2::new(theta.cos(), theta.sin());
        let (v0, dhat, kappa) = (
            10f64.powf(-0.3 + 2.3 * next()),
            10f64.powf(-3.5 + 1.0 * next()),
            10f64.powf(3.0 + 2.0 * next()),
        );
        let (h, mass, thickness, front) = (
            0.004 + 0.01 * next(),
            0.3 + 3.0 * next(),
            0.005 + 0.03 * next(),
            0.3 + 0.4 * next(),
        );
        let settings = ContactSettings {
            method: ContactMethod::Ipc,
            dhat: Some(dhat),
            kappa,
            h,
            gravity: DVec2::ZERO,
            ..ContactSettings::default()
        };
        let wall = Wall {
            center: normal * (front + 0.5 * thickness),
            half_extents: DVec2::new(0.5 * thickness, 1.0),
            angle: theta,
        };
        let ball = Ball {
            position: DVec2::ZERO,
            velocity: normal * v0,
            radius: 0.0,
            mass,
        };
        let mut lane = LaneWorld::new("turned", settings, vec![wall], vec![ball]);
        let steps = 80;
        for _ in 0..steps {
            lane.step().expect("steps");
        }
        assert_eq!(lane.stats.tunneled, 0, "case {case}");
        let params = seed_listing::Params {
            m: mass,
            h,
            wall: front,
            w: thickness,
            dhat,
            kappa,
            k: 1.0,
        };
        let (through, xmax_minus_wall, _) = seed_listing::throw(&params, v0, true, steps);
        assert!(!through);
        let seed_gap = -xmax_minus_wall;
        let gap = lane.stats.min_gap.expect("a gap");
        assert!(
            (gap - seed_gap).abs() <= 1e-9 + 1e-6 * seed_gap,
            "case {case} (θ = {theta}, v0 = {v0}): gap {gap}, seed listing {seed_gap}"
        );
    }
}
