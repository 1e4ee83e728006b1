//! Demos (SPEC §5): a scene, the user actions applied to it tick by tick, and state hashes that prove a
//! replay is the same run. Plain Rust: the CLI, the GUI's replay viewer and the exporter all replay through
//! [`Player`].
//!
//! Timeline: tick `T` is the state after `T` fixed steps *and* after the actions tagged `T`. Replaying is
//! `for T in 0..=ticks { apply actions tagged T; check the hash stored for T; if T < ticks { step } }`.
//! Only ticks that step count (a paused window records no ticks), so pauses do not change the physics.

mod script;
mod session;

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use script::{
    FIXED_RATES_HZ, Script, ScriptAction, fixed_rate_hz, rate_for_step, record_script,
    record_script_timed,
};
pub use session::*;

use crate::scene::{Scene, SceneError};

/// The demo format this build writes and reads.
pub const DEMO_VERSION: u32 = 1;
/// The revision of the physics whose state hashes this build computes, stored in every demo it records.
/// - 1: until 2026-12-06;
/// - 2: a ball's distance to a wall is measured to the face to the last bit, however far the wall's centre lies.
///   Ball–wall contacts change in their last bits, and with them a revision 1 demo's later hashes.
/// - 3: an IPC Newton direction below the tolerance ends the solve only if it changes no contact's gap by a
///   tenth of that gap ([`crate::physics::newton::SETTLED_GAP_CHANGE`]), or no representable step is left.
///   Solves with contacts closer than about ten tolerances may take more directions (the shipped wall-throw
///   demo's hashes do not change; the reference pit takes 4 more directions in 120 steps at 1k, 2 at 10k).
/// - 4: lanes of different h keep time together ([`step_lanes`]): a tick steps the lane of the smallest h and
///   every lane whose step ends by then, where each lane used to take a step every tick; the run ends at a scene's
///   `steps` of the smallest h of its lanes, and a lane the panel edited to another h takes the steps that fit.
///   Lanes that run their scene's own h step as before (every shipped scene and demo keeps its hashes).
/// - 5: an IPC solve also ends when a line search that had to backtrack finds no lower energy than E(x), only an
///   equal one: the energy's rounding, where the solve used to repeat the same direction at α ≈ 10⁻⁸ until its cap.
///   Solves that met it end earlier, in their last bits (the shipped slope's state after 60 ticks changes; the
///   shipped wall-throw demo's hashes do not).
/// - 6: a rod held on one end keeps its end on the floor through its supported sub-steps (the sub-step is sized
///   by the spin after its kick, and an end that gravity keeps down stays held), and impacts past a step's
///   crossing cap are inelastic. Rods that pivoted on an end change in their last bits (the shipped rod drop's
///   state after 60 ticks changes); balls do not change.
pub const PHYSICS_REVISION: u32 = 6;

/// What changed in the physics after `revision`, in a few words for a replay's verdict.
fn physics_changes_since(revision: u32) -> &'static str {
    match revision {
        1 => {
            "ball–wall distances to the last bit, Newton's stop beside contacts closer than its tolerance, lanes \
             of different h keeping time together, Newton's stop at the energy's rounding, and rods held on an end"
        }
        2 => {
            "Newton's stop beside contacts closer than its tolerance, lanes of different h keeping time together, \
             Newton's stop at the energy's rounding, and rods held on an end"
        }
        3 => {
            "lanes of different h keeping time together, Newton's stop at the energy's rounding, and rods held on \
             an end"
        }
        4 => "Newton's stop at the energy's rounding, and rods held on an end",
        5 => "rods held on an end",
        _ => "changes to the physics",
    }
}

/// Demos written before the revision was stored hold revision 1.
fn first_physics_revision() -> u32 {
    1
}

/// Most actions in one demo.
pub const MAX_ACTIONS: usize = 1_000_000;
/// Longest demo, in ticks: the longest run (about 46 hours at 60 Hz).
pub const MAX_TICKS: u64 = crate::scene::MAX_RUN_STEPS;
/// Most stored hashes in one demo.
pub const MAX_HASHES: usize = 1_000_000;
/// Default spacing of stored hashes, in ticks.
pub const DEFAULT_HASH_EVERY: u64 = 60;

/// A recorded session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Demo {
    /// Format version; this build reads [`DEMO_VERSION`].
    pub version: u32,
    /// The physics revision its hashes were computed with ([`PHYSICS_REVISION`]); 1 where it is missing.
    #[serde(default = "first_physics_revision")]
    pub physics: u32,
    /// What wrote it (informational).
    #[serde(default)]
    pub written_by: String,
    /// The fixed-step rate the recording ran at [Hz]: replays and exports use it to pace ticks in real time.
    pub fixed_hz: f64,
    /// A hash is stored every this many ticks (and at the end).
    pub hash_every: u64,
    /// Length of the demo in ticks.
    pub ticks: u64,
    /// The scene as it was when recording started.
    pub scene: Scene,
    /// Every action, in the order it was applied.
    pub actions: Vec<TimedAction>,
    /// State hashes, by tick, increasing.
    pub hashes: Vec<TickHash>,
}

/// An action and the tick it was applied at.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimedAction {
    pub tick: u64,
    pub action: Action,
}

/// The state hash at a tick, as 16 hex digits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TickHash {
    pub tick: u64,
    pub hash: String,
}

/// Formats a state hash as stored in demos.
pub fn hash_hex(hash: u64) -> String {
    format!("{hash:016x}")
}

/// A demo that cannot be read or replayed: the file, the place in it, and the problem.
pub type DemoError = SceneError;

/// The shipped demo, by its path in the repository: the Demo panel's default replay.
pub const SHIPPED_DEMO: &str = "assets/demos/wall_throw.demo.ron";

/// [`SHIPPED_DEMO`]'s text, compiled in, as the built-in scenes' are: outside the repository its path still
/// replays (the window's default Replay said "No such file or directory" there).
const SHIPPED_DEMO_TEXT: &str = include_str!("../../assets/demos/wall_throw.demo.ron");

impl Demo {
    /// Reads, parses and validates a demo file. [`SHIPPED_DEMO`]'s path, where no such file exists (the program
    /// run outside the repository), reads the compiled-in copy.
    pub fn load(path: &Path) -> Result<Demo, DemoError> {
        Demo::load_in(Path::new(""), path)
    }

    /// [`Demo::load`] with a relative `path` taken from `dir` rather than the working directory (errors still name
    /// `path` as given when `dir` is empty).
    pub fn load_in(dir: &Path, path: &Path) -> Result<Demo, DemoError> {
        let shipped = (path == Path::new(SHIPPED_DEMO)).then_some(SHIPPED_DEMO_TEXT);
        let (text, file) = crate::scene::read_or_compiled_in(dir, path, shipped, "demos")?;
        Demo::parse(&text, &file)
    }

    /// Parses and validates demo text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Demo, DemoError> {
        // Read the version first, so a demo from another version says so rather than failing on a field.
        let lenient = ron::Options::default()
            .with_recursion_limit(64)
            .with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME);
        if let Ok(v) = lenient.from_str::<ron::Value>(text)
            && let Ok(v) = v.into_rust::<VersionOnlyMap>()
            && v.version != DEMO_VERSION
        {
            return Err(SceneError {
                file: file.to_string(),
                place: "version".into(),
                problem: format!(
                    "the demo has format version {}; this build reads version {DEMO_VERSION}",
                    v.version
                ),
            });
        }
        let demo: Demo = lenient
            .from_str(text)
            .map_err(|e| SceneError::of_ron(text, file, &e))?;
        demo.validate(file)?;
        Ok(demo)
    }

    /// Checks every field; errors name the field.
    pub fn validate(&self, file: &str) -> Result<(), DemoError> {
        let fail = |place: String, problem: String| SceneError {
            file: file.to_string(),
            place,
            problem,
        };
        if self.version != DEMO_VERSION {
            return Err(fail(
                "version".into(),
                format!(
                    "the demo has format version {}; this build reads version {DEMO_VERSION}",
                    self.version
                ),
            ));
        }
        if !(1..=PHYSICS_REVISION).contains(&self.physics) {
            return Err(fail(
                "physics".into(),
                format!(
                    "physics revision {} is not one this build knows (1 to {PHYSICS_REVISION}){}",
                    self.physics,
                    if self.physics > PHYSICS_REVISION {
                        ": a newer build recorded it"
                    } else {
                        ""
                    }
                ),
            ));
        }
        if !(self.fixed_hz.is_finite() && self.fixed_hz > 0.0 && self.fixed_hz <= 10_000.0) {
            return Err(fail(
                "fixed_hz".into(),
                format!(
                    "must be in (0, 10000] Hz, got {}",
                    crate::text::number(self.fixed_hz)
                ),
            ));
        }
        if self.hash_every == 0 {
            return Err(fail("hash_every".into(), "must be at least 1".into()));
        }
        if self.ticks > MAX_TICKS {
            return Err(fail(
                "ticks".into(),
                format!("{} ticks; demos are limited to {MAX_TICKS}", self.ticks),
            ));
        }
        self.scene.validate(file).map_err(|e| SceneError {
            place: format!("scene.{}", e.place),
            ..e
        })?;
        check_timed_actions(&self.actions, self.ticks, "demo")
            .map_err(|(place, problem)| fail(place, problem))?;
        if self.hashes.len() > MAX_HASHES {
            return Err(fail(
                "hashes".into(),
                format!(
                    "{} hashes; demos are limited to {MAX_HASHES}",
                    self.hashes.len()
                ),
            ));
        }
        let mut previous: Option<u64> = None;
        for (i, h) in self.hashes.iter().enumerate() {
            if previous.is_some_and(|p| h.tick <= p) {
                return Err(fail(
                    format!("hashes[{i}].tick"),
                    format!("{} does not come after the previous hash's tick", h.tick),
                ));
            }
            if !h.tick.is_multiple_of(self.hash_every) && h.tick != self.ticks {
                return Err(fail(
                    format!("hashes[{i}].tick"),
                    format!(
                        "{} is neither a multiple of hash_every ({}) nor the demo's end (ticks: {})",
                        h.tick, self.hash_every, self.ticks
                    ),
                ));
            }
            if h.tick > self.ticks {
                return Err(fail(
                    format!("hashes[{i}].tick"),
                    format!("{} is after the demo's end (ticks: {})", h.tick, self.ticks),
                ));
            }
            if h.hash.len() != 16 || !h.hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(fail(
                    format!("hashes[{i}].hash"),
                    format!(
                        "{:?} is not 16 hex digits",
                        crate::text::abbreviate(&h.hash, 40)
                    ),
                ));
            }
            previous = Some(h.tick);
        }
        // A recording stores a hash at its last tick, so a verification covers the whole demo. Without it the
        // ticks after the last hash would pass unchecked: a demo whose `ticks` was raised from 300 to 10⁷ still
        // verified as "match".
        if let Some(last) = self.hashes.last()
            && last.tick != self.ticks
        {
            return Err(fail(
                "hashes".into(),
                format!(
                    "the last stored hash is at tick {}, but the demo runs to tick {} (ticks); a demo stores a hash \
                     at its last tick, so the ticks after {} could not be checked",
                    last.tick, self.ticks, last.tick
                ),
            ));
        }
        Ok(())
    }

    /// The demo as pretty RON.
    pub fn to_ron(&self) -> Result<String, ron::Error> {
        ron::ser::to_string_pretty(self, Self::ron_config())
    }

    /// The length in bytes of [`Demo::to_ron`]'s text, counted as it is written instead of held.
    pub fn ron_len(&self) -> Result<usize, ron::Error> {
        /// Counts what is written to it.
        struct Count(usize);
        impl std::fmt::Write for Count {
            fn write_str(&mut self, s: &str) -> std::fmt::Result {
                self.0 += s.len();
                Ok(())
            }
        }
        let mut count = Count(0);
        ron::ser::to_writer_pretty(&mut count, self, Self::ron_config())?;
        Ok(count.0)
    }

    /// How a demo's text is laid out.
    fn ron_config() -> ron::ser::PrettyConfig {
        ron::ser::PrettyConfig::default()
            .struct_names(true)
            .depth_limit(6)
    }

    /// Writes the demo atomically: a crash never leaves a half-written demo where a good one was. Returns the bytes
    /// written (a FIFO's or a device's own size reads 0).
    pub fn save(&self, path: &Path) -> anyhow::Result<usize> {
        let text = self.text_to_save(path)?;
        write_atomic(path, text.as_bytes())?;
        Ok(text.len())
    }

    /// Writes the demo atomically where nothing is yet: an existing file (or a link to one) is left as it is and
    /// the error is an [`AlreadyExists`]. A character device or a FIFO is written into, as by [`Demo::save`].
    pub fn save_new(&self, path: &Path) -> anyhow::Result<usize> {
        self.save_new_waiting(path, true)
    }

    /// [`Demo::save_new`] that does not wait on a FIFO: one that no program reads is an error at once, and one
    /// whose reader takes nothing for 2 s an error then. The window saves this way; a wait there
    /// would freeze it with no way to stop.
    pub fn save_new_at_once(&self, path: &Path) -> anyhow::Result<usize> {
        self.save_new_waiting(path, false)
    }

    /// [`Demo::save_new`], waiting for a FIFO's reader or not (see [`write_file`]).
    fn save_new_waiting(&self, path: &Path, wait: bool) -> anyhow::Result<usize> {
        let text = self.text_to_save(path)?;
        write_file(path, text.as_bytes(), false, wait)?;
        Ok(text.len())
    }

    fn text_to_save(&self, path: &Path) -> anyhow::Result<String> {
        let text = self
            .to_ron()
            .map_err(|e| anyhow::anyhow!("cannot serialise the demo: {e}"))?;
        let limit = crate::scene::MAX_SCENE_BYTES;
        if text.len() as u64 > limit {
            anyhow::bail!(
                "{}: not written: the demo would be {} bytes, and demos are limited to {limit} bytes (replay \
                 would refuse it); record fewer ticks or actions",
                path.display(),
                text.len()
            );
        }
        Ok(text)
    }
}

/// Checks a demo's or script's action list (`what` names it): at most [`MAX_ACTIONS`], ticks in order, none
/// after `ticks`. The error is `(place, problem)`.
pub(crate) fn check_timed_actions(
    actions: &[TimedAction],
    ticks: u64,
    what: &str,
) -> Result<(), (String, String)> {
    if actions.len() > MAX_ACTIONS {
        return Err((
            "actions".into(),
            format!(
                "{} actions; a {what} holds at most {MAX_ACTIONS}",
                actions.len()
            ),
        ));
    }
    let mut previous = 0;
    for (i, a) in actions.iter().enumerate() {
        if a.tick < previous {
            return Err((
                format!("actions[{i}].tick"),
                format!(
                    "{} comes before the previous action's tick {previous}; list actions in tick order",
                    a.tick
                ),
            ));
        }
        if a.tick > ticks {
            return Err((
                format!("actions[{i}].tick"),
                format!("{} is after the end of the {what} (ticks: {ticks})", a.tick),
            ));
        }
        previous = a.tick;
    }
    Ok(())
}

/// Just the version of a demo of any version.
#[derive(Deserialize)]
struct VersionOnlyMap {
    version: u32,
}

/// Whether `a` and `b` name the same existing file, through links or different spellings of the path (the same
/// device and inode on Unix, the same canonical path elsewhere).
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

/// Writes `bytes` to a temporary file beside `path`, flushes it to disk and renames it over `path`, so a reader
/// never sees half a file and a failed write leaves the old one.
///
/// A symbolic link is written through (its target is replaced, the link stays); one that leads nowhere is
/// refused. A character device or a FIFO (`/dev/null`, a pipe to another program) is written in place: a rename
/// would replace the device itself. Anything else that is not a regular file (a directory, a block device, a
/// socket) is refused.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_file(path, bytes, true, true)
}

/// An output that already exists and is not to be replaced.
#[derive(Debug, thiserror::Error)]
#[error("{}: already exists", path.display())]
pub struct AlreadyExists {
    pub path: std::path::PathBuf,
}

/// Does `path` hold a file that writing there would replace (a regular file, or a link to one)? A character
/// device or a FIFO is written into, not replaced; a missing path or a link to nothing holds none.
pub fn holds_a_file(path: &Path) -> bool {
    matches!(follow_output_link(path), Ok(Some(found)) if found.metadata.is_file())
}

/// `path` with `-n` before its extension: `demos/mine.demo.ron` → `demos/mine-2.demo.ron`, `clip.gif` →
/// `clip-2.gif`, `frames/` → `frames-2/`. The double extension `.demo.ron` stays whole.
pub fn numbered_path(path: &Path, n: u32) -> std::path::PathBuf {
    // On the path's own bytes, so a name that is not UTF-8 keeps its bytes (the cuts are at ASCII '/' and '.').
    #[cfg(unix)]
    let text: Vec<u8> = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec();
    #[cfg(not(unix))]
    let text: Vec<u8> = path.to_string_lossy().as_bytes().to_vec();
    let (body, slash): (&[u8], &[u8]) = match text.strip_suffix(b"/") {
        Some(body) => (body, b"/"),
        None => (&text, b""),
    };
    let name_start = body.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    let name = &body[name_start..];
    let stem_len = if name.len() > b".demo.ron".len() && name.ends_with(b".demo.ron") {
        name.len() - b".demo.ron".len()
    } else {
        match name.iter().rposition(|&b| b == b'.') {
            Some(dot) if dot > 0 => dot,
            _ => name.len(),
        }
    };
    let split = name_start + stem_len;
    let mut numbered = body[..split].to_vec();
    numbered.extend_from_slice(format!("-{n}").as_bytes());
    numbered.extend_from_slice(&body[split..]);
    numbered.extend_from_slice(slash);
    #[cfg(unix)]
    return std::path::PathBuf::from(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&numbered),
    );
    #[cfg(not(unix))]
    return std::path::PathBuf::from(String::from_utf8_lossy(&numbered).into_owned());
}

/// Most numbered names [`unused_path`] tries before it gives up.
pub const MAX_NUMBERED_NAMES: u32 = 10_000;

/// The first of `path`, `path-2`, `path-3`, … ([`numbered_path`]) where nothing is, or that is a character device
/// or a FIFO (written into, not replaced); `None` when all [`MAX_NUMBERED_NAMES`] are taken.
pub fn unused_path(path: &Path) -> Option<std::path::PathBuf> {
    let free = |p: &Path| match follow_output_link(p) {
        Ok(None) => true,
        Ok(Some(found)) => is_stream(found.metadata.file_type()),
        Err(_) => std::fs::symlink_metadata(p).is_err(),
    };
    if free(path) {
        return Some(path.to_path_buf());
    }
    (2..=MAX_NUMBERED_NAMES)
        .map(|n| numbered_path(path, n))
        .find(|p| free(p))
}

/// Moves the finished temporary file `temp` to `path` unless something is there: a hard link, which fails if
/// `path` exists, then the temporary name removed. Where the file system has no hard links, a rename after a
/// last look (a window of a few microseconds).
pub fn publish_new(temp: &Path, path: &Path) -> std::io::Result<()> {
    match std::fs::hard_link(temp, path) {
        Ok(()) => {
            let _ = std::fs::remove_file(temp);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
        Err(_) if std::fs::symlink_metadata(path).is_ok() => Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "the file exists",
        )),
        Err(_) => std::fs::rename(temp, path),
    }
}

/// Checks before any work that a file can be saved at `path` as [`Demo::save`] would: not a directory or a
/// special file other than a device or FIFO, and, for anything but those, a folder that takes new files (the
/// temporary file written beside it is created and removed). `record` asks first, so a run of hours is not
/// thrown away for a folder that is missing or read-only.
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
    let OutputAt::File { target, .. } = output_at(path)? else {
        return Ok(());
    };
    let (dir, tmp) = temporary_sibling(&target)?;
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => anyhow::bail!("{}: '{}' is not a folder", path.display(), dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
            "{}: the folder '{}' does not exist",
            path.display(),
            dir.display()
        ),
        Err(e) => anyhow::bail!(
            "{}: cannot look at the folder '{}' ({e})",
            path.display(),
            dir.display()
        ),
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| {
            anyhow::anyhow!(
                "{}: cannot write a file in {} ({e})",
                path.display(),
                dir.display()
            )
        })?;
    let _ = std::fs::remove_file(&tmp);
    Ok(())
}

/// What a save to a path meets, links followed: a device or FIFO to write into, or a regular file (`exists`) or
/// nothing at `target`, to be replaced through a temporary file beside it.
enum OutputAt {
    Stream,
    File {
        target: std::path::PathBuf,
        exists: bool,
    },
}

/// What a save to `path` meets ([`OutputAt`]); a directory or another special file is an error naming `path`.
fn output_at(path: &Path) -> anyhow::Result<OutputAt> {
    let found = follow_output_link(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let exists = match found.as_ref().map(|f| &f.metadata) {
        Some(m) if m.is_dir() => {
            anyhow::bail!("{}: is a directory; give a file name", path.display())
        }
        Some(m) if !m.is_file() && !is_stream(m.file_type()) => anyhow::bail!(
            "{}: is neither a regular file, a character device nor a FIFO; not writing there",
            path.display()
        ),
        Some(m) if !m.is_file() => return Ok(OutputAt::Stream),
        found => found.is_some(),
    };
    let target = found
        .and_then(|f| f.link_target)
        .unwrap_or_else(|| path.to_path_buf());
    Ok(OutputAt::File { target, exists })
}

/// The folder `path` is in: its parent, or `.` for a bare name.
pub fn folder_of(path: &Path) -> std::path::PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    }
}

/// The folder `path` is in and the temporary file beside it that a save writes first.
fn temporary_sibling(path: &Path) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    use anyhow::Context;
    let dir = folder_of(path);
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file name", path.display()))?;
    let tmp = dir.join(crate::text::temporary_name(
        ".",
        &name.to_string_lossy(),
        &format!(".tmp-{}", std::process::id()),
    ));
    Ok((dir, tmp))
}

/// How long a temporary output must have gone unwritten before [`remove_stale_temporaries`] takes its process for
/// gone.
const STALE_PARTIAL_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// Removes what saves of `out` that were killed outright (SIGKILL, a power cut) left beside it: `.NAME.WHAT-PID`
/// files and folders (`what`: `partial` for an export's, `tmp` for a demo's) whose process is gone. Returns their
/// names, and those of the ones left because they were written to within [`STALE_PARTIAL_AGE`]. A live process's
/// (another save of the same file under way) and this one's are left alone.
pub fn remove_stale_temporaries(out: &Path, what: &str) -> (Vec<String>, Vec<String>) {
    let Some(name) = out.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Default::default();
    };
    let prefix = format!(".{name}.{what}-");
    let Ok(entries) = std::fs::read_dir(folder_of(out)) else {
        return Default::default();
    };
    let (mut removed, mut recent) = (Vec::new(), Vec::new());
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = file
            .strip_prefix(&prefix)
            .filter(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<u32>().ok())
        else {
            continue;
        };
        // A process of another PID namespace (a container) sharing the folder looks gone from here: a partial
        // written to within the last minute is left alone whatever its PID says.
        let written_lately = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().map_or(true, |age| age < STALE_PARTIAL_AGE));
        if pid == std::process::id() || process_alive(pid) {
            continue;
        }
        if written_lately {
            recent.push(file);
            continue;
        }
        let path = entry.path();
        let gone = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(e) => Err(e),
        };
        if gone.is_ok() {
            removed.push(file);
        }
    }
    removed.sort();
    recent.sort();
    (removed, recent)
}

/// Is there a process `pid` (one this user may not signal counts)? Off Unix, always (nothing is removed).
pub fn process_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        // 0 and 1 (and anything beyond i32) are never an export's: treated as alive, so left alone.
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return true;
        };
        if pid <= 1 {
            return true;
        }
        // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
        let sent = unsafe { libc::kill(pid, 0) };
        sent == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// Gives `new`, about to replace the regular file at `old`, `old`'s permissions: a demo or clip saved over one
/// that only its owner could read stays so. Nothing is done when `old` is not a regular file, and a failure leaves
/// `new` with the permissions it was created with.
pub fn keep_permissions(old: &Path, new: &Path) {
    if let Ok(meta) = std::fs::metadata(old)
        && meta.is_file()
    {
        let _ = std::fs::set_permissions(new, meta.permissions());
    }
}

/// Is `path` a FIFO (links followed)? Opening one waits for the other end.
pub fn is_fifo(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// How long the window's save ([`Demo::save_new_at_once`]) waits for a FIFO's reader to take what it writes.
const STREAM_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Writes `bytes` into `stream`, opened by [`open_stream`], giving up once its reader has taken nothing for
/// `patience` (a pipe's buffer holds 64 KiB; a reader that stopped reading would block the write for good).
fn write_all_within(
    stream: &mut std::fs::File,
    mut bytes: &[u8],
    patience: std::time::Duration,
) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    {
        use std::os::unix::io::AsRawFd;
        let fd = stream.as_raw_fd();
        // SAFETY: fcntl on a descriptor `stream` owns, with flags read from it.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let total = bytes.len();
        let mut since = std::time::Instant::now();
        while !bytes.is_empty() {
            match stream.write(bytes) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    bytes = &bytes[n..];
                    since = std::time::Instant::now();
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let left = patience.saturating_sub(since.elapsed());
                    if left.is_zero() {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!(
                                "its reader took nothing for {:.1} s; {} of {total} bytes were written",
                                patience.as_secs_f64(),
                                total - bytes.len()
                            ),
                        ));
                    }
                    let mut poll = libc::pollfd {
                        fd,
                        events: libc::POLLOUT,
                        revents: 0,
                    };
                    // SAFETY: one pollfd, on a descriptor `stream` owns.
                    unsafe { libc::poll(&mut poll, 1, left.as_millis().clamp(1, 1000) as i32) };
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = patience;
        stream.write_all(bytes)
    }
}

/// Opens a character device or FIFO for writing. A FIFO's open waits for a reader: it is tried without blocking
/// every 50 ms, saying once on stderr that it waits, and `between` runs before each retry (an error from it ends
/// the wait), so a stop signal can end it. A device that is not there (ENXIO too) is an error at once.
pub fn open_stream(
    target: &Path,
    mut between: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<std::fs::File> {
    use anyhow::Context;
    let failed = || format!("cannot open '{}' for writing", target.display());
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::AsRawFd;
        let fifo = is_fifo(target);
        let mut said = false;
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(target)
            {
                Ok(file) => {
                    // Blocking writes from here: the reader takes the output at its own pace.
                    // SAFETY: fcntl on a descriptor this function owns, with flags read from it.
                    let fd = file.as_raw_fd();
                    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
                    if flags < 0
                        || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0
                    {
                        return Err(std::io::Error::last_os_error()).with_context(failed);
                    }
                    return Ok(file);
                }
                Err(e) if fifo && e.raw_os_error() == Some(libc::ENXIO) => {
                    between()?;
                    if !said {
                        crate::cli::stdout::errln!(
                            "{}",
                            crate::text::one_line(&format!(
                                "waiting for a reader of '{}'…",
                                target.display()
                            ))
                        );
                        said = true;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(e) => return Err(e).with_context(failed),
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = &mut between;
        std::fs::OpenOptions::new()
            .write(true)
            .open(target)
            .with_context(failed)
    }
}

/// Writes `bytes` at `path` (see [`write_atomic`]); `replace`: an existing file may be replaced, else the finished
/// file is linked into place, which fails when something appeared there meanwhile (the error is an
/// [`AlreadyExists`]); `wait`: a FIFO
/// that no program reads is waited for (saying so), and its reader for as long as it takes; else such a FIFO is
/// refused at once, and a reader that takes nothing for [`STREAM_PATIENCE`] ends the write with an error.
fn write_file(path: &Path, bytes: &[u8], replace: bool, wait: bool) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let target = match output_at(path)? {
        OutputAt::Stream => {
            // A FIFO without a reader says that it waits for one, or is refused.
            let mut f = open_stream(path, || {
                anyhow::ensure!(
                    wait,
                    "{}: a FIFO that no program reads; start one that reads it (such as `cat`), then save again",
                    path.display()
                );
                Ok(())
            })?;
            let written = if wait {
                f.write_all(bytes)
            } else {
                write_all_within(&mut f, bytes, STREAM_PATIENCE)
            };
            return written
                .and_then(|()| f.flush())
                .with_context(|| format!("{}: write failed", path.display()));
        }
        OutputAt::File { exists: true, .. } if !replace => {
            return Err(AlreadyExists {
                path: path.to_path_buf(),
            }
            .into());
        }
        OutputAt::File { target, .. } => target,
    };
    let path = target.as_path();
    let (dir, tmp) = temporary_sibling(path)?;
    let _unfinished = Unfinished::register(&tmp);
    let result = (|| -> anyhow::Result<()> {
        // The messages name the path the user gave: the temporary copy beside it is an implementation detail.
        let mut f = std::fs::File::create(&tmp).with_context(|| {
            format!(
                "{}: cannot write a file in {}",
                path.display(),
                dir.display()
            )
        })?;
        f.write_all(bytes)
            .with_context(|| format!("{}: write failed", path.display()))?;
        f.sync_all()
            .with_context(|| format!("{}: flush to disk failed", path.display()))?;
        let moved = if replace {
            keep_permissions(path, &tmp);
            std::fs::rename(&tmp, path)
        } else {
            publish_new(&tmp, path)
        };
        match moved {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(AlreadyExists {
                path: path.to_path_buf(),
            }
            .into()),
            moved => moved.with_context(|| {
                format!(
                    "{}: cannot move the finished file into place",
                    path.display()
                )
            }),
        }
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Temporary files being written by [`write_atomic`] in this process; [`remove_unfinished_writes`] deletes them.
static UNFINISHED: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// A temporary file (or directory) listed in [`UNFINISHED`] while it lives: a stop signal's handler removes it
/// before the process exits ([`remove_unfinished_writes`]).
pub struct Unfinished(std::path::PathBuf);

impl Unfinished {
    pub fn register(path: &Path) -> Unfinished {
        if let Ok(mut list) = UNFINISHED.lock() {
            list.push(path.to_path_buf());
        }
        Unfinished(path.to_path_buf())
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Ok(mut list) = UNFINISHED.lock() {
            list.retain(|p| *p != self.0);
        }
    }
}

/// Deletes the temporary files (and an export's temporary frames directory) of writes still in progress: what a
/// signal handler calls before it exits, so a killed save leaves neither a half-written file nor a hidden
/// temporary one (the old file stays).
pub fn remove_unfinished_writes() {
    if let Ok(list) = UNFINISHED.lock() {
        for path in list.iter() {
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.is_dir() => {
                    // An export's renderer may still be writing frames into it: a frame written during the
                    // removal leaves the folder not empty, so it is tried again.
                    for _ in 0..10 {
                        if std::fs::remove_dir_all(path).is_ok() || !path.exists() {
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                }
                Ok(_) => {
                    let _ = std::fs::remove_file(path);
                }
                Err(_) => {}
            }
        }
    }
}

/// What an output path names once a symbolic link is followed (see [`follow_output_link`]).
#[derive(Debug)]
pub struct OutputTarget {
    /// The link's canonical target; `None` when the path is not a symbolic link, or is one into an open
    /// descriptor's pipe, which has no path (its `metadata` is the pipe's).
    pub link_target: Option<std::path::PathBuf>,
    /// What is there, the link followed.
    pub metadata: std::fs::Metadata,
}

/// A symbolic link that cannot be written through. The message says what is wrong; the caller names the path.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("is a symbolic link to a missing or unreachable file")]
    Dangling(#[source] std::io::Error),
    #[error("cannot read '{}'", target.display())]
    Unreadable {
        target: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Follows an output path as saves and exports do: `None` when nothing is there (or it cannot be looked at;
/// creating the file then says why); a symbolic link is resolved to its canonical target, so the output
/// replaces the file it points at and the link stays; a link to nothing is refused.
pub fn follow_output_link(path: &Path) -> Result<Option<OutputTarget>, LinkError> {
    let Ok(metadata) = std::fs::symlink_metadata(path) else {
        return Ok(None);
    };
    if !metadata.file_type().is_symlink() {
        return Ok(Some(OutputTarget {
            link_target: None,
            metadata,
        }));
    }
    let target = match std::fs::canonicalize(path) {
        Ok(target) => target,
        Err(e) => {
            // A link to an open descriptor's pipe (`/dev/stdout` → `/proc/self/fd/1` → `pipe:[…]`) names no path,
            // yet opens: a stream is written into through it (a socket is not a stream and stays refused).
            if let Ok(metadata) = std::fs::metadata(path)
                && is_stream(metadata.file_type())
            {
                return Ok(Some(OutputTarget {
                    link_target: None,
                    metadata,
                }));
            }
            return Err(LinkError::Dangling(e));
        }
    };
    let metadata = std::fs::metadata(&target).map_err(|source| LinkError::Unreadable {
        target: target.clone(),
        source,
    })?;
    Ok(Some(OutputTarget {
        link_target: Some(target),
        metadata,
    }))
}

/// A character device (`/dev/null`) or a FIFO: an output written into, never replaced (a rename would replace
/// the device itself). Demos and exports both go by it.
pub fn is_stream(file_type: std::fs::FileType) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        file_type.is_char_device() || file_type.is_fifo()
    }
    #[cfg(not(unix))]
    {
        let _ = file_type;
        false
    }
}

/// Where a replay stands against the demo's stored hashes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// Stored hashes that matched so far.
    pub matched: usize,
    /// The first tick whose state differed: (tick, stored, computed).
    pub mismatch: Option<(u64, String, String)>,
    /// The demo's physics revision, where it is not this build's: a mismatch is then expected.
    pub older_physics: Option<u32>,
}

impl Verdict {
    /// Nothing checked yet, for a replay of `demo`.
    pub fn for_demo(demo: &Demo) -> Verdict {
        Verdict {
            older_physics: (demo.physics != PHYSICS_REVISION).then_some(demo.physics),
            ..Verdict::default()
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.mismatch {
            // Nothing compared is no match: a demo without hashes replays unchecked.
            None if self.matched == 0 => write!(f, "nothing checked (no stored hash)"),
            None => write!(
                f,
                "match ({})",
                crate::text::counted(self.matched as u64, "hash", "hashes")
            ),
            Some((tick, stored, got)) => {
                write!(
                    f,
                    "MISMATCH at tick {tick}: the demo stores {stored}, this replay computed {got} ({} matched)",
                    crate::text::counted(self.matched as u64, "earlier hash", "earlier hashes")
                )?;
                match self.older_physics {
                    Some(revision) => write!(
                        f,
                        "; the demo was recorded with physics revision {revision} and this build computes \
                         revision {PHYSICS_REVISION} ({}), so its states may differ for that reason alone: record it again \
                         to verify it",
                        physics_changes_since(revision)
                    ),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Plays a demo forward tick by tick, checking every stored hash, and seeks by replaying from checkpoints.
#[derive(Clone, Debug)]
pub struct Player {
    pub demo: Demo,
    /// Names the demo in errors.
    pub file: String,
    pub session: Session,
    /// Index of the next action to apply.
    next_action: usize,
    /// Index of the next stored hash to check.
    next_hash: usize,
    /// Have the actions and hash of the current tick been applied and checked?
    settled: bool,
    pub verdict: Verdict,
    /// The last action applied, for the viewer.
    pub last_action: Option<(u64, String)>,
    checkpoints: Vec<Checkpoint>,
}

#[derive(Clone, Debug)]
struct Checkpoint {
    session: Session,
    next_action: usize,
    next_hash: usize,
    verdict: Verdict,
}

/// Ticks between seek checkpoints.
const CHECKPOINT_EVERY: u64 = 300;
/// At most this many checkpoints are kept (older ones are thinned out).
const MAX_CHECKPOINTS: usize = 64;

impl Player {
    pub fn new(demo: Demo, file: impl Into<String>) -> Player {
        let session = Session::new(demo.scene.clone());
        let verdict = Verdict::for_demo(&demo);
        Player {
            demo,
            file: file.into(),
            session,
            next_action: 0,
            next_hash: 0,
            settled: false,
            verdict,
            last_action: None,
            checkpoints: Vec::new(),
        }
    }

    pub fn tick(&self) -> u64 {
        self.session.tick
    }

    pub fn at_end(&self) -> bool {
        self.settled && self.session.tick >= self.demo.ticks
    }

    /// Applies the current tick's actions and checks its hash (once).
    fn settle(&mut self) -> Result<(), DemoError> {
        if self.settled {
            return Ok(());
        }
        let tick = self.session.tick;
        while let Some(a) = self.demo.actions.get(self.next_action) {
            if a.tick != tick {
                break;
            }
            let index = self.next_action;
            self.session
                .apply(&a.action)
                .map_err(|problem| SceneError {
                    file: self.file.clone(),
                    place: format!("actions[{index}] (tick {tick})"),
                    problem,
                })?;
            self.last_action = Some((tick, a.action.label()));
            self.next_action += 1;
        }
        if let Some(h) = self.demo.hashes.get(self.next_hash)
            && h.tick == tick
        {
            let got = hash_hex(self.session.hash());
            if self.verdict.mismatch.is_none() {
                if got.eq_ignore_ascii_case(&h.hash) {
                    self.verdict.matched += 1;
                } else {
                    self.verdict.mismatch = Some((tick, h.hash.clone(), got));
                }
            }
            self.next_hash += 1;
        }
        self.settled = true;
        if tick.is_multiple_of(CHECKPOINT_EVERY)
            && self
                .checkpoints
                .last()
                .is_none_or(|c| c.session.tick < tick)
        {
            if self.checkpoints.len() >= MAX_CHECKPOINTS {
                // Keep every other checkpoint: seeking stays bounded in memory and in time.
                let mut k = 0;
                self.checkpoints.retain(|_| {
                    k += 1;
                    k % 2 == 1
                });
            }
            self.checkpoints.push(Checkpoint {
                session: self.session.clone(),
                next_action: self.next_action,
                next_hash: self.next_hash,
                verdict: self.verdict.clone(),
            });
        }
        Ok(())
    }

    /// Brings the player to the state of its current tick (actions applied, hash checked).
    pub fn start(&mut self) -> Result<(), DemoError> {
        self.settle()
    }

    /// Advances one tick; returns `false` at the end of the demo.
    pub fn advance(&mut self) -> Result<bool, DemoError> {
        self.settle()?;
        if self.session.tick >= self.demo.ticks {
            return Ok(false);
        }
        self.session.step();
        self.settled = false;
        self.settle()?;
        Ok(true)
    }

    /// Plays to the end (or, with `stop_at_mismatch`, to the first mismatch).
    pub fn run_to_end(&mut self, stop_at_mismatch: bool) -> Result<&Verdict, DemoError> {
        self.settle()?;
        while !(stop_at_mismatch && self.verdict.mismatch.is_some()) && self.advance()? {}
        Ok(&self.verdict)
    }

    /// Moves to `tick` (clamped to the demo), backwards by restarting from the nearest checkpoint.
    pub fn seek(&mut self, tick: u64) -> Result<(), DemoError> {
        self.seek_with(tick, |_| {})
    }

    /// [`Player::seek`], showing `each_tick` the session after every tick it steps on the way.
    pub fn seek_with(
        &mut self,
        tick: u64,
        mut each_tick: impl FnMut(&Session),
    ) -> Result<(), DemoError> {
        let tick = tick.min(self.demo.ticks);
        if tick < self.session.tick {
            match self
                .checkpoints
                .iter()
                .rev()
                .find(|c| c.session.tick <= tick)
            {
                Some(c) => {
                    self.session = c.session.clone();
                    self.next_action = c.next_action;
                    self.next_hash = c.next_hash;
                    self.verdict = c.verdict.clone();
                    self.settled = true;
                }
                None => {
                    self.session = Session::new(self.demo.scene.clone());
                    self.next_action = 0;
                    self.next_hash = 0;
                    self.verdict = Verdict::for_demo(&self.demo);
                    self.settled = false;
                }
            }
            // The last action applied before the point returned to, not one from after it.
            self.last_action = self
                .next_action
                .checked_sub(1)
                .and_then(|i| self.demo.actions.get(i))
                .map(|a| (a.tick, a.action.label()));
        }
        self.settle()?;
        while self.session.tick < tick {
            self.advance()?;
            each_tick(&self.session);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO whose reader opened it and takes nothing: the window's write gives up after its patience, saying how
    /// much went in, where a plain write would block once the pipe's 64 KiB buffer is full.
    #[cfg(unix)]
    #[test]
    fn a_write_into_a_fifo_whose_reader_takes_nothing_gives_up() {
        let dir = std::env::temp_dir().join(format!("cs-stalled-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        let fifo = dir.join("stalled.fifo");
        let _ = std::fs::remove_file(&fifo);
        let Some(reader) = crate::testing::fifo_with_reader(&fifo) else {
            eprintln!("mkfifo is not available here; skipped");
            return;
        };
        let _reader = reader.expect("opens the FIFO for reading");
        let mut stream = open_stream(&fifo, || Ok(())).expect("a reader is there");
        let bytes = vec![b'x'; 1 << 20];
        let started = std::time::Instant::now();
        let err = write_all_within(&mut stream, &bytes, std::time::Duration::from_millis(300))
            .expect_err("nothing reads");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        let message = err.to_string();
        assert!(
            message.starts_with("its reader took nothing for 0.3 s;")
                && message.ends_with("of 1048576 bytes were written"),
            "{message}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
