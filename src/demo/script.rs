//! Scripted demos: a list of timed actions, recorded headless into a [`Demo`] (`contact-sandbox record`).
//!
//! ```ron
//! Script(
//!     ticks: 300,          // length of the demo in fixed ticks
//!     hash_every: 30,      // optional; default 60
//!     actions: [
//!         (tick: 0, action: Throw(v0: 1.0)),
//!         (tick: 100, action: Spawn(BallSpec(position: (0.2, 0.1), velocity: (3.0, 0.0), radius: 0.01))),
//!     ],
//! )
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{
    Action, DEFAULT_HASH_EVERY, DEMO_VERSION, Demo, DemoError, MAX_HASHES, MAX_TICKS,
    PHYSICS_REVISION, Session, TickHash, TimedAction, hash_hex, refuse_ipc_into_overlap,
    refuse_rod_below_floor,
};
use crate::scene::{Scene, SceneError, read_bounded_text};

/// A timed action of a script (the same shape as a demo's).
pub type ScriptAction = TimedAction;

/// A list of timed actions to record without a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Length of the demo in fixed ticks.
    pub ticks: u64,
    /// Store a state hash every this many ticks (default 60) and at the end.
    #[serde(default)]
    pub hash_every: Option<u64>,
    /// Actions in tick order; several may share a tick and apply in the order given.
    pub actions: Vec<ScriptAction>,
}

/// Fewest bytes a stored hash takes in a saved demo: `TickHash(tick: 0, hash: "…")` pretty-printed is 88.
const MIN_HASH_BYTES: u64 = 80;
/// Fewest bytes an action takes in a saved demo (a `Pause` at tick 0, pretty-printed, takes more).
const MIN_ACTION_BYTES: u64 = 60;

impl Script {
    /// Reads, parses and validates a script file.
    pub fn load(path: &Path) -> Result<Script, DemoError> {
        let file = path.display().to_string();
        let text = read_bounded_text(path, "scripts")?;
        Script::parse(&text, &file)
    }

    /// Parses and validates script text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Script, DemoError> {
        let script: Script = ron::Options::default()
            .with_recursion_limit(64)
            .with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME)
            .from_str(text)
            .map_err(|e| SceneError::of_ron(text, file, &e))?;
        script.validate(file)?;
        Ok(script)
    }

    pub fn validate(&self, file: &str) -> Result<(), DemoError> {
        let fail = |place: String, problem: String| SceneError {
            file: file.to_string(),
            place,
            problem,
        };
        if self.ticks > MAX_TICKS {
            return Err(fail(
                "ticks".into(),
                format!("{} ticks; demos are limited to {MAX_TICKS}", self.ticks),
            ));
        }
        if self.hash_every == Some(0) {
            return Err(fail("hash_every".into(), "must be at least 1".into()));
        }
        if self.ticks / self.hash_every() >= MAX_HASHES as u64 {
            return Err(fail(
                "hash_every".into(),
                format!(
                    "{} ticks at one hash every {} would store more than {MAX_HASHES} hashes",
                    self.ticks,
                    self.hash_every()
                ),
            ));
        }
        // A demo stores one entry per hash and per action; past the size a demo may hold, `record` would run
        // the whole script and then refuse to save it.
        let hashes = self.ticks / self.hash_every() + 1;
        let least = hashes * MIN_HASH_BYTES + self.actions.len() as u64 * MIN_ACTION_BYTES;
        let limit = crate::scene::MAX_SCENE_BYTES;
        if least > limit {
            return Err(fail(
                "hash_every".into(),
                too_large(
                    format!(
                        "{} ticks at one hash every {} store {hashes} hashes, which with {} actions make a demo \
                         of at least {least} bytes",
                        self.ticks,
                        self.hash_every(),
                        self.actions.len()
                    ),
                    limit,
                ),
            ));
        }
        super::check_timed_actions(&self.actions, self.ticks, "script")
            .map_err(|(place, problem)| fail(place, problem))?;
        Ok(())
    }

    pub fn hash_every(&self) -> u64 {
        self.hash_every.unwrap_or(DEFAULT_HASH_EVERY).max(1)
    }
}

/// The rates a window's fixed clock may run at [Hz]: a scene's own `1 / h`, clamped to them, and the run control's.
pub const FIXED_RATES_HZ: std::ops::RangeInclusive<f64> = 1.0..=1000.0;

/// The fixed-step rate a scene runs at in the sandbox: `1/h` of its smallest h, which a tick advances the run by
/// ([`crate::demo::step_lanes`]), clamped to [`FIXED_RATES_HZ`]: real time.
pub fn fixed_rate_hz(scene: &Scene) -> f64 {
    rate_for_step(scene.lanes.iter().map(|l| l.contact.h).reduce(f64::min))
}

/// The fixed-step rate for ticks of `h` [Hz]: `1/h` clamped to [`FIXED_RATES_HZ`]; 60 Hz without a valid `h`.
pub fn rate_for_step(h: Option<f64>) -> f64 {
    match h {
        Some(h) if h.is_finite() && h > 0.0 => {
            (1.0 / h).clamp(*FIXED_RATES_HZ.start(), *FIXED_RATES_HZ.end())
        }
        _ => 60.0,
    }
}

/// Records `script` on `scene` headless. A refused action is an error naming it (`script_file` names the
/// script); so is a switch to IPC while something overlaps, which the window refuses too (replays accept it). `progress` is called with (tick, ticks) now and then.
pub fn record_script(
    scene: &Scene,
    script: &Script,
    script_file: &str,
    progress: impl FnMut(u64, u64),
) -> Result<Demo, DemoError> {
    record_script_timed(scene, script, script_file, progress).map(|(demo, _)| demo)
}

/// [`record_script`], with how long the demo plays [s]: each tick at the rate of the lanes it steps
/// ([`crate::demo::play_rate_hz`]), as a replay and an export play it.
pub fn record_script_timed(
    scene: &Scene,
    script: &Script,
    script_file: &str,
    mut progress: impl FnMut(u64, u64),
) -> Result<(Demo, f64), DemoError> {
    let fixed_hz = fixed_rate_hz(scene);
    let mut play_seconds = 0.0;
    check_demo_size(scene, script, script_file, crate::scene::MAX_SCENE_BYTES)?;
    let mut session = Session::new(scene.clone());
    let every = script.hash_every();
    let mut hashes = Vec::new();
    let mut next = 0;
    for tick in 0..=script.ticks {
        while let Some(a) = script.actions.get(next) {
            if a.tick != tick {
                break;
            }
            let refused = |problem| SceneError {
                file: script_file.to_string(),
                place: format!("actions[{next}] (tick {tick})"),
                problem,
            };
            // A new recording refuses what the window refuses (replays of old demos still accept it).
            if let Action::Settings { lane, settings } = &a.action
                && let Some(world) = session.lanes.get_mut(*lane)
            {
                refuse_ipc_into_overlap(world, settings).map_err(refused)?;
            }
            if let Action::Rod(rod) = &a.action {
                refuse_rod_below_floor(&session.lanes, rod).map_err(refused)?;
            }
            session.apply(&a.action).map_err(refused)?;
            next += 1;
        }
        if tick.is_multiple_of(every) || tick == script.ticks {
            hashes.push(TickHash {
                tick,
                hash: hash_hex(session.hash()),
            });
        }
        if tick < script.ticks {
            // At the rate of the lanes as this tick finds them, before it steps them.
            play_seconds += 1.0 / session.play_rate_hz(fixed_hz);
            session.step();
        }
        if tick.is_multiple_of(256) {
            progress(tick, script.ticks);
        }
    }
    progress(script.ticks, script.ticks);
    Ok((
        demo_of(scene, script, script.hash_every(), hashes),
        play_seconds,
    ))
}

/// The demo `script` records from `scene`, with a hash every `every` ticks and the given `hashes`.
fn demo_of(scene: &Scene, script: &Script, every: u64, hashes: Vec<TickHash>) -> Demo {
    Demo {
        version: DEMO_VERSION,
        physics: PHYSICS_REVISION,
        written_by: format!(
            "contact-sandbox {} (record --script)",
            env!("CARGO_PKG_VERSION")
        ),
        fixed_hz: fixed_rate_hz(scene),
        hash_every: every,
        ticks: script.ticks,
        scene: scene.clone(),
        actions: script.actions.clone(),
        hashes,
    }
}

impl Script {
    /// The size in bytes of the demo this script records from `scene`, exactly, and the number of its hashes.
    ///
    /// Everything a recorded demo holds is known before the run except the hashes' values, whose text has a fixed
    /// length. A hash's entry is the same text wherever it stands in the list except for its tick, a decimal
    /// integer, so the demo is written twice, with its first hash alone and with a second one at tick 1, and each
    /// further hash adds that entry's length plus one byte for each digit of its tick beyond the first. Nothing
    /// grows with the number of hashes: a script of 10⁶ hashes is measured in the memory of a short one. Sizes
    /// beyond `usize` saturate (such a demo is refused all the same).
    pub fn demo_bytes(&self, scene: &Scene) -> Result<(usize, usize), ron::Error> {
        self.demo_bytes_every(scene, self.hash_every())
    }

    /// [`Script::demo_bytes`] as if the script stored a hash every `every` ticks.
    fn demo_bytes_every(&self, scene: &Scene, every: u64) -> Result<(usize, usize), ron::Error> {
        let placeholder = |tick| TickHash {
            tick,
            hash: hash_hex(0),
        };
        let len = |hashes: Vec<TickHash>| demo_of(scene, self, every, hashes).ron_len();
        // The hashes' ticks are 0, every, 2·every, … up to `ticks`, and `ticks` itself when it is not one of them.
        let first = len(vec![placeholder(0)])?;
        let one_digit_entry = len(vec![placeholder(0), placeholder(1)])? - first;
        let mut bytes = first;
        let mut hashes = 1usize;
        for digits in 1..=u64::MAX.ilog10() + 1 {
            let low = 10u64.pow(digits - 1);
            if low > self.ticks {
                break;
            }
            let high = if digits <= u64::MAX.ilog10() {
                (10u64.pow(digits) - 1).min(self.ticks)
            } else {
                self.ticks
            };
            let mut count = high / every - (low - 1) / every;
            if !self.ticks.is_multiple_of(every) && (low..=high).contains(&self.ticks) {
                count += 1;
            }
            let count = usize::try_from(count).unwrap_or(usize::MAX);
            let entry = one_digit_entry + (digits as usize - 1);
            bytes = bytes.saturating_add(entry.saturating_mul(count));
            hashes = hashes.saturating_add(count);
        }
        Ok((bytes, hashes))
    }
}

/// `what` the script would make, and the limit it passes, with what to do about it.
fn too_large(what: String, limit: u64) -> String {
    format!(
        "{what}; demos are limited to {limit} bytes (raise hash_every, or record fewer ticks or actions)"
    )
}

/// Refuses a script whose demo would be over `limit` bytes, before it is run: `record` would otherwise run it
/// whole and then refuse to save it.
fn check_demo_size(
    scene: &Scene,
    script: &Script,
    file: &str,
    limit: u64,
) -> Result<(), DemoError> {
    let fail = |place: &str, problem: String| SceneError {
        file: file.to_string(),
        place: place.into(),
        problem,
    };
    let (bytes, hashes) = script
        .demo_bytes(scene)
        .map_err(|e| fail("actions", format!("cannot serialise the demo: {e}")))?;
    if bytes as u64 > limit {
        // With one hash at each end the hashes are as few as they can be: if that is still too large, the actions
        // (or the scene) are, and no hash_every helps.
        let fewest = script.ticks.max(1);
        let (least, _) = script
            .demo_bytes_every(scene, fewest)
            .map_err(|e| fail("actions", format!("cannot serialise the demo: {e}")))?;
        if least as u64 > limit {
            let bare = Script {
                ticks: script.ticks,
                hash_every: script.hash_every,
                actions: Vec::new(),
            };
            let (alone, _) = bare
                .demo_bytes_every(scene, fewest)
                .map_err(|e| fail("scene", format!("cannot serialise the demo: {e}")))?;
            if alone as u64 > limit {
                return Err(fail(
                    "scene",
                    format!(
                        "the scene alone makes a demo of {alone} bytes, with no action and a hash only at its start \
                         and end; demos are limited to {limit} bytes (record from a smaller scene)"
                    ),
                ));
            }
            return Err(fail(
                "actions",
                format!(
                    "the demo of {} ticks with {} would be {bytes} bytes, and {least} bytes even with a hash only \
                     at its start and end; demos are limited to {limit} bytes (record fewer actions)",
                    script.ticks,
                    crate::text::counted(script.actions.len() as u64, "action", "actions"),
                ),
            ));
        }
        return Err(fail(
            "hash_every",
            too_large(
                format!(
                    "the demo of {} ticks at one hash every {} ({hashes} hashes) with {} actions would be \
                     {bytes} bytes",
                    script.ticks,
                    script.hash_every(),
                    script.actions.len(),
                ),
                limit,
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wall_throw() -> Scene {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/scenes/wall_throw.ron");
        Scene::load(Path::new(path)).expect("the shipped scene loads")
    }

    fn script(ticks: u64, hash_every: u64) -> Script {
        Script::parse(
            &format!(
                "Script(ticks: {ticks}, hash_every: {hash_every}, actions: [(tick: 0, action: Throw(v0: 2.5)), \
                 (tick: 7, action: Pause), (tick: 7, action: Resume), (tick: 12, action: Spawn(BallSpec(position: \
                 (0.2, 0.3), velocity: (1.0, 0.0), radius: 0.01)))])"
            ),
            "t.script.ron",
        )
        .expect("a valid script")
    }

    /// The size `record` checks before it runs is the saved demo's size to the byte, whether or not the last tick
    /// falls on a hash.
    #[test]
    fn a_scripts_demo_size_is_known_to_the_byte_before_it_is_recorded() {
        let scene = wall_throw();
        for (ticks, every) in [
            (60, 30),
            (61, 30),
            (20, 1),
            (15, 1000),
            (12, 5),
            (1003, 7),
            (100, 10),
        ] {
            let script = script(ticks, every);
            let (bytes, hashes) = script.demo_bytes(&scene).expect("serialises");
            let demo = record_script(&scene, &script, "t.script.ron", |_, _| {}).expect("records");
            let text = demo.to_ron().expect("serialises");
            assert_eq!(bytes, text.len(), "ticks {ticks}, hash every {every}");
            assert_eq!(
                hashes,
                demo.hashes.len(),
                "ticks {ticks}, hash every {every}"
            );
        }
    }

    /// The demo's size counted by digits is the size of the demo written with every placeholder hash, for hash
    /// lists that end on a multiple of `hash_every` or not, and ticks that cross from one count of digits to the
    /// next.
    #[test]
    fn a_demo_s_size_counted_by_digits_is_its_size_with_every_hash_written() {
        let scene = wall_throw();
        for (ticks, every) in [
            (12, 1),
            (13, 3),
            (12, 12),
            (12, 5),
            (99, 9),
            (100, 9),
            (101, 50),
            (12_345, 1),
            (99_999, 7),
            (100_000, 100_000),
            (100_001, 100_000),
            (0, 1),
            (9, 1),
            (10, 1),
            (10, 3),
        ] {
            // Scripts too short for the helper's actions have none.
            let script = if ticks >= 12 {
                script(ticks, every)
            } else {
                Script::parse(
                    &format!("Script(ticks: {ticks}, hash_every: {every}, actions: [])"),
                    "short.script.ron",
                )
                .expect("a valid script")
            };
            let every = script.hash_every();
            let last = (!ticks.is_multiple_of(every)).then_some(ticks);
            let placeholders: Vec<TickHash> = (0..=ticks)
                .step_by(every as usize)
                .chain(last)
                .map(|tick| TickHash {
                    tick,
                    hash: hash_hex(0),
                })
                .collect();
            let hashes = placeholders.len();
            let written = demo_of(&scene, &script, script.hash_every(), placeholders)
                .ron_len()
                .expect("serialises");
            assert_eq!(
                script.demo_bytes(&scene).expect("serialises"),
                (written, hashes),
                "ticks {ticks}, hash every {every}"
            );
        }
    }

    /// When even a hash only at each end leaves the demo too large, the refusal names the actions, since no
    /// `hash_every` helps, or the scene where it is too large without them; otherwise it names `hash_every`.
    #[test]
    fn a_demo_too_large_for_its_actions_blames_them_and_not_hash_every() {
        let scene = wall_throw();
        let script = script(61, 1);
        let (bytes, _) = script.demo_bytes(&scene).expect("serialises");
        let (least, hashes) = script
            .demo_bytes_every(&scene, script.ticks)
            .expect("serialises");
        assert_eq!(hashes, 2);
        assert!(least < bytes);
        let blamed = |limit: usize| {
            check_demo_size(&scene, &script, "t.script.ron", limit as u64)
                .expect_err("over the limit")
                .to_string()
        };
        assert!(
            blamed(bytes - 1).starts_with("t.script.ron: hash_every: "),
            "{}",
            blamed(bytes - 1)
        );
        assert!(
            blamed(least).starts_with("t.script.ron: hash_every: "),
            "{}",
            blamed(least)
        );
        let bare = Script {
            ticks: script.ticks,
            hash_every: None,
            actions: Vec::new(),
        };
        let (alone, _) = bare
            .demo_bytes_every(&scene, script.ticks)
            .expect("serialises");
        assert_eq!(
            blamed(alone - 1),
            format!(
                "t.script.ron: scene: the scene alone makes a demo of {alone} bytes, with no action and a hash only \
                 at its start and end; demos are limited to {} bytes (record from a smaller scene)",
                alone - 1
            )
        );
        assert_eq!(
            blamed(least - 1),
            format!(
                "t.script.ron: actions: the demo of 61 ticks with 4 actions would be {bytes} bytes, and {least} \
                 bytes even with a hash only at its start and end; demos are limited to {} bytes (record fewer \
                 actions)",
                least - 1
            )
        );
    }

    #[test]
    fn a_script_whose_demo_passes_the_limit_by_one_byte_is_refused_before_it_runs() {
        let scene = wall_throw();
        let script = script(61, 30);
        let (bytes, _) = script.demo_bytes(&scene).expect("serialises");
        check_demo_size(&scene, &script, "t.script.ron", bytes as u64)
            .expect("a demo at the limit saves");
        let error = check_demo_size(&scene, &script, "t.script.ron", bytes as u64 - 1)
            .expect_err("one byte over")
            .to_string();
        assert_eq!(
            error,
            format!(
                "t.script.ron: hash_every: the demo of 61 ticks at one hash every 30 (4 hashes) with 4 actions would \
                 be {bytes} bytes; demos are limited to {} bytes (raise hash_every, or record fewer ticks or \
                 actions)",
                bytes - 1
            )
        );
    }
}
