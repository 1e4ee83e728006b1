//! Demos (SPEC §5): scripted recording, bit-identical replay, the first differing tick after an edit,
//! recording through the ECS message path and replaying headless, bad files, atomic saves.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use contact_sandbox::demo::{
    Action, Demo, Player, Script, Session, TimedAction, hash_hex, hash_lanes, record_script,
    spawn_ball_everywhere,
};
use contact_sandbox::physics::DVec2;
use contact_sandbox::scene::{BallSpec, Scene};
use contact_sandbox::sim::{
    ActiveScene, Lane, LaneSettings, Recorder, Replay, RestartScene, SavedDemo, SimControl, SimLog,
    SimPlugin, SpawnBall, SpawnRod, StartRecording, StartReplay, StepInFlight, Stepping,
    StopRecording, ThrowBall,
};
use contact_sandbox::testing::uniform;

const WALL_THROW: &str = "assets/scenes/wall_throw.ron";
const BALL_PIT: &str = "assets/scenes/ball_pit.ron";
const ROD_DROP: &str = "assets/scenes/rod_drop.ron";
const SCRIPT: &str = "assets/demos/wall_throw.script.ron";
use contact_sandbox::demo::SHIPPED_DEMO;

fn scene(path: &str) -> Scene {
    Scene::load(Path::new(path)).expect("built-in scene loads")
}

/// The start of every run's scratch directory's name; the process id follows.
const SCRATCH_PREFIX: &str = "contact-sandbox-demo-";

/// `name` in this run's scratch directory, which the demo tests share (each with its own file names).
///
/// The test harness has no hook at the end of a run to remove the directory, so the first call of a run removes
/// the ones that finished runs left behind instead: every `cargo test` used to leave one in the temp directory.
fn scratch(name: &str) -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let temp = std::env::temp_dir();
        remove_finished_runs_scratch(&temp);
        let dir = temp.join(format!("{SCRATCH_PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    })
    .join(name)
}

/// Removes the scratch directories in `temp` of runs whose process is gone. Without `/proc` nothing tells a
/// finished run from a live one, and nothing is removed. (`/proc` shows this PID namespace only: a run in
/// another container sharing the temp directory would look finished.)
fn remove_finished_runs_scratch(temp: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SCRATCH_PREFIX))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[test]
fn a_finished_run_s_scratch_is_removed_and_a_live_one_s_kept() {
    let temp = std::env::temp_dir().join(format!("cs-scratch-sweep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&temp);
    // No process has an id this large (Linux's limit is 2²²), and this PID namespace always has process 1.
    let dead = temp.join(format!("{SCRATCH_PREFIX}4000000000"));
    let live = temp.join(format!("{SCRATCH_PREFIX}1"));
    let own = temp.join(format!("{SCRATCH_PREFIX}{}", std::process::id()));
    let other = temp.join(format!("{SCRATCH_PREFIX}notes"));
    for dir in [&dead, &live, &own, &other] {
        std::fs::create_dir_all(dir).expect("temp dir");
        std::fs::write(dir.join("a.demo.ron"), "()").expect("a file in it");
    }
    remove_finished_runs_scratch(&temp);
    if Path::new("/proc/self").exists() {
        assert!(!dead.exists(), "a finished run's directory is removed");
    }
    for kept in [&live, &own, &other] {
        assert!(
            kept.join("a.demo.ron").exists(),
            "{} is kept",
            kept.display()
        );
    }
    std::fs::remove_dir_all(&temp).expect("removed");
}

fn wall_throw_demo() -> Demo {
    let script = Script::load(Path::new(SCRIPT)).expect("shipped script loads");
    record_script(&scene(WALL_THROW), &script, SCRIPT, |_, _| {}).expect("script records")
}

#[test]
fn scripted_demo_replays_bit_for_bit_twice() {
    let demo = wall_throw_demo();
    assert_eq!(demo.ticks, 300);
    assert_eq!(demo.hashes.len(), 31, "every 10 ticks from 0 to 300");
    for _ in 0..2 {
        let mut player = Player::new(demo.clone(), "wall_throw");
        let verdict = player.run_to_end(false).expect("replays").clone();
        assert_eq!(verdict.mismatch, None);
        assert_eq!(verdict.matched, demo.hashes.len());
    }
    // Recording again gives the same hashes: the run is a function of the script.
    assert_eq!(wall_throw_demo().hashes, demo.hashes);
}

#[test]
fn the_recorded_throws_do_what_the_seed_says() {
    // At 50 m/s penalty tunnels and IPC holds; the replayed lanes at the end say so.
    let demo = wall_throw_demo();
    let mut player = Player::new(demo, "wall_throw");
    player.run_to_end(false).expect("replays");
    let lanes = &player.session.lanes;
    assert!(lanes[0].ball_tunneled(0), "penalty lane tunnels at 50 m/s");
    assert!(!lanes[1].ball_tunneled(0), "IPC lane holds at 50 m/s");
    assert!(lanes[1].balls[0].position.x < 0.503);
}

#[test]
fn flipping_one_number_names_the_first_differing_tick() {
    let demo = wall_throw_demo();
    let text = demo.to_ron().expect("serialises");
    // The second throw's speed: 5.0 m/s becomes 5.000001 m/s.
    let edited = text.replacen("v0: 5.0", "v0: 5.000001", 1);
    assert_ne!(edited, text, "the demo text holds the throw speed");
    let demo = Demo::parse(&edited, "edited.demo.ron").expect("still a valid demo");
    let mut player = Player::new(demo, "edited");
    let verdict = player.run_to_end(true).expect("replays").clone();
    let (tick, stored, got) = verdict.mismatch.expect("the edit is detected");
    assert_eq!(
        tick, 100,
        "the throw at tick 100 changes the state hashed at tick 100"
    );
    assert_ne!(stored, got);
    assert_eq!(verdict.matched, 10, "ticks 0, 10, …, 90 still match");
    // A hash digit flipped is a mismatch at that hash's tick.
    let mut demo = wall_throw_demo();
    let h = &mut demo.hashes[7];
    let flipped = if h.hash.starts_with('0') { "1" } else { "0" };
    h.hash.replace_range(0..1, flipped);
    let mut player = Player::new(demo, "flipped");
    let verdict = player.run_to_end(true).expect("replays").clone();
    assert_eq!(verdict.mismatch.map(|m| m.0), Some(70));
}

#[test]
fn demo_text_round_trips_every_bit() {
    let mut demo = wall_throw_demo();
    // Awkward floats survive the RON text exactly.
    let awkward = [0.1 + 0.2, 1.0 / 3.0, 5e-324, 1.7976931348623157e308, -0.0];
    for (i, x) in awkward.into_iter().enumerate() {
        demo.actions.push(TimedAction {
            tick: 300,
            action: Action::Spawn(BallSpec {
                position: DVec2::new(x, -(i as f64)),
                velocity: DVec2::new(x, x),
                radius: 0.0,
                mass: 1.0,
            }),
        });
    }
    let text = demo.to_ron().expect("serialises");
    let back = Demo::parse(&text, "round trip").expect("parses");
    assert_eq!(back, demo);
    for (a, b) in back.actions.iter().zip(&demo.actions) {
        if let (Action::Spawn(x), Action::Spawn(y)) = (&a.action, &b.action) {
            assert_eq!(x.position.x.to_bits(), y.position.x.to_bits());
        }
    }
}

#[test]
fn the_shipped_demo_verifies() {
    let demo = Demo::load(Path::new(SHIPPED_DEMO)).expect("shipped demo loads");
    let mut player = Player::new(demo.clone(), SHIPPED_DEMO);
    let verdict = player.run_to_end(true).expect("replays").clone();
    assert_eq!(verdict.mismatch, None, "{verdict}");
    assert_eq!(verdict.matched, demo.hashes.len());
    // It is the shipped script, recorded.
    assert_eq!(demo.actions, wall_throw_demo().actions);
}

#[test]
fn seeking_backwards_and_forwards_lands_on_the_same_state() {
    let demo = wall_throw_demo();
    let mut straight = Player::new(demo.clone(), "straight");
    straight.seek(250).expect("seeks");
    let mut wandering = Player::new(demo, "wandering");
    wandering.seek(290).expect("seeks");
    wandering.seek(30).expect("seeks back");
    wandering.seek(250).expect("seeks forward");
    assert_eq!(wandering.tick(), 250);
    assert_eq!(wandering.session.hash(), straight.session.hash());
    assert_eq!(wandering.verdict, straight.verdict);
}

#[test]
fn indexed_spawns_reach_exactly_the_verdicts_and_lanes_of_the_full_scan() {
    // Crowded random spawns of mixed sizes (points to 5 cm) in an IPC lane with a wall and a penalty lane: many
    // are refused, some for overlapping the wall, the penalty lane's for overlapping more than 64 balls. The
    // grid's verdicts, messages (which ball, what distance) and resulting lanes must be the full scan's.
    let scene = Scene::parse(
        r#"Scene(name: "crowd", lanes: [
            LaneSpec(name: "ipc", contact: ContactSettings(method: Ipc, dhat: Some(1e-4)),
                walls: [WallSpec(center: (0.0, -0.3), half_extents: (1.0, 0.05))]),
            LaneSpec(name: "penalty", contact: ContactSettings(method: Penalty)),
        ])"#,
        "crowd.ron",
    )
    .expect("valid");
    let mut next = uniform(99);
    let mut full = scene.build();
    let mut indexed = scene.build();
    let mut grids = Vec::new();
    let (mut accepted, mut refused) = (0, 0);
    for k in 0..3000 {
        let radius = if k % 5 == 0 {
            0.0
        } else {
            0.05 * next() * next()
        };
        let ball = BallSpec {
            position: DVec2::new(0.6 * next() - 0.3, 0.6 * next() - 0.3),
            velocity: DVec2::ZERO,
            radius,
            mass: 1.0,
        };
        let mut a: Vec<_> = full.iter_mut().collect();
        let mut b: Vec<_> = indexed.iter_mut().collect();
        let by_scan = spawn_ball_everywhere(&mut a, &ball, None);
        let by_grid = spawn_ball_everywhere(&mut b, &ball, Some(&mut grids));
        assert_eq!(by_grid, by_scan, "spawn {k}: {ball:?}");
        match by_scan {
            Ok(()) => accepted += 1,
            Err(_) => refused += 1,
        }
    }
    assert!(
        accepted > 300 && refused > 300,
        "{accepted} accepted, {refused} refused"
    );
    assert_eq!(hash_lanes(&indexed), hash_lanes(&full));
}

fn expect_error(text: &str, needles: &[&str]) {
    let err = Demo::parse(text, "bad.demo.ron").expect_err("must be refused");
    let message = err.to_string();
    assert!(message.starts_with("bad.demo.ron"), "{message}");
    for needle in needles {
        assert!(
            message.contains(needle),
            "'{message}' should mention '{needle}'"
        );
    }
}

#[test]
fn bad_demos_are_refused_with_the_file_the_field_and_the_problem() {
    let good = wall_throw_demo().to_ron().expect("serialises");
    expect_error(&good[..good.len() / 2], &["line"]);
    expect_error("", &["line"]);
    expect_error(
        &good.replacen("version: 1", "version: 7", 1),
        &["version", "7", "reads version 1"],
    );
    expect_error(
        &good.replacen("fixed_hz: 100.0", "fixed_hz: -3.0", 1),
        &["fixed_hz", "-3"],
    );
    expect_error(
        &good.replacen("hash_every: 10", "hash_every: 0", 1),
        &["hash_every"],
    );
    // Hashes at ticks hash_every does not produce: the first offending one is named.
    expect_error(
        &good.replacen("hash_every: 10", "hash_every: 7", 1),
        &[
            "hashes[1].tick",
            "10 is neither a multiple of hash_every (7)",
        ],
    );
    expect_error(
        &good.replacen("tick: 100,", "tick: 400,", 1),
        &["actions[1].tick", "400"],
    );
    expect_error(
        &good.replacen("tick: 100,", "tick: 100, speed: 3,", 1),
        &["speed"],
    );
    let demo = wall_throw_demo();
    let bad_hash = demo
        .to_ron()
        .expect("ron")
        .replacen(&demo.hashes[2].hash, "xyz", 1);
    expect_error(&bad_hash, &["hashes[2].hash", "\"xyz\""]);
    // Names are one line of text: they appear in messages.
    expect_error(
        &good.replacen("name: \"Wall throw\"", "name: \"Wall\u{1b}throw\"", 1),
        &["scene.name", "U+001B"],
    );
    // A right-to-left override printed raw would reverse the rest of the line that shows the name.
    expect_error(
        &good.replacen("name: \"Wall throw\"", "name: \"Wall \u{202e}throw\"", 1),
        &["scene.name", "U+202E", "bidirectional"],
    );
    // So is a scene's description, shown under its name.
    let description = good
        .lines()
        .find(|l| l.trim_start().starts_with("description:"))
        .expect("the demo's scene has a description")
        .to_string();
    expect_error(
        &good.replacen(&description, "description: \"one\\ntwo\\u{1b}[31m\",", 1),
        &["scene.description", "U+000A", "one line of text"],
    );
    expect_error(
        &good.replacen(&description, "description: \"a \u{202e}b\",", 1),
        &["scene.description", "U+202E", "bidirectional"],
    );
    // A scene error inside a demo names its place in the scene.
    expect_error(
        &good.replacen("h: 0.01", "h: -0.01", 1),
        &["scene.lanes[0]", "contact.h"],
    );
    // A longer run than its hashes cover: its last ticks would pass unchecked ("match" for 10⁷ ticks of which
    // 300 were checked).
    let ticks = format!("ticks: {},", demo.ticks);
    expect_error(
        &good.replacen(&ticks, "ticks: 10000000,", 1),
        &[
            "hashes",
            &format!("last stored hash is at tick {}", demo.ticks),
            "runs to tick 10000000",
        ],
    );
}

#[test]
fn a_hand_edited_action_that_cannot_apply_is_an_error_naming_it() {
    let mut demo = wall_throw_demo();
    demo.actions.push(TimedAction {
        tick: 250,
        action: Action::Settings {
            lane: 5,
            settings: Default::default(),
        },
    });
    let mut player = Player::new(demo, "edited.demo.ron");
    let err = player.run_to_end(false).expect_err("lane 5 does not exist");
    let message = err.to_string();
    assert!(message.contains("actions[3]"), "{message}");
    assert!(message.contains("lane 5"), "{message}");
}

#[test]
fn scripts_are_validated_and_refused_actions_are_named() {
    let err = Script::parse(
        "Script(ticks: 10, actions: [(tick: 5, action: Restart), (tick: 2, action: Restart)])",
        "s.ron",
    )
    .expect_err("out of order");
    assert!(err.to_string().contains("actions[1].tick"), "{err}");
    let err = Script::parse("Script(ticks: 10, hash_every: 0, actions: [])", "s.ron")
        .expect_err("zero spacing");
    assert!(err.to_string().contains("hash_every"), "{err}");
    // A ball inside the IPC lane's wall is refused in every lane; the script names the action.
    let script = Script::parse(
        "Script(ticks: 10, actions: [(tick: 3, action: Spawn(BallSpec(position: (0.513, 0.0), radius: 0.001)))])",
        "s.ron",
    )
    .expect("valid script");
    let err = record_script(&scene(WALL_THROW), &script, "s.ron", |_, _| {})
        .expect_err("spawn inside a wall");
    let message = err.to_string();
    assert!(
        message.contains("s.ron") && message.contains("actions[0] (tick 3)"),
        "{message}"
    );
    assert!(message.contains("spawn refused"), "{message}");
}

#[test]
fn saves_are_atomic_and_failures_leave_the_old_file() {
    let demo = wall_throw_demo();
    // A directory of its own: other tests save demos beside `scratch`'s files at the same time, and their
    // temporary copies would be counted as this save's leftovers (a CI run failed so, at c397b57).
    let own = scratch("atomic");
    std::fs::create_dir_all(&own).expect("dir");
    let path = own.join("atomic.demo.ron");
    demo.save(&path).expect("saves");
    let before = std::fs::read(&path).expect("reads");
    // A directory where the file should go: the save fails, nothing half-written remains.
    let blocked = own.join("blocked.demo.ron");
    std::fs::create_dir_all(&blocked).expect("dir");
    std::fs::write(blocked.join("keep"), b"x").expect("file");
    let err = demo.save(&blocked).expect_err("cannot replace a directory");
    assert!(err.to_string().contains("blocked.demo.ron"), "{err:#}");
    let parent = blocked.parent().expect("parent");
    let leftovers: Vec<_> = std::fs::read_dir(parent)
        .expect("lists")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    let err = demo
        .save(Path::new("/nonexistent-dir/x.demo.ron"))
        .expect_err("no such directory");
    // The message names the path given, not the temporary copy the save writes first.
    let message = format!("{err:#}");
    assert!(
        message.starts_with("/nonexistent-dir/x.demo.ron: cannot write a file in /nonexistent-dir"),
        "{message}"
    );
    assert!(!message.contains(".tmp-"), "{message}");
    assert_eq!(std::fs::read(&path).expect("reads"), before);
    assert_eq!(Demo::load(&path).expect("loads"), demo);
}

/// A demo saved over one keeps that file's permissions: one only its owner could read stays so (the new file
/// used to get the default mode, 644 here).
#[test]
fn a_demo_saved_over_another_keeps_its_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let demo = wall_throw_demo();
    let path = scratch("private.demo.ron");
    std::fs::write(&path, b"old").expect("file");
    for mode in [0o600, 0o640] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        demo.save(&path).expect("saves over it");
        let got = std::fs::metadata(&path)
            .expect("saved")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(got, mode, "{got:o}");
        assert_eq!(Demo::load(&path).expect("loads"), demo);
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_save_writes_through_links_and_into_fifos_and_never_replaces_them() {
    let demo = wall_throw_demo();
    let text = demo.to_ron().expect("serialises");
    // Through a symbolic link: the file it points at gets the demo, the link stays a link.
    let target = scratch("linked-target.demo.ron");
    let link = scratch("link.demo.ron");
    let _ = std::fs::remove_file(&link);
    std::fs::write(&target, b"old").expect("file");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    demo.save(&link).expect("saves through the link");
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&target).expect("reads"), text);
    // A link to nothing, or a socket, is refused and left as it is.
    let dangling = scratch("dangling.demo.ron");
    let _ = std::fs::remove_file(&dangling);
    std::os::unix::fs::symlink(scratch("no-such-target"), &dangling).expect("symlink");
    let err = demo.save(&dangling).expect_err("a link to nothing");
    assert!(
        err.to_string().contains("missing or unreachable"),
        "{err:#}"
    );
    assert!(
        std::fs::symlink_metadata(&dangling)
            .expect("link")
            .file_type()
            .is_symlink()
    );
    let socket = scratch("demo.sock");
    let _ = std::fs::remove_file(&socket);
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("a socket");
    let err = demo.save(&socket).expect_err("a socket");
    assert!(
        err.to_string().contains("neither a regular file"),
        "{err:#}"
    );
    // Into a FIFO (as into /dev/null): a reader gets the bytes, and the FIFO is still one.
    let fifo = scratch("demo.fifo");
    let _ = std::fs::remove_file(&fifo);
    // The reader is open before the save; the demo (a few kB) fits in the pipe's buffer.
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let mut reader = contact_sandbox::testing::fifo_with_reader(&fifo)
        .expect("mkfifo is available")
        .expect("opens the FIFO for reading");
    assert!(
        text.len() < 64 * 1024,
        "{} bytes would not fit in a pipe",
        text.len()
    );
    demo.save(&fifo).expect("writes into the FIFO");
    let mut got = String::new();
    reader
        .read_to_string(&mut got)
        .expect("reads what the save wrote");
    assert_eq!(got, text);
    assert!(
        std::fs::metadata(&fifo)
            .expect("fifo")
            .file_type()
            .is_fifo()
    );
}

/// The window saves a recording without waiting: a FIFO that no program reads would freeze it, with no way to
/// stop the wait. It is refused at once, with what to do, and a reader started afterwards gets the demo.
#[test]
fn the_window_s_save_into_a_fifo_without_a_reader_is_refused_at_once() {
    use contact_sandbox::sim::save_without_replacing;
    use std::io::Read;
    let demo = wall_throw_demo();
    let fifo = scratch("window-save.fifo");
    let _ = std::fs::remove_file(&fifo);
    if !contact_sandbox::testing::make_fifo(&fifo) {
        eprintln!("mkfifo is not available here; skipped");
        return;
    }
    // On a thread: a save that waited for a reader would hang the test, not fail it.
    let (said, heard) = std::sync::mpsc::channel();
    std::thread::spawn({
        let (demo, fifo) = (demo.clone(), fifo.clone());
        move || {
            let _ = said.send(save_without_replacing(&demo, &fifo).map_err(|e| format!("{e:#}")));
        }
    });
    let message = heard
        .recv_timeout(Duration::from_secs(20))
        .expect("refused without waiting for a reader")
        .expect_err("nothing reads it");
    assert!(
        message.contains("a FIFO that no program reads") && message.contains("then save again"),
        "{message}"
    );
    // With a reader, the same save goes through, into the FIFO, under its own name.
    let _ = std::fs::remove_file(&fifo);
    let mut reader = contact_sandbox::testing::fifo_with_reader(&fifo)
        .expect("mkfifo is available")
        .expect("opens the FIFO for reading");
    let text = demo.to_ron().expect("serialises");
    assert!(
        text.len() < 64 * 1024,
        "{} bytes would not fit in a pipe",
        text.len()
    );
    let saved = save_without_replacing(&demo, &fifo).expect("a reader is there");
    assert_eq!(saved, fifo);
    let mut got = String::new();
    reader
        .read_to_string(&mut got)
        .expect("reads what the save wrote");
    assert_eq!(got, text);
    let _ = std::fs::remove_file(&fifo);
}

/// A save that fails keeps the recording as it was: the end's hash it took is taken back, so the recording saved
/// later still reads (a hash off the `hash_every` grid before the end is refused), and replays with a match. The
/// failure's note goes once a save succeeds. A replay of the FIFO is refused at once.
#[test]
fn a_failed_save_keeps_the_recording_as_it_was() {
    let mut app = headless(WALL_THROW);
    app.update();
    app.world_mut().write_message(StartRecording);
    app.update();
    for _ in 0..23 {
        app.update();
    }
    // Nothing reads the FIFO: the window's save is refused at once.
    let fifo = scratch("failed-save.fifo");
    let _ = std::fs::remove_file(&fifo);
    if !contact_sandbox::testing::make_fifo(&fifo) {
        eprintln!("mkfifo is not available here; skipped");
        return;
    }
    app.world_mut().write_message(StopRecording(fifo.clone()));
    app.update();
    let said = app.world().resource::<SimLog>().error.clone();
    assert!(
        said.as_deref()
            .is_some_and(|e| e.contains("no program reads") && e.contains("the recording is kept")),
        "{said:?}"
    );
    assert!(app.world().resource::<Recorder>().is_recording());
    // The refused stop names no save: "last saved" is not paired with the name it asked for.
    assert_eq!(app.world().resource::<Recorder>().last_saved, None);
    for _ in 0..50 {
        app.update();
    }
    let (demo, _) = save_and_replay(&mut app, "after-a-failed-save.demo.ron");
    assert!(demo.ticks > 60, "{}", demo.ticks);
    assert_eq!(app.world().resource::<SimLog>().error, None);
    let path = scratch("after-a-failed-save.demo.ron");
    assert_eq!(
        app.world().resource::<Recorder>().last_saved,
        Some(SavedDemo {
            path: path.clone(),
            asked: path.clone()
        })
    );
    // The window's replay of a FIFO is refused at once too: opening it would wait for a writer.
    app.world_mut().write_message(StartReplay(fifo.clone()));
    app.update();
    let said = app.world().resource::<SimLog>().error.clone();
    assert!(
        said.as_deref()
            .is_some_and(|e| e.contains("a FIFO; the window replays demo files")),
        "{said:?}"
    );
    assert!(app.world().get_resource::<Replay>().is_none());
    let _ = std::fs::remove_file(&fifo);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn an_output_link_is_followed_to_its_target_and_a_link_to_nothing_is_refused() {
    // The one rule saves (demo::write_atomic) and exports (cli::export) go by.
    use contact_sandbox::demo::{LinkError, follow_output_link};
    let missing = scratch("follow-missing.ron");
    let _ = std::fs::remove_file(&missing);
    assert!(matches!(follow_output_link(&missing), Ok(None)));
    let file = scratch("follow-file.ron");
    std::fs::write(&file, b"x").expect("file");
    let found = follow_output_link(&file)
        .expect("a file")
        .expect("is there");
    assert!(found.link_target.is_none() && found.metadata.is_file());
    let link = scratch("follow-link.ron");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&file, &link).expect("symlink");
    let found = follow_output_link(&link)
        .expect("a link")
        .expect("is there");
    let canonical = std::fs::canonicalize(&file).expect("canonical");
    assert_eq!(found.link_target.as_deref(), Some(canonical.as_path()));
    assert!(found.metadata.is_file());
    let dangling = scratch("follow-dangling.ron");
    let _ = std::fs::remove_file(&dangling);
    std::os::unix::fs::symlink(scratch("follow-nowhere"), &dangling).expect("symlink");
    let refused = follow_output_link(&dangling);
    assert!(
        matches!(refused, Err(LinkError::Dangling(_))),
        "{refused:?}"
    );
    // A save names the path and the problem, in one line.
    let err = wall_throw_demo().save(&dangling).expect_err("refused");
    assert_eq!(
        format!("{err:#}"),
        format!(
            "{}: is a symbolic link to a missing or unreachable file",
            dangling.display()
        )
    );
}

/// `/dev/stdout` on a pipe is a link into /proc that names no path (`pipe:[…]`); it is written into like a FIFO,
/// and the count of bytes is of the demo written (a FIFO's own size reads 0).
#[test]
fn record_writes_a_demo_into_dev_stdout_on_a_pipe() {
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
        .args([
            "record",
            "--scene",
            WALL_THROW,
            "--script",
            SCRIPT,
            "--out",
            "/dev/stdout",
        ])
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let (demo, line) = stdout
        .rsplit_once(")recorded ")
        .expect("the demo, then the line");
    let demo = format!("{demo})");
    assert!(demo.starts_with("Demo("), "{stdout}");
    let parsed = Demo::parse(&demo, "stdout").expect("the demo written is whole");
    assert!(
        line.trim_end()
            .ends_with(&format!("-> /dev/stdout ({} bytes)", demo.len())),
        "{line}"
    );
    assert_eq!(parsed.to_ron().expect("serialises"), demo);
}

#[test]
fn record_refuses_to_write_over_its_own_inputs() {
    let scene_copy = scratch("own-input.scene.ron");
    std::fs::copy(WALL_THROW, &scene_copy).expect("copies the scene");
    let script_copy = scratch("own-input.script.ron");
    std::fs::copy(SCRIPT, &script_copy).expect("copies the script");
    // The same files, spelt differently.
    let dir = scene_copy.parent().expect("dir");
    let dotted = dir.join(".").join("own-input.scene.ron");
    let exe = env!("CARGO_BIN_EXE_contact-sandbox");
    for (out, input) in [(&dotted, &scene_copy), (&script_copy, &script_copy)] {
        let before = std::fs::read(input).expect("reads");
        let run = std::process::Command::new(exe)
            .arg("record")
            .arg("--scene")
            .arg(&scene_copy)
            .arg("--script")
            .arg(&script_copy)
            .arg("--out")
            .arg(out)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "{stderr}");
        assert!(stderr.contains("is the same file as"), "{stderr}");
        assert_eq!(
            std::fs::read(input).expect("reads"),
            before,
            "{} changed",
            input.display()
        );
    }
}

/// `record --out` never replaces a file unless `--force` is given: the refusal names the file and the option.
#[test]
fn record_refuses_an_existing_out_unless_forced() {
    let precious = scratch("precious.txt");
    std::fs::write(&precious, b"not a demo").expect("writes");
    let exe = env!("CARGO_BIN_EXE_contact-sandbox");
    let record = |force: bool| {
        let mut command = std::process::Command::new(exe);
        command
            .args(["record", "--scene", WALL_THROW, "--script", SCRIPT, "--out"])
            .arg(&precious);
        if force {
            command.arg("--force");
        }
        command.output().expect("runs")
    };
    let run = record(false);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{stderr}");
    assert_eq!(
        stderr.trim(),
        format!(
            "error: --out {}: already exists; pass --force to replace it",
            precious.display()
        )
    );
    assert_eq!(std::fs::read(&precious).expect("reads"), b"not a demo");
    let run = record(true);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        Demo::load(&precious).expect("the demo replaced it").hashes,
        wall_throw_demo().hashes
    );
}

/// `path-2`, `path-3`, … go before the extension, `.demo.ron` counted as one.
#[test]
fn numbered_names_go_before_the_extension() {
    use contact_sandbox::demo::{numbered_path, unused_path};
    let cases = [
        ("demos/mine.demo.ron", 2, "demos/mine-2.demo.ron"),
        ("demos/clip.gif", 3, "demos/clip-3.gif"),
        ("a.b/clip", 2, "a.b/clip-2"),
        ("frames/", 2, "frames-2/"),
        (".demo.ron", 2, ".demo-2.ron"),
        (".hidden", 2, ".hidden-2"),
    ];
    for (path, n, numbered) in cases {
        assert_eq!(
            numbered_path(Path::new(path), n),
            Path::new(numbered),
            "{path}"
        );
    }
    // A name that is not UTF-8 keeps its bytes.
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let latin1 = Path::new(std::ffi::OsStr::from_bytes(b"caf\xe9/clip.gif"));
        let numbered = numbered_path(latin1, 2);
        assert_eq!(numbered.as_os_str().as_bytes(), b"caf\xe9/clip-2.gif");
    }
    let first = scratch("taken.demo.ron");
    std::fs::write(&first, b"x").expect("writes");
    let _ = std::fs::remove_file(scratch("taken-2.demo.ron"));
    assert_eq!(unused_path(&first), Some(scratch("taken-2.demo.ron")));
    assert_eq!(
        unused_path(Path::new("/dev/null")).as_deref(),
        Some(Path::new("/dev/null"))
    );
}

/// Stopping a window recording where a file is saves it under the next free numbered name and keeps the file:
/// a "save as" name that stays in its field, or two fresh names within one second, never lose a recording.
#[test]
fn a_window_recording_never_replaces_a_file() {
    let mut app = headless(WALL_THROW);
    let path = scratch("twice.demo.ron");
    std::fs::write(&path, b"an earlier recording").expect("writes");
    for numbered in ["twice-2.demo.ron", "twice-3.demo.ron"] {
        let _ = std::fs::remove_file(scratch(numbered));
        app.world_mut().write_message(StartRecording);
        for _ in 0..5 {
            app.update();
        }
        app.world_mut().write_message(StopRecording(path.clone()));
        app.update();
        assert_eq!(
            app.world().resource::<Recorder>().last_saved,
            Some(SavedDemo {
                path: scratch(numbered),
                asked: path.clone()
            })
        );
        Demo::load(&scratch(numbered)).expect("saved beside it");
    }
    assert_eq!(
        std::fs::read(&path).expect("reads"),
        b"an earlier recording"
    );
}

#[test]
fn verify_refuses_a_demo_without_hashes() {
    let mut demo = wall_throw_demo();
    demo.hashes.clear();
    let path = scratch("no-hashes.demo.ron");
    demo.save(&path).expect("saves");
    let exe = env!("CARGO_BIN_EXE_contact-sandbox");
    let run = std::process::Command::new(exe)
        .arg("replay")
        .arg(&path)
        .arg("--verify")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{stderr}");
    assert!(stderr.contains("no hashes"), "{stderr}");
    // A plain replay plays it, but does not call it a match: nothing was compared.
    let replay = |json: bool| {
        let mut command = std::process::Command::new(exe);
        command.arg("replay").arg(&path);
        if json {
            command.arg("--json");
        }
        let run = command.output().expect("runs");
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        String::from_utf8(run.stdout).expect("UTF-8")
    };
    let text = replay(false);
    assert!(
        text.contains("hashes: nothing checked (no stored hash)"),
        "{text}"
    );
    assert!(!text.contains("match"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&replay(true)).expect("JSON");
    assert!(json["match"].is_null(), "{json}");
    assert_eq!(json["hashes"], 0);
}

/// `replay --json` gives each lane's numbers in SI units, as `run --json` does, beside the window's words: the
/// smallest gap is the replayed lane's own, to the bit.
#[test]
fn replay_json_gives_each_lanes_numbers_not_only_words() {
    let demo = Demo::load(Path::new("assets/demos/wall_throw.demo.ron")).expect("loads");
    let mut player = Player::new(demo, "reference");
    player.run_to_end(false).expect("replays");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
        .args(["replay", "assets/demos/wall_throw.demo.ron", "--json"])
        .output()
        .expect("runs");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let out: serde_json::Value = serde_json::from_slice(&run.stdout).expect("JSON");
    let lanes = out["lanes"].as_array().expect("lanes");
    assert_eq!(lanes.len(), player.session.lanes.len());
    for (json, lane) in lanes.iter().zip(&player.session.lanes) {
        assert_eq!(json["name"], lane.name.as_str());
        assert_eq!(json["steps"], lane.stats.steps);
        assert_eq!(json["max_newton"], lane.stats.max_newton);
        match lane.stats.min_gap {
            Some(gap) => assert_eq!(json["min_gap_m"].as_f64(), Some(gap), "{}", lane.name),
            None => assert!(json["min_gap_m"].is_null()),
        }
        assert!(json["outcome"].is_string() && json["summary"].is_string());
    }
}

/// A headless app where every `update()` advances the fixed clock by one step.
fn headless(scene: &str) -> App {
    let mut app = App::new();
    app.add_plugins(MinimalPlugins).add_plugins(SimPlugin);
    app.insert_resource(TimeUpdateStrategy::FixedTimesteps(1));
    app.insert_resource(ActiveScene::load(Path::new(scene)).expect("built-in scene loads"));
    app.update();
    app
}

fn ecs_hash(app: &mut App) -> u64 {
    let mut query = app.world_mut().query::<&Lane>();
    let mut lanes: Vec<&Lane> = query.iter(app.world()).collect();
    lanes.sort_by_key(|l| l.index);
    contact_sandbox::demo::hash_lanes(lanes.into_iter().map(|l| &l.world))
}

#[test]
fn a_window_recording_replays_headless_bit_for_bit() {
    let _ = window_recording_replays(headless(BALL_PIT), "window.demo.ron", Duration::ZERO, false);
}

/// The ball pit stepped as the window steps it: in the background, three fixed ticks a frame.
fn background_pit() -> App {
    let mut app = App::new();
    app.add_plugins(MinimalPlugins).add_plugins(SimPlugin);
    app.insert_resource(Stepping::Background);
    app.insert_resource(TimeUpdateStrategy::FixedTimesteps(3));
    app.insert_resource(ActiveScene::load(Path::new(BALL_PIT)).expect("built-in scene loads"));
    app.update();
    app
}

/// The window's background stepping: batches of three ticks on a worker thread, messages and edits arriving
/// while a batch runs, hashes taken inside batches, a switch to inline stepping and back ("physics thread").
/// The recording still replays bit for bit.
#[test]
fn a_recording_stepped_in_the_background_replays_bit_for_bit() {
    let mut app = background_pit();
    // Hashes every 7 ticks, so most of them fall inside a batch and are taken by the worker.
    app.world_mut().resource_mut::<Recorder>().hash_every = 7;
    // Frames of 20 ms, so the ticks owed while a batch runs fit in the next one even when a loaded machine
    // slows the worker (the ball pit steps in well under a millisecond).
    let mut app =
        window_recording_replays(app, "background.demo.ron", Duration::from_millis(20), true);
    let in_flight = app.world_mut().resource::<StepInFlight>();
    assert!(in_flight.batches > 10, "{} batches", in_flight.batches);
    assert!(
        in_flight.largest_batch >= 2,
        "largest batch {}",
        in_flight.largest_batch
    );
}

/// Records a scripted window session on `app` (spawns, a settings edit, pause and single step, a rod; with
/// `switch`, a stretch of inline stepping in the middle) and checks that the saved demo replays headless to the
/// same hashes and final state.
fn window_recording_replays(mut app: App, file: &str, frame: Duration, switch: bool) -> App {
    app.world_mut().write_message(StartRecording);
    app.update();
    assert!(app.world().resource::<Recorder>().is_recording());
    for k in 0..40 {
        if k % 7 == 0 {
            app.world_mut().write_message(SpawnBall {
                position: DVec2::new(-0.3 + 0.05 * f64::from(k), 1.5),
                velocity: DVec2::new(0.5, -2.0),
                radius: 0.04,
                mass: 0.2,
            });
        }
        if switch && k == 16 {
            // Switch while a batch runs: its result must land before inline stepping goes on.
            for _ in 0..1000 {
                if app.world().resource::<StepInFlight>().is_running() {
                    break;
                }
                app.update();
            }
            assert!(app.world().resource::<StepInFlight>().is_running());
            app.insert_resource(Stepping::Inline);
        }
        if switch && k == 27 {
            app.insert_resource(Stepping::Background);
        }
        if k == 12 {
            // An inspector edit of the IPC lane's friction.
            let mut query = app.world_mut().query::<(&Lane, &mut LaneSettings)>();
            for (lane, mut settings) in query.iter_mut(app.world_mut()) {
                if lane.index == 1 {
                    settings.0.friction = 0.6;
                }
            }
        }
        if k == 20 {
            app.world_mut().resource_mut::<SimControl>().toggle_pause();
        }
        if k == 23 {
            app.world_mut().resource_mut::<SimControl>().single_step();
        }
        if k == 25 {
            app.world_mut().resource_mut::<SimControl>().toggle_pause();
        }
        if k == 33 {
            // A restart keeps the inspector's edit: it is recorded after the restart, and replays.
            app.world_mut().write_message(RestartScene);
        }
        if k == 30 {
            app.world_mut().write_message(SpawnRod {
                center: DVec2::new(0.0, 2.0),
                angle: 0.3,
                length: 0.4,
                mass: 1.0,
                restitution: 0.5,
                velocity: DVec2::ZERO,
                omega: 1.0,
            });
        }
        app.update();
        std::thread::sleep(frame);
    }
    if switch {
        // How many ticks a batch takes depends on the machine's load; keep recording until one took several,
        // so the worker's own hashes are part of what the replay checks (owing ticks when a fast worker or a busy
        // machine leaves none owed).
        for _ in 0..500 {
            if app.world().resource::<StepInFlight>().largest_batch >= 2 {
                break;
            }
            app.world_mut().resource_mut::<StepInFlight>().owe(2);
            app.update();
            std::thread::sleep(frame);
        }
    }
    let mut query = app.world_mut().query::<&Lane>();
    let friction: Vec<(usize, f64)> = query
        .iter(app.world())
        .map(|lane| (lane.index, lane.world.settings.friction))
        .collect();
    assert!(friction.contains(&(1, 0.6)), "{friction:?}");
    let path = stop_into_scratch(&mut app, file);
    let demo = Demo::load(&path).expect("the recording was saved and loads");
    assert!(
        demo.actions
            .iter()
            .any(|a| matches!(a.action, Action::Settings { lane: 1, .. }))
    );
    assert!(
        demo.actions
            .iter()
            .any(|a| matches!(a.action, Action::Rod(_)))
    );
    assert_eq!(
        demo.actions
            .iter()
            .filter(|a| matches!(a.action, Action::Spawn(_)))
            .count(),
        6
    );
    assert!(demo.actions.iter().any(|a| a.action == Action::SingleStep));
    let restart = demo
        .actions
        .iter()
        .position(|a| a.action == Action::Restart)
        .expect("the restart was recorded");
    assert!(
        matches!(demo.actions.get(restart + 1).map(|a| &a.action), Some(Action::Settings { lane: 1, settings }) if settings.friction == 0.6),
        "{:?}",
        demo.actions.get(restart + 1)
    );
    let mut player = Player::new(demo.clone(), path.display().to_string());
    let verdict = player.run_to_end(false).expect("replays").clone();
    assert_eq!(verdict.mismatch, None, "{verdict}");
    assert_eq!(verdict.matched, demo.hashes.len());
    assert!(demo.hashes.len() >= 2);
    // The final state the window saved is the final state of the replay.
    assert_eq!(
        hash_hex(player.session.hash()),
        demo.hashes.last().expect("final hash").hash
    );
    app
}

#[test]
fn a_replay_in_the_ecs_follows_the_demo_and_ignores_user_input() {
    let demo = wall_throw_demo();
    let path = scratch("ecs-replay.demo.ron");
    demo.save(&path).expect("saves");
    let mut app = headless(WALL_THROW);
    app.world_mut().write_message(StartReplay(path.clone()));
    app.update();
    assert!(app.world().get_resource::<Replay>().is_some());
    // User input during a replay changes nothing.
    app.world_mut().write_message(ThrowBall {
        v0: 20.0,
        h: None,
        stiffness: None,
        dhat: None,
    });
    for _ in 0..150 {
        app.update();
    }
    let tick = app.world().resource::<Replay>().player.tick();
    assert!(tick > 100, "the replay advanced ({tick} ticks)");
    let mut reference = Player::new(demo, "reference");
    reference.seek(tick).expect("seeks");
    assert_eq!(ecs_hash(&mut app), reference.session.hash());
    // Seek back to the start of the 1 m/s throw.
    app.world_mut().resource_mut::<Replay>().seek = Some(40);
    app.update();
    let tick = app.world().resource::<Replay>().player.tick();
    reference.seek(tick).expect("seeks");
    assert_eq!(ecs_hash(&mut app), reference.session.hash());
}

/// Each scene's state after 60 ticks, hashed. A change here means the physics changed: re-derive the values
/// with `cargo test determinism -- --nocapture` and say why in the commit.
const SCENE_HASHES: [(&str, &str); 5] = [
    (WALL_THROW, "a594a483ce603a9d"),
    (BALL_PIT, "41381e30a1c9e30d"),
    (ROD_DROP, "62e4c8be7512e0af"),
    ("assets/scenes/gauntlet.ron", "2e66b75e4ecbfd65"),
    ("assets/scenes/slope.ron", "3df497784ef110c0"),
];

#[test]
fn determinism_scene_hashes_after_60_ticks_match_the_stored_values() {
    let mut wrong = Vec::new();
    for (path, stored) in SCENE_HASHES {
        let mut session = Session::new(scene(path));
        for _ in 0..60 {
            session.step();
        }
        let got = hash_hex(session.hash());
        println!("{path}: {got}");
        if got != stored {
            wrong.push(format!("{path}: stored {stored}, got {got}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn determinism_the_multi_threaded_ecs_matches_the_headless_session() {
    // MinimalPlugins runs the multi-threaded executor: lane order in queries must not matter.
    for path in [BALL_PIT, ROD_DROP] {
        let mut app = headless(path);
        for _ in 0..60 {
            app.update();
        }
        let steps = app.world().resource::<SimControl>().ticks;
        let mut session = Session::new(scene(path));
        for _ in 0..steps {
            session.step();
        }
        assert_eq!(
            ecs_hash(&mut app),
            session.hash(),
            "{path} after {steps} ticks"
        );
    }
}

/// The window refuses to switch a lane to IPC while a ball overlaps a wall; a demo that holds such a switch
/// (recorded before the check, or written by hand) still replays as it was recorded.
#[test]
fn a_demo_switching_an_overlapping_lane_to_ipc_still_replays() {
    let mut demo = wall_throw_demo();
    // At 1 m/s (the first throw) the penalty ball is inside the wall around tick 50.
    let mut settings = scene(WALL_THROW).lanes[0].contact.clone();
    settings.method = contact_sandbox::physics::world::ContactMethod::Ipc;
    demo.actions.insert(
        1,
        TimedAction {
            tick: 52,
            action: Action::Settings { lane: 0, settings },
        },
    );
    demo.hashes.clear();
    let mut probe = Player::new(demo.clone(), "old.demo.ron");
    probe.seek(51).expect("seeks");
    let (_, depth) = probe.session.lanes[0].clone().gap_and_penetration();
    assert!(
        depth > 0.0,
        "the penalty ball is not inside the wall at tick 51"
    );
    probe.seek(53).expect("the switch replays as recorded");
    assert_eq!(
        probe.session.lanes[0].settings.method,
        contact_sandbox::physics::world::ContactMethod::Ipc
    );
    let mut player = Player::new(demo, "old.demo.ron");
    player.run_to_end(false).expect("and so does the rest");
}

/// A typo inside an action (`dhar` for `dhat`) is an error naming the file and the field, in scripts and in
/// demos: ignoring it would record a different run than the one written.
#[test]
fn unknown_fields_inside_actions_are_errors_naming_the_field() {
    for (action, field) in [
        ("Throw(v0: 1.0, dhar: Some(1e-4))", "dhar"),
        ("Settings(lane: 0, settings: (), foo: 1)", "foo"),
        ("Settings(lane: 0, settings: (gravty: (0, 0)))", "gravty"),
    ] {
        let text = format!("Script(ticks: 10, actions: [(tick: 1, action: {action})])");
        let err = Script::parse(&text, "typo.script.ron").expect_err(action);
        let message = err.to_string();
        assert!(
            message.starts_with("typo.script.ron: line 1")
                && message.contains(&format!("`{field}`")),
            "{action}: {message}"
        );
    }
    let good = wall_throw_demo().to_ron().expect("serialises");
    let typo = good.replacen("v0: 5.0", "v0: 5.0, dhar: Some(1e-4)", 1);
    assert_ne!(typo, good, "the demo text holds the throw speed");
    expect_error(&typo, &["line", "`dhar`"]);
}

/// `record --script` refuses what the window refuses: switching a lane to IPC while its ball is inside a wall.
/// The message names the script, the action and the overlap. (A replay still accepts such a switch: see
/// `a_demo_switching_an_overlapping_lane_to_ipc_still_replays`.)
#[test]
fn a_new_recording_refuses_to_switch_an_overlapping_lane_to_ipc() {
    let script = Script::parse(
        "Script(ticks: 80, actions: [(tick: 0, action: Throw(v0: 1.0)), \
         (tick: 53, action: Settings(lane: 0, settings: (method: Ipc, gravity: (0, 0))))])",
        "switch.script.ron",
    )
    .expect("a valid script");
    let err = record_script(&scene(WALL_THROW), &script, "switch.script.ron", |_, _| {})
        .expect_err("the penalty ball is inside the wall at tick 53");
    let message = err.to_string();
    assert!(
        message.starts_with("switch.script.ron: actions[1] (tick 53): lane '")
            && message.contains("method ipc needs a positive gap")
            && message.contains("ball 0 overlaps wall 0 by "),
        "{message}"
    );
    // Once the ball is out of the wall again, the switch records.
    let later = Script::parse(
        "Script(ticks: 80, actions: [(tick: 0, action: Throw(v0: 1.0)), \
         (tick: 79, action: Settings(lane: 0, settings: (method: Ipc, gravity: (0, 0))))])",
        "later.script.ron",
    )
    .expect("a valid script");
    record_script(&scene(WALL_THROW), &later, "later.script.ron", |_, _| {})
        .expect("nothing overlaps at tick 79");
}

/// A new recording refuses a rod dropped into the floor, as a scene file's rod is refused, naming the action; a
/// rod on the floor records. (Before, it was lifted out at its first step and reported as a 1 m sink.)
#[test]
fn a_new_recording_refuses_a_rod_dropped_below_the_floor() {
    let text = |y: &str| {
        format!(
            "Script(ticks: 10, actions: [(tick: 1, action: Rod(RodSpec(center: (0, {y}), length: 0.5)))])"
        )
    };
    let script = Script::parse(&text("-1"), "rb.script.ron").expect("a valid script");
    let message = record_script(&scene(ROD_DROP), &script, "rb.script.ron", |_, _| {})
        .expect_err("the rod starts 1 m below the floor")
        .to_string();
    assert_eq!(
        message,
        "rb.script.ron: actions[0] (tick 1): rod refused: its lower end would start 1.000 m below the floor of lane \
         'rods: exact impulse law' (its floor at y = 0 m); drop it on or above the floor"
    );
    let on_floor = Script::parse(&text("0"), "ok.script.ron").expect("a valid script");
    let demo = record_script(&scene(ROD_DROP), &on_floor, "ok.script.ron", |_, _| {})
        .expect("a rod lying on the floor records");
    assert!(matches!(demo.actions[0].action, Action::Rod(_)));
}

/// A refused throw names the action (index and tick, from the replay or the recording) and the throw's own
/// field: "v0", not "the throw: lanes[0].balls[0].velocity.x".
#[test]
fn a_refused_throw_names_the_action_and_v0() {
    for (throw, expected) in [
        (
            "Throw(v0: 1e300)",
            "throw refused: v0: must be within ±1e6 m/s",
        ),
        (
            "Throw(v0: 1.0, h: Some(50.0))",
            "throw refused: h: must be at most 10 s",
        ),
        (
            "Throw(v0: 1.0, dhat: Some(1e7))",
            "throw refused: dhat: must be between 1e-9 m and 1 m, got 1e7 m",
        ),
    ] {
        let text = format!("Script(ticks: 10, actions: [(tick: 2, action: {throw})])");
        let script = Script::parse(&text, "t.script.ron").expect("a valid script");
        let message = record_script(&scene(WALL_THROW), &script, "t.script.ron", |_, _| {})
            .expect_err(throw)
            .to_string();
        assert!(
            message.starts_with(&format!("t.script.ron: actions[0] (tick 2): {expected}"))
                && !message.contains("the throw:")
                && message.len() < 240,
            "{message}"
        );
    }
}

/// "1 hash", not "1 hashes" (nor "(1 earlier hashes matched)").
#[test]
fn verdicts_count_one_hash_in_the_singular() {
    use contact_sandbox::demo::Verdict;
    let matched = |matched, mismatch| {
        Verdict {
            matched,
            mismatch,
            older_physics: None,
        }
        .to_string()
    };
    assert_eq!(matched(1, None), "match (1 hash)");
    assert_eq!(matched(31, None), "match (31 hashes)");
    let late = Some((20, "0".repeat(16), "1".repeat(16)));
    assert!(
        matched(1, late.clone()).ends_with("(1 earlier hash matched)"),
        "{}",
        matched(1, late)
    );
}

/// A throw's run length is recorded with it, so a recording started from a thrown scene replays as the window
/// ran: a slow throw (151 steps), F5, a throw at 5 m/s and 1 ms (800 steps in the window, from the scene file's
/// 0.8 s). Before, the replay took its length from the scene the demo started from and ran 151 × 10 ms worth.
#[test]
fn a_throw_recorded_from_a_thrown_scene_replays_its_own_run_length() {
    let mut app = headless(WALL_THROW);
    app.update();
    let throw = |app: &mut App, v0: f64, h: Option<f64>| {
        app.world_mut().write_message(ThrowBall {
            v0,
            h,
            stiffness: None,
            dhat: None,
        });
        app.update();
    };
    throw(&mut app, 0.5, None);
    let run_end = |app: &App| {
        app.world()
            .resource::<SimControl>()
            .run_end
            .expect("an end")
    };
    assert_eq!(run_end(&app), 151.0 * 0.01);
    app.world_mut().write_message(StartRecording);
    app.update();
    throw(&mut app, 5.0, Some(0.001));
    assert_eq!(run_end(&app), 800.0 * 0.001);
    // Past the window's 800 steps: a replay running longer ends on another state.
    for _ in 0..820 {
        app.update();
    }
    let path = stop_into_scratch(&mut app, "thrown_run_length.demo.ron");
    let demo = Demo::load(&path).expect("saved");
    assert!(
        demo.actions.iter().any(|a| matches!(
            a.action,
            Action::Throw {
                steps: Some(800),
                ..
            }
        )),
        "{:?}",
        demo.actions
    );
    let mut player = Player::new(demo.clone(), path.display().to_string());
    let verdict = player.run_to_end(false).expect("replays").clone();
    assert_eq!(verdict.mismatch, None, "{verdict}");
}

/// A ball thrown after the scene's run has finished (wall throw stops at 80 steps) starts the run over from
/// there, in the window and in the replay of its recording; it used to hang in the air.
#[test]
fn a_throw_after_the_scene_finished_runs_the_scene_again_and_replays() {
    let mut app = headless(WALL_THROW);
    app.update();
    app.world_mut().write_message(StartRecording);
    app.update();
    let steps = |app: &mut App| -> Vec<u64> {
        let mut query = app.world_mut().query::<&Lane>();
        query
            .iter(app.world())
            .map(|l| l.world.stats.steps)
            .collect()
    };
    for _ in 0..100 {
        app.update();
    }
    assert!(
        steps(&mut app).iter().all(|&s| s == 80),
        "{:?}",
        steps(&mut app)
    );
    app.world_mut().write_message(SpawnBall {
        position: DVec2::new(0.1, 0.3),
        velocity: DVec2::new(1.0, 0.0),
        radius: 0.01,
        mass: 1.0,
    });
    for _ in 0..30 {
        app.update();
    }
    // The spawn lands after the first update's fixed step.
    assert!(
        steps(&mut app).iter().all(|&s| s == 109),
        "{:?}",
        steps(&mut app)
    );
    let mut query = app.world_mut().query::<&Lane>();
    for lane in query.iter(app.world()) {
        let ball = lane.world.balls.last().expect("the thrown ball");
        assert!(
            ball.position.x > 0.35,
            "{}: {:?}",
            lane.world.name,
            ball.position
        );
    }
    let path = stop_into_scratch(&mut app, "after_the_limit.demo.ron");
    let demo = Demo::load(&path).expect("saved");
    let mut player = Player::new(demo.clone(), path.display().to_string());
    let verdict = player.run_to_end(false).expect("replays").clone();
    assert_eq!(verdict.mismatch, None, "{verdict}");
    assert_eq!(
        hash_hex(player.session.hash()),
        demo.hashes.last().expect("final hash").hash
    );
}

/// The demo `record` makes of wall throw with `script` (saved as `<name>.demo.ron` in the scratch folder), and
/// a headless window replaying it, paused at its first tick.
fn replaying_wall_throw_script(script: &str, name: &str) -> (Demo, App) {
    let script = Script::parse(script, name).expect("parses");
    let demo = record_script(&scene(WALL_THROW), &script, name, |_, _| {}).expect("records");
    let path = scratch(&format!("{name}.demo.ron"));
    demo.save(&path).expect("saves");
    let mut app = headless(WALL_THROW);
    app.world_mut().write_message(StartReplay(path));
    app.update();
    app.world_mut().resource_mut::<Replay>().playing = false;
    (demo, app)
}

/// The replay viewer's plots and layout across seeks: a seek or a step within the run on screen keeps the lane
/// entities (so the view does not move) and the plots up to that tick, also back to before a spawn (whose ball
/// goes); a seek into another run (past a throw) starts the plots of that run. The ECS state always matches an
/// independent player.
#[test]
fn seeking_a_replay_keeps_the_plots_and_the_lanes_of_the_run_on_screen() {
    let (demo, mut app) = replaying_wall_throw_script(
        "Script(ticks: 300, hash_every: 10, actions: [
            (tick: 0, action: Throw(v0: 1.0)),
            (tick: 100, action: Throw(v0: 5.0)),
            (tick: 130, action: Spawn(BallSpec(position: (0.2, 0.1), velocity: (3.0, 0.0), radius: 0.01))),
        ])",
        "seek",
    );
    let mut reference = Player::new(demo, "reference");
    // (lane entities, per lane: the plotted steps, the lane's steps, its balls and ball entities)
    type View = (Vec<Entity>, Vec<(Vec<u64>, u64, usize, usize)>);
    let view = |app: &mut App| -> View {
        let mut query = app
            .world_mut()
            .query::<(Entity, &Lane, &contact_sandbox::sim::LaneDiagnostics)>();
        let mut lanes: Vec<_> = query.iter(app.world()).collect();
        lanes.sort_by_key(|(_, lane, _)| lane.index);
        (
            lanes.iter().map(|(e, ..)| *e).collect(),
            lanes
                .iter()
                .map(|(_, lane, d)| {
                    (
                        d.history.iter().map(|s| s.step).collect(),
                        lane.world.stats.steps,
                        lane.world.balls.len(),
                        lane.ball_entities.len(),
                    )
                })
                .collect(),
        )
    };
    let mut seek = |app: &mut App, tick: u64| -> View {
        app.world_mut().resource_mut::<Replay>().seek = Some(tick);
        app.update();
        app.update();
        let at = app.world().resource::<Replay>().player.tick();
        assert_eq!(at, tick);
        reference.seek(at).expect("seeks");
        assert_eq!(ecs_hash(app), reference.session.hash(), "tick {tick}");
        view(app)
    };
    let (first_lanes, _) = seek(&mut app, 150);
    for (tick, same_lanes, balls) in [
        (170, true, 2),
        (120, true, 1),
        (140, true, 2),
        (40, false, 1),
    ] {
        let (lanes, per_lane) = seek(&mut app, tick);
        assert_eq!(
            lanes == first_lanes,
            same_lanes,
            "tick {tick}: lane entities"
        );
        for (steps, lane_steps, ball_count, ball_entities) in per_lane {
            assert_eq!((ball_count, ball_entities), (balls, balls), "tick {tick}");
            assert_eq!(steps.last(), Some(&lane_steps), "tick {tick}: {steps:?}");
            assert!(
                steps.windows(2).all(|w| w[1] == w[0] + 1),
                "tick {tick}: {steps:?}"
            );
            if same_lanes {
                // The run began at tick 100 (the 5 m/s throw): every step of it is plotted.
                assert_eq!(steps.first(), Some(&1), "tick {tick}: {steps:?}");
            }
        }
    }
}

/// The viewer's "last action" after a seek is the last one applied before the tick it lands on, also when it
/// seeks back past a checkpoint or to before every checkpoint; it kept showing one from later in the demo.
#[test]
fn a_seek_back_shows_the_last_action_before_its_tick() {
    let script = Script::parse(
        "Script(ticks: 700, hash_every: 50, actions: [
            (tick: 10, action: Throw(v0: 1.0)),
            (tick: 350, action: Throw(v0: 2.0)),
            (tick: 650, action: Restart),
        ])",
        "last action script",
    )
    .expect("parses");
    let demo = record_script(&scene(WALL_THROW), &script, "last action script", |_, _| {})
        .expect("records");
    let mut player = Player::new(demo, "last action");
    player.start().expect("starts");
    for (tick, expected) in [
        (690, Some(650)),
        (400, Some(350)),
        (320, Some(10)),
        (5, None),
        (660, Some(650)),
        (10, Some(10)),
    ] {
        player.seek(tick).expect("seeks");
        assert_eq!(
            player.last_action.as_ref().map(|(at, _)| *at),
            expected,
            "seek to {tick}"
        );
    }
}

/// A window recording kept running past the longest demo ends at that tick: its hash is stored there, what
/// came after is left out and said so, and the saved demo loads and replays (it was refused when saved).
#[test]
fn a_recording_kept_past_its_limit_ends_there_and_replays() {
    let mut app = headless(WALL_THROW);
    app.world_mut().resource_mut::<Recorder>().max_ticks = 40;
    app.world_mut().write_message(StartRecording);
    app.update();
    let spawn = |app: &mut App, y: f64| {
        app.world_mut().write_message(SpawnBall {
            position: DVec2::new(0.1, y),
            velocity: DVec2::new(1.0, 0.0),
            radius: 0.01,
            mass: 1.0,
        });
    };
    for _ in 0..20 {
        app.update();
    }
    spawn(&mut app, 0.3);
    for _ in 0..40 {
        app.update();
    }
    spawn(&mut app, -0.3);
    app.update();
    let (demo, said) = save_and_replay(&mut app, "limit.demo.ron");
    assert!(
        said.contains("ended at its limit of 40 ticks (actions after it, left out: 1)"),
        "{said}"
    );
    assert_eq!(demo.ticks, 40);
    let spawns = demo
        .actions
        .iter()
        .filter(|a| matches!(a.action, Action::Spawn(_)))
        .count();
    assert_eq!(spawns, 1);
}

/// Stops the recording into the scratch file `name`, removed first: a save never replaces a file (it takes the
/// name's next number), so a file left by an earlier run with this process's number must not be what is read back.
/// Returns its path.
fn stop_into_scratch(app: &mut App, name: &str) -> PathBuf {
    let path = scratch(name);
    let _ = std::fs::remove_file(&path);
    app.world_mut().write_message(StopRecording(path.clone()));
    app.update();
    path
}

/// Stops the recording into a fresh scratch file `name`, and replays what was saved: it must match its hashes
/// throughout, and end on a hash at its last tick. Returns the demo and what the window said.
fn save_and_replay(app: &mut App, name: &str) -> (Demo, String) {
    let path = stop_into_scratch(app, name);
    let said = app
        .world()
        .resource::<contact_sandbox::sim::SimLog>()
        .info
        .clone()
        .unwrap_or_default();
    let demo = Demo::load(&path).expect("the saved demo is valid");
    assert_eq!(demo.hashes.last().map(|h| h.tick), Some(demo.ticks));
    let mut player = Player::new(demo.clone(), path.display().to_string());
    let verdict = player.run_to_end(false).expect("replays").clone();
    assert_eq!(verdict.mismatch, None, "{verdict}");
    assert_eq!(verdict.matched, demo.hashes.len());
    (demo, said)
}

/// One update of a background-stepping app that starts a batch of five ticks or more: four ticks owed, then a
/// wait for the batch and a pause twice as long as the update and the batch took. A batch takes the ticks owed,
/// as many as fit in a frame at the last cost per tick, so a frame this long leaves room for them however slow a
/// loaded machine makes the worker; and ticks are owed only while a batch runs, which a fast worker or a busy
/// machine may never let happen (with a fixed 20 ms frame, and with nothing owed, a debug build under the whole
/// suite's load took one tick per batch throughout).
fn update_with_room_for_a_batch(app: &mut App) {
    let started = std::time::Instant::now();
    app.world_mut().resource_mut::<StepInFlight>().owe(4);
    app.update();
    while app.world().resource::<StepInFlight>().worker_busy()
        && started.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(5) + 2 * started.elapsed());
}

/// The window's background stepping takes several ticks per batch; a batch must not step past the tick where
/// the recording ends, or the demo would end later than its limit with the worker's hashes after its end.
#[test]
fn a_recording_stepped_in_the_background_ends_at_its_tick_limit() {
    // Where the batches end depends on the worker's timing: a tick owed while a batch runs joins the next batch,
    // one owed after it ended starts a batch of its own. A batch that ends at the limit has nothing to cut, so
    // limits are tried in turn until one falls inside a batch (three in a row once all ended batches, in a CI
    // run's review); the first cut ends the test.
    let mut cut = 0;
    for limit in 32..=47 {
        let mut app = background_pit();
        {
            let mut recorder = app.world_mut().resource_mut::<Recorder>();
            recorder.max_ticks = limit;
            recorder.hash_every = 7;
        }
        app.world_mut().write_message(StartRecording);
        for _ in 0..40 {
            update_with_room_for_a_batch(&mut app);
        }
        let in_flight = app.world().resource::<StepInFlight>();
        assert!(in_flight.largest_batch >= 5, "{}", in_flight.largest_batch);
        cut += in_flight.cut_at_recording_limit;
        let (demo, said) = save_and_replay(&mut app, "background-limit.demo.ron");
        assert_eq!(demo.ticks, limit, "{said}");
        assert!(
            said.contains(&format!("ended at its limit of {limit} ticks")),
            "{said}"
        );
        if cut > 0 {
            return;
        }
    }
    panic!("no batch was cut at the limit in sixteen recordings");
}

/// A demo that cannot be opened leaves its error on screen until a replay starts; then it goes, and an
/// unrelated error raised meanwhile would have stayed.
#[test]
fn a_replay_that_starts_takes_an_earlier_replay_error_off_the_screen() {
    let mut app = headless(WALL_THROW);
    let missing = scratch("no-such.demo.ron");
    let _ = std::fs::remove_file(&missing);
    app.world_mut().write_message(StartReplay(missing));
    app.update();
    let error = app
        .world()
        .resource::<contact_sandbox::sim::SimLog>()
        .error
        .clone();
    assert!(
        error
            .as_deref()
            .is_some_and(|e| e.contains("no-such.demo.ron")),
        "{error:?}"
    );
    app.world_mut()
        .write_message(StartReplay(SHIPPED_DEMO.into()));
    app.update();
    assert!(app.world().get_resource::<Replay>().is_some());
    let log = app.world().resource::<contact_sandbox::sim::SimLog>();
    assert_eq!(log.error, None, "{:?}", log.errors);
}

/// An inspector edit is applied in the fixed tick, not with the messages: a full recording ends before it too.
#[test]
fn a_recording_out_of_room_ends_before_a_settings_edit() {
    let mut app = headless(BALL_PIT);
    app.world_mut().write_message(StartRecording);
    for _ in 0..3 {
        app.update();
    }
    // Set once the restart that starts the recording is behind: the frame after it counts it again (the bound
    // on a frame's actions is not an exact count).
    app.world_mut().resource_mut::<Recorder>().max_actions = 1;
    app.world_mut().write_message(SpawnBall {
        position: DVec2::new(0.0, 1.6),
        velocity: DVec2::ZERO,
        radius: 0.03,
        mass: 0.2,
    });
    for _ in 0..3 {
        app.update();
    }
    let mut query = app.world_mut().query::<(&Lane, &mut LaneSettings)>();
    for (lane, mut settings) in query.iter_mut(app.world_mut()) {
        if lane.index == 1 {
            settings.0.friction = 0.6;
        }
    }
    for _ in 0..3 {
        app.update();
    }
    let (demo, said) = save_and_replay(&mut app, "settings-limit.demo.ron");
    assert_eq!(demo.actions.len(), 1, "{said}");
    assert!(said.contains("(left out: 1)"), "{said}");
    assert!(demo.ticks >= 3, "{said}");
}

/// A recording full of actions ends before the frame whose actions would not fit, at the state before them,
/// inline and in the background: what was saved replays to the end, where the window had been.
#[test]
fn a_recording_out_of_room_for_actions_ends_before_them_and_replays() {
    for stepping in [Stepping::Inline, Stepping::Background] {
        let mut app = headless(BALL_PIT);
        app.insert_resource(stepping);
        app.world_mut().resource_mut::<Recorder>().max_actions = 6;
        app.world_mut().write_message(StartRecording);
        app.update();
        let spawn = |app: &mut App, k: u32| {
            app.world_mut().write_message(SpawnBall {
                position: DVec2::new(-0.4 + 0.09 * f64::from(k), 1.6),
                velocity: DVec2::ZERO,
                radius: 0.03,
                mass: 0.2,
            });
        };
        for k in 0..3 {
            spawn(&mut app, k);
            app.update();
            app.update();
        }
        // Pause and resume: two actions, five in all.
        app.world_mut().resource_mut::<SimControl>().toggle_pause();
        app.update();
        app.world_mut().resource_mut::<SimControl>().toggle_pause();
        app.update();
        app.update();
        let recording = app.world().resource::<Recorder>();
        let start = recording.recording.as_ref().map_or(0, |r| r.start_tick);
        assert_eq!(recording.actions(), 5, "{stepping:?}");
        // Two spawns in one frame: only one would fit, so the recording ends before both, at the tick they came
        // in (the frame's fixed ticks run before its messages).
        spawn(&mut app, 4);
        spawn(&mut app, 5);
        app.update();
        let at = app.world().resource::<SimControl>().ticks - start;
        for k in 6..9 {
            spawn(&mut app, k);
            app.update();
        }
        // The recording line stops at the end (and says so), while the lanes go on.
        let now = app.world().resource::<SimControl>().ticks;
        assert!(now - start > at, "{stepping:?}");
        assert_eq!(app.world().resource::<Recorder>().ticks(now), at);
        let (demo, said) = save_and_replay(&mut app, "action-limit.demo.ron");
        assert_eq!(demo.actions.len(), 5, "{stepping:?}");
        assert_eq!(demo.ticks, at, "{stepping:?}: {said}");
        assert!(
            said.contains(&format!(
                "the recording ended at tick {at}, before the actions that would have passed its limit of 6 \
                 (left out: 5)"
            )),
            "{stepping:?}: {said}"
        );
    }
}

/// Each lane's place and extent on screen: its offset and its bounds, by lane.
fn layout(app: &mut App) -> Vec<(DVec2, (DVec2, DVec2))> {
    let mut query = app.world_mut().query::<&Lane>();
    let mut lanes: Vec<&Lane> = query.iter(app.world()).collect();
    lanes.sort_by_key(|lane| lane.index);
    lanes
        .iter()
        .map(|lane| (lane.offset, lane.bounds))
        .collect()
}

/// A replay lays its lanes out as their run was built, wherever the balls are at the tick it lands on. A seek
/// past a restart once laid wall throw's lanes out from the ball's position at that tick: with the ball off the
/// lane's left edge, the lanes turned from one above the other to side by side.
#[test]
fn a_replay_lays_its_lanes_out_as_their_run_was_built() {
    let mut fresh = headless(WALL_THROW);
    fresh.update();
    let built = layout(&mut fresh);
    let (_, mut app) = replaying_wall_throw_script(
        "Script(ticks: 200, hash_every: 10, actions: [(tick: 99, action: Restart)])",
        "restart",
    );
    for tick in [150, 60, 199] {
        app.world_mut().resource_mut::<Replay>().seek = Some(tick);
        app.update();
        app.update();
        assert_eq!(app.world().resource::<Replay>().player.tick(), tick);
        let balls = {
            let mut query = app.world_mut().query::<&Lane>();
            query
                .iter(app.world())
                .map(|lane| lane.world.balls[0].position.x)
                .collect::<Vec<f64>>()
        };
        assert!(balls.iter().all(|&x| x > 0.01), "tick {tick}: {balls:?}");
        assert_eq!(layout(&mut app), built, "tick {tick}");
    }
}

/// Stopping a replay brings the sandbox back as it was when the replay started: the lanes with their bodies,
/// edits and plots, and the run control (it used to restart the scene with the file's settings).
#[test]
fn stopping_a_replay_restores_the_sandbox_as_it_was() {
    let mut app = headless(WALL_THROW);
    for _ in 0..20 {
        app.update();
    }
    let mut query = app.world_mut().query::<(&Lane, &mut LaneSettings)>();
    for (lane, mut settings) in query.iter_mut(app.world_mut()) {
        if lane.index == 1 {
            settings.0.kappa = 5e4;
        }
    }
    app.world_mut().write_message(SpawnBall {
        position: DVec2::new(0.1, 0.3),
        velocity: DVec2::new(1.0, 0.0),
        radius: 0.01,
        mass: 1.0,
    });
    for _ in 0..5 {
        app.update();
    }
    app.world_mut().resource_mut::<SimControl>().toggle_pause();
    app.update();
    let plotted = |app: &mut App| -> Vec<usize> {
        let mut query = app
            .world_mut()
            .query::<(&Lane, &contact_sandbox::sim::LaneDiagnostics)>();
        let mut lanes: Vec<_> = query.iter(app.world()).collect();
        lanes.sort_by_key(|(lane, _)| lane.index);
        lanes.iter().map(|(_, d)| d.history.len()).collect()
    };
    let before = (ecs_hash(&mut app), plotted(&mut app));
    assert!(before.1.iter().all(|&n| n > 20), "{:?}", before.1);
    let laid_out = layout(&mut app);

    app.world_mut()
        .write_message(StartReplay(PathBuf::from(SHIPPED_DEMO)));
    for _ in 0..30 {
        app.update();
    }
    assert_ne!(ecs_hash(&mut app), before.0, "the replay is on screen");
    // A replay opened over the first one: stopping still returns to the sandbox from before both.
    app.world_mut()
        .write_message(StartReplay(PathBuf::from(SHIPPED_DEMO)));
    for _ in 0..10 {
        app.update();
    }
    app.world_mut()
        .write_message(contact_sandbox::sim::StopReplay);
    app.update();
    app.update();
    assert!(app.world().get_resource::<Replay>().is_none());
    assert_eq!((ecs_hash(&mut app), plotted(&mut app)), before);
    // Laid out as before, not by where the balls are now.
    assert_eq!(layout(&mut app), laid_out);
    assert!(app.world().resource::<SimControl>().paused);
    let mut query = app.world_mut().query::<(&Lane, &LaneSettings)>();
    for (lane, settings) in query.iter(app.world()) {
        if lane.index == 1 {
            assert_eq!((lane.world.settings.kappa, settings.0.kappa), (5e4, 5e4));
        }
    }
}

/// A recording whose hash list is full stores no more hashes until it ends; its end's hash then takes the
/// list's last place, so the saved demo ends on a hash at its last tick and replays, whichever limit ended it.
#[test]
fn a_full_hash_list_gives_its_last_place_to_the_end_hash() {
    for limit in ["ticks", "actions"] {
        let mut app = headless(WALL_THROW);
        {
            let mut recorder = app.world_mut().resource_mut::<Recorder>();
            recorder.hash_every = 2;
            recorder.max_hashes = 4;
            if limit == "ticks" {
                recorder.max_ticks = 25;
            }
        }
        app.world_mut().write_message(StartRecording);
        for _ in 0..20 {
            app.update();
        }
        if limit == "actions" {
            app.world_mut().resource_mut::<Recorder>().max_actions = 0;
            app.world_mut().write_message(SpawnBall {
                position: DVec2::new(0.1, 0.3),
                velocity: DVec2::new(1.0, 0.0),
                radius: 0.01,
                mass: 1.0,
            });
        }
        for _ in 0..20 {
            app.update();
        }
        let (demo, said) = save_and_replay(&mut app, &format!("full-hashes-{limit}.demo.ron"));
        let ticks: Vec<u64> = demo.hashes.iter().map(|h| h.tick).collect();
        assert_eq!(ticks.len(), 4, "{limit}: {ticks:?}, {said}");
        // The first three every second tick from the start, then the end in the fourth place.
        assert_eq!(&ticks[..3], &[0, 2, 4], "{limit}: {said}");
        assert_eq!(ticks[3], demo.ticks, "{limit}: {said}");
        if limit == "ticks" {
            assert_eq!(demo.ticks, 25, "{said}");
        } else {
            assert!(demo.ticks > 6 && demo.ticks < 25, "{ticks:?}: {said}");
        }
    }
}

/// A legal name near the 255-byte limit: the temporary file beside it used to add `.` and `.tmp-PID` and fail
/// with "File name too long", blaming the folder.
#[test]
fn a_demo_saves_under_a_name_near_the_file_name_limit() {
    let name = format!("{}.demo.ron", "a".repeat(246));
    assert_eq!(name.len(), 255);
    let path = scratch("long-name").with_file_name(&name);
    let demo = wall_throw_demo();
    demo.save(&path).expect("a 255-byte name saves");
    assert_eq!(Demo::load(&path).expect("loads").hashes, demo.hashes);
    std::fs::remove_file(&path).expect("removes");
}

/// A script whose demo could not be saved is refused when it is read, not after `record` has run it: 10⁷ ticks at
/// one hash every 11 make a demo of 85 MB. The bound it uses is below every demo's size.
#[test]
fn a_script_whose_demo_would_be_too_large_is_refused_before_recording() {
    let error = Script::parse(
        "Script(ticks: 10000000, hash_every: 11, actions: [])",
        "big.script.ron",
    )
    .expect_err("too large a demo")
    .to_string();
    assert!(
        error.starts_with(
            "big.script.ron: hash_every: 10000000 ticks at one hash every 11 store 909091 hashes"
        ),
        "{error}"
    );
    assert!(error.contains("limited to 67108864 bytes"), "{error}");
    // The shipped demo is larger than the least its script's counts allow.
    let demo = wall_throw_demo();
    let text = demo.to_ron().expect("serialises");
    let least = demo.hashes.len() * 80 + demo.actions.len() * 60;
    assert!(text.len() >= least, "{} bytes against {least}", text.len());
}

/// A demo recorded before ball–wall distances were measured to the faces (physics revision 1, the ball pit's
/// first 30 ticks, recorded by the build before the change) replays with a mismatch, and the verdict says why,
/// in the text and in `replay --json`; a new recording stores this build's revision and matches.
#[test]
fn a_demo_of_an_older_physics_revision_says_why_it_differs() {
    const OLD: &str = "tests/fixtures/ball_pit.physics1.demo.ron";
    let demo = Demo::load(Path::new(OLD)).expect("the old demo loads");
    assert_eq!(demo.physics, 1, "a demo without the field is revision 1");
    let mut player = Player::new(demo, OLD);
    let verdict = player.run_to_end(true).expect("replays").clone();
    assert_eq!(verdict.older_physics, Some(1));
    let text = verdict.to_string();
    assert!(text.starts_with("MISMATCH at tick 30"), "{text}");
    assert!(
        text.ends_with(&format!(
            "; the demo was recorded with physics revision 1 and this build computes revision {} (ball–wall \
             distances to the last bit, Newton's stop beside contacts closer than its tolerance, lanes of different h \
             keeping time together, Newton's stop at the energy's rounding, and rods held on an end), so its states may \
             differ for that reason alone: record it again to verify it",
            contact_sandbox::demo::PHYSICS_REVISION
        )),
        "{text}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
        .args(["replay", OLD, "--json"])
        .output()
        .expect("the binary runs");
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("replay --json prints JSON");
    assert_eq!(json["physics_revision"], 1);
    assert_eq!(
        json["scene"], "Ball pit",
        "the scene named as run --json names it"
    );
    assert_eq!(
        json["this_build_physics_revision"],
        contact_sandbox::demo::PHYSICS_REVISION
    );
    assert_eq!(json["match"], false);
    // Recorded again, it stores this build's revision and matches.
    let script =
        Script::parse("Script(ticks: 30, hash_every: 30, actions: [])", "s.ron").expect("parses");
    let again = record_script(&scene(BALL_PIT), &script, "s.ron", |_, _| {}).expect("records");
    assert_eq!(again.physics, contact_sandbox::demo::PHYSICS_REVISION);
    let verdict = Player::new(again, "again")
        .run_to_end(true)
        .expect("replays")
        .clone();
    assert_eq!((verdict.matched, verdict.mismatch), (2, None));
    // A revision this build does not know is refused, naming the field.
    let text = std::fs::read_to_string(OLD).expect("reads");
    let newer = contact_sandbox::demo::PHYSICS_REVISION + 1;
    for (revision, says) in [(0, ""), (newer, ": a newer build recorded it")] {
        let edited = text.replacen(
            "version: 1,",
            &format!("version: 1,\n    physics: {revision},"),
            1,
        );
        let error = Demo::parse(&edited, "edited.demo.ron")
            .expect_err("an unknown revision")
            .to_string();
        assert_eq!(
            error,
            format!(
                "edited.demo.ron: physics: physics revision {revision} is not one this build knows (1 to {}){says}",
                contact_sandbox::demo::PHYSICS_REVISION
            )
        );
    }
}

/// Outside the repository the shipped demo's path replays its compiled-in copy (the window's default Replay said
/// "No such file or directory" there); any other missing demo is still an error naming it.
#[test]
fn the_shipped_demo_loads_from_its_compiled_in_copy_outside_the_repository() {
    let elsewhere = std::env::temp_dir().join(format!("cs-demo-elsewhere-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&elsewhere);
    std::fs::create_dir_all(&elsewhere).expect("a temporary directory");
    let shipped = Path::new(SHIPPED_DEMO);
    let here = Demo::load(shipped).unwrap_or_else(|e| panic!("{e}"));
    let away = Demo::load_in(&elsewhere, shipped).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(away, here);
    let other = Path::new("assets/demos/other.demo.ron");
    let error = Demo::load_in(&elsewhere, other)
        .expect_err("not the shipped demo")
        .to_string();
    assert!(error.contains("other.demo.ron"), "{error}");
    // A broken file at the shipped path is read, not replaced by the compiled-in copy.
    let broken = elsewhere.join(shipped);
    std::fs::create_dir_all(broken.parent().expect("a folder")).expect("folders");
    std::fs::write(&broken, "(version: ").expect("written");
    let error = Demo::load_in(&elsewhere, shipped)
        .expect_err("a broken file is an error")
        .to_string();
    assert!(error.contains(&broken.display().to_string()), "{error}");
    let _ = std::fs::remove_dir_all(&elsewhere);
}

/// A refusal owed to a running replay goes once the replay stops: "a demo is replaying: stop the replay to change
/// the simulation" stayed on screen after Stop replay.
#[test]
fn a_refusal_owed_to_a_replay_goes_when_the_replay_stops() {
    let mut app = headless(WALL_THROW);
    app.update();
    app.world_mut()
        .write_message(StartReplay(PathBuf::from(SHIPPED_DEMO)));
    for _ in 0..3 {
        app.update();
    }
    app.world_mut().write_message(RestartScene);
    app.update();
    let shown = app
        .world()
        .resource::<contact_sandbox::sim::SimLog>()
        .error
        .clone();
    assert!(
        shown
            .as_deref()
            .is_some_and(|e| e.contains("a demo is replaying")),
        "{shown:?}"
    );
    app.world_mut()
        .write_message(contact_sandbox::sim::StopReplay);
    app.update();
    app.update();
    assert_eq!(
        app.world().resource::<contact_sandbox::sim::SimLog>().error,
        None
    );
}

/// A recording stopped before any step (the sandbox paused throughout) is saved, and says that it holds none: a
/// review saved one unaware, and its replay showed empty plots.
#[test]
fn a_recording_of_no_step_says_so_when_saved() {
    let mut app = headless(WALL_THROW);
    app.world_mut().resource_mut::<SimControl>().toggle_pause();
    app.update();
    app.world_mut().write_message(StartRecording);
    for _ in 0..3 {
        app.update();
    }
    // It replays, to its one hash at tick 0.
    let (demo, said) = save_and_replay(&mut app, "no-step.demo.ron");
    assert!(
        said.ends_with(
            "no-step.demo.ron (0 ticks, 0 actions); it holds no step: the sandbox was paused throughout (P \
             resumes while recording)"
        ),
        "{said}"
    );
    assert_eq!(demo.ticks, 0);
}

/// Each lane's steps and the steps of the samples in its plots' history, in lane order.
fn plotted(app: &mut App) -> Vec<(u64, Vec<u64>)> {
    let mut query = app
        .world_mut()
        .query::<(&Lane, &contact_sandbox::sim::LaneDiagnostics)>();
    let mut lanes: Vec<_> = query.iter(app.world()).collect();
    lanes.sort_by_key(|(lane, _)| lane.index);
    lanes
        .iter()
        .map(|(lane, d)| {
            (
                lane.world.stats.steps,
                d.history.iter().map(|s| s.step).collect(),
            )
        })
        .collect()
}

/// A replay plots a lane's steps once each, as the sandbox does: a lane of 10 ms beside one of 1 ms gets a
/// sample on its own steps only, not on the ticks it waits (its spikes counted ten times over), and the idle
/// ticks after the run's end add nothing (they pushed the run's start out of the plots).
#[test]
fn a_replay_plots_each_lane_s_steps_once() {
    let mut mixed = scene(WALL_THROW);
    mixed.lanes[0].contact.h = 0.001;
    mixed.steps = Some(300);
    let script =
        Script::parse("Script(ticks: 400, hash_every: 50, actions: [])", "s.ron").expect("parses");
    let demo = record_script(&mixed, &script, "s.ron", |_, _| {}).expect("records");
    let path = scratch("mixed_h.demo.ron");
    demo.save(&path).expect("saves");
    let mut app = headless(WALL_THROW);
    app.update();
    app.world_mut().write_message(StartReplay(path));
    for _ in 0..420 {
        app.update();
    }
    let lanes = plotted(&mut app);
    let steps: Vec<(u64, usize)> = lanes.iter().map(|(steps, h)| (*steps, h.len())).collect();
    assert_eq!(steps, [(300, 300), (30, 30)]);
    for (_, plotted) in &lanes {
        assert!(
            plotted.windows(2).all(|pair| pair[0] < pair[1]),
            "{plotted:?}"
        );
    }
    // A seek over more ticks than a history holds keeps as many of each lane's steps: the seek's buffer held the
    // last 2 000 ticks, 100 of a 20-times coarser lane's 150 steps.
    mixed.lanes[0].contact.h = 0.0005;
    mixed.steps = Some(3000);
    let script = Script::parse("Script(ticks: 3000, hash_every: 500, actions: [])", "s.ron")
        .expect("parses");
    let demo = record_script(&mixed, &script, "s.ron", |_, _| {}).expect("records");
    let path = scratch("mixed_h_long.demo.ron");
    demo.save(&path).expect("saves");
    let mut app = headless(WALL_THROW);
    app.update();
    app.world_mut().write_message(StartReplay(path));
    app.update();
    app.world_mut().resource_mut::<Replay>().seek = Some(3000);
    app.update();
    let lanes = plotted(&mut app);
    let steps: Vec<(u64, usize)> = lanes.iter().map(|(steps, h)| (*steps, h.len())).collect();
    assert_eq!(steps, [(3000, 2000), (150, 150)]);
}

/// `record --out` a FIFO that nothing reads says that it waits for a reader, once, and then writes the whole demo
/// into it when one comes: it used to wait in silence.
#[test]
fn record_into_a_fifo_without_a_reader_says_it_waits() {
    let fifo = scratch("record-wait.fifo");
    let Some(mut command) = crate::Watched::binary_beside_fifo(&fifo) else {
        return;
    };
    command
        .args([
            "record",
            "--scene",
            "assets/scenes/wall_throw.ron",
            "--script",
            "assets/demos/wall_throw.script.ron",
            "--out",
        ])
        .arg(&fifo)
        .stdout(std::process::Stdio::piped());
    let mut record = crate::Watched::start(command, &fifo);
    let word = format!("waiting for a reader of '{}'…", fifo.display());
    record.hear(&word);
    let text = std::fs::read_to_string(&fifo).expect("reads the FIFO");
    record.finish_having_said_once(&word);
    let demo = Demo::parse(&text, "from the FIFO").expect("the whole demo came through");
    assert!(demo.ticks > 0);
}
