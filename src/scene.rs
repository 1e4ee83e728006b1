//! Scene files: RON documents holding one or more lanes (see `docs/scenes.md`).
//!
//! Loading is two passes: RON syntax and types (errors carry the line and column), then validation of every
//! value (errors carry the field path, e.g. `lanes[1].balls[0].mass`). Either way the message names the file.

use std::fmt;
use std::path::Path;

use glam::DVec2;
use serde::{Deserialize, Serialize};

use crate::physics::broad_phase::BroadPhase;
use crate::physics::geometry::{Ball, Wall, ball_wall_gap};
use crate::physics::rod_flight::Rod;
use crate::physics::world::{
    ContactMethod, ContactSettings, LaneWorld, MAX_BALL_WALL_PAIRS_PER_LANE, MAX_BALLS_PER_LANE,
    MAX_LENGTH, SpawnError, check_ball,
};
use crate::text::{is_bidi_control, number};

/// Most lanes a scene may hold.
pub const MAX_LANES: usize = 64;
/// Most walls per lane.
pub const MAX_WALLS_PER_LANE: usize = 10_000;
/// Ball–wall pairs over all of a scene's lanes (see [`MAX_BALL_WALL_PAIRS_PER_LANE`]): 240 MB of sides.
pub const MAX_BALL_WALL_PAIRS_PER_SCENE: usize = 10_000_000;
/// Most rods per lane.
pub const MAX_RODS_PER_LANE: usize = 10_000;
/// Largest scene file read, in bytes.
pub const MAX_SCENE_BYTES: u64 = 64 * 1024 * 1024;

/// A scene: what a user loads, what the CLI runs, what a demo stores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scene {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// How many steps `contact-sandbox run` takes when `--steps` is not given.
    #[serde(default)]
    pub steps: Option<u64>,
    pub lanes: Vec<LaneSpec>,
}

/// One lane: its contact settings and bodies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaneSpec {
    pub name: String,
    #[serde(default)]
    pub contact: ContactSettings,
    #[serde(default)]
    pub walls: Vec<WallSpec>,
    #[serde(default)]
    pub balls: Vec<BallSpec>,
    #[serde(default)]
    pub rods: Vec<RodSpec>,
    /// Height of the floor the rods land on [m].
    #[serde(default)]
    pub rod_floor_y: f64,
}

/// A static oriented box.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WallSpec {
    pub center: DVec2,
    pub half_extents: DVec2,
    /// Radians, counter-clockwise.
    #[serde(default)]
    pub angle: f64,
}

/// A ball; velocity defaults to rest, radius to 0 (a point), mass to 1 kg.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BallSpec {
    pub position: DVec2,
    #[serde(default)]
    pub velocity: DVec2,
    #[serde(default)]
    pub radius: f64,
    #[serde(default = "one")]
    pub mass: f64,
}

/// A thin rigid rod.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RodSpec {
    pub center: DVec2,
    /// Radians, counter-clockwise from +x.
    #[serde(default)]
    pub angle: f64,
    pub length: f64,
    #[serde(default = "one")]
    pub mass: f64,
    /// Coefficient of restitution `e ∈ [0, 1]` at the contact point.
    #[serde(default)]
    pub restitution: f64,
    #[serde(default)]
    pub velocity: DVec2,
    /// Angular velocity [rad/s], counter-clockwise positive.
    #[serde(default)]
    pub omega: f64,
}

fn one() -> f64 {
    1.0
}

/// A scene that could not be loaded: the file, the place in it, and the problem.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub struct SceneError {
    pub file: String,
    pub place: String,
    pub problem: String,
}

impl fmt::Display for SceneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.place.is_empty() {
            write!(f, "{}: {}", self.file, self.problem)
        } else {
            write!(f, "{}: {}: {}", self.file, self.place, self.problem)
        }
    }
}

impl SceneError {
    /// The error of a RON read of `text` (the file `file`) that failed: where ([`ron_place`]) and why, with a
    /// word when the file ends before its brackets close, as a file cut short does ("Expected opening `(`" alone
    /// read as a mistake in the text).
    pub fn of_ron(text: &str, file: &str, error: &ron::error::SpannedError) -> SceneError {
        let mut problem = error.code.to_string();
        // Only where the read failed at the file's end: a mistake in the middle of a whole file (a `]` typed for
        // a `)`) leaves brackets open too.
        let open = if at_the_end(text, error) {
            unclosed_brackets(text)
        } else {
            0
        };
        match open {
            0 => {}
            1 => problem.push_str(" (the file ends with a bracket still open: is it cut short?)"),
            n => problem.push_str(&format!(
                " (the file ends with {n} brackets still open: is it cut short?)"
            )),
        }
        SceneError {
            file: file.to_string(),
            place: ron_place(text, error),
            problem,
        }
    }
}

/// Where a RON read of `text` failed, as a character offset (RON counts lines and columns from 1, columns in
/// characters).
fn error_offset(text: &str, error: &ron::error::SpannedError) -> usize {
    let at = error.span.start;
    text.split_inclusive('\n')
        .take(at.line.saturating_sub(1))
        .map(|line| line.chars().count())
        .sum::<usize>()
        + at.col.saturating_sub(1)
}

/// Did a RON read of `text` fail at its end: is what follows the error's position, past blanks and comments, at most
/// a short rest of one line (the token the file was cut in)?
fn at_the_end(text: &str, error: &ron::error::SpannedError) -> bool {
    let rest: String = text.chars().skip(error_offset(text, error)).collect();
    let code: Vec<&str> = rest
        .lines()
        .map(|line| line.split("//").next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .collect();
    code.len() <= 1 && code.first().is_none_or(|line| line.chars().count() <= 80)
}

/// Brackets (`(`, `[`, `{`) left open at the end of a RON text, outside strings (raw ones too), character
/// literals and comments; 0 where more close than open.
fn unclosed_brackets(text: &str) -> usize {
    let mut depth: i64 = 0;
    let mut chars = text.chars().peekable();
    let mut previous = ' ';
    while let Some(c) = chars.next() {
        // A raw string, `r"…"` or `r#"…"#`, where `\` escapes nothing: skipped to its closing quote and hashes.
        // (An `r` that ends an identifier, as in `for"`, is not one: RON has no such token.)
        if c == 'r'
            && !previous.is_alphanumeric()
            && previous != '_'
            && matches!(chars.peek(), Some('"' | '#'))
        {
            let mut hashes = 0;
            while chars.peek() == Some(&'#') {
                chars.next();
                hashes += 1;
            }
            if chars.peek() == Some(&'"') {
                chars.next();
                'raw: while let Some(c) = chars.next() {
                    if c == '"' {
                        let mut closing = 0;
                        while closing < hashes && chars.peek() == Some(&'#') {
                            chars.next();
                            closing += 1;
                        }
                        if closing == hashes {
                            break 'raw;
                        }
                    }
                }
            }
            previous = '"';
            continue;
        }
        previous = c;
        match c {
            // A character literal: `'('`, `'\''`.
            '\'' => {
                if chars.next() == Some('\\') {
                    chars.next();
                }
                if chars.peek() == Some(&'\'') {
                    chars.next();
                }
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                // RON's block comments nest.
                let mut comments = 1;
                while comments > 0 {
                    match chars.next() {
                        Some('*') if chars.peek() == Some(&'/') => {
                            chars.next();
                            comments -= 1;
                        }
                        Some('/') if chars.peek() == Some(&'*') => {
                            chars.next();
                            comments += 1;
                        }
                        Some(_) => {}
                        None => break,
                    }
                }
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
    }
    usize::try_from(depth).unwrap_or(0)
}

/// Where a RON read failed: the line and column, and, when the error lies in a field's value, that field with
/// the text written there, e.g. `line 6, column 111 (newton_max_iterations: -3)`, so that "Integer is out of
/// bounds" names what it is about. An error elsewhere (an unknown field's name, a missing field) keeps the line
/// and column alone: the field before it is not what it is about.
pub fn ron_place(text: &str, error: &ron::error::SpannedError) -> String {
    let at = error.span.start;
    let place = format!("line {}, column {}", at.line, at.col);
    let offset = error_offset(text, error);
    // The field is looked for in the lines just before the error (a file may hold 64 MB).
    let window_start = offset.saturating_sub(4_000);
    let mut before: Vec<char> = text
        .chars()
        .skip(window_start)
        .take(offset - window_start)
        .collect();
    if window_start > 0
        && let Some(newline) = before.iter().position(|&c| c == '\n')
    {
        before.drain(..=newline);
    }
    let Some((field, value_from)) = field_before(&before) else {
        return place;
    };
    let after_colon = offset - before.len() + value_from;
    let rest: Vec<char> = text.chars().skip(after_colon).take(200).collect();
    let (value, value_end) = value_text(&rest);
    // Inside the value, or at its first character past leading blanks.
    if offset - after_colon >= value_end.max(1) {
        return place;
    }
    if value.is_empty() {
        format!("{place} ({field})")
    } else {
        format!("{place} ({field}: {value})")
    }
}

/// The last `name:` in `before` (outside strings and comments, and not `::`), and the offset just after its colon.
fn field_before(before: &[char]) -> Option<(String, usize)> {
    let mut last = None;
    let mut k = 0;
    while k < before.len() {
        let c = before[k];
        if let Some(skip) = skipped_at(before, k) {
            k += skip;
            continue;
        }
        if c == ':' && before.get(k + 1) != Some(&':') && (k == 0 || before[k - 1] != ':') {
            let mut end = k;
            while end > 0 && before[end - 1].is_whitespace() {
                end -= 1;
            }
            let mut start = end;
            while start > 0 && (before[start - 1].is_alphanumeric() || before[start - 1] == '_') {
                start -= 1;
            }
            if start < end {
                last = Some((before[start..end].iter().collect(), k + 1));
            }
        }
        k += 1;
    }
    last
}

/// At `k` in `text`, the length of a string, a `//` comment (to its line's end) or a `/* */` comment that starts
/// there (to the end of `text` when it does not close), escapes inside strings included.
fn skipped_at(text: &[char], k: usize) -> Option<usize> {
    let rest = &text[k..];
    match rest {
        ['"', ..] => {
            let mut j = 1;
            while j < rest.len() {
                match rest[j] {
                    '\\' => j += 2,
                    '"' => return Some(j + 1),
                    _ => j += 1,
                }
            }
            Some(rest.len())
        }
        ['/', '/', ..] => Some(rest.iter().position(|&c| c == '\n').unwrap_or(rest.len())),
        ['/', '*', ..] => Some(
            rest.windows(2)
                .skip(2)
                .position(|w| w == ['*', '/'])
                .map_or(rest.len(), |p| p + 4),
        ),
        _ => None,
    }
}

/// The value written at the start of `rest`, and where it ends in `rest`: up to the first `,` or closing bracket
/// outside its own brackets, strings and comments, and never past the line's end. Shown trimmed, at most 40
/// characters, with control and bidirectional-formatting characters escaped so the message stays one plain line.
fn value_text(rest: &[char]) -> (String, usize) {
    let mut depth = 0usize;
    let mut end = rest.len();
    let mut k = 0;
    while k < rest.len() {
        let c = rest[k];
        if c == '\n' || c == '\r' {
            end = k;
            break;
        }
        if let Some(skip) = skipped_at(rest, k).filter(|_| c == '"') {
            k += skip;
            continue;
        }
        if c == '/' && matches!(rest.get(k + 1), Some('/' | '*')) {
            end = k;
            break;
        }
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => {
                end = k;
                break;
            }
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                end = k;
                break;
            }
            _ => {}
        }
        k += 1;
    }
    let end = end.min(rest.len());
    let value: String = rest[..end].iter().collect();
    let value = value.trim();
    let shown = crate::text::one_line(&value.chars().take(40).collect::<String>());
    if value.chars().count() > 40 {
        (format!("{shown}…"), end)
    } else {
        (shown, end)
    }
}

impl Scene {
    /// Reads, parses and validates a scene file.
    pub fn load(path: &Path) -> Result<Scene, SceneError> {
        let file = path.display().to_string();
        let text = read_bounded_text(path, "scenes")?;
        Scene::parse(&text, &file)
    }

    /// Parses and validates scene text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Scene, SceneError> {
        let scene: Scene = ron::Options::default()
            .with_recursion_limit(64)
            // An optional value may be written bare (`steps: 80`) as a script's and a demo's may, or as `Some(80)`.
            .with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME)
            .from_str(text)
            .map_err(|e| SceneError::of_ron(text, file, &e))?;
        scene.validate(file)?;
        Ok(scene)
    }

    /// Checks every value; the error names the field path.
    pub fn validate(&self, file: &str) -> Result<(), SceneError> {
        let fail = |place: String, problem: String| SceneError {
            file: file.to_string(),
            place,
            problem,
        };
        if self.lanes.is_empty() {
            return Err(fail(
                "lanes".into(),
                "a scene needs at least one lane".into(),
            ));
        }
        if self.lanes.len() > MAX_LANES {
            return Err(fail(
                "lanes".into(),
                format!(
                    "{} lanes; at most {MAX_LANES} are allowed",
                    self.lanes.len()
                ),
            ));
        }
        check_name(&self.name).map_err(|problem| fail("name".into(), problem))?;
        check_one_line(&self.description, "a description")
            .map_err(|problem| fail("description".into(), problem))?;
        if let Some(steps) = self.steps
            && !(1..=MAX_RUN_STEPS).contains(&steps)
        {
            return Err(fail(
                "steps".into(),
                format!("must be between 1 and {MAX_RUN_STEPS}, got {steps}"),
            ));
        }
        for (l, lane) in self.lanes.iter().enumerate() {
            check_name(&lane.name).map_err(|problem| fail(format!("lanes[{l}].name"), problem))?;
            lane.validate()
                .map_err(|(place, problem)| fail(format!("lanes[{l}].{place}"), problem))?;
        }
        let pairs: usize = self
            .lanes
            .iter()
            .map(|lane| lane.balls.len() * lane.walls.len())
            .sum();
        if pairs > MAX_BALL_WALL_PAIRS_PER_SCENE {
            return Err(fail(
                "lanes".into(),
                format!(
                    "the lanes hold {pairs} ball–wall pairs between them; a scene may hold at most \
                     {MAX_BALL_WALL_PAIRS_PER_SCENE} (each pair's side of its wall is tracked, to report tunnelling)"
                ),
            ));
        }
        Ok(())
    }

    /// Builds one physics world per lane.
    pub fn build(&self) -> Vec<LaneWorld> {
        self.lanes.iter().map(LaneSpec::build).collect()
    }

    /// Serialises the scene as pretty RON (what demos embed and `--help` examples show).
    pub fn to_ron(&self) -> String {
        ron::ser::to_string_pretty(self, ron::ser::PrettyConfig::default().struct_names(true))
            .unwrap_or_else(|e| format!("// scene could not be serialised: {e}"))
    }
}

/// The text at `path` (a relative one taken from `root`) and the name its errors give, or `compiled_in` where there
/// is one and no file is there: outside the repository, the shipped scenes and demo still load by their paths in it.
/// A file that is there is read, broken or not. Errors name the file as given when `root` is empty.
pub fn read_or_compiled_in(
    root: &Path,
    path: &Path,
    compiled_in: Option<&'static str>,
    kind: &str,
) -> Result<(String, String), SceneError> {
    let file = root.join(path);
    match compiled_in {
        Some(text) if !file.exists() => Ok((text.to_string(), path.display().to_string())),
        _ => Ok((read_bounded_text(&file, kind)?, file.display().to_string())),
    }
}

/// Reads a text file of at most [`MAX_SCENE_BYTES`]; `kind` ("scenes", "demos", …) names what is limited in the
/// message. A regular file's size is checked before reading; anything else (a device such as `/dev/zero`, a
/// FIFO) is read only up to one byte past the limit.
pub fn read_bounded_text(path: &Path, kind: &str) -> Result<String, SceneError> {
    use std::io::Read;
    let error = |problem: String| SceneError {
        file: path.display().to_string(),
        place: String::new(),
        problem,
    };
    let too_large = |size: &str| {
        error(format!(
            "the file is {size} bytes; {kind} are limited to {MAX_SCENE_BYTES} bytes"
        ))
    };
    let cannot_read = |e: std::io::Error| error(format!("cannot read the file: {e}"));
    let size = std::fs::metadata(path).map_err(cannot_read)?.len();
    if size > MAX_SCENE_BYTES {
        return Err(too_large(&size.to_string()));
    }
    let mut bytes = Vec::new();
    open_for_reading(path)
        .map_err(cannot_read)?
        .take(MAX_SCENE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot_read)?;
    if bytes.len() as u64 > MAX_SCENE_BYTES {
        return Err(too_large(&format!("more than {MAX_SCENE_BYTES}")));
    }
    let mut text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let byte = e.as_bytes().get(at).copied().unwrap_or(0);
        error(format!(
            "cannot read the file: it is not UTF-8 text (byte 0x{byte:02X} at offset {at} does not fit there; is it \
             a binary file, or text in another encoding such as Latin-1?)"
        ))
    })?;
    // A byte-order mark, as some editors on Windows save one, is not part of the text.
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    Ok(text)
}

/// How long opening a FIFO may wait for a writer before [`open_for_reading`] says that it waits.
const FIFO_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// Opens `path` for reading. Opening a FIFO waits for something to write into it; after [`FIFO_PATIENCE`] of
/// that, standard error says so, once, so that a command reading a FIFO nobody writes to does not sit silent.
fn open_for_reading(path: &Path) -> std::io::Result<std::fs::File> {
    #[cfg(unix)]
    {
        if crate::demo::is_fifo(path) {
            let (opened, waiting) = std::sync::mpsc::channel::<()>();
            let shown = crate::text::one_line(&path.display().to_string());
            // Without a thread for the notice, the FIFO is opened all the same.
            let notice = std::thread::Builder::new().spawn(move || {
                if waiting.recv_timeout(FIFO_PATIENCE)
                    == Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                {
                    crate::cli::stdout::errln!("waiting for something to write into '{shown}'…");
                }
            });
            let file = std::fs::File::open(path);
            drop(opened);
            if let Ok(notice) = notice {
                let _ = notice.join();
            }
            return file;
        }
    }
    std::fs::File::open(path)
}

type FieldError = (String, String);

/// How many ball pairs may overlap or touch when a lane starts: eight per ball on average (a packed pile of
/// equal discs has three), and never fewer than 10 000.
pub fn max_overlapping_pairs(balls: usize) -> usize {
    balls.saturating_mul(8).max(10_000)
}

/// Longest scene or lane name, in characters.
pub const MAX_NAME_CHARS: usize = 200;

/// Names are labels and appear in messages: one line of printable text.
fn check_name(name: &str) -> Result<(), String> {
    check_one_line(name, "a name")?;
    let count = name.chars().count();
    if count > MAX_NAME_CHARS {
        return Err(format!(
            "is {count} characters long; at most {MAX_NAME_CHARS} are allowed"
        ));
    }
    Ok(())
}

/// Text shown as one line (a name, a scene's description): no control characters, which would break the line or
/// drive a terminal, and no bidirectional formatting characters.
fn check_one_line(text: &str, what: &str) -> Result<(), String> {
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        return Err(format!(
            "contains the control character U+{:04X}; {what} is one line of text",
            u32::from(c)
        ));
    }
    if let Some(c) = text.chars().find(|&c| is_bidi_control(c)) {
        return Err(format!(
            "contains the bidirectional formatting character U+{:04X}, which reorders the text printed after it",
            u32::from(c)
        ));
    }
    Ok(())
}

fn positive(place: &str, value: f64) -> Result<(), FieldError> {
    finite(place, value)?;
    if value <= 0.0 {
        return Err((
            place.to_string(),
            format!("must be > 0, got {}", number(value)),
        ));
    }
    Ok(())
}

/// How far below the floor a rod's end may start [m]: the rod step's contact slop, within which an end counts as
/// touching, so a rod laid on the floor at an angle is not refused for a rounding error.
pub const ROD_START_SLOP: f64 = 1e-8;

/// How far `rod`'s lower end starts below a floor at `floor_y`, where that is more than [`ROD_START_SLOP`]: such a
/// rod is refused, in a scene file, a new recording or the window.
pub fn rod_start_depth(floor_y: f64, rod: &Rod) -> Option<f64> {
    let depth = floor_y - rod.lowest_end_height();
    (depth > ROD_START_SLOP).then_some(depth)
}

/// Most steps a scene (its `steps`), `run --steps` or `throw --steps` asks for, and the longest demo in ticks
/// ([`crate::demo::MAX_TICKS`]): one limit, so that a scene's whole run fits in a demo (about 46 hours at 60 Hz).
/// A window recording kept running past it ends there (`Recorder::max_ticks`), as one with more actions than a
/// demo holds ends before them (`Recorder::max_actions`).
pub const MAX_RUN_STEPS: u64 = 10_000_000;

/// Longest time step [s].
pub const MAX_STEP: f64 = 10.0;
/// Shortest time step [s]. Newton stops before taking a direction below its tolerance, so a ball whose step
/// `v h` is shorter stands still: at `h = 10⁻³⁰⁰` s a 5 m/s throw froze at once. A microsecond keeps speeds of
/// 10⁻⁴ m/s visible at the seed's tolerance (10⁻¹⁰ m).
pub const MIN_STEP: f64 = 1e-6;
/// Largest gravity component [m/s²].
pub const MAX_GRAVITY: f64 = 1e6;
/// Largest Newton tolerance [m].
pub const MAX_NEWTON_TOLERANCE: f64 = 1.0;
pub use crate::physics::stiffness::{MAX_DHAT, MIN_DHAT};
/// Largest friction coefficient μ (the smallest is 0, frictionless). Dry pairs measure about 0.1 to 1 (rubber on
/// dry concrete near 1; clean metals in vacuum a few, where they begin to cold-weld); at 10, a ball sliding on a
/// floor at 1 m/s stops within 5 mm (v² / 2μg). Scene files, demo actions and the window's μ field all check this
/// one limit.
pub const MAX_FRICTION: f64 = 10.0;
/// Largest penalty stiffness k [N/m] and barrier stiffness κ: 10⁴ times the stiffest value the seed, the shipped
/// scenes or the tests use (10⁸). At the defaults (m/h² = 10⁴) it already makes the Newton system's condition
/// number about 10⁸; at 10³⁰⁰ the energies overflow.
pub const MAX_STIFFNESS: f64 = 1e12;

/// The range a contact setting must lie in; scene files, demo actions, the window's fields (through
/// [`check_contact`]) and `throw`'s options all check it here, so they say the same.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValueRange {
    /// Smallest value allowed; 0 means "> 0".
    pub low: f64,
    /// Largest value allowed.
    pub high: f64,
    /// The unit, e.g. `"m"`; empty for a pure number.
    pub unit: &'static str,
}

/// d̂ [m]: [`MIN_DHAT`] to [`MAX_DHAT`].
pub const DHAT_RANGE: ValueRange = ValueRange {
    low: MIN_DHAT,
    high: MAX_DHAT,
    unit: "m",
};
/// Penalty stiffness k [N/m]: > 0, at most [`MAX_STIFFNESS`].
pub const STIFFNESS_RANGE: ValueRange = ValueRange {
    low: 0.0,
    high: MAX_STIFFNESS,
    unit: "N/m",
};
/// The friction mollifier's speed ε_v [m/s]. Its displacement ε_v h enters squared: at 10⁻¹⁶⁰ m/s that underflows
/// and every IPC step of a friction lane would return its start, without a fault. A
/// nanometre a second is already far below any sliding speed the sandbox shows; above 10³ m/s friction acts like
/// a weak drag on every ball it touches.
pub const FRICTION_EPSILON_V_RANGE: ValueRange = ValueRange {
    low: 1e-9,
    high: 1e3,
    unit: "m/s",
};
/// Barrier stiffness κ: > 0, at most [`MAX_STIFFNESS`].
pub const KAPPA_RANGE: ValueRange = ValueRange {
    low: 0.0,
    high: MAX_STIFFNESS,
    unit: "",
};

impl ValueRange {
    /// `Ok` inside the range; else the problem, e.g. "must be between 1e-9 m and 1 m, got 1e7 m".
    pub fn check(&self, value: f64) -> Result<(), String> {
        let inside = value.is_finite()
            && value <= self.high
            && if self.low > 0.0 {
                value >= self.low
            } else {
                value > 0.0
            };
        if inside {
            return Ok(());
        }
        let unit = |v: String| {
            if self.unit.is_empty() {
                v
            } else {
                format!("{v} {}", self.unit)
            }
        };
        let range = if self.low > 0.0 {
            format!(
                "between {} and {}",
                unit(number(self.low)),
                unit(number(self.high))
            )
        } else {
            format!("> 0 and at most {}", unit(number(self.high)))
        };
        Err(format!("must be {range}, got {}", unit(number(value))))
    }
}

/// `value ≤ limit`, or an error saying `why`.
fn at_most(place: &str, value: f64, limit: f64, unit: &str, why: &str) -> Result<(), FieldError> {
    if value > limit {
        return Err((
            place.to_string(),
            format!(
                "must be at most {limit} {unit} ({why}), got {}",
                number(value)
            ),
        ));
    }
    Ok(())
}

/// `|value| ≤ limit`, or an error saying `why`.
fn bounded_by(
    place: &str,
    value: f64,
    limit: f64,
    unit: &str,
    why: &str,
) -> Result<(), FieldError> {
    if value.abs() > limit {
        return Err((
            place.to_string(),
            format!(
                "must be within ±{limit:e} {unit} ({why}), got {}",
                number(value)
            ),
        ));
    }
    Ok(())
}

/// `|value| ≤ limit`: a wall's lengths beyond the range in which `f64` still resolves micrometre gaps
/// ([`MAX_LENGTH`]) are refused, in the words `check_ball` uses for a ball's.
fn bounded(place: &str, value: f64, limit: f64, unit: &str) -> Result<(), FieldError> {
    bounded_by(
        place,
        value,
        limit,
        unit,
        "gaps of micrometres are not resolved beyond that",
    )
}

fn finite(place: &str, value: f64) -> Result<(), FieldError> {
    if !value.is_finite() {
        return Err((
            place.to_string(),
            format!("must be a finite number, got {}", number(value)),
        ));
    }
    Ok(())
}

fn finite_vec(place: &str, value: DVec2) -> Result<(), FieldError> {
    finite(&format!("{place}.x"), value.x)?;
    finite(&format!("{place}.y"), value.y)
}

/// Checks contact settings; the error is `(field, problem)` with the field relative to `contact`.
pub fn check_contact(c: &ContactSettings) -> Result<(), FieldError> {
    finite("contact.h", c.h)?;
    // One message for every h below the range, 0 and negative ones included (0 read "must be > 0" while 1e-7 gave
    // the range).
    if c.h < MIN_STEP {
        return Err((
            "contact.h".to_string(),
            format!(
                "must be at least {} s (a ball slower than the Newton tolerance / h stands still), got {}",
                number(MIN_STEP),
                number(c.h)
            ),
        ));
    }
    at_most(
        "contact.h",
        c.h,
        MAX_STEP,
        "s",
        "a longer step is no time step",
    )?;
    let ranged = [
        ("contact.stiffness", Some(c.stiffness), STIFFNESS_RANGE),
        ("contact.kappa", Some(c.kappa), KAPPA_RANGE),
        ("contact.dhat", c.dhat, DHAT_RANGE),
    ];
    for (place, value, range) in ranged {
        if let Some(value) = value {
            range
                .check(value)
                .map_err(|problem| (place.to_string(), problem))?;
        }
    }
    finite("contact.ccd_factor", c.ccd_factor)?;
    if !(c.ccd_factor > 0.0 && c.ccd_factor < 1.0) {
        return Err((
            "contact.ccd_factor".into(),
            format!("must be in (0, 1), got {}", number(c.ccd_factor)),
        ));
    }
    finite_vec("contact.gravity", c.gravity)?;
    bounded_by(
        "contact.gravity.x",
        c.gravity.x,
        MAX_GRAVITY,
        "m/s²",
        "energies overflow beyond that",
    )?;
    bounded_by(
        "contact.gravity.y",
        c.gravity.y,
        MAX_GRAVITY,
        "m/s²",
        "energies overflow beyond that",
    )?;
    positive("contact.newton_tolerance", c.newton_tolerance)?;
    at_most(
        "contact.newton_tolerance",
        c.newton_tolerance,
        MAX_NEWTON_TOLERANCE,
        "m",
        "Newton stops before its first step when every move is smaller than the tolerance",
    )?;
    finite("contact.friction", c.friction)?;
    if !(0.0..=MAX_FRICTION).contains(&c.friction) {
        return Err((
            "contact.friction".into(),
            format!(
                "must be between 0 and {}, got {}",
                number(MAX_FRICTION),
                number(c.friction)
            ),
        ));
    }
    if let Err(problem) = FRICTION_EPSILON_V_RANGE.check(c.friction_epsilon_v) {
        return Err(("contact.friction_epsilon_v".into(), problem));
    }
    if c.friction_iterations == 0 || c.friction_iterations > 20 {
        return Err((
            "contact.friction_iterations".into(),
            format!("must be between 1 and 20, got {}", c.friction_iterations),
        ));
    }
    if c.newton_max_iterations == 0 || c.newton_max_iterations > 10_000 {
        return Err((
            "contact.newton_max_iterations".into(),
            format!(
                "must be between 1 and 10000, got {}",
                c.newton_max_iterations
            ),
        ));
    }
    Ok(())
}

impl LaneSpec {
    fn validate(&self) -> Result<(), FieldError> {
        check_contact(&self.contact)?;
        finite("rod_floor_y", self.rod_floor_y)?;
        bounded("rod_floor_y", self.rod_floor_y, MAX_LENGTH, "m")?;
        if self.walls.len() > MAX_WALLS_PER_LANE {
            return Err((
                "walls".into(),
                format!(
                    "{} walls; at most {MAX_WALLS_PER_LANE} are allowed",
                    self.walls.len()
                ),
            ));
        }
        if self.balls.len() > MAX_BALLS_PER_LANE {
            return Err((
                "balls".into(),
                format!(
                    "{} balls; at most {MAX_BALLS_PER_LANE} are allowed",
                    self.balls.len()
                ),
            ));
        }
        let pairs = self.balls.len() * self.walls.len();
        if pairs > MAX_BALL_WALL_PAIRS_PER_LANE {
            return Err((
                "balls".into(),
                format!(
                    "{} balls and {} walls make {pairs} ball–wall pairs; a lane tracks at most \
                     {MAX_BALL_WALL_PAIRS_PER_LANE} (each pair's side of its wall, to report tunnelling)",
                    self.balls.len(),
                    self.walls.len()
                ),
            ));
        }
        if self.rods.len() > MAX_RODS_PER_LANE {
            return Err((
                "rods".into(),
                format!(
                    "{} rods; at most {MAX_RODS_PER_LANE} are allowed",
                    self.rods.len()
                ),
            ));
        }
        for (k, w) in self.walls.iter().enumerate() {
            finite_vec(&format!("walls[{k}].center"), w.center)?;
            positive(&format!("walls[{k}].half_extents.x"), w.half_extents.x)?;
            positive(&format!("walls[{k}].half_extents.y"), w.half_extents.y)?;
            finite(&format!("walls[{k}].angle"), w.angle)?;
            for (field, value) in [
                ("center.x", w.center.x),
                ("center.y", w.center.y),
                ("half_extents.x", w.half_extents.x),
                ("half_extents.y", w.half_extents.y),
            ] {
                bounded(&format!("walls[{k}].{field}"), value, MAX_LENGTH, "m")?;
            }
        }
        let walls: Vec<Wall> = self.walls.iter().map(WallSpec::to_wall).collect();
        for (i, b) in self.balls.iter().enumerate() {
            check_ball(&b.to_ball()).map_err(|e| match e {
                SpawnError::Invalid {
                    field,
                    requirement,
                    value,
                } => (
                    format!("balls[{i}].{field}"),
                    format!("must be {requirement}, got {}", number(value)),
                ),
                other => (format!("balls[{i}]"), other.to_string()),
            })?;
        }
        for (r, rod) in self.rods.iter().enumerate() {
            let rod = rod.to_rod();
            rod.check_spawn().map_err(|e| {
                (
                    format!("rods[{r}].{}", e.field),
                    format!("{}, got {}", e.reason, number(e.value)),
                )
            })?;
            self.check_rod_above_floor(r, &rod)?;
        }
        let pairs = self.overlapping_pairs()?;
        if self.contact.method == ContactMethod::Ipc {
            self.check_ipc_feasible(&walls, &pairs)?;
        }
        Ok(())
    }

    /// The ball pairs that overlap or touch at the start, sorted; more than [`max_overlapping_pairs`] is an
    /// error (a heap of coincident balls has `n²/2` of them, and every one would be a contact in each step).
    fn overlapping_pairs(&self) -> Result<Vec<(u32, u32)>, FieldError> {
        let centre: Vec<DVec2> = self.balls.iter().map(|b| b.position).collect();
        let radius: Vec<f64> = self.balls.iter().map(|b| b.radius).collect();
        let limit = max_overlapping_pairs(self.balls.len());
        let mut pairs = Vec::new();
        if !BroadPhase::default().near_pairs_at_most(&centre, &radius, 0.0, limit, &mut pairs) {
            return Err((
                "balls".into(),
                format!(
                    "more than {limit} pairs of balls overlap or touch at the start; a lane of {} balls may \
                     start with at most {limit} (are many balls at the same position?)",
                    self.balls.len()
                ),
            ));
        }
        Ok(pairs)
    }

    /// IPC needs every pair strictly apart at the start (SPEC §1.6); `pairs` are the overlapping ball pairs.
    fn check_ipc_feasible(&self, walls: &[Wall], pairs: &[(u32, u32)]) -> Result<(), FieldError> {
        for (i, b) in self.balls.iter().enumerate() {
            for (k, w) in walls.iter().enumerate() {
                let d = ball_wall_gap(b.position, b.radius, w);
                if d <= 0.0 {
                    return Err((
                        format!("balls[{i}]"),
                        format!(
                            "starts inside or touching wall {k} (surface distance {d:.3e} m); an IPC lane needs a positive gap"
                        ),
                    ));
                }
            }
        }
        if let Some(&(i, j)) = pairs.first() {
            let (a, b) = (&self.balls[i as usize], &self.balls[j as usize]);
            let d = (a.position - b.position).length() - a.radius - b.radius;
            return Err((
                format!("balls[{j}]"),
                format!(
                    "overlaps or touches balls[{i}] (surface distance {d:.3e} m); an IPC lane needs a positive gap"
                ),
            ));
        }
        Ok(())
    }

    /// A rod must start with both ends on or above the floor (within [`ROD_START_SLOP`]): one below it would be
    /// lifted out at its first step, a jump no physics made (as an IPC lane refuses a ball inside a wall).
    fn check_rod_above_floor(&self, r: usize, rod: &Rod) -> Result<(), FieldError> {
        if let Some(depth) = rod_start_depth(self.rod_floor_y, rod) {
            return Err((
                format!("rods[{r}]"),
                format!(
                    "starts with its lower end {} below the floor (rod_floor_y = {} m); a rod must start on or \
                     above the floor",
                    crate::text::length_text(depth),
                    number(self.rod_floor_y)
                ),
            ));
        }
        Ok(())
    }

    /// The physics world of this lane.
    pub fn build(&self) -> LaneWorld {
        let mut lane = LaneWorld::new(
            self.name.clone(),
            self.contact.clone(),
            self.walls.iter().map(WallSpec::to_wall).collect(),
            self.balls.iter().map(BallSpec::to_ball).collect(),
        );
        lane.rod_floor_y = self.rod_floor_y;
        lane.rods = self.rods.iter().map(RodSpec::to_rod).collect();
        lane
    }
}

impl WallSpec {
    pub fn to_wall(&self) -> Wall {
        Wall {
            center: self.center,
            half_extents: self.half_extents,
            angle: self.angle,
        }
    }
}

impl BallSpec {
    pub fn to_ball(&self) -> Ball {
        Ball {
            position: self.position,
            velocity: self.velocity,
            radius: self.radius,
            mass: self.mass,
        }
    }
}

impl RodSpec {
    pub fn to_rod(&self) -> Rod {
        Rod {
            center: self.center,
            angle: self.angle,
            length: self.length,
            mass: self.mass,
            restitution: self.restitution,
            velocity: self.velocity,
            omega: self.omega,
        }
    }
}

#[cfg(test)]
mod tests {
    /// Brackets inside strings, raw strings, character literals and comments (nested too) are not counted.
    #[test]
    fn open_brackets_are_counted_outside_strings_literals_and_comments() {
        use super::unclosed_brackets;
        assert_eq!(unclosed_brackets("Scene(a: [(1, 2)"), 2);
        assert_eq!(unclosed_brackets(r#"Scene(a: "((\"(", b: ["#), 2);
        assert_eq!(
            unclosed_brackets(r##"Scene(a: r#"a " ( b"#, b: r"C:\dir\", c: ["##),
            2
        );
        assert_eq!(unclosed_brackets(r"Scene(a: '(', b: '\'', c: ["), 2);
        assert_eq!(
            unclosed_brackets("Scene( // ((\n /* ( /* ( */ ( */ a: ["),
            2
        );
        assert_eq!(unclosed_brackets("Scene(for: 1)"), 0);
        assert_eq!(unclosed_brackets("a)))"), 0);
    }
}
