//! `contact-sandbox bench`: the reference ball pit (SPEC §6) for IPC and penalty, and rapier2d as the peer.
//!
//! Each (engine, N) runs in a child process (`contact-sandbox bench-one …`) so its peak RSS is its own.
//! rapier2d is a dev-dependency: its runner is the example `rapier_peer`, which `bench` builds with cargo
//! (release) the first time when it runs from a source checkout.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use glam::DVec2;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::physics::geometry::{Ball, Wall};
use crate::physics::linear::LinearCounters;
use crate::physics::newton::PhaseTimes;
use crate::physics::world::{ContactMethod, ContactSettings, LaneWorld};

use super::stdout::outln;

/// The most balls `--n` takes.
pub const MAX_BENCH_N: u64 = 200_000;
/// The most steps `--steps` takes.
pub const MAX_BENCH_STEPS: u64 = 100_000;
/// The most runs `--repeat` takes.
pub const MAX_BENCH_REPEAT: u64 = 100;

/// Arguments of `contact-sandbox bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Ball counts, comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000,4000,10000",
        allow_negative_numbers = true,
        value_parser = super::count_between::<usize>(1, MAX_BENCH_N)
    )]
    pub n: Vec<usize>,
    /// Steps per run (each timed).
    #[arg(
        long,
        default_value_t = 120,
        allow_negative_numbers = true,
        value_parser = super::count_between::<usize>(1, MAX_BENCH_STEPS)
    )]
    pub steps: usize,
    /// Engines, comma separated: ipc, penalty, rapier2d.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ipc,penalty,rapier2d",
        value_parser = super::parse_listed_word
    )]
    pub engines: Vec<String>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Runs of each (engine, N). They are taken in turn (every engine once, then again), so a slow spell of the
    /// machine hits all engines alike; the table gives the median of the runs' medians, their range, and the
    /// ratio to rapier2d run by run.
    #[arg(
        long,
        default_value_t = 1,
        allow_negative_numbers = true,
        value_parser = super::count_between::<usize>(1, MAX_BENCH_REPEAT)
    )]
    pub repeat: usize,
    /// The box's width [m] for every N (1 to 4000), instead of the reference pit's 20 m.
    #[arg(long, allow_negative_numbers = true, conflicts_with = "constant_depth")]
    pub box_width: Option<f64>,
    /// Widen the box in proportion to N (20 m per 1 000 balls, so N from 50 to 200 000), so every N from 1 000 on
    /// starts and lands about as deep as the reference pit at N = 1 000. The reference pit keeps 20 m, so its
    /// pile grows taller with N.
    #[arg(long)]
    pub constant_depth: bool,
}

impl BenchArgs {
    /// The box's width [m] for `n` balls: the reference pit's, `--box-width`'s, or 20 m per 1 000 balls under
    /// `--constant-depth`.
    pub fn box_width_for(&self, n: usize) -> f64 {
        match (self.box_width, self.constant_depth) {
            (Some(width), _) => width,
            (None, true) => PIT_WIDTH * n as f64 / CONSTANT_DEPTH_BALLS as f64,
            (None, false) => PIT_WIDTH,
        }
    }

    /// Refuses a count whose box cannot hold its pit, naming the option that set the box.
    pub fn check_box(&self, n: usize) -> Result<()> {
        let width = self.box_width_for(n);
        match (pit_problem(n, width), self.box_width) {
            (None, _) => Ok(()),
            (Some(problem), Some(_)) => bail!("invalid --box-width {width}: {problem}"),
            (Some(problem), None) => bail!(
                "invalid --n {n} with --constant-depth, which gives it a box {width} m wide (20 m per 1 000 \
                 balls): {problem}; --box-width sets a width of your own"
            ),
        }
    }
}

/// `--constant-depth` gives every N the depth of the reference pit with this many balls.
pub const CONSTANT_DEPTH_BALLS: usize = 1000;

/// Arguments of the hidden `bench-one` child.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchOneArgs {
    #[arg(long)]
    pub engine: String,
    #[arg(long)]
    pub n: usize,
    #[arg(long)]
    pub steps: usize,
    #[arg(long, default_value_t = PIT_WIDTH, allow_negative_numbers = true)]
    pub box_width: f64,
}

/// One (engine, N) result, as `--json` prints it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BenchRun {
    pub engine: String,
    pub n: usize,
    pub steps: usize,
    pub median_ms: f64,
    pub p95_ms: f64,
    pub mean_newton: Option<f64>,
    pub max_newton: Option<u32>,
    /// Steps whose Newton solve stopped at the cap of [`PIT_NEWTON_CAP`] directions, unconverged (`null` for
    /// rapier2d): their times are of a solve cut short.
    #[serde(default)]
    pub iteration_caps: Option<u64>,
    pub min_gap_m: Option<f64>,
    pub max_penetration_m: Option<f64>,
    pub peak_rss_mb: Option<f64>,
    /// Balls that left the box (went through a wall).
    pub escaped: usize,
    /// The box's width [m]: 20 for the reference pit.
    #[serde(default = "reference_width")]
    pub box_width_m: f64,
    /// Where our engines' time went, in ms per step averaged over the run (`null` for rapier2d).
    #[serde(default)]
    pub profile_ms_per_step: Option<Profile>,
    /// How many sparse factorisations a step took, on average (`null` for rapier2d).
    #[serde(default)]
    pub factorisations_per_step: Option<Factorisations>,
    /// Each run's median, in the order they ran (`median_ms` is their median; one with `--repeat 1`).
    #[serde(default)]
    pub median_ms_runs: Vec<f64>,
}

/// An engine's median step time over rapier2d's at one N (`--json`'s `ratios`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Ratio {
    pub engine: String,
    pub peer: String,
    pub n: usize,
    /// The engines' medians (over runs) divided.
    pub median_ratio: f64,
    /// Run by run: each run of the engine over the peer's run in the same round (`--repeat` takes every engine
    /// once per round).
    pub runs: Vec<f64>,
}

/// Mean ms per step in each phase of a step (see [`PhaseTimes`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Profile {
    pub broad_phase: f64,
    pub contacts: f64,
    pub assembly: f64,
    pub linear_solve: f64,
    pub ccd: f64,
    pub line_search: f64,
    /// The rest of the Newton loops (convergence checks, bookkeeping).
    pub newton_other: f64,
    /// Outside the Newton loops: islands, `x̃`, friction set-up, diagnostics (gaps, tunnelling, energy).
    pub outside_newton: f64,
    pub total: f64,
}

/// Sparse factorisations per step, on average over the run (and over the runs with `--repeat`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Factorisations {
    /// Symbolic: an ordering and a pattern analysis.
    pub symbolic: f64,
    /// Numeric: the factor's values.
    pub numeric: f64,
}

impl Factorisations {
    fn from_counters(c: LinearCounters, steps: usize) -> Factorisations {
        Factorisations {
            symbolic: c.symbolic as f64 / steps.max(1) as f64,
            numeric: c.numeric as f64 / steps.max(1) as f64,
        }
    }

    /// The mean of `runs` (repeated runs of one pit).
    fn mean(runs: &[Factorisations]) -> Factorisations {
        let k = runs.len().max(1) as f64;
        Factorisations {
            symbolic: runs.iter().map(|f| f.symbolic).sum::<f64>() / k,
            numeric: runs.iter().map(|f| f.numeric).sum::<f64>() / k,
        }
    }
}

impl Profile {
    fn from_times(t: &PhaseTimes, total_s: f64, steps: usize) -> Profile {
        let ms = |s: f64| s * 1e3 / steps.max(1) as f64;
        let phases =
            t.broad_phase + t.contacts + t.assembly + t.linear_solve + t.ccd + t.line_search;
        Profile {
            broad_phase: ms(t.broad_phase),
            contacts: ms(t.contacts),
            assembly: ms(t.assembly),
            linear_solve: ms(t.linear_solve),
            ccd: ms(t.ccd),
            line_search: ms(t.line_search),
            newton_other: ms(t.newton_total - phases),
            outside_newton: ms(total_s - t.newton_total),
            total: ms(total_s),
        }
    }

    /// Every field's mean over `profiles` (repeated runs of one pit).
    pub fn mean(profiles: &[Profile]) -> Profile {
        let k = profiles.len().max(1) as f64;
        let mean = |field: fn(&Profile) -> f64| profiles.iter().map(field).sum::<f64>() / k;
        Profile {
            broad_phase: mean(|p| p.broad_phase),
            contacts: mean(|p| p.contacts),
            assembly: mean(|p| p.assembly),
            linear_solve: mean(|p| p.linear_solve),
            ccd: mean(|p| p.ccd),
            line_search: mean(|p| p.line_search),
            newton_other: mean(|p| p.newton_other),
            outside_newton: mean(|p| p.outside_newton),
            total: mean(|p| p.total),
        }
    }

    /// The parts that partition a step's time, with their table headings; they add up to `total`.
    pub fn parts(&self) -> [(&'static str, f64); 8] {
        [
            ("broad ph", self.broad_phase),
            ("contacts", self.contacts),
            ("assembly", self.assembly),
            ("solve", self.linear_solve),
            ("CCD", self.ccd),
            ("line srch", self.line_search),
            ("newton other", self.newton_other),
            ("outside", self.outside_newton),
        ]
    }
}

/// The reference pit's parameters (SPEC §6).
pub const PIT_WIDTH: f64 = 20.0;
pub const PIT_RADIUS: f64 = 0.05;
pub const PIT_H: f64 = 1.0 / 60.0;
pub const PIT_DHAT: f64 = 1e-3;
pub const PIT_SEED: u64 = 0x5EED_CAFE;
/// Each ball's radius is [`PIT_RADIUS`] times a uniform draw from `LOW` to `LOW + SPAN` (±20 %).
const PIT_RADIUS_LOW: f64 = 0.8;
const PIT_RADIUS_SPAN: f64 = 0.4;
/// The pit's barrier stiffness κ, penalty stiffness k [N/m] and Newton tolerance [m].
pub const PIT_KAPPA: f64 = 1e4;
pub const PIT_STIFFNESS: f64 = 1e6;
pub const PIT_NEWTON_TOLERANCE: f64 = 1e-6;
/// The balls' starting grid: its spacing [m] and the height of its first row's centres above the floor.
const PIT_SPACING: f64 = 0.15;
const PIT_FIRST_ROW: f64 = 0.1 + 0.5 * PIT_SPACING;
/// Each ball starts up to half this [m] off its grid point, in x and in y.
const PIT_JITTER: f64 = 0.02;
/// The side walls' height [m]; the starting grid must stay below it.
const PIT_WALL_HEIGHT: f64 = 500.0;
/// The widths `--box-width` accepts [m]: up to the box `--constant-depth` gives 200 000 balls. rapier2d computes in
/// f32, whose spacing at the walls of a 4 000 m box (±2 000 m) is 0.12 mm (an eighth of d̂, a quarter of a percent
/// of a ball's radius); at the reference pit's walls (±10 m) it is 1 µm.
pub const PIT_WIDTHS: std::ops::RangeInclusive<f64> = 1.0..=4_000.0;

fn reference_width() -> f64 {
    PIT_WIDTH
}

/// Refuses a box the pit cannot be built in, as `--box-width` sets it (see [`pit_problem`]).
pub fn check_pit(n: usize, width: f64) -> Result<()> {
    match pit_problem(n, width) {
        Some(problem) => bail!("invalid --box-width {width}: {problem}"),
        None => Ok(()),
    }
}

/// Why the pit of `n` balls cannot be built in a box `width` wide, if it cannot: a width outside [`PIT_WIDTHS`]
/// (or not a number), or a starting grid that would stand above the side walls.
pub fn pit_problem(n: usize, width: f64) -> Option<String> {
    if !PIT_WIDTHS.contains(&width) {
        return Some(format!(
            "the box must be between {} and {} m wide",
            PIT_WIDTHS.start(),
            PIT_WIDTHS.end()
        ));
    }
    let top = pit_grid_top(n, width);
    (top > PIT_WALL_HEIGHT - 1.0).then(|| {
        format!(
            "{n} balls in a box {width} m wide would start {top:.0} m high, above the side walls \
             ({PIT_WALL_HEIGHT} m); widen the box or use fewer balls"
        )
    })
}

/// The arguments of the `bench-one` child that runs `engine` (ipc or penalty) on `n` balls.
pub fn bench_one_args(engine: &str, n: usize, steps: usize, width: f64) -> Vec<String> {
    let mut args = vec!["bench-one".to_string(), "--engine".into(), engine.into()];
    args.extend(peer_args(n, steps, width));
    args
}

/// The arguments of the rapier2d peer (`examples/rapier_peer.rs`) on `n` balls; `bench-one` takes them too. The
/// width is written so that it parses back to the same bits.
pub fn peer_args(n: usize, steps: usize, width: f64) -> Vec<String> {
    vec![
        "--n".into(),
        n.to_string(),
        "--steps".into(),
        steps.to_string(),
        "--box-width".into(),
        format!("{width:?}"),
    ]
}

/// Columns of the starting grid in a box `width` wide (at least one).
fn pit_columns(width: f64) -> usize {
    (((width - 2.0 * PIT_SPACING) / PIT_SPACING).floor() as usize).max(1)
}

/// The height [m] of the top of the starting grid of `n` balls in a box `width` wide: the top row's centres plus
/// the largest jitter and radius.
pub fn pit_grid_top(n: usize, width: f64) -> f64 {
    let rows = n.div_ceil(pit_columns(width));
    PIT_FIRST_ROW
        + PIT_SPACING * rows.saturating_sub(1) as f64
        + 0.5 * PIT_JITTER
        + PIT_RADIUS * 1.2
}

/// A small deterministic generator (SplitMix64), so every engine gets the same balls.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The pit's walls: a floor with its top at y = 0 and two side walls `width` apart (20 m in the reference pit).
pub fn pit_walls(width: f64) -> Vec<Wall> {
    let half = width * 0.5;
    let tall = PIT_WALL_HEIGHT * 0.5;
    vec![
        Wall {
            center: DVec2::new(0.0, -0.5),
            half_extents: DVec2::new(half + 1.0, 0.5),
            angle: 0.0,
        },
        Wall {
            center: DVec2::new(-half - 0.5, tall),
            half_extents: DVec2::new(0.5, tall),
            angle: 0.0,
        },
        Wall {
            center: DVec2::new(half + 0.5, tall),
            half_extents: DVec2::new(0.5, tall),
            angle: 0.0,
        },
    ]
}

/// `n` balls of radius 0.05 m ± 20 % on a loose grid (spacing 0.15 m, jittered), at rest, above the floor of a
/// box `width` wide.
pub fn pit_balls(n: usize, seed: u64, width: f64) -> Vec<Ball> {
    let mut rng = SplitMix64(seed);
    let spacing = PIT_SPACING;
    let columns = pit_columns(width);
    (0..n)
        .map(|k| {
            let (row, col) = (k / columns, k % columns);
            let radius = PIT_RADIUS * (PIT_RADIUS_LOW + PIT_RADIUS_SPAN * rng.unit());
            let jitter = DVec2::new(rng.unit() - 0.5, rng.unit() - 0.5) * PIT_JITTER;
            Ball {
                position: DVec2::new(
                    -width * 0.5 + spacing * (col as f64 + 1.0),
                    0.1 + spacing * (row as f64 + 0.5),
                ) + jitter,
                velocity: DVec2::ZERO,
                radius,
                mass: std::f64::consts::PI * radius * radius * 1000.0,
            }
        })
        .collect()
}

/// The pit's Newton cap: a step whose solve has not met the tolerance after this many directions ends there.
pub const PIT_NEWTON_CAP: u32 = 100;

/// The pit as a lane for `method`, in a box `width` wide ([`PIT_WIDTH`] for the reference pit).
pub fn pit_lane(n: usize, method: ContactMethod, width: f64) -> LaneWorld {
    let settings = ContactSettings {
        method,
        stiffness: PIT_STIFFNESS,
        dhat: Some(PIT_DHAT),
        kappa: PIT_KAPPA,
        h: PIT_H,
        gravity: DVec2::new(0.0, -9.81),
        newton_tolerance: PIT_NEWTON_TOLERANCE,
        newton_max_iterations: PIT_NEWTON_CAP,
        ..ContactSettings::default()
    };
    LaneWorld::new(
        format!("{} pit N={n}", method.label()),
        settings,
        pit_walls(width),
        pit_balls(n, PIT_SEED, width),
    )
}

/// Balls outside a box `width` wide (beyond a side wall or below the floor).
pub fn escaped(positions: impl Iterator<Item = DVec2>, width: f64) -> usize {
    positions
        .filter(|p| p.y < 0.0 || p.x.abs() > width * 0.5)
        .count()
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[index]
}

/// Peak resident set size of this process [MB, 10⁶ bytes], from `/proc/self/status` (Linux).
pub fn peak_rss_mb() -> Option<f64> {
    peak_rss_mb_of(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// The `VmHWM` line of a `/proc/PID/status` text in MB (10⁶ bytes): the kernel's "kB" there are KiB.
fn peak_rss_mb_of(status: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0 / 1e6)
}

/// Runs one of our engines in this process, in a box `width` wide.
pub fn bench_ours(method: ContactMethod, n: usize, steps: usize, width: f64) -> BenchRun {
    bench_lane(pit_lane(n, method, width), steps, width)
}

/// Steps `lane` (a pit in a box `width` wide) `steps` times, timing each step, and reports it.
pub fn bench_lane(mut lane: LaneWorld, steps: usize, width: f64) -> BenchRun {
    let (method, n) = (lane.settings.method, lane.balls.len());
    let mut times = Vec::with_capacity(steps);
    let mut newton = Vec::with_capacity(steps);
    for _ in 0..steps {
        let start = Instant::now();
        let iterations = lane.step().map(|d| d.newton_iterations);
        times.push(start.elapsed().as_secs_f64() * 1e3);
        match iterations {
            Some(i) => newton.push(i),
            None => break,
        }
    }
    times.sort_by(f64::total_cmp);
    let s = &lane.stats;
    BenchRun {
        engine: method.label().to_string(),
        n,
        steps: times.len(),
        median_ms: percentile(&times, 0.5),
        p95_ms: percentile(&times, 0.95),
        mean_newton: Some(s.mean_newton()),
        max_newton: Some(s.max_newton),
        iteration_caps: Some(u64::from(s.iteration_caps)),
        min_gap_m: s.min_gap,
        max_penetration_m: Some(s.max_penetration),
        peak_rss_mb: peak_rss_mb(),
        escaped: escaped(lane.balls.iter().map(|b| b.position), width),
        box_width_m: width,
        profile_ms_per_step: Some(Profile::from_times(
            &lane.phase_times(),
            times.iter().sum::<f64>() * 1e-3,
            times.len(),
        )),
        factorisations_per_step: Some(Factorisations::from_counters(
            lane.linear_counters(),
            times.len(),
        )),
        median_ms_runs: Vec::new(),
    }
}

/// The median of `values` (the mean of the middle two for an even count); NaN when empty.
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        k if k % 2 == 1 => sorted[k / 2],
        k => 0.5 * (sorted[k / 2 - 1] + sorted[k / 2]),
    }
}

/// One (engine, N) over its repeated runs, in the order they ran: the median of their medians and of their
/// p95s, the largest peak RSS and the mean profile. The pit is deterministic, so every run must report the same
/// steps, Newton counts, gaps, penetrations and escapes; a run that does not is an error naming the field.
pub fn combine_runs(runs: &[BenchRun]) -> Result<BenchRun> {
    let Some(first) = runs.first() else {
        bail!("no runs to combine");
    };
    if runs.len() == 1 {
        // `median_ms_runs` is there whatever `--repeat`: a script reads one shape.
        return Ok(BenchRun {
            median_ms_runs: vec![first.median_ms],
            ..first.clone()
        });
    }
    // Each deterministic field as text that holds every bit (`{:?}` of an f64 round-trips).
    let fields = |r: &BenchRun| {
        [
            ("engine", format!("{} N={}", r.engine, r.n)),
            ("steps", r.steps.to_string()),
            ("mean_newton", format!("{:?}", r.mean_newton)),
            ("max_newton", format!("{:?}", r.max_newton)),
            ("iteration_caps", format!("{:?}", r.iteration_caps)),
            ("min_gap_m", format!("{:?}", r.min_gap_m)),
            ("max_penetration_m", format!("{:?}", r.max_penetration_m)),
            ("escaped", r.escaped.to_string()),
            ("box_width_m", format!("{:?}", r.box_width_m)),
        ]
    };
    let expected = fields(first);
    for (k, run) in runs.iter().enumerate().skip(1) {
        for ((field, got), (_, want)) in fields(run).iter().zip(&expected) {
            if got != want {
                bail!(
                    "{} N={}: run {} reported {field} {got}, run 1 {want}; the pit should be deterministic",
                    first.engine,
                    first.n,
                    k + 1
                );
            }
        }
    }
    let medians: Vec<f64> = runs.iter().map(|r| r.median_ms).collect();
    let p95s: Vec<f64> = runs.iter().map(|r| r.p95_ms).collect();
    let profiles: Vec<Profile> = runs
        .iter()
        .filter_map(|r| r.profile_ms_per_step.clone())
        .collect();
    let factorisations: Vec<Factorisations> = runs
        .iter()
        .filter_map(|r| r.factorisations_per_step)
        .collect();
    Ok(BenchRun {
        median_ms: median(&medians),
        p95_ms: median(&p95s),
        peak_rss_mb: runs.iter().filter_map(|r| r.peak_rss_mb).reduce(f64::max),
        profile_ms_per_step: (profiles.len() == runs.len()).then(|| Profile::mean(&profiles)),
        factorisations_per_step: (factorisations.len() == runs.len())
            .then(|| Factorisations::mean(&factorisations)),
        median_ms_runs: medians,
        ..first.clone()
    })
}

/// Each engine's median over rapier2d's at the same N, overall and run by run.
pub fn ratios(runs: &[BenchRun]) -> Vec<Ratio> {
    const PEER: &str = "rapier2d";
    let mut out = Vec::new();
    for run in runs.iter().filter(|r| r.engine != PEER) {
        let Some(peer) = runs.iter().find(|r| r.engine == PEER && r.n == run.n) else {
            continue;
        };
        let median_ratio = run.median_ms / peer.median_ms;
        let paired =
            !run.median_ms_runs.is_empty() && run.median_ms_runs.len() == peer.median_ms_runs.len();
        let runs = if paired {
            let rounds = run.median_ms_runs.iter().zip(&peer.median_ms_runs);
            rounds.map(|(a, b)| a / b).collect()
        } else {
            vec![median_ratio]
        };
        out.push(Ratio {
            engine: run.engine.clone(),
            peer: PEER.into(),
            n: run.n,
            median_ratio,
            runs,
        });
    }
    out
}

/// `bench-one`: one run, printed as one JSON line for the parent.
pub fn run_bench_one(args: &BenchOneArgs) -> Result<()> {
    let method = match args.engine.as_str() {
        "ipc" => ContactMethod::Ipc,
        "penalty" => ContactMethod::Penalty,
        other => bail!("invalid --engine: expected ipc or penalty, got {other:?}"),
    };
    check_pit(args.n, args.box_width)?;
    let run = bench_ours(method, args.n, args.steps, args.box_width);
    outln!("{}", serde_json::to_string(&run)?)?;
    Ok(())
}

fn rapier_peer() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot locate the running binary")?;
    let dir = exe.parent().context("the binary has no folder")?;
    let peer = dir.join("examples").join("rapier_peer");
    if peer.exists() {
        return Ok(peer);
    }
    let manifest = env!("CARGO_MANIFEST_DIR");
    // Built with the running binary's profile next to it (`<target>/release/` or `<target>/debug/`), whatever
    // CARGO_TARGET_DIR says in this shell; a binary anywhere else gets a release peer in a target folder of its
    // own beside it.
    let profile = dir.file_name().and_then(|name| name.to_str());
    let (target, release, peer) = match (profile, dir.parent()) {
        (Some(name @ ("release" | "debug")), Some(target)) => {
            (target.to_path_buf(), name == "release", peer)
        }
        _ => {
            let target = dir.join("rapier-peer-target");
            let peer = target.join("release").join("examples").join("rapier_peer");
            if peer.exists() {
                return Ok(peer);
            }
            (target, true, peer)
        }
    };
    let mut cargo = Command::new("cargo");
    cargo.args(["build", "--example", "rapier_peer"]);
    if release {
        cargo.arg("--release");
    }
    cargo
        .arg("--manifest-path")
        .arg(format!("{manifest}/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target);
    crate::cli::stdout::errln!(
        "building the rapier2d peer (cargo build{} --example rapier_peer) into {} ...",
        if release { " --release" } else { "" },
        target.display()
    );
    let status = cargo
        .status()
        .context("cannot run cargo to build the rapier2d peer")?;
    if !status.success() || !peer.exists() {
        bail!(
            "the rapier2d peer did not build at {}; run `cargo build --release --example rapier_peer`",
            peer.display()
        );
    }
    Ok(peer)
}

fn run_child(mut command: Command, what: &str) -> Result<BenchRun> {
    let out = command
        .output()
        .with_context(|| format!("cannot start {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    parse_report(line).with_context(|| format!("{what} printed {line:?}"))
}

/// A child's one-line JSON report. serde_json's `float_roundtrip` parsing is correctly rounded, so the table
/// holds exactly the values the child measured (its default fast parsing can land one unit in the last place
/// off: the 1 000-ball pit's smallest gap, 2.2442500153332934e-6 m, came back as 2.244250015333294e-6).
pub fn parse_report(line: &str) -> serde_json::Result<BenchRun> {
    serde_json::from_str(line)
}

/// `values` without repeats, each where it first appears: `ipc,penalty,ipc` → `ipc,penalty`.
pub fn first_of_each<T: PartialEq + Clone>(values: &[T]) -> Vec<T> {
    let mut kept: Vec<T> = Vec::with_capacity(values.len());
    for v in values {
        if !kept.contains(v) {
            kept.push(v.clone());
        }
    }
    kept
}

/// Entry point of the subcommand.
pub fn run_bench(args: &BenchArgs) -> Result<()> {
    if args.n.is_empty() {
        bail!("invalid --n: give at least one count, between 1 and {MAX_BENCH_N}");
    }
    if let Some(&bad) = args.n.iter().find(|&&n| n == 0 || n as u64 > MAX_BENCH_N) {
        bail!("invalid --n: every count must be between 1 and {MAX_BENCH_N}, got {bad}");
    }
    // Each engine: ours (run by `bench-one`) or the rapier2d peer; an unknown one is refused before any run.
    for engine in &args.engines {
        if !matches!(engine.as_str(), "ipc" | "penalty" | "rapier2d") {
            bail!("invalid --engines: unknown engine {engine:?} (ipc, penalty, rapier2d)");
        }
    }
    // A count or an engine given twice would run twice and fill the table with a duplicate row.
    let (n, engines) = (first_of_each(&args.n), first_of_each(&args.engines));
    for (option, given, kept) in [
        ("--n", args.n.len(), n.len()),
        ("--engines", args.engines.len(), engines.len()),
    ] {
        if kept < given {
            crate::cli::stdout::errln!(
                "note: {option} names a value more than once; each runs once, in the order first given"
            );
        }
    }
    let args = &BenchArgs {
        n,
        engines,
        ..args.clone()
    };
    if args.steps == 0 || args.steps as u64 > MAX_BENCH_STEPS {
        bail!(
            "invalid --steps: must be between 1 and {MAX_BENCH_STEPS}, got {}",
            args.steps
        );
    }
    if args.repeat == 0 || args.repeat as u64 > MAX_BENCH_REPEAT {
        bail!(
            "invalid --repeat: must be between 1 and {MAX_BENCH_REPEAT}, got {}",
            args.repeat
        );
    }
    for &n in &args.n {
        args.check_box(n)?;
    }
    let ours: Vec<bool> = args.engines.iter().map(|e| e != "rapier2d").collect();
    let exe = std::env::current_exe().context("cannot locate the running binary")?;
    let mut runs = Vec::new();
    for &n in &args.n {
        let width = args.box_width_for(n);
        let mut repeated: Vec<Vec<BenchRun>> = vec![Vec::new(); args.engines.len()];
        for round in 1..=args.repeat {
            for ((engine, &ours), done) in args.engines.iter().zip(&ours).zip(&mut repeated) {
                let run = if ours {
                    let mut c = Command::new(&exe);
                    c.args(bench_one_args(engine, n, args.steps, width));
                    run_child(c, &format!("{engine} N={n}"))?
                } else {
                    let mut c = Command::new(rapier_peer()?);
                    c.args(peer_args(n, args.steps, width));
                    run_child(c, &format!("rapier2d N={n}"))?
                };
                if !args.json {
                    crate::cli::stdout::errln!(
                        "{:>9} N={:>6}: median {:8.2} ms  p95 {:8.2} ms  (run {round} of {})",
                        run.engine,
                        run.n,
                        run.median_ms,
                        run.p95_ms,
                        args.repeat
                    );
                }
                done.push(run);
            }
        }
        for done in &repeated {
            runs.push(combine_runs(done)?);
        }
    }
    if args.json {
        // The pit's parameters, so that a saved result says what it measured.
        let widths: Vec<f64> = first_of_each(&args.n)
            .iter()
            .map(|&n| args.box_width_for(n))
            .collect();
        let parameters = json!({
            "steps": args.steps,
            "repeat": args.repeat,
            "seed": PIT_SEED,
            "h_s": PIT_H,
            "dhat_m": PIT_DHAT,
            "kappa": PIT_KAPPA,
            "penalty_stiffness_n_per_m": PIT_STIFFNESS,
            "newton_tolerance_m": PIT_NEWTON_TOLERANCE,
            "newton_cap": PIT_NEWTON_CAP,
            "radius_m": [PIT_RADIUS * PIT_RADIUS_LOW, PIT_RADIUS * (PIT_RADIUS_LOW + PIT_RADIUS_SPAN)],
            "box_width_m": widths,
        });
        outln!(
            "{}",
            json!({"runs": runs, "ratios": ratios(&runs), "parameters": parameters})
        )?;
    } else {
        outln!("{}", format_table(&runs))?;
    }
    Ok(())
}

fn opt(v: Option<f64>, scale: f64, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{:.*}", digits, v * scale))
}

/// The human table.
pub fn format_table(runs: &[BenchRun]) -> String {
    let mut out = String::from(
        " engine   |      N |   box m | median ms |  p95 ms | Newton mean/max | min gap um | max pen um | RSS MB | escaped\n",
    );
    for r in runs {
        let newton = match (r.mean_newton, r.max_newton) {
            (Some(m), Some(x)) => format!("{m:.2}/{x}"),
            _ => "-".into(),
        };
        out.push_str(&format!(
            " {:8} | {:6} | {:>7.1} | {:9.3} | {:7.3} | {:>15} | {:>10} | {:>10} | {:>6} | {}\n",
            r.engine,
            r.n,
            r.box_width_m,
            r.median_ms,
            r.p95_ms,
            newton,
            opt(r.min_gap_m, 1e6, 2),
            opt(r.max_penetration_m, 1e6, 2),
            opt(r.peak_rss_mb, 1.0, 1),
            r.escaped
        ));
    }
    // A capped solve is not converged: say how many steps ended so, as `throw` and `run` do.
    for r in runs {
        if let Some(caps) = r.iteration_caps.filter(|&caps| caps > 0) {
            out.push_str(&format!(
                " note: {} N={}: Newton hit its cap of {PIT_NEWTON_CAP} directions in {caps} of {} steps (not \
                 converged; `iteration_caps` in --json)\n",
                r.engine, r.n, r.steps
            ));
        }
    }
    let spread = |values: &[f64]| {
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    };
    if runs.iter().any(|r| r.median_ms_runs.len() > 1) {
        out.push_str("\n median ms over the runs: median (lowest - highest run)\n");
        for r in runs.iter().filter(|r| r.median_ms_runs.len() > 1) {
            let (lo, hi) = spread(&r.median_ms_runs);
            out.push_str(&format!(
                " {:8} | {:6} | {:.3} ({lo:.3} - {hi:.3}) over {} runs\n",
                r.engine,
                r.n,
                r.median_ms,
                r.median_ms_runs.len()
            ));
        }
    }
    let ratios = ratios(runs);
    if !ratios.is_empty() {
        out.push_str("\n median over rapier2d's median at the same N (run by run: each run over rapier2d's run in the same round)\n");
        for q in &ratios {
            let (lo, hi) = spread(&q.runs);
            out.push_str(&format!(
                " {:8} | {:6} | {:.2}",
                q.engine, q.n, q.median_ratio
            ));
            if q.runs.len() > 1 {
                out.push_str(&format!(
                    " (run by run {lo:.2} - {hi:.2} over {} runs)",
                    q.runs.len()
                ));
            }
            out.push('\n');
        }
    }
    let profiled: Vec<&BenchRun> = runs
        .iter()
        .filter(|r| r.profile_ms_per_step.is_some())
        .collect();
    if let Some(first) = profiled
        .first()
        .and_then(|r| r.profile_ms_per_step.as_ref())
    {
        out.push_str("\n where the time goes, ms per step (mean over the run, and over the runs with --repeat)\n engine   |      N");
        for (name, _) in first.parts() {
            out.push_str(&format!(" | {name:>9}"));
        }
        out.push_str(" |     total | symbolic/numeric factorisations per step\n");
        for r in profiled {
            if let Some(p) = &r.profile_ms_per_step {
                out.push_str(&format!(" {:8} | {:6}", r.engine, r.n));
                for (_, ms) in p.parts() {
                    out.push_str(&format!(" | {ms:9.3}"));
                }
                out.push_str(&format!(" | {:9.3} | ", p.total));
                out.push_str(&match r.factorisations_per_step {
                    Some(f) => format!("{:.1} / {:.1}\n", f.symbolic, f.numeric),
                    None => "-\n".to_string(),
                });
            }
        }
    }
    out
}

/// For the JSON consumers: a run as a JSON value.
pub fn run_json(run: &BenchRun) -> Value {
    serde_json::to_value(run).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    /// `peak_rss_mb` is in MB of 10⁶ bytes; the kernel writes KiB and calls them "kB".
    #[test]
    fn peak_rss_is_read_in_megabytes() {
        let status =
            "Name:\tcontact-sandbox\nVmPeak:\t  200000 kB\nVmHWM:\t   68359 kB\nVmRSS:\t 1 kB\n";
        let mb = super::peak_rss_mb_of(status).expect("a VmHWM line");
        assert!((mb - 69.999_616).abs() < 1e-9, "{mb}");
        assert_eq!(super::peak_rss_mb_of("VmRSS:\t1 kB\n"), None);
        if cfg!(target_os = "linux") {
            assert!(super::peak_rss_mb().is_some_and(|mb| mb > 0.0));
        }
    }

    #[test]
    fn repeated_counts_and_engines_run_once_in_the_order_first_given() {
        assert_eq!(super::first_of_each(&[50, 50, 10, 50]), [50, 10]);
        let engines = ["ipc", "penalty", "ipc"].map(String::from);
        assert_eq!(super::first_of_each(&engines), ["ipc", "penalty"]);
    }
}
