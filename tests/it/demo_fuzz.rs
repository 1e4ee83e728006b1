//! Fuzzing the demo and script parsers (issue 8, SPEC §7): arbitrary bytes, mutated shipped demos and
//! scripts, truncation at every length, deep nesting. Every input is accepted (and then replays without a
//! panic) or refused with one line that starts with the file name. `CONTACT_SANDBOX_PROPTEST_CASES=N` raises
//! the case count, as for the other property tests.

use std::cell::RefCell;
use std::path::Path;
use std::time::Instant;

use contact_sandbox::demo::{Demo, Player, Script};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;

use super::robustness::{TOKENS, apply, mutation, runner};

const FILE: &str = "fuzz.demo.ron";
/// A replay of a fuzzed demo stops here: the parser is under test, not the length of a mutated `ticks`.
const REPLAY_TICKS: u64 = 120;

fn check_message(message: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        message.starts_with(&format!("{FILE}: ")),
        "error does not start with the file name: {message:?}"
    );
    prop_assert!(
        !message.chars().any(char::is_control),
        "error is not one clean line: {message:?}"
    );
    prop_assert!(message.len() > FILE.len() + 2, "empty error: {message:?}");
    Ok(())
}

/// Parses `text` as a demo; if it parses, replays the start of it. Returns whether it parsed.
fn demo_checked(text: &str) -> Result<bool, TestCaseError> {
    match Demo::parse(text, FILE) {
        Ok(demo) => {
            // Keep mutated scenes with thousands of bodies out of the step loop.
            let bodies: usize = demo.scene.lanes.iter().map(|l| l.balls.len()).sum();
            if bodies > 200 {
                return Ok(true);
            }
            let mut player = Player::new(demo, FILE);
            if let Err(e) = player.seek(REPLAY_TICKS) {
                check_message(&e.to_string())?;
            }
            Ok(true)
        }
        Err(e) => {
            check_message(&e.to_string())?;
            Ok(false)
        }
    }
}

fn script_checked(text: &str) -> Result<bool, TestCaseError> {
    match Script::parse(text, FILE) {
        Ok(_) => Ok(true),
        Err(e) => {
            check_message(&e.to_string())?;
            Ok(false)
        }
    }
}

fn shipped(path: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect("shipped file")
}

const DEMO_TOKENS: &[&str] = &[
    "Demo(",
    "TimedAction(",
    "TickHash(",
    "version:",
    "fixed_hz:",
    "hash_every:",
    "ticks:",
    "actions:",
    "hashes:",
    "tick:",
    "hash:",
    "action:",
    "Throw(v0: 1e300)",
    "Spawn(BallSpec(position: (0.0, 0.0)))",
    "Settings(lane: 99, settings: ContactSettings())",
    "Restart",
    "Pause",
    "\"0123456789abcdef\"",
    "18446744073709551615",
];

#[test]
fn the_demo_parser_survives_arbitrary_bytes_and_tokens() {
    let tokens: Vec<&'static str> = TOKENS.iter().chain(DEMO_TOKENS).copied().collect();
    let strategy = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..2048)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        any::<String>(),
        prop::collection::vec(prop::sample::select(tokens), 0..200).prop_map(|t| t.concat()),
    ];
    let result = runner(256).run(&strategy, |text| {
        demo_checked(&text)?;
        script_checked(&text)?;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn the_demo_parser_survives_mutated_shipped_demos_and_scripts() {
    let files = [
        shipped("assets/demos/wall_throw.demo.ron"),
        shipped("assets/demos/wall_throw.script.ron"),
    ];
    let strategy = (any::<Index>(), prop::collection::vec(mutation(), 1..=4));
    let counts = RefCell::new([0u64; 4]);
    let start = Instant::now();
    let result = runner(256).run(&strategy, |(which, mutations)| {
        let k = which.index(files.len());
        let mut text = files[k].clone();
        for m in &mutations {
            apply(&mut text, m);
        }
        let text = String::from_utf8_lossy(&text);
        let parsed = if k == 0 {
            demo_checked(&text)?
        } else {
            script_checked(&text)?
        };
        counts.borrow_mut()[2 * k + usize::from(!parsed)] += 1;
        Ok(())
    });
    let [d_ok, d_refused, s_ok, s_refused] = *counts.borrow();
    eprintln!(
        "mutated demos: {d_ok} parsed and replayed, {d_refused} refused; mutated scripts: {s_ok} parsed, \
         {s_refused} refused; {:.1} s",
        start.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn truncating_the_shipped_demo_at_every_length_gives_ok_or_one_line() {
    let text = shipped("assets/demos/wall_throw.demo.ron");
    let mut accepted = 0;
    // Every 7th length keeps the debug-build run short while still cutting inside every kind of token.
    for len in (0..=text.len()).step_by(7).chain([text.len()]) {
        match demo_checked(&String::from_utf8_lossy(&text[..len])) {
            Ok(true) => accepted += 1,
            Ok(false) => {}
            Err(e) => panic!("truncated to {len} bytes: {e}"),
        }
    }
    assert!(accepted >= 1, "not even the whole demo parsed");
}

#[test]
fn deep_nesting_in_a_demo_is_refused_without_overflowing_the_stack() {
    for text in [
        "[".repeat(100_000),
        format!("Demo(version: 1, actions: {}", "[".repeat(100_000)),
        format!("Demo(version: {}", "Some(".repeat(100_000)),
        format!("Script(ticks: 1, actions: {}", "(".repeat(100_000)),
    ] {
        let demo = Demo::parse(&text, FILE).expect_err("refused");
        assert!(demo.to_string().len() < 300, "{demo}");
        let script = Script::parse(&text, FILE).expect_err("refused");
        assert!(script.to_string().len() < 300, "{script}");
    }
}
