//! The rapier2d peer for `contact-sandbox bench` (SPEC §6): the same reference ball pit, the same balls, the same
//! step, with CCD on. rapier2d is a dev-dependency, so it lives in an example that `bench` runs as a child.
//!
//! ```text
//! cargo run --release --example rapier_peer -- --n 1000 --steps 120 [--box-width 20]
//! ```
//! prints one JSON line in `bench`'s run format.

use std::time::Instant;

use contact_sandbox::cli::bench::{
    BenchRun, PIT_H, PIT_SEED, PIT_WIDTH, check_pit, escaped, peak_rss_mb, pit_balls, pit_walls,
};
use contact_sandbox::physics::DVec2;
use contact_sandbox::physics::broad_phase::BroadPhase;
use contact_sandbox::physics::geometry::ball_wall_gap;
use rapier2d::prelude::*;

fn arg<T: std::str::FromStr>(name: &str, default: T, what: &str) -> Result<T, String> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("invalid {name}: expected {what}")),
    }
}

fn main() -> Result<(), String> {
    let n = arg("--n", 1000, "a count")?;
    let steps = arg("--steps", 120, "a count")?;
    let width = arg("--box-width", PIT_WIDTH, "a width in metres")?;
    check_pit(n, width).map_err(|e| e.to_string())?;
    let mut bodies = RigidBodySet::new();
    let mut colliders = ColliderSet::new();
    for wall in pit_walls(width) {
        let body = bodies.insert(
            RigidBodyBuilder::fixed()
                .translation(Vector::new(wall.center.x as f32, wall.center.y as f32))
                .rotation(wall.angle as f32),
        );
        let shape = ColliderBuilder::cuboid(wall.half_extents.x as f32, wall.half_extents.y as f32)
            .friction(0.0)
            .restitution(0.0);
        colliders.insert_with_parent(shape, body, &mut bodies);
    }
    let mut handles = Vec::with_capacity(n);
    let balls = pit_balls(n, PIT_SEED, width);
    for ball in &balls {
        let body = bodies.insert(
            RigidBodyBuilder::dynamic()
                .translation(Vector::new(ball.position.x as f32, ball.position.y as f32))
                .ccd_enabled(true),
        );
        let shape = ColliderBuilder::ball(ball.radius as f32)
            .mass(ball.mass as f32)
            .friction(0.0)
            .restitution(0.0);
        colliders.insert_with_parent(shape, body, &mut bodies);
        handles.push(body);
    }
    let gravity = Vector::new(0.0, -9.81);
    let parameters = IntegrationParameters {
        dt: PIT_H as f32,
        ..IntegrationParameters::default()
    };
    let mut pipeline = PhysicsPipeline::new();
    let mut islands = IslandManager::new();
    let mut broad_phase = BroadPhaseBvh::new();
    let mut narrow_phase = NarrowPhase::new();
    let mut impulse_joints = ImpulseJointSet::new();
    let mut multibody_joints = MultibodyJointSet::new();
    let mut ccd = CCDSolver::new();
    let mut times = Vec::with_capacity(steps);
    // The radii rapier simulates (f32), for the gap measurement.
    let radii: Vec<f64> = balls.iter().map(|b| f64::from(b.radius as f32)).collect();
    let walls = pit_walls(width);
    let mut grid = BroadPhase::default();
    let mut centres = Vec::with_capacity(n);
    let mut pairs = Vec::new();
    let mut deepest = 0.0f64;
    let mut closest = f64::INFINITY;
    for _ in 0..steps {
        let start = Instant::now();
        pipeline.step(
            gravity,
            &parameters,
            &mut islands,
            &mut broad_phase,
            &mut narrow_phase,
            &mut bodies,
            &mut colliders,
            &mut impulse_joints,
            &mut multibody_joints,
            &mut ccd,
            &(),
            &(),
        );
        times.push(start.elapsed().as_secs_f64() * 1e3);
        // Measured from the bodies' positions after the step, as for our engines (rapier's manifold distances
        // are those its narrow phase saw before the step's solve).
        centres.clear();
        centres.extend(handles.iter().filter_map(|h| bodies.get(*h)).map(|b| {
            let t = b.translation();
            DVec2::new(f64::from(t.x), f64::from(t.y))
        }));
        for (c, r) in centres.iter().zip(&radii) {
            for wall in &walls {
                let d = ball_wall_gap(*c, *r, wall);
                deepest = deepest.max(-d);
                closest = closest.min(d);
            }
        }
        grid.near_pairs(&centres, &radii, 0.0, &mut pairs);
        for &(i, j) in &pairs {
            let (i, j) = (i as usize, j as usize);
            let d = (centres[i] - centres[j]).length() - radii[i] - radii[j];
            deepest = deepest.max(-d);
            closest = closest.min(d);
        }
    }
    times.sort_by(f64::total_cmp);
    let pick = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    let positions = handles.iter().filter_map(|h| bodies.get(*h)).map(|b| {
        let t = b.translation();
        DVec2::new(f64::from(t.x), f64::from(t.y))
    });
    let run = BenchRun {
        engine: "rapier2d".into(),
        n,
        steps: times.len(),
        median_ms: pick(0.5),
        p95_ms: pick(0.95),
        mean_newton: None,
        max_newton: None,
        iteration_caps: None,
        min_gap_m: closest.is_finite().then_some(closest),
        max_penetration_m: Some(deepest),
        peak_rss_mb: peak_rss_mb(),
        escaped: escaped(positions, width),
        box_width_m: width,
        profile_ms_per_step: None,
        factorisations_per_step: None,
        median_ms_runs: Vec::new(),
    };
    println!(
        "{}",
        serde_json::to_string(&run).map_err(|e| e.to_string())?
    );
    Ok(())
}
