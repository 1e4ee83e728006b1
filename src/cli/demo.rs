//! `contact-sandbox record --scene FILE --script ACTIONS.ron --out DEMO` and
//! `contact-sandbox replay DEMO [--verify] [--json]` (SPEC §5).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};
use indicatif::ProgressBar;
use serde_json::json;

use crate::demo::{
    AlreadyExists, Demo, Player, Script, holds_a_file, remove_unfinished_writes, same_file,
};
use crate::scene::Scene;
use crate::sim::{lane_outcome, lane_summary};

use super::stdout::outln;
use crate::text::counted;

/// Arguments of `contact-sandbox record`.
#[derive(clap::Args, Debug, Clone)]
pub struct RecordArgs {
    /// The scene the demo starts from (RON; see docs/scenes.md).
    #[arg(long)]
    pub scene: PathBuf,
    /// The timed actions to record (RON; see docs/demos.md).
    #[arg(long)]
    pub script: PathBuf,
    /// Where to write the demo (written atomically). An existing file is refused unless --force is given.
    #[arg(long)]
    pub out: PathBuf,
    /// Replace --out if a file is there already.
    #[arg(long)]
    pub force: bool,
}

/// Arguments of `contact-sandbox replay`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The demo file.
    pub demo: PathBuf,
    /// Stop at the first hash that differs, and leave the lanes out of the text report: the demo's line and the
    /// verdict (--json still gives every lane). Exits 1 on a mismatch, as without it.
    #[arg(long)]
    pub verify: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

fn progress_bar(len: u64, what: &str) -> ProgressBar {
    super::progress_bar(
        len,
        "{msg} [{bar:40}] {pos}/{len} ticks, {rate}, ETA {eta}",
        what,
    )
}

pub fn run_record(args: &RecordArgs) -> Result<()> {
    for (option, input) in [("--scene", &args.scene), ("--script", &args.script)] {
        if same_file(&args.out, input) {
            bail!(
                "--out {}: is the same file as {option} {}; the demo would replace it",
                args.out.display(),
                input.display()
            );
        }
    }
    if !args.force && holds_a_file(&args.out) {
        bail!("{}", already_exists(&args.out));
    }
    // Before the run, which may take hours: a missing or read-only folder fails now, not after it.
    crate::demo::check_writable(&args.out)?;
    // A recording killed outright (SIGKILL, a full disk's SIGXFSZ) left `.NAME.tmp-PID` beside its --out.
    super::note_stale_temporaries(&args.out, "tmp", "a recording");
    // Ctrl-C, SIGTERM or SIGHUP while the demo is being saved removes its temporary file (the old demo stays);
    // before that there is nothing to clean up.
    super::on_stop_signal(|| {
        remove_unfinished_writes();
        std::process::exit(130);
    });
    let scene = Scene::load(&args.scene)?;
    let script = Script::load(&args.script)?;
    let script_file = args.script.display().to_string();
    for note in crate::demo::throws_without_steps_notes(&scene, &script.actions, &script_file)
        .into_iter()
        .chain(crate::demo::settings_replaced_notes(
            &scene,
            &script.actions,
            &script_file,
        ))
    {
        crate::cli::stdout::errln!("note: {note}");
    }
    let bar = progress_bar(script.ticks, "recording");
    let started = Instant::now();
    let (demo, play_seconds) = crate::demo::record_script_timed(
        &scene,
        &script,
        &args.script.display().to_string(),
        |tick, _| bar.set_position(tick),
    )?;
    bar.finish_and_clear();
    // The bytes written, also into a FIFO or a device, whose own size reads 0.
    let size = if args.force {
        demo.save(&args.out)?
    } else {
        // A file that appeared while recording (another `record` of the same --out) is not replaced either, and
        // this recording is not thrown away: it is saved at the first free numbered name beside it.
        match demo.save_new(&args.out) {
            Err(e) if e.downcast_ref::<AlreadyExists>().is_some() => {
                let kept = crate::sim::save_without_replacing(&demo, &args.out)?;
                bail!(
                    "--out {}: was created while recording; not replacing it: the demo is in '{}'",
                    args.out.display(),
                    kept.display()
                );
            }
            saved => saved?,
        }
    };
    outln!(
        "recorded {} ({:.2} s of play, from {} Hz), {}, {} in {:.2} s -> {} ({} bytes)",
        counted(demo.ticks, "tick", "ticks"),
        play_seconds,
        crate::text::number(demo.fixed_hz),
        counted(demo.actions.len() as u64, "action", "actions"),
        counted(demo.hashes.len() as u64, "hash", "hashes"),
        started.elapsed().as_secs_f64(),
        args.out.display(),
        size
    )?;
    Ok(())
}

/// The refusal of an output that exists, for `record` and `export`.
pub fn already_exists(out: &std::path::Path) -> String {
    format!(
        "--out {}: already exists; pass --force to replace it",
        out.display()
    )
}

pub fn run_replay(args: &ReplayArgs) -> Result<()> {
    let file = args.demo.display().to_string();
    let demo = Demo::load(&args.demo)?;
    let (ticks, hashes) = (demo.ticks, demo.hashes.len());
    if args.verify && hashes == 0 {
        bail!("{file}: the demo holds no hashes, so there is nothing to verify");
    }
    let bar = if args.json {
        ProgressBar::hidden()
    } else {
        progress_bar(ticks, "replaying")
    };
    let started = Instant::now();
    let mut player = Player::new(demo, file.clone());
    player.start()?;
    // How long the replayed ticks play, each at the rate of the lanes it steps, as an export plays them.
    let mut play_seconds = 0.0;
    // Each lane's balls half-way through the demo, for the slope check `run --json` makes from its own half-way
    // step ([`super::run::slope_check`]).
    let mut halfway = Vec::new();
    while !(args.verify && player.verdict.mismatch.is_some()) {
        if player.tick() == ticks / 2 {
            halfway = player
                .session
                .lanes
                .iter()
                .map(super::run::HalfwaySnapshot::of)
                .collect();
        }
        let rate = player.session.play_rate_hz(player.demo.fixed_hz);
        if !player.advance()? {
            break;
        }
        play_seconds += 1.0 / rate;
        if player.tick().is_multiple_of(64) {
            bar.set_position(player.tick());
        }
    }
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let verdict = player.verdict.clone();
    // The verdict decides the exit status even when nobody reads the report (`replay --verify | head -1`: a
    // closed pipe must not turn a mismatch into a quiet success).
    let failure = if let Some((tick, _, _)) = verdict.mismatch {
        Some(anyhow::anyhow!(
            "{file}: the replay differs from the recording at tick {tick}"
        ))
    } else if verdict.matched != hashes {
        Some(anyhow::anyhow!(
            "{file}: only {} of {hashes} stored hashes were checked",
            verdict.matched
        ))
    } else {
        None
    };
    let printed = print_replay(
        args,
        &file,
        &player,
        &halfway,
        (ticks, hashes),
        (play_seconds, seconds),
        &verdict,
    );
    match failure {
        Some(failure) => Err(failure),
        None => printed,
    }
}

/// The replay's report on standard output, as text or JSON.
fn print_replay(
    args: &ReplayArgs,
    file: &str,
    player: &Player,
    halfway: &[super::run::HalfwaySnapshot],
    (ticks, hashes): (u64, usize),
    (play_seconds, seconds): (f64, f64),
    verdict: &crate::demo::Verdict,
) -> Result<()> {
    if args.json {
        // The numbers `run --json` gives for a lane (SI units; the slope check from the demo's half-way tick),
        // and the window's words for it, written a ball at a time.
        let no_halfway = super::run::HalfwaySnapshot::default();
        let lanes: Vec<_> = player
            .session
            .lanes
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let was = player.session.loaded.lanes.get(i).map(|spec| &spec.contact);
                let edited = was.map(|was| crate::sim::settings_changes(was, &l.settings));
                super::run::lane_streamed(l, halfway.get(i).unwrap_or(&no_halfway), |lane| {
                    lane["outcome"] = json!(lane_outcome(l));
                    lane["summary"] = json!(lane_summary(l));
                    // What an edit during the demo changed from the lane's scene, each with its value now.
                    lane["edited"] = json!(edited.unwrap_or_default());
                })
            })
            .collect();
        let shape = json!({
            "demo": file,
            // The scene the demo begins with, as `run --json` names its scene, and the one its lanes are of at
            // the end (another after a `Scene` action).
            "scene": player.demo.scene.name,
            "lanes_scene": player.session.loaded.name,
            "ticks": ticks,
            // How long the replayed ticks play, each at its lanes' rate, and the rate the demo starts at.
            "play_seconds": play_seconds,
            "fixed_hz": player.demo.fixed_hz,
            "replayed_ticks": player.tick(),
            "hashes": hashes,
            "matched": verdict.matched,
            // `null` when there was nothing to compare: a demo without hashes is not a verified match.
            "match": (verdict.matched > 0 || verdict.mismatch.is_some()).then_some(verdict.mismatch.is_none()),
            "first_mismatch_tick": verdict.mismatch.as_ref().map(|m| m.0),
            // A demo recorded with another physics revision is expected to differ in its last bits.
            "physics_revision": player.demo.physics,
            "this_build_physics_revision": crate::demo::PHYSICS_REVISION,
            "seconds": seconds,
        });
        let report = super::run::WithParts::new(shape, vec![("lanes", lanes)]);
        super::stdout::write_json(&report, true)?;
    } else {
        // A `Scene` action switched the lanes to another scene: both are named.
        let switched = if player.session.loaded.name != player.demo.scene.name {
            format!(" (switched to '{}')", player.session.loaded.name)
        } else {
            String::new()
        };
        // A verification that stopped at a mismatch played only the ticks up to it.
        let replayed = if player.tick() < ticks {
            format!(
                " over the {} replayed",
                counted(player.tick(), "tick", "ticks")
            )
        } else {
            String::new()
        };
        outln!(
            "{file}: scene '{}'{switched}, {} ({play_seconds:.2} s of play{replayed}, from {} Hz), {}",
            player.demo.scene.name,
            counted(ticks, "tick", "ticks"),
            crate::text::number(player.demo.fixed_hz),
            counted(player.demo.actions.len() as u64, "action", "actions")
        )?;
        if !args.verify {
            for (i, l) in player.session.lanes.iter().enumerate() {
                // A lane edited or thrown to other settings during the demo is named with what changed from the
                // scene its name describes (as the window and a clip title it), not only by a name that may quote
                // a setting it no longer has ("penalty k=1e4" running at k = 1e6).
                let was = player.session.loaded.lanes.get(i).map(|spec| &spec.contact);
                outln!(
                    "  lane '{}': {}; {}",
                    crate::sim::lane_title(l, was),
                    lane_outcome(l),
                    lane_summary(l)
                )?;
            }
        }
        outln!(
            "replayed {} in {seconds:.2} s; hashes: {verdict}",
            counted(player.tick(), "tick", "ticks")
        )?;
    }
    Ok(())
}
