//! The reference ball pit of `contact-sandbox bench` (SPEC §6) runs, and IPC stays penetration-free in it.
//! No timing is asserted here: this machine is shared and noisy.

use contact_sandbox::cli::bench::{PIT_WIDTH, bench_ours, pit_balls, pit_lane};
use contact_sandbox::physics::world::ContactMethod;

#[test]
fn the_pit_is_the_same_for_every_engine_and_fits_the_box() {
    let a = pit_balls(500, 7);
    let b = pit_balls(500, 7);
    assert_eq!(a, b);
    for ball in &a {
        assert!(ball.position.x.abs() + ball.radius < PIT_WIDTH * 0.5);
        assert!(ball.position.y - ball.radius > 0.0);
        assert!((0.04..=0.06).contains(&ball.radius));
    }
}

#[test]
fn ipc_stays_penetration_free_in_the_bench_pit() {
    let mut lane = pit_lane(400, ContactMethod::Ipc);
    for _ in 0..90 {
        let reported = lane.step().expect("the IPC pit steps").energy;
        // The step reports its energy from the gap's broad-phase query; a query of its own gives the same bits.
        assert_eq!(reported.to_bits(), lane.energy().to_bits());
        let (gap, _) = lane.gap_and_penetration();
        assert!(
            gap.is_none_or(|g| g > 0.0),
            "a pair touched or overlapped: {gap:?}"
        );
    }
    assert_eq!(lane.stats.tunneled, 0);
    assert_eq!(lane.stats.max_penetration, 0.0);
    // Balls have landed and touch the floor or each other within d̂.
    assert!(lane.stats.min_gap.is_some_and(|g| g < lane.dhat()));
}

#[test]
fn a_penalty_step_reports_the_energy_of_its_own_query() {
    let mut lane = pit_lane(300, ContactMethod::Penalty);
    let mut overlapped = false;
    for _ in 0..60 {
        let reported = lane.step().expect("the penalty pit steps").energy;
        assert_eq!(reported.to_bits(), lane.energy().to_bits());
        overlapped |= lane.gap_and_penetration().1 > 0.0;
    }
    // Penalty contacts overlap, so the energy included contact terms.
    assert!(overlapped);
}

#[test]
fn bench_runs_report_every_field() {
    let run = bench_ours(ContactMethod::Penalty, 150, 10);
    assert_eq!(run.steps, 10);
    assert!(run.median_ms.is_finite() && run.p95_ms >= run.median_ms);
    assert!(run.mean_newton.is_some() && run.max_newton.is_some());
    assert_eq!(run.escaped, 0);
}

#[test]
fn the_bench_profile_accounts_for_the_step_time() {
    let run = bench_ours(ContactMethod::Ipc, 200, 20);
    let p = run
        .profile_ms_per_step
        .expect("our engines report where the time went");
    let phases = p.parts().map(|(_, ms)| ms);
    assert!(phases.iter().all(|t| t.is_finite() && *t >= 0.0), "{p:?}");
    let sum: f64 = phases.iter().sum();
    // The phases partition the step: they add up to the measured total (up to rounding).
    assert!((sum - p.total).abs() <= 1e-9 * p.total.max(1.0), "{p:?}");
    assert!(p.total > 0.0 && p.linear_solve > 0.0 && p.ccd > 0.0);
    // Every Newton iteration of a coupled island factorises once; 20 steps of a landing pit couple some.
    assert!(
        p.numeric_per_step > 0.0 && p.symbolic_per_step > 0.0,
        "{p:?}"
    );
}
