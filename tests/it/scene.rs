//! Scene files: the shipped scenes load, the documented example parses, and malformed scenes give one clear
//! line naming the file, the place and the problem.

use std::path::{Path, PathBuf};

use contact_sandbox::cli::run::run_scene;
use contact_sandbox::scene::Scene;

fn scenes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes")
}

#[test]
fn every_shipped_scene_loads_and_steps() {
    let mut count = 0;
    for entry in std::fs::read_dir(scenes_dir()).expect("assets/scenes") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("ron") {
            continue;
        }
        let scene = Scene::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let lanes = run_scene(&scene, 3);
        for lane in &lanes {
            assert!(lane.fault.is_none(), "{}: {:?}", path.display(), lane.fault);
        }
        count += 1;
    }
    assert!(count >= 1);
}

#[test]
fn wall_throw_scene_gives_the_seed_numbers_at_5_m_s() {
    let scene = Scene::load(&scenes_dir().join("wall_throw.ron")).expect("loads");
    let lanes = run_scene(&scene, 80);
    let penalty = &lanes[0];
    let ipc = &lanes[1];
    assert!(
        penalty.stats.tunneled > 0,
        "penalty must go through at 5 m/s"
    );
    assert_eq!(ipc.stats.tunneled, 0);
    let gap_um = ipc.stats.min_gap.expect("gap") * 1e6;
    assert!((gap_um - 24.0).abs() <= 0.05, "{gap_um}");
    assert_eq!(ipc.stats.max_newton, 9);
}

#[test]
fn the_documented_example_scene_parses() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/scenes.md"))
        .expect("docs/scenes.md");
    let start = doc.find("```ron").expect("a ```ron block") + "```ron".len();
    let end = start + doc[start..].find("```").expect("closing fence");
    let scene = Scene::parse(&doc[start..end], "docs/scenes.md").unwrap_or_else(|e| panic!("{e}"));
    assert!(scene.lanes.len() >= 2);
    let lanes = run_scene(&scene, 10);
    assert!(lanes.iter().all(|l| l.fault.is_none()));
}

const GOOD_LANE: &str = r#"LaneSpec(name: "a", contact: (method: Ipc, h: 0.01),
    walls: [WallSpec(center: (0.0, -0.5), half_extents: (2.0, 0.5))],
    balls: [BallSpec(position: (0.0, 0.2), radius: 0.1, mass: 1.0)])"#;

fn scene_with(lane: &str) -> String {
    format!("Scene(name: \"t\", lanes: [{lane}])")
}

fn error_of(text: &str) -> String {
    Scene::parse(text, "bad.ron")
        .expect_err("must be rejected")
        .to_string()
}

#[test]
fn a_good_scene_parses() {
    Scene::parse(&scene_with(GOOD_LANE), "good.ron").unwrap_or_else(|e| panic!("{e}"));
}

/// An optional value may be written bare, as in a script: `steps: 5` was refused with "Expected option".
#[test]
fn optional_values_may_be_written_bare_or_in_some() {
    let lane = |dhat: &str| GOOD_LANE.replace("h: 0.01", &format!("h: 0.01, dhat: {dhat}"));
    let bare = Scene::parse(
        &format!("Scene(name: \"t\", steps: 5, lanes: [{}])", lane("1e-3")),
        "bare.ron",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let some = Scene::parse(
        &format!(
            "Scene(name: \"t\", steps: Some(5), lanes: [{}])",
            lane("Some(1e-3)")
        ),
        "some.ron",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bare.steps, Some(5));
    assert_eq!(bare.lanes[0].contact.dhat, Some(1e-3));
    assert_eq!(bare, some);
}

/// A value RON itself refuses (a negative count, a string for a number, a tuple for a float) is named with its
/// field and the text written, not by its line and column alone.
#[test]
fn values_the_reader_refuses_are_named_with_their_field_and_text() {
    for (from, to, expected) in [
        (
            "h: 0.01",
            "h: 0.01, newton_max_iterations: -3",
            "(newton_max_iterations: -3): ",
        ),
        ("mass: 1.0", "mass: \"1.0\"", "(mass: \"1.0\"): "),
        (
            "radius: 0.1",
            "radius: (0.05, 0.0)",
            "(radius: (0.05, 0.0)): ",
        ),
        (
            "h: 0.01",
            "h: 0.01, friction_iterations: 100000000000",
            "(friction_iterations: 100000000000): ",
        ),
    ] {
        let message = error_of(&scene_with(&GOOD_LANE.replace(from, to)));
        assert!(message.starts_with("bad.ron: line "), "{message}");
        assert!(
            message.contains(expected),
            "expected {expected:?} in {message:?}"
        );
    }
    let message = error_of("Scene(name: \"t\", steps: Some(-5), lanes: [])");
    assert!(message.contains("(steps: Some(-5)): "), "{message}");
    // Comments and strings are not fields: `// note: heavy` and `name: "a: b"` name nothing.
    let message = error_of(&scene_with(
        &GOOD_LANE.replace("mass: 1.0", "// note: heavy\n mass: \"1.0\""),
    ));
    assert!(message.contains("(mass: \"1.0\"): "), "{message}");
    let message = error_of(&scene_with(
        &GOOD_LANE
            .replace("name: \"a\"", "name: \"a: \\\"b\"")
            .replace("h: 0.01", "h: -"),
    ));
    assert!(message.contains("(h: -): "), "{message}");
    // An error that is not about a value (an unknown field, a missing one) names no field: the one before it
    // is not what it is about.
    for text in [
        scene_with(&GOOD_LANE.replace("h: 0.01", "h: 0.01, frobnicate: 3")),
        scene_with(&GOOD_LANE.replace("radius: 0.1, mass: 1.0", "radius: 0.1, mas: 1.0")),
    ] {
        let message = error_of(&text);
        assert!(!message.contains(" ("), "{message}");
        assert!(message.contains(", column "), "{message}");
    }
}

#[test]
fn malformed_scenes_name_the_file_the_place_and_the_problem() {
    let cases: Vec<(String, &str)> = vec![
        (scene_with(&GOOD_LANE.replace("balls: [", "balls: [[")), "line"),
        (scene_with(&GOOD_LANE.replace("method: Ipc", "method: Magic")), "Magic"),
        (scene_with(&GOOD_LANE.replace("mass: 1.0", "mass: -1.0")), "lanes[0].balls[0].mass"),
        (scene_with(&GOOD_LANE.replace("h: 0.01", "h: 0.0")), "lanes[0].contact.h"),
        (scene_with(&GOOD_LANE.replace("h: 0.01", "h: 0.01, dhat: Some(-1e-3)")), "lanes[0].contact.dhat"),
        (scene_with(&GOOD_LANE.replace("h: 0.01", "h: 0.01, kappa: 0.0")), "lanes[0].contact.kappa"),
        (scene_with(&GOOD_LANE.replace("h: 0.01", "h: 0.01, stiffness: -5.0")), "lanes[0].contact.stiffness"),
        (scene_with(&GOOD_LANE.replace("radius: 0.1", "radius: NaN")), "lanes[0].balls[0].radius"),
        (scene_with(&GOOD_LANE.replace("(0.0, 0.2)", "(inf, 0.2)")), "lanes[0].balls[0].position.x"),
        (scene_with(&GOOD_LANE.replace("(0.0, 0.2)", "(0.0, 0.05)")), "wall 0"),
        (
            scene_with(&GOOD_LANE.replace(
                "BallSpec(position: (0.0, 0.2), radius: 0.1, mass: 1.0)",
                "BallSpec(position: (0.0, 0.2), radius: 0.1), BallSpec(position: (0.15, 0.2), radius: 0.1)",
            )),
            "lanes[0].balls[1]",
        ),
        (scene_with(&GOOD_LANE.replace("half_extents: (2.0, 0.5)", "half_extents: (0.0, 0.5)")), "half_extents.x"),
        (scene_with(&GOOD_LANE.replace("h: 0.01", "h: 0.01, ccd_factor: 1.0")), "ccd_factor"),
        (scene_with(&GOOD_LANE.replace("h: 0.01", "h: 0.01, colour: 3")), "colour"),
        (scene_with(&GOOD_LANE.replace("h: 0.01", "h: 1e300")), "lanes[0].contact.h: must be at most 10 s"),
        (
            scene_with(&GOOD_LANE.replace("h: 0.01", "h: 1e999")),
            "lanes[0].contact.h: must be a finite number, got inf (a number beyond ±1.8e308",
        ),
        (scene_with(&GOOD_LANE.replace("h: 0.01", "h: 1e-300")), "lanes[0].contact.h: must be at least 1e-6 s"),
        (
            format!("Scene(name: \"t\", steps: Some(1000000000000), lanes: [{GOOD_LANE}])"),
            "bad.ron: steps: must be between 1 and 10000000, got 1000000000000",
        ),
        (
            scene_with(&GOOD_LANE.replace("h: 0.01", "h: 0.01, gravity: (0.0, -1e308)")),
            "lanes[0].contact.gravity.y: must be within",
        ),
        (
            scene_with(&GOOD_LANE.replace("h: 0.01", "h: 0.01, newton_tolerance: 1e300")),
            "lanes[0].contact.newton_tolerance: must be at most 1 m",
        ),
        (
            scene_with(&GOOD_LANE.replace(
                "balls: [",
                "rods: [RodSpec(center: (0.0, 1.0), angle: 0.0, length: 0.5, mass: 1.0, restitution: 0.5, \
                 velocity: (0.0, -1e300))], balls: [",
            )),
            "lanes[0].rods[0].velocity.y",
        ),
        (
            scene_with(&GOOD_LANE.replace(
                "balls: [",
                "rods: [RodSpec(center: (0.0, 1.0), angle: 0.0, length: 0.5, mass: 1.0, restitution: 0.5, \
                 omega: 1e300)], balls: [",
            )),
            "lanes[0].rods[0].omega",
        ),
        // An ε_v of 1e-200 m/s underflowed in the friction terms, and the lane froze without a fault.
        (
            scene_with(&GOOD_LANE.replace("h: 0.01", "h: 0.01, friction: 0.5, friction_epsilon_v: 1e-200")),
            "lanes[0].contact.friction_epsilon_v: must be between 1e-9 m/s and 1000 m/s, got 1e-200 m/s",
        ),
        (
            scene_with(&GOOD_LANE.replace("mass: 1.0", "mass: 1e300")),
            "lanes[0].balls[0].mass: must be between 1e-6 kg and 1e6 kg",
        ),
        (scene_with(&GOOD_LANE.replace("mass: 1.0", "mass: 1e-300")), "lanes[0].balls[0].mass"),
        (format!("Scene(name: \"t\", lanes: [{}])", vec![GOOD_LANE; 65].join(",")), "at most 64"),
        ("Scene(name: \"t\", lanes: [])".to_string(), "at least one lane"),
        (String::new(), "line"),
    ];
    for (text, needle) in cases {
        let message = error_of(&text);
        assert!(message.starts_with("bad.ron: "), "{message}");
        assert!(
            message.contains(needle),
            "expected {needle:?} in {message:?}"
        );
        assert_eq!(message.lines().count(), 1, "{message}");
    }
}

/// μ has one upper bound, `MAX_FRICTION`, for scene files and the window's μ field: a scene file could ask for
/// μ = 50 that the window's field refused.
#[test]
fn a_friction_beyond_the_limit_is_refused_with_the_file_field_and_value() {
    use contact_sandbox::scene::MAX_FRICTION;
    assert_eq!(MAX_FRICTION, 10.0);
    for (setting, expected) in [
        (
            "friction: 50.0",
            "bad.ron: lanes[0].contact.friction: must be between 0 and 10, got 50",
        ),
        (
            "friction: 10.5",
            "bad.ron: lanes[0].contact.friction: must be between 0 and 10, got 10.5",
        ),
        (
            "friction: -0.1",
            "bad.ron: lanes[0].contact.friction: must be between 0 and 10, got -0.1",
        ),
    ] {
        let text = scene_with(&GOOD_LANE.replace("h: 0.01", &format!("h: 0.01, {setting}")));
        assert_eq!(error_of(&text), expected, "{setting}");
    }
    for setting in ["friction: 0.0", "friction: 0.5", "friction: 10.0"] {
        let text = scene_with(&GOOD_LANE.replace("h: 0.01", &format!("h: 0.01, {setting}")));
        Scene::parse(&text, "good.ron").unwrap_or_else(|e| panic!("{setting}: {e}"));
    }
}

#[test]
fn penalty_lanes_accept_overlapping_starts_that_ipc_refuses() {
    let text = scene_with(
        &GOOD_LANE
            .replace("method: Ipc", "method: Penalty")
            .replace("(0.0, 0.2)", "(0.0, 0.05)"),
    );
    Scene::parse(&text, "pen.ron").unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_binary_rejects_five_malformed_scene_files_with_one_line_each() {
    let dir =
        std::env::temp_dir().join(format!("contact-sandbox-bad-scenes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bad = [
        ("syntax.ron", "Scene(name: \"t\", lanes: [".to_string()),
        (
            "method.ron",
            scene_with(&GOOD_LANE.replace("method: Ipc", "method: Springs")),
        ),
        (
            "mass.ron",
            scene_with(&GOOD_LANE.replace("mass: 1.0", "mass: 0.0")),
        ),
        (
            "nan.ron",
            scene_with(&GOOD_LANE.replace("h: 0.01", "h: NaN")),
        ),
        (
            "inside.ron",
            scene_with(&GOOD_LANE.replace("(0.0, 0.2)", "(0.5, -0.3)")),
        ),
    ];
    let exe = env!("CARGO_BIN_EXE_contact-sandbox");
    for (name, text) in bad {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        let out = std::process::Command::new(exe)
            .args(["run", "--scene"])
            .arg(&path)
            .output()
            .expect("runs");
        assert!(!out.status.success(), "{name} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim_end().lines().count(), 1, "{name}: {stderr}");
        assert!(stderr.contains(name), "{name}: {stderr}");
    }
    let out = std::process::Command::new(exe)
        .args(["run", "--scene", "/definitely/not/here.ron"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    // A file name's newline, escape sequence or right-to-left override is written escaped: one line, and nothing
    // that drives the terminal.
    for (name, escaped) in [
        ("a\nb.ron", "a\\nb.ron"),
        ("t\u{1b}]0;pwned\u{7}.ron", "t\\u{1b}]0;pwned\\u{7}.ron"),
        ("r\u{202e}nor.ron", "r\\u{202e}nor.ron"),
    ] {
        let out = std::process::Command::new(exe)
            .args(["run", "--scene"])
            .arg(dir.join(name))
            .output()
            .expect("runs");
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr:?}");
        assert!(stderr.contains(escaped), "{stderr:?}");
        assert!(
            !stderr.contains('\u{1b}') && !stderr.contains('\u{202e}'),
            "{stderr:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_endless_device_is_read_only_up_to_the_size_limit() {
    let e = Scene::load(Path::new("/dev/zero")).expect_err("endless zeros are not a scene");
    let text = e.to_string();
    assert!(text.contains("/dev/zero"), "{text}");
    assert!(text.contains("more than 67108864 bytes"), "{text}");
}

/// `run --scene` on a FIFO that nothing writes to yet says that it waits, then reads the scene once one does.
#[cfg(unix)]
#[test]
fn a_scene_fifo_without_a_writer_is_waited_for_with_a_word() {
    let path =
        std::env::temp_dir().join(format!("contact-sandbox-scene-{}.fifo", std::process::id()));
    let Some(mut command) = crate::Watched::binary_beside_fifo(&path) else {
        return;
    };
    command
        .args(["run", "--steps", "1", "--scene"])
        .arg(&path)
        .stdout(std::process::Stdio::piped());
    let mut run = crate::Watched::start(command, &path);
    let word = format!("waiting for something to write into '{}'…", path.display());
    run.hear(&word);
    let scene = std::fs::read(scenes_dir().join("wall_throw.ron")).expect("reads");
    std::fs::write(&path, scene).expect("writes into the FIFO");
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut run.child.stdout.take().expect("piped"), &mut stdout)
        .expect("reads its output");
    run.finish_having_said_once(&word);
    assert!(stdout.contains("scene \"Wall throw\""), "{stdout}");
}

#[test]
fn a_heap_of_coincident_balls_is_refused_quickly_in_a_scene_and_when_spawned() {
    use contact_sandbox::physics::geometry::Ball;
    use contact_sandbox::physics::world::{MAX_OVERLAPS_PER_SPAWN, SpawnError};
    // 20 000 balls at one spot: 200 million overlapping pairs. Listing them took 12 GB.
    let ball = "BallSpec(position: (0.0, 0.2), radius: 0.1, mass: 1.0)";
    let heap = vec![ball; 20_000].join(",");
    let text = scene_with(
        &GOOD_LANE
            .replace("method: Ipc", "method: Penalty")
            .replace(ball, &heap),
    );
    let message = error_of(&text);
    assert!(
        message.contains("more than 160000 pairs of balls overlap"),
        "{message}"
    );
    assert!(message.contains("lanes[0].balls"), "{message}");
    // Spawned one by one into a penalty lane: the ball that would overlap too many is refused.
    let scene = Scene::parse(
        &scene_with(&GOOD_LANE.replace("method: Ipc", "method: Penalty")),
        "pen.ron",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut lane = scene.lanes[0].build();
    let spawn = Ball {
        position: glam::DVec2::new(0.0, 0.2),
        velocity: glam::DVec2::ZERO,
        radius: 0.1,
        mass: 1.0,
    };
    // The scene's ball and these make MAX + 1: the last of them overlaps MAX, the most allowed.
    for _ in 0..MAX_OVERLAPS_PER_SPAWN {
        lane.add_ball(spawn)
            .expect("overlapping a few balls is allowed under penalty");
    }
    assert_eq!(lane.add_ball(spawn), Err(SpawnError::OverlapsTooMany));
}

#[test]
fn a_byte_order_mark_before_a_scene_is_not_part_of_it() {
    let text = std::fs::read_to_string("assets/scenes/wall_throw.ron").expect("reads");
    let path = std::env::temp_dir().join(format!("contact-sandbox-bom-{}.ron", std::process::id()));
    std::fs::write(&path, format!("\u{feff}{text}")).expect("writes");
    let scene = Scene::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(scene.name, "Wall throw");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_run_reports_its_progress_and_the_same_lanes() {
    use contact_sandbox::cli::run::{run_scene_measured, run_scene_measured_with};
    let scene = Scene::load(Path::new("assets/scenes/wall_throw.ron")).expect("loads");
    let mut seen = Vec::new();
    let with = run_scene_measured_with(&scene, 600, |done| seen.push(done));
    assert_eq!(seen.last(), Some(&1200), "two lanes of 600 steps");
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(seen.len() >= 4, "{seen:?}");
    let without = run_scene_measured(&scene, 600);
    for ((a, _), (b, _)) in with.iter().zip(&without) {
        let bits = |l: &contact_sandbox::physics::world::LaneWorld| {
            l.balls
                .iter()
                .map(|b| (b.position.x.to_bits(), b.position.y.to_bits()))
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(a), bits(b));
    }
}

/// `run --json` writes its object a ball at a time; the bytes are those of the whole report serialised at once:
/// every lane's fields, the balls with their slope checks, the rods, and the scene's name with a quote to
/// escape.
#[test]
fn run_json_streamed_a_ball_at_a_time_is_the_report_serialised_whole() {
    use contact_sandbox::cli::run::{
        WithParts, lane_json, lane_streamed, run_report, run_scene_measured,
    };
    use contact_sandbox::cli::stdout::json_to;
    for (file, steps) in [
        ("slope.ron", 400),
        ("rod_drop.ron", 90),
        ("ball_pit.ron", 30),
    ] {
        let mut scene = Scene::load(&scenes_dir().join(file)).expect("loads");
        scene.name.push_str(" \"quoted\"");
        let lanes = run_scene_measured(&scene, steps);
        let whole = serde_json::json!({
            "scene": scene.name,
            "lanes": lanes.iter().map(|(lane, half)| lane_json(lane, half)).collect::<Vec<_>>(),
        });
        let mut streamed = Vec::new();
        json_to(&mut streamed, &run_report(&scene.name, &lanes), false).expect("writes to memory");
        let streamed = String::from_utf8(streamed).expect("UTF-8");
        assert_eq!(streamed, format!("{whole}\n"), "{file}");
        let key = match file {
            "slope.ron" => "\"slope\":{",
            "rod_drop.ron" => "\"omega\":",
            _ => "\"tunneled\":false",
        };
        assert!(streamed.contains(key), "{file}: no {key} in {streamed}");
        // Pretty, with fields added to each lane, as `replay --json` writes it.
        let more = |lane: &mut serde_json::Value| lane["outcome"] = "words".into();
        let lanes_whole: Vec<_> = lanes
            .iter()
            .map(|(lane, half)| {
                let mut whole = lane_json(lane, half);
                more(&mut whole);
                whole
            })
            .collect();
        let lanes_streamed: Vec<_> = lanes
            .iter()
            .map(|(lane, half)| lane_streamed(lane, half, more))
            .collect();
        let report = WithParts::new(
            serde_json::json!({"ticks": 7}),
            vec![("lanes", &lanes_streamed)],
        );
        assert_eq!(
            serde_json::to_string_pretty(&report).expect("serialises"),
            serde_json::to_string_pretty(&serde_json::json!({"ticks": 7, "lanes": lanes_whole}))
                .expect("serialises"),
            "{file}"
        );
    }
}

#[test]
fn a_pile_reports_its_contacts_and_a_single_throw_where_it_stopped() {
    use contact_sandbox::sim::lane_outcome;
    let pit = Scene::load(Path::new("assets/scenes/ball_pit.ron")).expect("loads");
    let lanes = run_scene(&pit, 300);
    let outcomes: Vec<String> = lanes.iter().map(lane_outcome).collect();
    // The overlap now and the record so far, told apart.
    assert!(
        outcomes[0].starts_with("in contact, overlap ")
            && outcomes[0].contains(" now, deepest so far "),
        "{outcomes:?}"
    );
    assert!(
        outcomes[1].starts_with("in contact, closest gap so far "),
        "{outcomes:?}"
    );
    // The gauntlet's IPC balls bounce off their walls and drift back: after 10 s none is in contact any more.
    let gauntlet = Scene::load(Path::new("assets/scenes/gauntlet.ron")).expect("loads");
    let lanes = run_scene(&gauntlet, 1000);
    let ipc = lane_outcome(&lanes[1]);
    assert!(
        ipc.starts_with("contact ended, closest gap so far "),
        "{ipc}"
    );
    let throw = Scene::load(Path::new("assets/scenes/wall_throw.ron")).expect("loads");
    let lanes = run_scene(&throw, 80);
    assert_eq!(lane_outcome(&lanes[0]), "through");
    assert!(
        lane_outcome(&lanes[1]).starts_with("turned back "),
        "{}",
        lane_outcome(&lanes[1])
    );
    // Under gravity the IPC ball meets the wall, then falls past it: it left contact, it was not turned back (the
    // lane said "stopped at 24.0 µm short" while the ball fell away). The penalty ball at 1 m/s bounces back.
    let mut falling = throw.clone();
    for lane in &mut falling.lanes {
        lane.contact.gravity = contact_sandbox::physics::DVec2::new(0.0, -9.81);
    }
    let lanes = run_scene(&falling, 80);
    let ipc = lane_outcome(&lanes[1]);
    assert!(
        ipc.starts_with("left contact after coming within "),
        "{ipc}"
    );
    assert!(ipc.contains(", moving at "), "{ipc}");
    let slow = contact_sandbox::demo::thrown_scene(&throw, 1.0, (None, None, None), None, "t")
        .expect("a throw at 1 m/s");
    let lanes = run_scene(&slow, 80);
    assert!(
        lane_outcome(&lanes[0]).starts_with("turned back "),
        "{}",
        lane_outcome(&lanes[0])
    );
    // At 1 m/s with h = 5 ms, 80 steps end 0.1 m short of the wall (the window's throw runs 160): "flying" while
    // the run goes on, and "never reached the wall" (as `throw` says) once it is over.
    let short =
        contact_sandbox::demo::thrown_scene(&throw, 1.0, (Some(0.005), None, None), None, "t")
            .expect("a throw at 1 m/s");
    let lanes = run_scene(&short, 80);
    for lane in &lanes {
        assert_eq!(lane_outcome(lane), "flying");
        assert_eq!(
            contact_sandbox::sim::lane_outcome_of_run(lane, true),
            "never reached the wall"
        );
    }
}

#[test]
fn a_lane_of_rods_says_where_its_rods_are_not_a_ball_word() {
    use contact_sandbox::sim::{lane_outcome, lane_summary};
    let rods = Scene::load(Path::new("assets/scenes/rod_drop.ron")).expect("loads");
    let lanes = run_scene(&rods, 1);
    assert_eq!(lane_outcome(&lanes[0]), "4 rods: 4 in flight");
    assert!(
        lane_summary(&lanes[0]).starts_with("0 impacts"),
        "{}",
        lane_summary(&lanes[0])
    );
    // Twelve seconds later every rod lies on the floor, after its impacts.
    let lanes = run_scene(&rods, 1200);
    assert_eq!(lane_outcome(&lanes[0]), "4 rods: 4 lying on the floor");
    assert!(
        !lane_summary(&lanes[0]).starts_with("0 impacts"),
        "{}",
        lane_summary(&lanes[0])
    );
}

#[test]
fn every_shipped_scene_can_be_picked_in_the_window() {
    use contact_sandbox::sim::BUILT_IN_SCENES;
    let mut shipped: Vec<String> = std::fs::read_dir("assets/scenes")
        .expect("the scenes folder")
        .filter_map(|entry| entry.ok())
        .map(|entry| format!("assets/scenes/{}", entry.file_name().to_string_lossy()))
        .filter(|path| path.ends_with(".ron"))
        .collect();
    shipped.sort();
    let mut listed: Vec<String> = BUILT_IN_SCENES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(listed, shipped);
}

/// The window finds its scenes from any working directory: each built-in path's compiled-in text is that file's.
#[test]
fn the_compiled_in_scenes_are_the_shipped_files() {
    use contact_sandbox::sim::{BUILT_IN_SCENES, built_in_text};
    for path in BUILT_IN_SCENES {
        let on_disk = std::fs::read_to_string(path).expect("a shipped scene");
        assert_eq!(
            built_in_text(Path::new(path)),
            Some(on_disk.as_str()),
            "{path}"
        );
    }
    assert_eq!(built_in_text(Path::new("assets/scenes/none.ron")), None);
}

#[test]
fn a_ball_sliding_along_a_slope_is_not_called_stopped() {
    use contact_sandbox::sim::lane_outcome;
    let slope = Scene::load(Path::new("assets/scenes/slope.ron")).expect("loads");
    let lanes = run_scene(&slope, 400);
    let outcomes: Vec<String> = lanes.iter().map(lane_outcome).collect();
    // μ = 0.49 < tan 26.6° slides; μ = 0.5 sticks (SPEC §1.5).
    assert!(
        outcomes[0].starts_with("in contact, moving at "),
        "{outcomes:?}"
    );
    assert!(
        outcomes[1].starts_with("at rest in contact, gap "),
        "{outcomes:?}"
    );
}

/// A rod whose lower end starts below the floor is refused (it used to be lifted out at the first step, a
/// 1 m jump reported as "max sink 1 m"), and so is a floor beyond the ±1e6 m every coordinate keeps to. Values
/// are quoted compactly, in the balls' words ("…, got X").
#[test]
fn rods_below_the_floor_and_far_floors_are_refused_with_compact_values() {
    let rod_lane = |rod: &str, floor: &str| {
        scene_with(&format!(
            r#"LaneSpec(name: "r", rods: [RodSpec({rod})], rod_floor_y: {floor})"#
        ))
    };
    for (text, expected) in [
        (
            rod_lane("center: (0, -1), length: 1", "0.0"),
            "bad.ron: lanes[0].rods[0]: starts with its lower end 1.000 m below the floor (rod_floor_y = 0 m)",
        ),
        (
            rod_lane(
                "center: (0, 0.2), angle: 1.5707963267948966, length: 1",
                "0.0",
            ),
            "bad.ron: lanes[0].rods[0]: starts with its lower end 300.00 mm below the floor (rod_floor_y = 0 m)",
        ),
        (
            rod_lane("center: (0, 2), length: 1", "2.5"),
            "bad.ron: lanes[0].rods[0]: starts with its lower end 500.00 mm below the floor (rod_floor_y = 2.5 m)",
        ),
        (
            rod_lane("center: (0, 1), length: 1", "1e300"),
            "bad.ron: lanes[0].rod_floor_y: must be within ±1e6 m (gaps of micrometres are not resolved beyond \
             that), got 1e300",
        ),
        (
            rod_lane("center: (0, 1e300), length: 1", "0"),
            "bad.ron: lanes[0].rods[0].center.y: must be within ±1e6 m, got 1e300",
        ),
        (
            rod_lane("center: (0, 1), length: -2", "0"),
            "bad.ron: lanes[0].rods[0].length: must be at least 1e-6 m, got -2",
        ),
        // At or below 0 is told the range, as below it is (it read "must be > 0").
        (
            rod_lane("center: (0, 0.5), angle: 0.5, length: 1, mass: -1", "0"),
            "bad.ron: lanes[0].rods[0].mass: must be between 1e-6 kg and 1e6 kg, got -1",
        ),
        // A rod with no inertia a double can hold gave NaN everywhere at its first step; mass had no bounds.
        (
            rod_lane(
                "center: (0, 0.5), angle: 0.5, length: 1e-300, omega: 3",
                "0",
            ),
            "bad.ron: lanes[0].rods[0].length: must be at least 1e-6 m, got 1e-300",
        ),
        (
            rod_lane("center: (0, 0.5), angle: 0.5, length: 1, mass: 1e-320", "0"),
            "bad.ron: lanes[0].rods[0].mass: must be between 1e-6 kg and 1e6 kg, got 1e-320",
        ),
        (
            rod_lane(
                "center: (0, 1e5), angle: 0.5, length: 1, mass: 1.7e308",
                "0",
            ),
            "bad.ron: lanes[0].rods[0].mass: must be between 1e-6 kg and 1e6 kg, got 1.7e308",
        ),
        (
            scene_with(&GOOD_LANE.replace("(0.0, 0.2)", "(0.0, -1e300)")),
            "bad.ron: lanes[0].balls[0].position.y: must be within ±1e6 m (gaps of micrometres are not resolved \
             beyond that), got -1e300",
        ),
    ] {
        let message = error_of(&text);
        assert!(message.starts_with(expected), "{message}");
        assert!(message.len() < 240, "{message}");
    }
    // Resting on the floor, flat or tilted, is fine.
    for rod in [
        "center: (0, 0), length: 1",
        "center: (0, 0.5), angle: 1.5707963267948966, length: 1",
        "center: (0, 0.14776010333066977), angle: 0.3, length: 1",
    ] {
        Scene::parse(&rod_lane(rod, "0.0"), "good.ron").unwrap_or_else(|e| panic!("{rod}: {e}"));
    }
}

/// d̂, k and κ have physical bounds: d̂ from 1 nm to 1 m, k and κ at most 1e12. The message names the field, the
/// range and the value.
#[test]
fn contact_stiffnesses_and_barrier_distances_beyond_their_bounds_are_refused() {
    for (setting, expected) in [
        (
            "dhat: Some(1e300)",
            "lanes[0].contact.dhat: must be between 1e-9 m and 1 m, got 1e300 m",
        ),
        (
            "dhat: Some(1e-20)",
            "lanes[0].contact.dhat: must be between 1e-9 m and 1 m, got 1e-20 m",
        ),
        (
            "dhat: Some(2.0)",
            "lanes[0].contact.dhat: must be between 1e-9 m and 1 m, got 2 m",
        ),
        (
            "stiffness: 1e300",
            "lanes[0].contact.stiffness: must be > 0 and at most 1e12 N/m, got 1e300 N/m",
        ),
        (
            "kappa: 1e13",
            "lanes[0].contact.kappa: must be > 0 and at most 1e12, got 1e13",
        ),
        (
            "kappa: -1",
            "lanes[0].contact.kappa: must be > 0 and at most 1e12, got -1",
        ),
    ] {
        let text = scene_with(&GOOD_LANE.replace("h: 0.01", &format!("h: 0.01, {setting}")));
        let message = error_of(&text);
        assert_eq!(message, format!("bad.ron: {expected}"));
    }
    for setting in [
        "dhat: Some(1e-9)",
        "dhat: Some(1.0)",
        "kappa: 1e12",
        "stiffness: 1e12",
    ] {
        let text = scene_with(&GOOD_LANE.replace("h: 0.01", &format!("h: 0.01, {setting}")));
        Scene::parse(&text, "good.ron").unwrap_or_else(|e| panic!("{setting}: {e}"));
    }
}

/// A shipped scene opened by another spelling of its path (absolute, `./…`) is the catalogue's entry, not a second
/// one; another file is added once.
#[test]
fn the_scene_menu_lists_a_file_once_however_its_path_is_spelled() {
    use contact_sandbox::sim::{BUILT_IN_SCENES, SceneCatalogue};
    let mut catalogue = SceneCatalogue {
        paths: BUILT_IN_SCENES
            .iter()
            .map(std::path::PathBuf::from)
            .collect(),
    };
    let shipped = Path::new("assets/scenes/ball_pit.ron");
    let absolute = std::fs::canonicalize(shipped).expect("the shipped scene exists");
    for spelling in [
        absolute.clone(),
        Path::new("./assets/scenes/ball_pit.ron").into(),
    ] {
        assert_eq!(catalogue.add(&spelling), shipped, "{}", spelling.display());
        assert_eq!(catalogue.paths.len(), BUILT_IN_SCENES.len());
    }
    let other = std::env::temp_dir().join(format!("cs-catalogue-{}.ron", std::process::id()));
    std::fs::write(&other, "").expect("a scratch file");
    assert_eq!(catalogue.add(&other), other);
    assert_eq!(catalogue.add(&other), other);
    assert_eq!(catalogue.paths.len(), BUILT_IN_SCENES.len() + 1);
    let _ = std::fs::remove_file(&other);
}

/// `run` runs every lane for the same time, `--steps` of the smallest h: a lane of 3 ms beside one of 1 ms takes
/// the steps that fit and is noted when it ends short; a lane whose h is longer than the run takes none, is
/// noted, and reports no Newton counts (`null`, not 0).
#[test]
fn run_keeps_lanes_of_different_h_together_and_notes_a_lane_that_ends_short() {
    use contact_sandbox::cli::run::{
        HalfwaySnapshot, lane_json, lane_steps, run_scene, short_lane_notes,
    };
    let mut scene =
        Scene::load(&scenes_dir().join("wall_throw.ron")).expect("the shipped scene loads");
    scene.lanes[0].contact.h = 0.001;
    scene.lanes[1].contact.h = 0.003;
    assert_eq!(lane_steps(&scene, 80), [80, 26]);
    let lanes = run_scene(&scene, 80);
    assert_eq!((lanes[0].stats.steps, lanes[1].stats.steps), (80, 26));
    let notes = short_lane_notes(lanes.iter(), 0.08, 80);
    assert_eq!(
        notes,
        [
            "lane 'ipc dhat=1mm' ends at 0.078 s, before the run's 0.08 s (80 steps of h = 0.001 s): its h = 0.003 \
          s does not divide it"
        ]
    );
    scene.lanes[1].contact.h = 0.7;
    let lanes = run_scene(&scene, 80);
    assert_eq!(lanes[1].stats.steps, 0);
    assert_eq!(
        short_lane_notes(lanes.iter(), 0.08, 80),
        [
            "lane 'ipc dhat=1mm' takes no step: its h = 0.7 s is longer than the run's 0.08 s (80 steps of h = \
          0.001 s)"
        ]
    );
    let half = HalfwaySnapshot::default();
    let json = lane_json(&lanes[1], &half);
    assert!(
        json["max_newton"].is_null() && json["mean_newton"].is_null(),
        "{json}"
    );
    assert_eq!(lane_json(&lanes[0], &half)["max_newton"], 2);
    // Lanes of one h end together and are not noted.
    scene.lanes[1].contact.h = 0.001;
    assert!(short_lane_notes(run_scene(&scene, 80).iter(), 0.08, 80).is_empty());
}

/// `run`'s text quotes the scene's and the lanes' names with their quotes and backslashes escaped, so a name
/// cannot end its quotes early, and everything else as written.
#[test]
fn run_quotes_names_with_quotes_in_them() {
    let dir = std::env::temp_dir().join(format!("cs-quoted-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let path = dir.join("quoted.ron");
    let text = r#"Scene(name: "say \"hi\" \\ now", lanes: [LaneSpec(name: "the \"IPC\" one, d̂=1mm", contact: (method: Ipc, h: 0.01),
    walls: [WallSpec(center: (0.0, -0.5), half_extents: (2.0, 0.5))],
    balls: [BallSpec(position: (0.0, 0.2), radius: 0.1, mass: 1.0)])])"#;
    std::fs::write(&path, text).expect("writes the scene");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
        .args(["run", "--steps", "2", "--scene"])
        .arg(&path)
        .output()
        .expect("runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains(r#"scene "say \"hi\" \\ now""#), "{stdout}");
    assert!(
        // The d̂ (d and a combining circumflex) as written: `{:?}` wrote "d\u{302}".
        stdout.contains("lane \"the \\\"IPC\\\" one, d\u{302}=1mm\" (ipc)"),
        "{stdout}"
    );
}

/// A scene, a script or a demo cut short says so: RON alone reported a truncated scene as "Expected opening `(`
/// for struct `BallSpec`", which reads as a mistake in the text. A file whose brackets all close gets no such
/// word, whatever its error.
#[test]
fn a_file_cut_short_is_said_to_be_cut_short() {
    let whole = std::fs::read_to_string(scenes_dir().join("ball_pit.ron")).expect("reads");
    let start = whole.find("Scene(").expect("the scene's start");
    let mut said = 0;
    for cut in (start + 7..whole.trim_end().len() - 1).step_by(37) {
        let Some(text) = whole.get(..cut) else {
            continue;
        };
        let error = Scene::parse(text, "cut.ron")
            .expect_err("a scene cut short is refused")
            .to_string();
        assert!(error.starts_with("cut.ron: "), "{error}");
        assert!(
            error.contains("still open: is it cut short?"),
            "cut at {cut}: {error}"
        );
        said += 1;
    }
    assert!(said > 10, "{said} cuts");
    let one =
        error_of(r#"Scene(name: "t", lanes: [LaneSpec(name: "a", contact: (method: Ipc, h: 0.01)"#);
    assert!(
        one.contains("(the file ends with 3 brackets still open"),
        "{one}"
    );
    // A `]` typed for a `)` in the middle of a whole file leaves brackets open too, but the read fails there, not
    // at the end: no such word.
    let mistyped =
        scene_with(&GOOD_LANE.replace("half_extents: (2.0, 0.5))]", "half_extents: (2.0, 0.5)]]"));
    let error = error_of(&mistyped);
    assert!(!error.contains("cut short"), "{error}");
    // Brackets in strings and comments do not count; a complete file with a mistake gets no such word.
    let whole_but_wrong = scene_with(&GOOD_LANE.replace("h: 0.01", "h: \"(\"")) + " // [(";
    let error = error_of(&whole_but_wrong);
    assert!(!error.contains("cut short"), "{error}");
    let script = contact_sandbox::demo::Script::parse("Script(ticks: 10, actions: [", "s.ron")
        .expect_err("refused")
        .to_string();
    assert!(script.contains("2 brackets still open"), "{script}");
}

/// A ball that tunnels out of a penalty lane and falls on under gravity no longer drives the lane's fastest speed
/// (the pre-flight's v): it used to grow without end, to "v·h = 3788 mm" in a pit whose balls all rested.
#[test]
fn a_ball_fallen_through_the_floor_does_not_drive_the_lane_s_fastest_speed() {
    let text = r#"Scene(name: "t", lanes: [LaneSpec(name: "a", contact: (method: Penalty, h: 0.01, stiffness: 1e3, gravity: (0.0, -9.81)),
    walls: [WallSpec(center: (0.0, -0.01), half_extents: (2.0, 0.01))],
    balls: [BallSpec(position: (0.0, 0.5), radius: 0.01, mass: 1.0, velocity: (0.0, -20.0))])])"#;
    let mut lanes = Scene::parse(text, "t.ron").expect("parses").build();
    let lane = &mut lanes[0];
    lane.measure_gaps();
    let mut speed_at_tunnel = None;
    for _ in 0..300 {
        lane.step();
        if lane.ball_tunneled(0) && speed_at_tunnel.is_none() {
            speed_at_tunnel = Some(lane.stats.max_speed);
        }
    }
    let at_tunnel = speed_at_tunnel.expect("the soft floor lets the 20 m/s ball through");
    let now = lane.balls[0].velocity.length();
    assert!(now > at_tunnel + 20.0, "it falls on: {now} m/s");
    assert_eq!(
        lane.stats.max_speed, at_tunnel,
        "falling on after it went through"
    );
    assert!((20.0..21.0).contains(&at_tunnel), "{at_tunnel}");
}
