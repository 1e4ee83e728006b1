//! The reference ball pit of `contact-sandbox bench` (SPEC §6) runs, and IPC stays penetration-free in it.
//! No timing is asserted here: this machine is shared and noisy.

use contact_sandbox::cli::bench::{
    BenchArgs, BenchOneArgs, BenchRun, Factorisations, PIT_WIDTH, Profile, bench_one_args,
    bench_ours, check_pit, combine_runs, parse_report, peer_args, pit_balls, pit_grid_top,
    pit_lane, ratios, run_bench,
};
use contact_sandbox::physics::world::ContactMethod;
use proptest::prelude::*;

#[test]
fn the_pit_is_the_same_for_every_engine_and_fits_the_box() {
    let a = pit_balls(500, 7, PIT_WIDTH);
    let b = pit_balls(500, 7, PIT_WIDTH);
    assert_eq!(a, b);
    for ball in &a {
        assert!(ball.position.x.abs() + ball.radius < PIT_WIDTH * 0.5);
        assert!(ball.position.y - ball.radius > 0.0);
        assert!((0.04..=0.06).contains(&ball.radius));
    }
}

#[test]
fn ipc_stays_penetration_free_in_the_bench_pit() {
    let mut lane = pit_lane(400, ContactMethod::Ipc, PIT_WIDTH);
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
    let mut lane = pit_lane(300, ContactMethod::Penalty, PIT_WIDTH);
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
    let run = bench_ours(ContactMethod::Penalty, 150, 10, PIT_WIDTH);
    assert_eq!(run.steps, 10);
    assert!(run.median_ms.is_finite() && run.p95_ms >= run.median_ms);
    assert!(run.mean_newton.is_some() && run.max_newton.is_some());
    assert_eq!(run.iteration_caps, Some(0));
    assert_eq!(run.escaped, 0);
}

/// Steps whose Newton solve ended on the cap are counted, and named under the table, as `throw` and `run` name
/// them: their times are those of a solve cut short.
#[test]
fn capped_newton_solves_are_counted_and_named_under_the_table() {
    use contact_sandbox::cli::bench::{PIT_NEWTON_CAP, bench_lane, format_table};
    let mut lane = pit_lane(300, ContactMethod::Ipc, PIT_WIDTH);
    lane.settings.newton_max_iterations = 3;
    let run = bench_lane(lane, 40, PIT_WIDTH);
    assert_eq!(run.steps, 40);
    assert!(
        run.iteration_caps
            .is_some_and(|caps| caps > 0 && caps <= 40),
        "a cap of 3 is hit while the pit lands: {:?}",
        run.iteration_caps
    );
    let capped = BenchRun {
        iteration_caps: Some(7),
        ..report([1.0, 2.0, 10.0, 1e-6, 0.0, 0.5])
    };
    let table = format_table(&[capped]);
    assert!(
        table.contains(&format!(
            "note: ipc N=1000: Newton hit its cap of {PIT_NEWTON_CAP} directions in 7 of 120 steps (not converged"
        )),
        "{table}"
    );
    for caps in [Some(0), None] {
        let run = BenchRun {
            iteration_caps: caps,
            ..report([1.0, 2.0, 10.0, 1e-6, 0.0, 0.5])
        };
        assert!(!format_table(&[run]).contains("note:"));
    }
}

#[test]
fn the_bench_profile_accounts_for_the_step_time() {
    let run = bench_ours(ContactMethod::Ipc, 200, 20, PIT_WIDTH);
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
    let f = run
        .factorisations_per_step
        .expect("our engines count their factorisations");
    assert!(f.numeric > 0.0 && f.symbolic > 0.0, "{f:?}");
}

/// Every float of a report, as bits.
fn report_bits(run: &BenchRun) -> Vec<u64> {
    let mut bits = vec![run.median_ms.to_bits(), run.p95_ms.to_bits()];
    for v in [
        run.mean_newton,
        run.min_gap_m,
        run.max_penetration_m,
        run.peak_rss_mb,
    ] {
        bits.push(v.map_or(u64::MAX, f64::to_bits));
    }
    if let Some(p) = &run.profile_ms_per_step {
        bits.extend(p.parts().map(|(_, ms)| ms.to_bits()));
        bits.push(p.total.to_bits());
    }
    if let Some(f) = &run.factorisations_per_step {
        bits.extend([f.symbolic.to_bits(), f.numeric.to_bits()]);
    }
    bits
}

fn report(values: [f64; 6]) -> BenchRun {
    BenchRun {
        engine: "ipc".into(),
        n: 1000,
        steps: 120,
        median_ms: values[0],
        p95_ms: values[1],
        mean_newton: Some(values[2]),
        max_newton: Some(98),
        iteration_caps: None,
        min_gap_m: Some(values[3]),
        max_penetration_m: Some(values[4]),
        peak_rss_mb: None,
        escaped: 0,
        box_width_m: PIT_WIDTH,
        profile_ms_per_step: Some(Profile {
            linear_solve: values[5],
            total: values[0] + values[5],
            ..Profile::default()
        }),
        factorisations_per_step: Some(Factorisations {
            // Any finite value stays finite: a product could overflow to infinity, which JSON cannot hold.
            symbolic: values[5],
            numeric: values[5] * 0.5,
        }),
        median_ms_runs: Vec::new(),
    }
}

#[test]
fn a_childs_report_reaches_the_table_bit_for_bit() {
    // The 1 000-ball pit's smallest gap, which serde_json's default parsing returned one unit in the last place
    // off.
    let run = report([
        3.51,
        14.7,
        14.458333333333334,
        2.2442500153332934e-6,
        0.0,
        2.05,
    ]);
    let line = serde_json::to_string(&run).expect("serialises");
    let back = parse_report(&line).expect("parses");
    assert_eq!(report_bits(&back), report_bits(&run), "{line}");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: crate::robustness::cases(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any finite values survive the child-to-parent round trip exactly.
    #[test]
    fn any_report_reaches_the_table_bit_for_bit(bits in proptest::array::uniform6(any::<u64>())) {
        let values = bits.map(|b| {
            let v = f64::from_bits(b);
            if v.is_finite() { v } else { f64::from_bits(b & 0x000f_ffff_ffff_ffff) }
        });
        let run = report(values);
        let line = serde_json::to_string(&run).expect("serialises");
        let back = parse_report(&line).expect("parses");
        prop_assert_eq!(report_bits(&back), report_bits(&run), "{}", line);
    }
}

/// A run of `engine` at N = 1 000 with the given median, p95, peak RSS and linear-solve time.
fn timed(engine: &str, median: f64, p95: f64, rss: f64, solve: f64) -> BenchRun {
    BenchRun {
        engine: engine.into(),
        median_ms: median,
        p95_ms: p95,
        peak_rss_mb: Some(rss),
        profile_ms_per_step: Some(Profile {
            linear_solve: solve,
            total: 2.0 * solve,
            ..Profile::default()
        }),
        ..report([
            median,
            p95,
            14.458333333333334,
            2.2442500153332934e-6,
            0.0,
            solve,
        ])
    }
}

#[test]
fn repeated_runs_report_the_median_of_their_medians_and_the_spread() {
    let runs = [
        timed("ipc", 3.6, 15.0, 36.0, 2.0),
        timed("ipc", 3.2, 14.0, 37.5, 1.0),
        timed("ipc", 5.1, 19.0, 35.0, 3.0),
    ];
    let combined = combine_runs(&runs).expect("the runs agree");
    assert_eq!(combined.median_ms, 3.6);
    assert_eq!(combined.p95_ms, 15.0);
    assert_eq!(combined.peak_rss_mb, Some(37.5));
    assert_eq!(combined.median_ms_runs, vec![3.6, 3.2, 5.1]);
    let profile = combined.profile_ms_per_step.expect("a mean profile");
    assert_eq!(profile.linear_solve, 2.0);
    assert_eq!(profile.total, 4.0);
    // The factorisation counts are kept apart from the times, and averaged the same way.
    assert_eq!(
        combined.factorisations_per_step,
        Some(Factorisations {
            symbolic: 2.0,
            numeric: 1.0
        })
    );
    // The deterministic fields are the runs' own.
    assert_eq!(combined.mean_newton, runs[0].mean_newton);
    assert_eq!(combined.min_gap_m, runs[0].min_gap_m);
    // An even count takes the mean of the middle two.
    let even = combine_runs(&runs[..2]).expect("the runs agree");
    assert_eq!(even.median_ms, 0.5 * (3.6 + 3.2));
    // One run is reported as it came, with its list of one run: `--json` has the same keys whatever `--repeat`
    // (a review's script found `median_ms_runs` only with `--repeat` above 1).
    let one = combine_runs(&runs[..1]).expect("one run");
    assert_eq!(
        one,
        BenchRun {
            median_ms_runs: vec![3.6],
            ..runs[0].clone()
        }
    );
    let line = serde_json::to_string(&one).expect("serialises");
    assert!(line.contains(r#""median_ms_runs":[3.6]"#), "{line}");
}

#[test]
fn repeated_runs_that_disagree_on_the_physics_are_refused_by_name() {
    let a = timed("ipc", 3.6, 15.0, 36.0, 2.0);
    let mut b = timed("ipc", 3.2, 14.0, 36.0, 2.0);
    b.min_gap_m = Some(2.244250015333294e-6);
    let error = combine_runs(&[a.clone(), b])
        .expect_err("the gaps differ")
        .to_string();
    assert!(error.contains("min_gap_m"), "{error}");
    assert!(
        error.contains("2.244250015333294e-6") && error.contains("run 2"),
        "{error}"
    );
    let mut c = a.clone();
    c.max_newton = Some(97);
    let error = combine_runs(&[a, c])
        .expect_err("the Newton caps differ")
        .to_string();
    assert!(error.contains("max_newton"), "{error}");
}

#[test]
fn ratios_pair_each_run_with_the_peer_run_of_its_round() {
    let ipc = combine_runs(&[
        timed("ipc", 4.0, 15.0, 36.0, 2.0),
        timed("ipc", 6.0, 15.0, 36.0, 2.0),
        timed("ipc", 5.0, 15.0, 36.0, 2.0),
    ])
    .expect("ipc runs agree");
    let peer = |median| BenchRun {
        mean_newton: None,
        max_newton: None,
        iteration_caps: None,
        profile_ms_per_step: None,
        factorisations_per_step: None,
        ..timed("rapier2d", median, 2.0, 33.0, 0.0)
    };
    let rapier = combine_runs(&[peer(1.0), peer(2.0), peer(1.25)]).expect("peer runs agree");
    let found = ratios(&[ipc, rapier]);
    assert_eq!(found.len(), 1);
    let q = &found[0];
    assert_eq!(
        (q.engine.as_str(), q.peer.as_str(), q.n),
        ("ipc", "rapier2d", 1000)
    );
    assert_eq!(q.median_ratio, 5.0 / 1.25);
    assert_eq!(q.runs, vec![4.0, 3.0, 4.0]);
}

#[test]
fn bench_refuses_a_bad_repeat_count_or_engine_before_running_anything() {
    let args = |repeat: usize, engines: &[&str]| BenchArgs {
        n: vec![100],
        steps: 5,
        engines: engines.iter().map(|e| e.to_string()).collect(),
        json: true,
        repeat,
        box_width: None,
        constant_depth: false,
    };
    let error = run_bench(&args(0, &["ipc"]))
        .expect_err("no runs")
        .to_string();
    assert!(error.contains("--repeat") && error.contains('0'), "{error}");
    let error = run_bench(&args(101, &["ipc"]))
        .expect_err("too many")
        .to_string();
    assert!(
        error.contains("--repeat") && error.contains("101"),
        "{error}"
    );
    let error = run_bench(&args(2, &["ipc", "box2d"]))
        .expect_err("unknown engine")
        .to_string();
    assert!(error.contains("box2d"), "{error}");
    // The count that is out of range is named, before any note about repeats.
    let error = run_bench(&BenchArgs {
        n: vec![1000, 250_000, 1000],
        ..args(1, &["ipc"])
    })
    .expect_err("too many balls")
    .to_string();
    assert!(
        error.contains("--n") && error.ends_with("got 250000"),
        "{error}"
    );
}

fn bench_args(n: Vec<usize>, box_width: Option<f64>, constant_depth: bool) -> BenchArgs {
    BenchArgs {
        n,
        steps: 5,
        engines: vec!["ipc".into()],
        json: true,
        repeat: 1,
        box_width,
        constant_depth,
    }
}

#[test]
fn a_wider_box_holds_the_same_balls_in_fewer_rows() {
    let reference = pit_balls(4000, 7, PIT_WIDTH);
    let wide = pit_balls(4000, 7, 80.0);
    // The same sizes and masses from the same seed; only the grid's shape changes.
    for (a, b) in reference.iter().zip(&wide) {
        assert_eq!((a.radius, a.mass), (b.radius, b.mass));
    }
    for ball in &wide {
        assert!(ball.position.x.abs() + ball.radius < 40.0, "{ball:?}");
        assert!(ball.position.y - ball.radius > 0.0, "{ball:?}");
    }
    let top = |balls: &[contact_sandbox::physics::geometry::Ball]| {
        balls
            .iter()
            .map(|b| b.position.y + b.radius)
            .fold(0.0, f64::max)
    };
    // Four times the width, about a quarter of the height: 31 rows of 131 balls against 8 of 531.
    let (deep, shallow) = (top(&reference), top(&wide));
    assert!(deep > 4.6 && deep < 4.8, "{deep}");
    assert!(shallow > 1.2 && shallow < 1.35, "{shallow}");
    // The bound the refusal uses lies above every ball.
    assert!(pit_grid_top(4000, PIT_WIDTH) >= deep && pit_grid_top(4000, 80.0) >= shallow);
}

#[test]
fn constant_depth_widens_the_box_with_n_and_box_width_fixes_it() {
    let constant = bench_args(vec![1000], None, true);
    assert_eq!(constant.box_width_for(1000), PIT_WIDTH);
    assert_eq!(constant.box_width_for(4000), 80.0);
    assert_eq!(constant.box_width_for(10_000), 200.0);
    let fixed = bench_args(vec![1000], Some(35.0), false);
    assert_eq!(fixed.box_width_for(10_000), 35.0);
    assert_eq!(
        bench_args(vec![1000], None, false).box_width_for(10_000),
        PIT_WIDTH
    );
}

#[test]
fn bench_refuses_a_box_it_cannot_build_naming_the_width() {
    for (n, width, named) in [
        (100, f64::NAN, "NaN"),
        (100, 0.5, "0.5"),
        (100, -20.0, "-20"),
        (100, 1e6, "1000000"),
        // 200 000 balls in a 2 m box would start kilometres up, above the 500 m side walls.
        (200_000, 2.0, "2 m wide"),
    ] {
        let error = run_bench(&bench_args(vec![n], Some(width), false))
            .expect_err("a box that cannot hold the pit")
            .to_string();
        assert!(
            error.contains("--box-width") && error.contains(named),
            "{error}"
        );
        assert!(check_pit(n, width).is_err());
    }
    // --constant-depth at a few balls gives a box under a metre: refused by the options the user gave.
    let error = run_bench(&bench_args(vec![10], None, true))
        .expect_err("0.2 m")
        .to_string();
    assert!(
        error.contains("--n 10 with --constant-depth") && error.contains("0.2 m"),
        "{error}"
    );
    assert!(!error.contains("invalid --box-width"), "{error}");
    // The reference pit's largest count fits.
    assert!(check_pit(200_000, PIT_WIDTH).is_ok());
}

#[test]
fn ipc_stays_penetration_free_in_a_wider_box_and_reports_its_width() {
    let run = bench_ours(ContactMethod::Ipc, 300, 60, 45.0);
    assert_eq!(run.box_width_m, 45.0);
    assert_eq!(run.max_penetration_m, Some(0.0));
    assert_eq!(run.escaped, 0);
    assert!(
        run.min_gap_m.is_some_and(|g| g > 0.0 && g < 1e-3),
        "{run:?}"
    );
    // The width reaches the JSON and comes back; a report without it is the reference pit's.
    let line = serde_json::to_string(&run).expect("serialises");
    assert!(line.contains("\"box_width_m\":45.0"), "{line}");
    let mut value: serde_json::Value = serde_json::from_str(&line).expect("parses");
    value
        .as_object_mut()
        .expect("an object")
        .remove("box_width_m");
    let old = parse_report(&value.to_string()).expect("an older report parses");
    assert_eq!(old.box_width_m, PIT_WIDTH);
}

#[derive(clap::Parser, Debug)]
struct BenchCli {
    #[command(flatten)]
    args: BenchArgs,
}

#[derive(clap::Parser, Debug)]
struct BenchOneCli {
    #[command(flatten)]
    args: BenchOneArgs,
}

#[test]
fn the_box_options_parse_and_reach_the_children_bit_for_bit() {
    use clap::Parser;
    let parse = |line: &[&str]| BenchCli::try_parse_from(line).map(|c| c.args);
    let args = parse(&["bench", "--box-width", "33.333333333333336"]).expect("parses");
    assert_eq!(args.box_width, Some(100.0 / 3.0));
    assert!(parse(&["bench", "--box-width", "30", "--constant-depth"]).is_err());
    assert!(parse(&["bench", "--constant-depth"]).is_ok_and(|a| a.constant_depth));
    // "inf" and "nan" parse as numbers; the box check refuses them by name.
    let inf = parse(&["bench", "--box-width", "inf"]).expect("a float");
    assert!(
        inf.check_box(1000)
            .is_err_and(|e| e.to_string().contains("inf"))
    );
    // What the parent hands each child parses back to the same width, bit for bit.
    for width in [PIT_WIDTH, 100.0 / 3.0, 246.8, 4000.0] {
        let line = bench_one_args("ipc", 1234, 7, width);
        // The subcommand `main` dispatches on, then its own arguments.
        assert_eq!(line[0], "bench-one");
        let one = BenchOneCli::try_parse_from(
            std::iter::once("contact-sandbox".to_string()).chain(line.into_iter().skip(1)),
        )
        .expect("bench-one parses its arguments")
        .args;
        assert_eq!(
            (
                one.engine.as_str(),
                one.n,
                one.steps,
                one.box_width.to_bits()
            ),
            ("ipc", 1234, 7, width.to_bits())
        );
        let peer = peer_args(1234, 7, width);
        let at = peer
            .iter()
            .position(|a| a == "--box-width")
            .expect("the peer gets the width");
        let given: f64 = peer[at + 1].parse().expect("a number");
        assert_eq!(given.to_bits(), width.to_bits());
    }
    // A child started without a width runs the reference pit.
    let plain = BenchOneCli::try_parse_from(["x", "--engine", "ipc", "--n", "5", "--steps", "1"])
        .expect("parses")
        .args;
    assert_eq!(plain.box_width, PIT_WIDTH);
}

/// The shipped binary, end to end: the width given to `bench` is the width its child ran.
#[test]
fn bench_runs_its_child_in_the_box_it_was_given() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
        .args([
            "bench",
            "--engines",
            "ipc",
            "--n",
            "60",
            "--steps",
            "2",
            "--box-width",
            "5.5",
            "--json",
        ])
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let run = &json["runs"][0];
    assert_eq!(run["box_width_m"], 5.5, "{json}");
    assert_eq!(
        (run["n"].as_u64(), run["steps"].as_u64()),
        (Some(60), Some(2))
    );
}
