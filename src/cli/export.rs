//! `contact-sandbox export DEMO --out clip.gif|clip.mp4|frames/ [--fps 30] [--size 1280x720]` (SPEC §5):
//! renders a demo's replay offscreen with the sandbox's renderer ([`crate::app::export`]) into a GIF, an MP4 or
//! a directory of PNG frames.
//!
//! Each tick plays at the rate of the lanes it steps ([`crate::demo::play_rate_hz`], [`PlaySchedule`]), and frame k
//! shows the tick whose play time is nearest k / fps. At one rate throughout that is tick `round(k · fixed_hz /
//! fps)`, and a demo of T ticks gives `floor(T · fps / fixed_hz) + 1` frames, and one more where the last of those
//! would stop short of the end (the first shows tick 0, the last the end).
//!
//! Before anything is rendered the demo is replayed headless and every stored hash checked. A demo this build
//! does not reproduce is refused unless `--allow-mismatch` is given: a clip is evidence, and one of a run that
//! differs from the recording must not pass for the recording. With the flag the clip is exported, a warning is
//! printed and the overlay says "MISMATCH at tick T" in red.
//!
//! The output is written to a temporary file (or directory) beside the target and renamed into place only when
//! it is complete, so an interrupted or failed export leaves the target as it was. A symbolic link is written
//! through (its target is replaced, the link stays). A GIF or MP4 for a character device or a FIFO
//! (`--out /dev/null`, a pipe to a player) is written to a temporary file in the system's temporary folder and
//! its finished bytes into the device: a rename would replace the device itself. Nothing else that exists and
//! is not a regular file (or, for frames, an empty directory) is replaced.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::progress_bar;
use anyhow::{Context, Result, anyhow, bail};

use crate::app::export::{ClipFormat, ExportPlan, Overlay, quiet_headless_gpu_probe, render_clip};
use crate::demo::{
    Demo, LinkError, OutputTarget, Player, follow_output_link, is_stream, publish_new, same_file,
};

use super::stdout::outln;
use crate::text::counted;

/// Frame rates `--fps` accepts [frames/s].
pub const FPS_RANGE: RangeInclusive<u32> = 1..=120;
/// Widths and heights `--size` accepts [px].
pub const SIDE_RANGE: RangeInclusive<u32> = 16..=3840;
/// Most frames one export renders (an hour at 30 fps plus change); more is almost surely a typo in `--fps`.
pub const MAX_FRAMES: u64 = 120_000;
/// Highest `--fps` for a GIF: its delays are whole centiseconds and browsers slow delays under 2 cs down to
/// 10 cs, so above 50 fps (2 cs) a clip plays slower than real time.
pub const GIF_MAX_FPS: u32 = 50;

/// Arguments of `contact-sandbox export`.
#[derive(clap::Args, Debug, Clone)]
pub struct ExportArgs {
    /// The demo to render (RON; see docs/demos.md).
    pub demo: PathBuf,
    /// The clip: a .gif or .mp4 file, or a directory for PNG frames (a path ending in '/' or an existing
    /// directory). Written atomically. An existing clip is refused unless --force is given.
    #[arg(long)]
    pub out: PathBuf,
    /// Replace the clip at --out if there is one (a frames directory must still be new or empty).
    #[arg(long)]
    pub force: bool,
    /// Frames per second of the clip (1..=120; at most 50 for a GIF); frame k shows the tick played at k / fps.
    #[arg(long, default_value = "30", value_parser = parse_fps, allow_negative_numbers = true)]
    pub fps: u32,
    /// Frame size WIDTHxHEIGHT in pixels, each side 16..=3840 (even for MP4; at most 3840x2160 either way up
    /// for the built-in openh264 encoder).
    #[arg(long, default_value = "1280x720", value_parser = parse_size)]
    pub size: FrameSize,
    /// MP4 encoder: ffmpeg (libx264, when `ffmpeg` is on PATH), openh264 (built in), or auto (ffmpeg when
    /// present, else openh264).
    #[arg(long, value_enum, default_value_t = Mp4Encoder::Auto)]
    pub encoder: Mp4Encoder,
    /// Export even if the demo's stored hashes do not match this build's replay (the clip is labelled
    /// "MISMATCH at tick T"), or if it stores none (labelled "unchecked").
    #[arg(long)]
    pub allow_mismatch: bool,
    /// Leave out the text overlay (demo, tick, time, hash verdict); the lanes' titles stay, as in the window.
    #[arg(long)]
    pub no_overlay: bool,
    /// Also report progress for a program to read: lines `progress check DONE/TOTAL` (ticks whose hashes are
    /// checked) and `progress frames DONE/TOTAL` on standard error, one per percent.
    #[arg(long)]
    pub progress_lines: bool,
    /// The demo's tick the clip starts at (the replay's "tick N / T"; default 0). The whole demo is still checked.
    #[arg(long, value_parser = super::parse_count, allow_negative_numbers = true)]
    pub from: Option<u64>,
    /// The demo's tick the clip ends at (default: its last).
    #[arg(long, value_parser = super::parse_count, allow_negative_numbers = true)]
    pub to: Option<u64>,
}

/// The part of an export a progress line counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressStage {
    /// Replaying the demo to check its hashes, in ticks.
    Check,
    /// Rendering and encoding, in frames.
    Frames,
}

impl ProgressStage {
    fn word(self) -> &'static str {
        match self {
            ProgressStage::Check => "check",
            ProgressStage::Frames => "frames",
        }
    }
}

/// `progress frames 30/91`: one line of `--progress-lines`.
pub fn progress_line(stage: ProgressStage, done: u64, total: u64) -> String {
    format!("progress {} {done}/{total}", stage.word())
}

/// Reads a [`progress_line`] back; `None` for any other line.
pub fn parse_progress_line(line: &str) -> Option<(ProgressStage, u64, u64)> {
    let mut words = line.split_whitespace();
    if words.next() != Some("progress") {
        return None;
    }
    let stage = match words.next()? {
        "check" => ProgressStage::Check,
        "frames" => ProgressStage::Frames,
        _ => return None,
    };
    let (done, total) = words.next()?.split_once('/')?;
    if words.next().is_some() {
        return None;
    }
    Some((stage, done.parse().ok()?, total.parse().ok()?))
}

/// Writes `--progress-lines`: a line whenever the whole percentage done grows, and at the end.
struct ProgressLines {
    stage: ProgressStage,
    total: u64,
    /// The last line's count.
    said: Option<u64>,
}

impl ProgressLines {
    /// Says `progress STAGE 0/TOTAL` at once, so a reader knows the total.
    fn start(stage: ProgressStage, total: u64) -> ProgressLines {
        let mut lines = ProgressLines {
            stage,
            total,
            said: None,
        };
        lines.report(0);
        lines
    }

    fn report(&mut self, done: u64) {
        let percent = |n: u64| n.saturating_mul(100) / self.total.max(1);
        let due = match self.said {
            None => true,
            Some(said) => done > said && (percent(done) > percent(said) || done >= self.total),
        };
        if due {
            self.said = Some(done);
            // Progress is a courtesy: a closed standard error does not stop the export.
            let _ = writeln!(
                io::stderr(),
                "{}",
                progress_line(self.stage, done, self.total)
            );
        }
    }
}

/// Width and height of the frames [px].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSize {
    pub width: u32,
    pub height: u32,
}

/// Which MP4 encoder `--encoder` asks for.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mp4Encoder {
    Auto,
    Openh264,
    Ffmpeg,
}

/// What the output path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    Gif,
    Mp4,
    /// A directory of `frame_00000.png`, `frame_00001.png`, …
    Frames,
}

/// `--fps`: an integer in [`FPS_RANGE`].
pub fn parse_fps(text: &str) -> Result<u32, String> {
    let fps = text
        .trim()
        .parse::<u32>()
        .map_err(|_| format!("--fps must be a whole number of frames per second, got '{text}'"))?;
    if !FPS_RANGE.contains(&fps) {
        return Err(format!(
            "--fps {fps} is outside {}..={}",
            FPS_RANGE.start(),
            FPS_RANGE.end()
        ));
    }
    Ok(fps)
}

/// `--size`: `WIDTHxHEIGHT`, each side in [`SIDE_RANGE`].
pub fn parse_size(text: &str) -> Result<FrameSize, String> {
    let malformed =
        || format!("--size must look like 1280x720 (WIDTHxHEIGHT in pixels), got '{text}'");
    let (w, h) = text.trim().split_once(['x', 'X']).ok_or_else(malformed)?;
    let width = w.trim().parse::<u32>().map_err(|_| malformed())?;
    let height = h.trim().parse::<u32>().map_err(|_| malformed())?;
    for (name, side) in [("width", width), ("height", height)] {
        if !SIDE_RANGE.contains(&side) {
            return Err(format!(
                "--size {width}x{height}: the {name} {side} is outside {}..={} pixels",
                SIDE_RANGE.start(),
                SIDE_RANGE.end()
            ));
        }
    }
    Ok(FrameSize { width, height })
}

/// The built-in openh264 encoder codes frames up to 3840 × 2160, on their side too (its own limit: a larger frame
/// failed at the first frame with "Encoder max resolution 3840x2160 horizontal or 2160x3840 vertical"), so a
/// larger `--size` is refused before anything is rendered.
pub fn openh264_size_refusal(width: u32, height: u32) -> Option<String> {
    (width.max(height) > 3840 || width.min(height) > 2160).then(|| {
        format!(
            "--size {width}x{height}: the built-in openh264 MP4 encoder takes at most 3840x2160 (or 2160x3840); \
             use a smaller size, a .gif or frames/, or --encoder ffmpeg with ffmpeg installed"
        )
    })
}

/// Classifies an output path: a trailing `/` or an existing directory means PNG frames, otherwise the
/// extension (case-insensitive) picks GIF or MP4.
pub fn classify_output(out: &Path, is_dir: bool) -> Result<OutputKind, String> {
    let text = out.to_string_lossy();
    if is_dir || text.ends_with('/') || text.ends_with(std::path::MAIN_SEPARATOR) {
        return Ok(OutputKind::Frames);
    }
    match out.extension().map(|e| e.to_string_lossy().to_lowercase()) {
        Some(e) if e == "gif" => Ok(OutputKind::Gif),
        Some(e) if e == "mp4" => Ok(OutputKind::Mp4),
        Some(e) => Err(format!(
            "--out {text}: unknown format '.{e}': use .gif, .mp4 or a directory/"
        )),
        None => Err(format!(
            "--out {text}: unknown format (no extension): use .gif, .mp4 or a directory/"
        )),
    }
}

/// Frames in a clip of a `ticks`-tick demo at `fixed_hz`: `floor(ticks · fps / fixed_hz) + 1`, and one more where
/// the last of those would show a tick before the end, so that the clip always ends on the demo's last state (612
/// ticks at 200 Hz gave 92 frames at 30 fps, the last showing tick 607); `None` when that is not a number below
/// 2^64 (a tiny or broken `fixed_hz`).
pub fn frame_count(ticks: u64, fixed_hz: f64, fps: u32) -> Option<u64> {
    frames_over(ticks as f64 * fps as f64 / fixed_hz, ticks, |k| {
        frame_tick(k, fixed_hz, fps, ticks)
    })
}

/// Frames in a clip `seconds_in_frames` frame intervals long that ends at tick `ticks`, frame `k` showing
/// `frame_tick(k)`: one a whole interval and the first, and one more where the last of those stops short of the end.
fn frames_over(seconds_in_frames: f64, ticks: u64, frame_tick: impl Fn(u64) -> u64) -> Option<u64> {
    // A whole number of frames computed as 89.999… must still count as 90.
    let intervals = (seconds_in_frames * (1.0 + 1e-12)).floor();
    // `as u64` saturates (and u64::MAX as f64 is 2^64), so anything out of range is caught here.
    if !(0.0..u64::MAX as f64).contains(&intervals) {
        return None;
    }
    let last = intervals as u64;
    let short = u64::from(frame_tick(last) < ticks);
    last.checked_add(1)?.checked_add(short)
}

/// The demo tick frame `k` shows: `round(k · fixed_hz / fps)`, never past the end.
pub fn frame_tick(k: u64, fixed_hz: f64, fps: u32, ticks: u64) -> u64 {
    ((k as f64 * fixed_hz / fps as f64).round() as u64).min(ticks)
}

/// The ticks `--from` and `--to` cut the clip to: from 0 and to `ticks` by default; an end past the demo's or a
/// start after the end is refused, naming the option and its value.
pub fn clip_range(
    from: Option<u64>,
    to: Option<u64>,
    ticks: u64,
    file: &str,
) -> Result<(u64, u64)> {
    let end = to.unwrap_or(ticks);
    if end > ticks {
        bail!("--to {end}: {file} has {}", counted(ticks, "tick", "ticks"));
    }
    let start = from.unwrap_or(0);
    if start > end {
        match to {
            Some(_) => bail!("--from {start}: after --to {end}"),
            None => bail!(
                "--from {start}: {file} has {}",
                counted(ticks, "tick", "ticks")
            ),
        }
    }
    Ok((start, end))
}

/// When each tick of a demo plays: tick `t` (t ≥ 1) lasts `1 / rate[t − 1]` s, the rate of the lanes it steps
/// ([`crate::demo::play_rate_hz`]), so a clip moves as the lanes do even where the smallest h changed part-way.
#[derive(Clone, Debug, PartialEq)]
pub struct PlaySchedule {
    /// The play time at which the demo stands at each tick, from 0 at tick 0 [s].
    at: Vec<f64>,
    /// Every tick at one rate (then the exact `round(k · fixed_hz / fps)` rule holds).
    uniform: Option<f64>,
}

impl PlaySchedule {
    /// The schedule of ticks played at `rates` [Hz], one a tick.
    pub fn new(rates: &[f64]) -> PlaySchedule {
        let mut at = Vec::with_capacity(rates.len() + 1);
        at.push(0.0);
        let mut time = 0.0;
        for rate in rates {
            time += 1.0 / rate;
            at.push(time);
        }
        let uniform = rates
            .first()
            .copied()
            .filter(|first| rates.iter().all(|r| r == first));
        PlaySchedule { at, uniform }
    }

    /// The demo's ticks.
    pub fn ticks(&self) -> u64 {
        (self.at.len() - 1) as u64
    }

    /// How long the demo plays [s].
    pub fn seconds(&self) -> f64 {
        self.at.last().copied().unwrap_or(0.0)
    }

    /// Frames in a clip at `fps` ([`frame_count`] at one rate; the same rule over the play time otherwise).
    pub fn frame_count(&self, fps: u32) -> Option<u64> {
        let ticks = self.ticks();
        if let Some(hz) = self.uniform {
            return frame_count(ticks, hz, fps);
        }
        frames_over(self.seconds() * fps as f64, ticks, |k| {
            self.frame_tick(k, fps)
        })
    }

    /// The tick frame `k` shows: the one whose play time is nearest `k / fps` (the later on a tie), never past the
    /// end.
    pub fn frame_tick(&self, k: u64, fps: u32) -> u64 {
        let ticks = self.ticks();
        if let Some(hz) = self.uniform {
            return frame_tick(k, hz, fps, ticks);
        }
        let target = k as f64 / fps as f64;
        let after = self.at.partition_point(|&t| t < target);
        if after == 0 {
            return 0;
        }
        if after >= self.at.len() {
            return ticks;
        }
        let nearer_before = target - self.at[after - 1] < self.at[after] - target;
        (if nearer_before { after - 1 } else { after }) as u64
    }
}

/// Is an `ffmpeg` that runs on PATH?
fn ffmpeg_available() -> bool {
    Command::new("ffmpeg")
        .arg("-version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Where a finished export goes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Destination {
    /// A missing path or a regular file (for frames: a missing path or an empty directory), symbolic links
    /// followed: the output is renamed onto it from a temporary beside it.
    Replace(PathBuf),
    /// A character device or a FIFO: the finished bytes are written into it.
    Stream(PathBuf),
}

/// What kind of file a path is, for messages.
fn file_kind(file_type: fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_char_device() {
            return "character device";
        }
        if file_type.is_fifo() {
            return "FIFO";
        }
        if file_type.is_block_device() {
            return "block device";
        }
        if file_type.is_socket() {
            return "socket";
        }
    }
    if file_type.is_dir() {
        "directory"
    } else if file_type.is_file() {
        "regular file"
    } else if file_type.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}

/// Where `--out` leads: a symbolic link is followed to its target; a missing path (or, for frames, a directory)
/// is written, a regular file only with `replace` (`--force`); a character device or a FIFO takes a GIF or MP4
/// in place; anything else is refused.
fn destination(out: &Path, kind: OutputKind, replace: bool) -> Result<Destination> {
    // Without a trailing '/', so a frames path that names a file is seen as that file.
    let plain: PathBuf = out.components().collect();
    let found = follow_output_link(&plain).map_err(|e| {
        let message = format!("--out {}: {e}", out.display());
        match e {
            LinkError::Dangling(source) | LinkError::Unreadable { source, .. } => {
                anyhow::Error::new(source).context(message)
            }
        }
    })?;
    let Some(OutputTarget {
        link_target,
        metadata: meta,
    }) = found
    else {
        // Missing (or unreadable: the folder checks report that).
        return Ok(Destination::Replace(out.to_path_buf()));
    };
    let path = link_target.unwrap_or_else(|| out.to_path_buf());
    let file_type = meta.file_type();
    match kind {
        OutputKind::Frames if file_type.is_dir() => Ok(Destination::Replace(path)),
        OutputKind::Frames => bail!(
            "--out {}: is a {}, not a directory; PNG frames go into a new or empty directory",
            out.display(),
            file_kind(file_type)
        ),
        OutputKind::Gif | OutputKind::Mp4 if file_type.is_file() && !replace => {
            bail!("{}", super::demo::already_exists(out))
        }
        OutputKind::Gif | OutputKind::Mp4 if file_type.is_file() => Ok(Destination::Replace(path)),
        OutputKind::Gif | OutputKind::Mp4 if is_stream(file_type) => Ok(Destination::Stream(path)),
        OutputKind::Gif | OutputKind::Mp4 => bail!(
            "--out {}: is a {}; a clip goes to a regular file (or a character device or FIFO)",
            out.display(),
            file_kind(file_type)
        ),
    }
}

/// Checks before any work that the output can be created: its folder exists and is writable (for a device or
/// FIFO: the temporary folder), a frames directory does not already hold files, and nothing but a regular file
/// would be replaced, and that only with `replace` ([`destination`]).
fn check_output(out: &Path, kind: OutputKind, replace: bool) -> Result<Destination> {
    let target = destination(out, kind, replace)?;
    let path = match &target {
        Destination::Replace(path) => path.as_path(),
        Destination::Stream(_) => {
            let probe = stream_hidden(out, "probe");
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&probe)
                .with_context(|| {
                    format!(
                        "cannot write in the temporary folder '{}'",
                        std::env::temp_dir().display()
                    )
                })?;
            let _ = fs::remove_file(&probe);
            return Ok(target);
        }
    };
    let folder = crate::demo::folder_of(path);
    // The option and its value, then what is wrong with its folder.
    match fs::metadata(&folder) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!(
            "--out {}: '{}' is not a directory",
            out.display(),
            folder.display()
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => bail!(
            "--out {}: the folder '{}' does not exist",
            out.display(),
            folder.display()
        ),
        Err(e) => bail!(
            "--out {}: cannot look at the folder '{}' ({e})",
            out.display(),
            folder.display()
        ),
    }
    if path.file_name().is_none() {
        bail!(
            "--out {}: name the file or directory to create, e.g. clip.gif or frames/",
            out.display()
        );
    }
    if kind == OutputKind::Frames && path.exists() {
        let entries = fs::read_dir(path)
            .with_context(|| format!("cannot read the frames directory '{}'", path.display()))?;
        if entries.count() > 0 {
            bail!(
                "frames directory '{}' already holds files: export into a new or empty directory",
                path.display()
            );
        }
    }
    // Not the temporary output's name: a test (or a script) waiting for that file to know the export is under way
    // would see the probe, before the stop signals are handled.
    let probe = hidden_beside(path, "probe");
    if let Err(e) = OpenOptions::new().write(true).create_new(true).open(&probe) {
        bail!("{}", unwritable_folder(&folder, &e));
    }
    let _ = fs::remove_file(&probe);
    Ok(target)
}

/// Why no file can be created in `folder`, which exists, in one line. Creating a file in a folder that exists
/// fails with "No such file or directory" where the file system takes no new files (`/proc`, `/sys`): that cause
/// is named instead of the misleading one.
fn unwritable_folder(folder: &Path, error: &io::Error) -> String {
    let folder = folder.display();
    match error.kind() {
        io::ErrorKind::PermissionDenied => {
            format!("output folder '{folder}' is not writable (permission denied)")
        }
        io::ErrorKind::ReadOnlyFilesystem => {
            format!("output folder '{folder}' is on a read-only file system")
        }
        io::ErrorKind::NotFound => {
            format!("output folder '{folder}' does not take new files (a virtual file system?)")
        }
        _ => format!("cannot create a file in output folder '{folder}' ({error})"),
    }
}

/// `dir/.name.partial-PID`: the temporary file or directory an export writes before its rename.
fn temp_path(out: &Path) -> PathBuf {
    hidden_beside(out, "partial")
}

/// `dir/.name.WHAT-PID`, beside `out`.
fn hidden_beside(out: &Path, what: &str) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "clip".into());
    crate::demo::folder_of(out).join(crate::text::temporary_name(
        ".",
        &name,
        &format!(".{what}-{}", std::process::id()),
    ))
}

/// Moves the finished output `temp` (a file, or a folder when `dir`) to the first free numbered name beside
/// `target` (`clip-2.gif`, `frames-2`; [`crate::demo::numbered_path`]), without replacing anything that appears
/// there meanwhile. Returns where it went; `None` leaves it where it is.
fn keep_beside(temp: &Path, target: &Path, dir: bool) -> Option<PathBuf> {
    (2..=crate::demo::MAX_NUMBERED_NAMES)
        .map(|n| crate::demo::numbered_path(target, n))
        .filter(|candidate| fs::symlink_metadata(candidate).is_err())
        .find_map(|candidate| {
            let moved = if dir {
                fs::rename(temp, &candidate)
            } else {
                crate::demo::publish_new(temp, &candidate)
            };
            moved.is_ok().then_some(candidate)
        })
}

/// `$TMPDIR/.contact-sandbox-name.partial-PID`: the temporary file of an export into a device or FIFO, whose
/// folder (`/dev`) may not be writable.
fn stream_temp_path(out: &Path) -> PathBuf {
    stream_hidden(out, "partial")
}

/// `$TMPDIR/.contact-sandbox-name.WHAT-PID`.
fn stream_hidden(out: &Path, what: &str) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "clip".into());
    std::env::temp_dir().join(crate::text::temporary_name(
        ".contact-sandbox-",
        &name,
        &format!(".{what}-{}", std::process::id()),
    ))
}

/// Opens a character device or FIFO for writing ([`crate::demo::open_stream`]); a stop signal ends the wait for a
/// FIFO's reader (a blocked `open` ignored the first signal, and a second one left the temporary clip behind).
fn open_stream(target: &Path) -> Result<File> {
    crate::demo::open_stream(target, || {
        if export_stopped() {
            bail!(
                "stopped ({}) while waiting for a reader of '{}'",
                super::stop_signal_name().unwrap_or("a stop signal"),
                target.display()
            );
        }
        Ok(())
    })
}

/// Stop signals the export has received.
static EXPORT_STOPS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Has a stop signal come?
fn export_stopped() -> bool {
    EXPORT_STOPS.load(std::sync::atomic::Ordering::SeqCst) > 0
}

/// The export's stop-signal handler. The first signal asks the app to exit at its next frame, and the export
/// then removes its temporary output itself. A second one exits at once, after removing the temporary output: it
/// used to exit through Bevy's handler without removing it (Ctrl-C pressed twice left `.clip.gif.partial-PID`).
fn stop_the_export() {
    if EXPORT_STOPS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
        bevy::app::TerminalCtrlCHandlerPlugin::gracefully_exit();
    } else {
        crate::demo::remove_unfinished_writes();
        crate::cli::stdout::errln!(
            "export stopped at once by a second signal ({}); its unfinished output was removed",
            super::stop_signal_name().unwrap_or("a stop signal")
        );
        std::process::exit(130);
    }
}

/// The temporary output: removed on drop unless kept (renamed onto the target, or left for the user).
struct TempOutput {
    temp: PathBuf,
    target: Destination,
    dir: bool,
    /// May a file that appeared at the target meanwhile be replaced (`--force`)?
    replace: bool,
    keep: bool,
    /// Listed for a second stop signal's handler, which exits at once ([`stop_the_export`]).
    unfinished: Option<crate::demo::Unfinished>,
}

impl TempOutput {
    fn create(target: &Destination, kind: OutputKind, replace: bool) -> Result<TempOutput> {
        let temp = match target {
            Destination::Replace(path) => {
                crate::cli::note_stale_temporaries(path, "partial", "an export");
                temp_path(path)
            }
            Destination::Stream(path) => stream_temp_path(path),
        };
        let dir = kind == OutputKind::Frames;
        let created = if dir {
            fs::create_dir(&temp)
        } else {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)
                .map(|_| ())
        };
        created.with_context(|| format!("cannot create '{}'", temp.display()))?;
        Ok(TempOutput {
            unfinished: Some(crate::demo::Unfinished::register(&temp)),
            temp,
            target: target.clone(),
            dir,
            replace,
            keep: false,
        })
    }

    /// Puts the finished output in place: renamed onto the target (the folder synced, so the rename survives a
    /// crash), or its bytes written into a device or FIFO.
    fn commit(mut self) -> Result<()> {
        let target = match &self.target {
            Destination::Replace(path) => path.clone(),
            Destination::Stream(path) => {
                let path = path.clone();
                return self.stream_into(&path);
            }
        };
        // check_output looked at the target before the export; it may have changed since.
        let refusal = match fs::symlink_metadata(&target) {
            Err(_) => None,
            Ok(m) if self.dir && m.is_dir() => {
                // rename(2) replaces an empty directory only.
                fs::read_dir(&target)?
                    .next()
                    .is_some()
                    .then(|| "filled up".to_string())
            }
            Ok(m) if !self.dir && m.is_file() => (!self.replace).then(|| "was created".to_string()),
            Ok(m) => Some(format!("became a {}", file_kind(m.file_type()))),
        };
        let refuse = |output: &mut TempOutput, change: &str| {
            output.keep = true;
            // Left for the user, named in the message: a later signal does not remove it either. It is moved to
            // a numbered name beside the target (`clip-2.gif`): left under its temporary name, a later export of
            // the clip took it for a killed export's and removed it.
            output.unfinished = None;
            let kept =
                keep_beside(&output.temp, &target, output.dir).unwrap_or(output.temp.clone());
            anyhow!(
                "'{}' {change} during the export; not replacing it: the output is in '{}'",
                target.display(),
                kept.display()
            )
        };
        if let Some(change) = refusal {
            return Err(refuse(&mut self, &change));
        }
        let moved = if self.dir || self.replace {
            if !self.dir {
                crate::demo::keep_permissions(&target, &self.temp);
            }
            fs::rename(&self.temp, &target)
        } else {
            // Linked into place, so a file created since the look above is not replaced either.
            publish_new(&self.temp, &target)
        };
        match moved {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && !self.dir => {
                return Err(refuse(&mut self, "was created"));
            }
            moved => moved.with_context(|| {
                format!(
                    "cannot rename '{}' to '{}'",
                    self.temp.display(),
                    target.display()
                )
            })?,
        }
        self.keep = true;
        if let Ok(folder) = File::open(crate::demo::folder_of(&target)) {
            let _ = folder.sync_all();
        }
        Ok(())
    }

    /// Writes the finished file into a character device or FIFO (opening a FIFO waits for its reader); the
    /// temporary file is removed on drop.
    fn stream_into(self, target: &Path) -> Result<()> {
        let mut device = open_stream(target)?;
        let kind = device
            .metadata()
            .with_context(|| format!("cannot read '{}'", target.display()))?
            .file_type();
        if !is_stream(kind) {
            bail!(
                "'{}' became a {} during the export; not writing into it",
                target.display(),
                file_kind(kind)
            );
        }
        let mut clip = File::open(&self.temp)
            .with_context(|| format!("cannot read '{}'", self.temp.display()))?;
        io::copy(&mut clip, &mut device)
            .and_then(|_| device.flush())
            .with_context(|| format!("cannot write '{}'", target.display()))?;
        Ok(())
    }
}

impl Drop for TempOutput {
    fn drop(&mut self) {
        if !self.keep {
            let _ = if self.dir {
                fs::remove_dir_all(&self.temp)
            } else {
                fs::remove_file(&self.temp)
            };
        }
    }
}

/// Bytes in a file, or in the files of a directory.
fn output_bytes(path: &Path) -> u64 {
    match fs::metadata(path) {
        Ok(m) if m.is_dir() => fs::read_dir(path)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok()?.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0),
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

/// `1.4 MB`, `820 kB`, `512 B`.
fn human_bytes(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b if b >= 1_000 => format!("{:.0} kB", b as f64 / 1e3),
        b => format!("{b} B"),
    }
}

pub fn run_export(args: &ExportArgs) -> Result<()> {
    // First, while the process has one thread.
    quiet_headless_gpu_probe();
    let kind = classify_output(&args.out, args.out.is_dir()).map_err(anyhow::Error::msg)?;
    if same_file(&args.out, &args.demo) {
        bail!(
            "--out {}: is the same file as the demo {}; the export would replace it",
            args.out.display(),
            args.demo.display()
        );
    }
    let FrameSize { width, height } = args.size;
    let format = match kind {
        OutputKind::Gif => ClipFormat::Gif,
        OutputKind::Frames => ClipFormat::Frames,
        OutputKind::Mp4 => {
            if width % 2 != 0 || height % 2 != 0 {
                bail!("--size {width}x{height}: MP4 (H.264, 4:2:0) needs an even width and height");
            }
            match (args.encoder, ffmpeg_available()) {
                (Mp4Encoder::Ffmpeg, false) => bail!(
                    "--encoder ffmpeg: no working `ffmpeg` on PATH (install it, or use --encoder openh264)"
                ),
                (Mp4Encoder::Ffmpeg, true) | (Mp4Encoder::Auto, true) => ClipFormat::Mp4Ffmpeg,
                (Mp4Encoder::Openh264, _) | (Mp4Encoder::Auto, false) => {
                    if let Some(refusal) = openh264_size_refusal(width, height) {
                        bail!(refusal);
                    }
                    ClipFormat::Mp4Openh264
                }
            }
        }
    };
    if kind != OutputKind::Mp4 && args.encoder != Mp4Encoder::Auto {
        bail!("--encoder applies to .mp4 output only");
    }

    if kind == OutputKind::Gif && args.fps > GIF_MAX_FPS {
        bail!(
            "--fps {}: a GIF cannot play faster than {GIF_MAX_FPS} fps in time (its frame delays are whole \
             centiseconds, and browsers play a delay of 1 cs as 10 cs); use --fps {GIF_MAX_FPS} or less, or export \
             an .mp4",
            args.fps
        );
    }

    let file = args.demo.display().to_string();
    let demo = Demo::load(&args.demo)?;
    let (from, to) = clip_range(args.from, args.to, demo.ticks, &file)?;
    if demo.hashes.is_empty() && !args.allow_mismatch {
        bail!(
            "{file}: the demo holds no hashes, so nothing can check that this replay is the recorded run; not \
             exporting it (pass --allow-mismatch to export it unchecked, labelled \"unchecked\")"
        );
    }
    // A clip whose ticks make too many frames even at the fastest rate a tick plays at is refused before a long
    // check; the check finds the lanes' own rates (below).
    let fastest_hz = demo.fixed_hz.max(*crate::demo::FIXED_RATES_HZ.end());
    frame_count(to - from, fastest_hz, args.fps)
        .filter(|&frames| frames <= MAX_FRAMES)
        .ok_or_else(|| {
            let frames = ((to - from) as f64 * args.fps as f64 / fastest_hz).floor() + 1.0;
            anyhow!(
                "{file}: {} make at least {frames:.0} frames at {} fps (a tick plays at most 1/{} s); exports are \
                 limited to {MAX_FRAMES} frames (lower --fps, or cut the clip with --from and --to)",
                counted(to - from, "tick", "ticks"),
                args.fps,
                crate::text::number(fastest_hz)
            )
        })?;
    let target = check_output(&args.out, kind, args.force)?;
    // From here Ctrl-C, SIGTERM or SIGHUP (ctrlc's `termination` feature, see Cargo.toml) stops the export
    // cleanly: during the check below at its next tick, with nothing written; while rendering, the app exits at its
    // next frame and the temporary output is removed (Bevy's own handler, installed later, would leave a gap). A
    // second signal exits at once; an ignored signal stays ignored.
    super::on_stop_signal(stop_the_export);
    // Check every stored hash before rendering: the clip is labelled with the verdict.
    let mut checker = Player::new(demo.clone(), file.clone());
    let bar = progress_bar(
        demo.ticks,
        "{msg} [{bar:40}] {pos}/{len} ticks, ETA {eta}",
        "checking hashes",
    );
    let mut check_lines = args
        .progress_lines
        .then(|| ProgressLines::start(ProgressStage::Check, demo.ticks));
    checker.start()?;
    let mut rates = Vec::with_capacity(usize::try_from(demo.ticks).unwrap_or(0));
    loop {
        // At the rate of the lanes as the tick finds them (its actions applied), before it steps them.
        let rate = checker.session.play_rate_hz(demo.fixed_hz);
        if !checker.advance()? {
            break;
        }
        rates.push(rate);
        if EXPORT_STOPS.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            bar.finish_and_clear();
            bail!(
                "export stopped ({}) while checking the demo's hashes, at tick {} of {}; nothing was written",
                super::stop_signal_name().unwrap_or("a stop signal"),
                checker.tick(),
                demo.ticks
            );
        }
        if checker.tick().is_multiple_of(64) {
            bar.set_position(checker.tick());
            if let Some(lines) = &mut check_lines {
                lines.report(checker.tick());
            }
        }
    }
    bar.finish_and_clear();
    if let Some(lines) = &mut check_lines {
        lines.report(checker.tick());
    }
    let verdict = checker.verdict.clone();
    drop(checker);
    let schedule = PlaySchedule::new(rates.get(from as usize..to as usize).unwrap_or_default());
    let frames = schedule
        .frame_count(args.fps)
        .filter(|&frames| frames <= MAX_FRAMES)
        .ok_or_else(|| {
            anyhow!(
                "{file}: {} play {:.1} s at their lanes' rates, {} frames at {} fps; exports are limited to \
                 {MAX_FRAMES} frames (lower --fps, or cut the clip with --from and --to)",
                counted(to - from, "tick", "ticks"),
                schedule.seconds(),
                (schedule.seconds() * args.fps as f64).floor() + 1.0,
                args.fps
            )
        })?;
    if let Some((tick, _, _)) = &verdict.mismatch {
        if !args.allow_mismatch {
            bail!(
                "{file}: {verdict}; not exporting a replay that differs from the recording \
                 (pass --allow-mismatch to export it labelled \"MISMATCH at tick {tick}\")"
            );
        }
        crate::cli::stdout::errln!(
            "{}",
            crate::text::one_line(&format!(
                "WARNING: {file}: {verdict}. Exporting anyway (--allow-mismatch); the clip is labelled \
                 \"MISMATCH at tick {tick}\" and is NOT the recorded run"
            ))
        );
    }
    let verdict_text = match &verdict.mismatch {
        Some((tick, _, _)) => format!("MISMATCH at tick {tick}"),
        None if verdict.matched == 0 => {
            crate::cli::stdout::errln!(
                "{}",
                crate::text::one_line(&format!(
                    "WARNING: {file}: the demo holds no hashes; exporting it unchecked (--allow-mismatch), \
                     labelled \"unchecked\""
                ))
            );
            "unchecked (no hashes)".to_string()
        }
        None => format!(
            "match ({})",
            counted(verdict.matched as u64, "hash", "hashes")
        ),
    };

    let temp = TempOutput::create(&target, kind, args.force)?;
    let frame_ticks: Vec<u64> = (0..frames)
        .map(|k| from + schedule.frame_tick(k, args.fps))
        .collect();
    let demo_name = args
        .demo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.clone());
    let overlay = (!args.no_overlay).then(|| Overlay {
        demo_name,
        verdict: verdict_text,
        mismatch: verdict.mismatch.is_some(),
    });
    let mut player = Player::new(demo.clone(), file.clone());
    player.start()?;
    let progress = progress_bar(
        frames,
        "{msg} [{bar:40}] {pos}/{len} frames, {rate}, ETA {eta}",
        "exporting",
    );
    let frame_lines = args.progress_lines.then(|| {
        Arc::new(Mutex::new(ProgressLines::start(
            ProgressStage::Frames,
            frames,
        )))
    });
    let on_frames = {
        let (bar, lines) = (progress.clone(), frame_lines.clone());
        Box::new(move |done: u64| {
            bar.set_position(done);
            if let Some(Ok(mut lines)) = lines.as_ref().map(|l| l.lock()) {
                lines.report(done);
            }
        })
    };
    let started = Instant::now();
    let outcome = render_clip(ExportPlan {
        player,
        width,
        height,
        fps: args.fps,
        frame_ticks,
        format,
        temp: temp.temp.clone(),
        overlay,
        on_frames,
    });
    progress.finish_and_clear();
    let rendered = outcome.with_context(|| {
        format!(
            "exporting {file} to {} failed; nothing was written there",
            args.out.display()
        )
    })?;
    if let Some(Ok(mut lines)) = frame_lines.as_ref().map(|l| l.lock()) {
        lines.report(rendered.frames);
    }
    let seconds = started.elapsed().as_secs_f64();
    let size = output_bytes(&temp.temp);
    temp.commit()?;
    let encoder = match format {
        ClipFormat::Gif => "GIF",
        ClipFormat::Mp4Openh264 => "MP4, openh264",
        ClipFormat::Mp4Ffmpeg => "MP4, ffmpeg libx264",
        ClipFormat::Frames => "PNG frames",
    };
    outln!(
        "exported {} ({width}x{height}, {} fps, {:.2} s of play; {encoder}) in {seconds:.1} s, \
         {:.1} frames/s -> {} ({}); hashes: {}",
        counted(rendered.frames, "frame", "frames"),
        args.fps,
        schedule.seconds(),
        rendered.frames as f64 / seconds.max(1e-9),
        args.out.display(),
        human_bytes(size),
        if verdict.matched == 0 && verdict.mismatch.is_none() {
            "none stored, nothing was checked".to_string()
        } else {
            verdict.to_string()
        }
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fps_accepts_1_to_120_and_names_the_value_otherwise() {
        assert_eq!(parse_fps("1"), Ok(1));
        assert_eq!(parse_fps("30"), Ok(30));
        assert_eq!(parse_fps("120"), Ok(120));
        assert!(parse_fps("0").unwrap_err().contains("--fps 0"));
        assert!(parse_fps("121").unwrap_err().contains("1..=120"));
        assert!(parse_fps("thirty").unwrap_err().contains("'thirty'"));
        assert!(parse_fps("-5").is_err());
        assert!(parse_fps("29.97").is_err());
    }

    #[test]
    fn size_reads_width_x_height_within_16_to_3840() {
        assert_eq!(
            parse_size("1280x720"),
            Ok(FrameSize {
                width: 1280,
                height: 720
            })
        );
        assert_eq!(
            parse_size("16X3840"),
            Ok(FrameSize {
                width: 16,
                height: 3840
            })
        );
        for bad in [
            "1280",
            "1280x",
            "x720",
            "1280*720",
            "a x b",
            "1280x720x3",
            "",
        ] {
            let message = parse_size(bad).unwrap_err();
            assert!(message.contains("1280x720"), "{bad}: {message}");
        }
        assert!(parse_size("15x720").unwrap_err().contains("width 15"));
        assert!(parse_size("1280x3841").unwrap_err().contains("height 3841"));
        assert!(parse_size("0x0").is_err());
    }

    #[test]
    fn output_kind_follows_the_extension_or_a_trailing_slash() {
        let kind = |p: &str, dir| classify_output(Path::new(p), dir);
        assert_eq!(kind("clip.gif", false), Ok(OutputKind::Gif));
        assert_eq!(kind("out/Clip.GIF", false), Ok(OutputKind::Gif));
        assert_eq!(kind("clip.mp4", false), Ok(OutputKind::Mp4));
        assert_eq!(kind("frames/", false), Ok(OutputKind::Frames));
        assert_eq!(kind("frames", true), Ok(OutputKind::Frames));
        assert_eq!(kind("clip.gif", true), Ok(OutputKind::Frames));
        let avi = kind("clip.avi", false).unwrap_err();
        assert_eq!(
            avi,
            "--out clip.avi: unknown format '.avi': use .gif, .mp4 or a directory/"
        );
        assert!(kind("clip", false).unwrap_err().contains("no extension"));
    }

    #[test]
    fn wall_throw_at_30_fps_has_91_frames_from_tick_0_to_300() {
        // 300 ticks at 100 Hz = 3 s: 90 frame intervals at 30 fps, 91 frames.
        assert_eq!(frame_count(300, 100.0, 30), Some(91));
        let ticks: Vec<u64> = (0..91).map(|k| frame_tick(k, 100.0, 30, 300)).collect();
        assert_eq!(&ticks[..4], &[0, 3, 7, 10]);
        assert_eq!(ticks[90], 300);
        assert!(ticks.windows(2).all(|w| w[0] < w[1]));
    }

    /// A demo whose lanes went from 10 ms to 1 ms part-way plays each tick at its lanes' rate: 10 ticks at 100 Hz
    /// and 100 at 1 000 Hz are 0.2 s, 7 frames at 30 fps, the fourth (0.1 s) at tick 10. At the recorded 100 Hz
    /// they made 34 frames, 1.1 s of a ball moving a tenth of its speed after the change.
    #[test]
    fn a_clip_plays_each_tick_at_its_lanes_rate() {
        let mut rates = vec![100.0; 10];
        rates.extend([1000.0; 100]);
        let schedule = PlaySchedule::new(&rates);
        assert_eq!(schedule.ticks(), 110);
        assert!((schedule.seconds() - 0.2).abs() < 1e-12);
        assert_eq!(schedule.frame_count(30), Some(7));
        let ticks: Vec<u64> = (0..7).map(|k| schedule.frame_tick(k, 30)).collect();
        assert_eq!(ticks, [0, 3, 7, 10, 43, 77, 110]);
        // One rate throughout: the exact rule of `frame_count` and `frame_tick`, ties and all.
        let uniform = PlaySchedule::new(&[100.0; 300]);
        assert_eq!(uniform.frame_count(30), frame_count(300, 100.0, 30));
        assert_eq!(uniform.frame_count(40), frame_count(300, 100.0, 40));
        assert!((0..121).all(|k| uniform.frame_tick(k, 40) == frame_tick(k, 100.0, 40, 300)));
        // A clip ends on the last tick where the play time falls between frames.
        let short = PlaySchedule::new(&[100.0, 100.0, 1000.0, 1000.0, 1000.0]);
        let frames = short.frame_count(30).expect("a count");
        assert_eq!(short.frame_tick(frames - 1, 30), 5);
        assert_eq!(PlaySchedule::new(&[]).frame_count(30), Some(1));
    }

    #[test]
    fn frame_ticks_round_to_the_nearest_tick_and_stay_inside_the_demo() {
        // One frame per tick when fps = fixed_hz.
        assert_eq!(frame_count(100, 60.0, 60), Some(101));
        assert!((0..101).all(|k| frame_tick(k, 60.0, 60, 100) == k));
        // More frames than ticks: ticks repeat.
        assert_eq!(frame_count(10, 10.0, 30), Some(31));
        assert_eq!(frame_tick(1, 10.0, 30, 10), 0); // 0.33 → 0
        assert_eq!(frame_tick(2, 10.0, 30, 10), 1); // 0.67 → 1
        // A fractional clip length: 301 ticks at 60 Hz at 30 fps → 150.5 intervals, whose 151st frame shows tick
        // 300, and a 152nd the end.
        assert_eq!(frame_count(301, 60.0, 30), Some(152));
        assert_eq!(frame_tick(150, 60.0, 30, 301), 300);
        assert_eq!(frame_tick(151, 60.0, 30, 301), 301);
        // An empty demo is one frame of tick 0.
        assert_eq!(frame_count(0, 100.0, 30), Some(1));
        assert_eq!(frame_tick(0, 100.0, 30, 0), 0);
        // The last frame shows the end, whatever the rates, and only the last does.
        for (ticks, hz, fps) in [
            (299, 100.0, 30),
            (7, 1000.0, 1),
            (1000, 59.94, 24),
            (612, 200.0, 30),
            (301, 60.0, 30),
        ] {
            let last = frame_count(ticks, hz, fps).unwrap() - 1;
            assert_eq!(
                frame_tick(last, hz, fps, ticks),
                ticks,
                "{ticks} at {hz} Hz, {fps} fps"
            );
            assert!(
                frame_tick(last - 1, hz, fps, ticks) < ticks,
                "{ticks} at {hz} Hz, {fps} fps"
            );
        }
        // 612 ticks at 200 Hz: 91.8 intervals at 30 fps, whose 92nd frame showed tick 607; a 93rd shows 612.
        assert_eq!(frame_count(612, 200.0, 30), Some(93));
    }

    #[test]
    fn a_missing_or_unwritable_output_folder_is_refused_before_rendering() {
        let missing = Path::new("/nonexistent-contact-sandbox-dir/clip.gif");
        let message = check_output(missing, OutputKind::Gif, true)
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "--out /nonexistent-contact-sandbox-dir/clip.gif: the folder '/nonexistent-contact-sandbox-dir' does \
             not exist"
        );
        let not_a_dir = Path::new("Cargo.toml/clip.gif");
        assert!(
            check_output(not_a_dir, OutputKind::Gif, true)
                .unwrap_err()
                .to_string()
                .contains("not a directory")
        );
    }

    #[test]
    fn temp_output_is_removed_unless_committed_and_replaces_the_target_when_it_is() {
        let dir = std::env::temp_dir().join(format!("cs-export-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let target = dir.join("clip.gif");
        fs::write(&target, b"old").unwrap();
        {
            let destination = check_output(&target, OutputKind::Gif, true).unwrap();
            let temp = TempOutput::create(&destination, OutputKind::Gif, true).unwrap();
            fs::write(&temp.temp, b"partial").unwrap();
        }
        assert_eq!(fs::read(&target).unwrap(), b"old");
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "temp file left behind"
        );
        let destination = check_output(&target, OutputKind::Gif, true).unwrap();
        let temp = TempOutput::create(&destination, OutputKind::Gif, true).unwrap();
        fs::write(&temp.temp, b"new").unwrap();
        temp.commit().unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);

        let frames = dir.join("frames/");
        let destination = check_output(&frames, OutputKind::Frames, true).unwrap();
        let temp = TempOutput::create(&destination, OutputKind::Frames, true).unwrap();
        fs::write(temp.temp.join("frame_00000.png"), b"png").unwrap();
        temp.commit().unwrap();
        assert!(dir.join("frames").join("frame_00000.png").is_file());
        assert!(check_output(&frames, OutputKind::Frames, true).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A fresh scratch folder for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cs-export-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn export_args(demo: &Path, out: &Path) -> ExportArgs {
        ExportArgs {
            demo: demo.to_path_buf(),
            out: out.to_path_buf(),
            fps: 30,
            size: FrameSize {
                width: 64,
                height: 64,
            },
            encoder: Mp4Encoder::Auto,
            force: false,
            allow_mismatch: false,
            no_overlay: false,
            progress_lines: false,
            from: None,
            to: None,
        }
    }

    /// An export killed outright (SIGKILL) left `.clip.gif.partial-PID` for good; the next export of the same clip
    /// removes it once that process is gone, and leaves a live one's and other names alone.
    #[cfg(unix)]
    #[test]
    fn a_dead_export_s_partial_output_is_removed_and_a_live_one_s_kept() {
        let dir = scratch("stale");
        let out = dir.join("clip.gif");
        let mut done = std::process::Command::new("true")
            .spawn()
            .expect("true runs");
        let dead = done.id();
        done.wait().expect("true ends");
        let mut live = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        for name in [
            format!(".clip.gif.partial-{dead}"),
            format!(".clip.gif.partial-{}", live.id()),
            format!(".clip.gif.partial-{}", std::process::id()),
            format!(".other.gif.partial-{dead}"),
            format!(".clip.gif.partial-{dead}x"),
        ] {
            fs::write(dir.join(name), b"half a clip").expect("written");
        }
        fs::create_dir(dir.join(format!(".clip.gif.partial-{dead}0"))).expect("a folder");
        // Written two minutes ago, all but one: a partial written to within the last minute is kept whatever its
        // PID (a process of another PID namespace looks gone from here).
        let ago = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
        for entry in fs::read_dir(&dir).expect("the folder").flatten() {
            fs::File::open(entry.path())
                .and_then(|f| f.set_modified(ago))
                .expect("an old time");
        }
        fs::write(
            dir.join(format!(".clip.gif.partial-{dead}1")),
            b"being written",
        )
        .expect("written");
        let (removed, recent) = crate::demo::remove_stale_temporaries(&out, "partial");
        let young = format!(".clip.gif.partial-{dead}1");
        assert_eq!(
            recent,
            if crate::demo::process_alive(dead * 10 + 1) {
                vec![]
            } else {
                vec![young]
            }
        );
        let _ = live.kill();
        let _ = live.wait();
        let mut expected = vec![format!(".clip.gif.partial-{dead}")];
        if !crate::demo::process_alive(dead * 10) {
            expected.push(format!(".clip.gif.partial-{dead}0"));
        }
        expected.sort();
        assert_eq!(removed, expected);
        assert_eq!(
            fs::read_dir(&dir).expect("the folder").count(),
            7 - expected.len()
        );
        fs::remove_dir_all(&dir).expect("removed");
    }

    /// `--from` and `--to` cut a clip to the demo's ticks between them; an end past the demo or a start after
    /// the end is refused naming the option and its value.
    #[test]
    fn from_and_to_cut_the_clip_and_refuse_ticks_outside_the_demo() {
        assert_eq!(clip_range(None, None, 300, "d.ron").ok(), Some((0, 300)));
        assert_eq!(
            clip_range(Some(100), Some(200), 300, "d.ron").ok(),
            Some((100, 200))
        );
        assert_eq!(
            clip_range(Some(300), None, 300, "d.ron").ok(),
            Some((300, 300))
        );
        let refused = |from, to| {
            clip_range(from, to, 300, "d.ron")
                .map_err(|e| e.to_string())
                .expect_err("refused")
        };
        assert_eq!(refused(None, Some(301)), "--to 301: d.ron has 300 ticks");
        assert_eq!(refused(Some(200), Some(100)), "--from 200: after --to 100");
        assert_eq!(refused(Some(400), None), "--from 400: d.ron has 300 ticks");
    }

    #[test]
    fn progress_lines_read_back_and_nothing_else_does() {
        for (stage, done, total) in [
            (ProgressStage::Check, 0, 300),
            (ProgressStage::Frames, 30, 91),
            (ProgressStage::Frames, 91, 91),
        ] {
            let line = progress_line(stage, done, total);
            assert_eq!(
                parse_progress_line(&line),
                Some((stage, done, total)),
                "{line}"
            );
        }
        assert_eq!(
            progress_line(ProgressStage::Frames, 30, 91),
            "progress frames 30/91"
        );
        for other in [
            "",
            "exported 91 frames",
            "progress frames 30",
            "progress frames x/91",
            "progress ticks 1/2",
            "progress frames 1/2 more",
            "error: output folder '/proc' does not take new files (a virtual file system?)",
        ] {
            assert_eq!(parse_progress_line(other), None, "{other}");
        }
    }

    /// `/proc` exists but takes no new files: creating one fails with "No such file or directory", which named
    /// the wrong cause ("cannot write in output folder '/proc': No such file or directory").
    #[cfg(target_os = "linux")]
    #[test]
    fn a_folder_that_takes_no_files_is_named_in_one_line() {
        let message =
            check_output(Path::new("/proc/clip.gif"), OutputKind::Gif, false).unwrap_err();
        assert_eq!(
            format!("{message:#}"),
            "output folder '/proc' does not take new files (a virtual file system?)"
        );
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        assert_eq!(
            unwritable_folder(Path::new("/root"), &denied),
            "output folder '/root' is not writable (permission denied)"
        );
    }

    /// An export never replaces a clip unless told to (`--force`): an existing one is refused before any work,
    /// naming it, and one that appears while the export runs is kept, the new clip left beside it.
    #[test]
    fn an_existing_clip_is_kept_unless_forced() {
        let dir = scratch("no-clobber");
        let target = dir.join("clip.gif");
        fs::write(&target, b"old").unwrap();
        let refusal = format!(
            "--out {}: already exists; pass --force to replace it",
            target.display()
        );
        let message = check_output(&target, OutputKind::Gif, false)
            .unwrap_err()
            .to_string();
        assert_eq!(message, refusal);
        let demo = Path::new("assets/demos/wall_throw.demo.ron");
        let message = run_export(&export_args(demo, &target))
            .unwrap_err()
            .to_string();
        assert_eq!(message, refusal);
        assert_eq!(fs::read(&target).unwrap(), b"old");
        assert!(check_output(&target, OutputKind::Gif, true).is_ok());
        // Created by someone else during the export: kept, and the clip is where the message says.
        let late = dir.join("late.gif");
        let destination = check_output(&late, OutputKind::Gif, false).unwrap();
        let temp = TempOutput::create(&destination, OutputKind::Gif, false).unwrap();
        fs::write(&temp.temp, b"new").unwrap();
        let kept = temp.temp.clone();
        fs::write(&late, b"theirs").unwrap();
        fs::write(dir.join("late-2.gif"), b"another").unwrap();
        let message = temp.commit().unwrap_err().to_string();
        let beside = dir.join("late-3.gif");
        assert_eq!(
            message,
            format!(
                "'{}' was created during the export; not replacing it: the output is in '{}'",
                late.display(),
                beside.display()
            )
        );
        assert_eq!(fs::read(&late).unwrap(), b"theirs");
        assert_eq!(fs::read(dir.join("late-2.gif")).unwrap(), b"another");
        // Under a name of its own, not its temporary one, which a later export of the clip would take for a
        // killed export's and remove.
        assert_eq!(fs::read(&beside).unwrap(), b"new");
        assert!(!kept.exists());
        assert_eq!(
            crate::demo::remove_stale_temporaries(&late, "partial"),
            (vec![], vec![])
        );
        // A clip replaced under --force keeps the old file's permissions.
        {
            use std::os::unix::fs::PermissionsExt;
            for mode in [0o600, 0o640] {
                fs::set_permissions(&target, fs::Permissions::from_mode(mode)).unwrap();
                let destination = check_output(&target, OutputKind::Gif, true).unwrap();
                let temp = TempOutput::create(&destination, OutputKind::Gif, true).unwrap();
                fs::write(&temp.temp, b"newer").unwrap();
                temp.commit().unwrap();
                assert_eq!(fs::read(&target).unwrap(), b"newer");
                let got = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
                assert_eq!(got, mode);
            }
        }
        // Without a clash the clip is linked into place and no temporary name stays.
        let fresh = dir.join("fresh.gif");
        let destination = check_output(&fresh, OutputKind::Gif, false).unwrap();
        let temp = TempOutput::create(&destination, OutputKind::Gif, false).unwrap();
        fs::write(&temp.temp, b"new").unwrap();
        let partial = temp.temp.clone();
        temp.commit().unwrap();
        assert_eq!(fs::read(&fresh).unwrap(), b"new");
        assert!(!partial.exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    /// GIF delays are whole centiseconds: above 50 fps they would alternate 2 and 1 cs, and browsers play 1 cs as
    /// 10 cs. The refusal comes before the demo is read, and says what to do instead.
    #[test]
    fn a_gif_above_50_fps_is_refused_suggesting_mp4() {
        let dir = scratch("gif-fps");
        let demo = Path::new("assets/demos/wall_throw.demo.ron");
        for fps in [51, 60, 120] {
            let args = ExportArgs {
                fps,
                ..export_args(demo, &dir.join("clip.gif"))
            };
            let message = run_export(&args).unwrap_err().to_string();
            assert!(
                message.starts_with(&format!(
                    "--fps {fps}: a GIF cannot play faster than 50 fps"
                )) && message.contains("--fps 50 or less")
                    && message.contains(".mp4"),
                "{message}"
            );
        }
        assert!(
            fs::read_dir(&dir).unwrap().next().is_none(),
            "nothing written"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    /// The built-in encoder's largest frame is 3840 × 2160 either way up; a larger size is refused before anything is
    /// rendered, naming --size, where the encoder failed at its first frame with its own words. ffmpeg is not asked.
    #[test]
    fn an_mp4_too_large_for_openh264_is_refused_naming_the_size() {
        let dir = scratch("openh264-size");
        let demo = Path::new("assets/demos/wall_throw.demo.ron");
        for (width, height) in [(2176, 2176), (3840, 2162), (2162, 3840), (3000, 3000)] {
            let args = ExportArgs {
                size: FrameSize { width, height },
                encoder: Mp4Encoder::Openh264,
                ..export_args(demo, &dir.join("clip.mp4"))
            };
            let message = run_export(&args).unwrap_err().to_string();
            assert!(
                message.starts_with(&format!(
                    "--size {width}x{height}: the built-in openh264 MP4 encoder takes at most 3840x2160"
                )) && message.contains("--encoder ffmpeg"),
                "{message}"
            );
        }
        for (width, height) in [(3840, 2160), (2160, 3840), (2160, 2160), (16, 3840)] {
            assert_eq!(
                openh264_size_refusal(width, height),
                None,
                "{width}x{height}"
            );
        }
        assert!(
            fs::read_dir(&dir).unwrap().next().is_none(),
            "nothing written"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A demo without hashes cannot be checked: export refuses it unless told to export it unchecked, as
    /// `replay --verify` refuses it (it used to print "hashes: match (0 hashes)").
    #[test]
    fn a_demo_without_hashes_is_refused_unless_allowed() {
        let dir = scratch("no-hashes");
        let demo = dir.join("bare.demo.ron");
        let mut bare = Demo::load(Path::new("assets/demos/wall_throw.demo.ron")).unwrap();
        bare.hashes.clear();
        bare.save(&demo).unwrap();
        let message = run_export(&export_args(&demo, &dir.join("clip.gif")))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("bare.demo.ron: the demo holds no hashes")
                && message.contains("--allow-mismatch"),
            "{message}"
        );
        assert!(!dir.join("clip.gif").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_tiny_fixed_hz_is_too_many_frames_not_zero() {
        // 300 ticks at 1e-17 Hz at 30 fps: 9e20 frames, past u64 (it used to wrap to 0 frames).
        assert_eq!(frame_count(300, 1e-17, 30), None);
        assert_eq!(frame_count(u64::MAX, 1e-300, 120), None);
        assert_eq!(frame_count(0, 1e-17, 30), Some(1));
        // Counts past MAX_FRAMES that fit a u64 are still counted (and refused by run_export).
        assert_eq!(frame_count(1 << 20, 1.0, 1), Some((1 << 20) + 1));
        assert!(frame_count(1 << 50, 1.0, 120).is_some_and(|n| n > MAX_FRAMES));
    }

    /// A demo of more ticks than a clip can show even at the fastest rate a tick plays at (1 000 Hz) is refused
    /// before its check, and `--from`/`--to` that cut it short enough are not.
    #[test]
    fn export_refuses_a_demo_too_long_for_a_clip_before_checking_it() {
        let dir = scratch("too-long");
        let demo = dir.join("long.demo.ron");
        let text = fs::read_to_string("assets/demos/wall_throw.demo.ron").unwrap();
        assert!(text.contains("ticks: 300,"));
        assert!(text.contains("tick: 300,"), "the last hash, at the end");
        let long = text
            .replacen("ticks: 300,", "ticks: 10000000,", 1)
            .replacen("tick: 300,", "tick: 10000000,", 1);
        fs::write(&demo, long).unwrap();
        let message = run_export(&export_args(&demo, &dir.join("clip.gif")))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("10000000 ticks make at least 300001 frames at 30 fps")
                && message.contains("limited to 120000 frames"),
            "{message}"
        );
        assert!(!dir.join("clip.gif").exists());
        let cut = clip_range(Some(9_000_000), None, 10_000_000, "long.demo.ron").expect("a range");
        assert!(frame_count(cut.1 - cut.0, 1000.0, 30).is_some_and(|f| f <= MAX_FRAMES));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn export_refuses_to_write_over_its_own_demo_by_any_name() {
        let dir = scratch("same-file");
        let demo = dir.join("in1.gif");
        fs::copy("assets/demos/wall_throw.demo.ron", &demo).unwrap();
        let original = fs::read(&demo).unwrap();
        let link = dir.join("link.gif");
        #[cfg(unix)]
        std::os::unix::fs::symlink(&demo, &link).unwrap();
        #[cfg(not(unix))]
        fs::copy(&demo, &link).unwrap();
        let hard = dir.join("hard.gif");
        fs::hard_link(&demo, &hard).unwrap();
        let spelt = dir.join(".").join("in1.gif");
        for out in [&demo, &spelt, &link, &hard] {
            let message = run_export(&export_args(&demo, out))
                .unwrap_err()
                .to_string();
            assert!(
                message.contains("is the same file as the demo"),
                "{}: {message}",
                out.display()
            );
            assert_eq!(fs::read(&demo).unwrap(), original);
        }
        assert!(same_file(&demo, &spelt));
        assert!(!same_file(&demo, &dir.join("other.gif")));
        assert!(!same_file(
            &demo,
            Path::new("assets/demos/wall_throw.demo.ron")
        ));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_is_written_through_and_stays_a_link() {
        let dir = scratch("symlink");
        let real = dir.join("real.gif");
        fs::write(&real, b"old").unwrap();
        let link = dir.join("link.gif");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let destination = check_output(&link, OutputKind::Gif, true).unwrap();
        let temp = TempOutput::create(&destination, OutputKind::Gif, true).unwrap();
        fs::write(&temp.temp, b"new").unwrap();
        temp.commit().unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&real).unwrap(), b"new");
        let dangling = dir.join("dangling.gif");
        std::os::unix::fs::symlink(dir.join("missing.gif"), &dangling).unwrap();
        assert!(
            check_output(&dangling, OutputKind::Gif, true)
                .unwrap_err()
                .to_string()
                .contains("symbolic link to a missing")
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_clip_for_a_fifo_is_written_into_it_and_the_fifo_stays() {
        use std::io::Read;
        use std::os::unix::fs::FileTypeExt;
        let dir = scratch("fifo");
        let fifo = dir.join("pipe.gif");
        // The reader is open before the commit; the bytes fit in the pipe's buffer.
        let Some(reader) = crate::testing::fifo_with_reader(&fifo) else {
            eprintln!("skipped: mkfifo is not available");
            return;
        };
        let mut reader = reader.unwrap();
        let destination = check_output(&fifo, OutputKind::Gif, true).unwrap();
        assert_eq!(destination, Destination::Stream(fifo.clone()));
        let temp = TempOutput::create(&destination, OutputKind::Gif, true).unwrap();
        assert!(!temp.temp.starts_with(&dir), "{}", temp.temp.display());
        let written = temp.temp.clone();
        fs::write(&temp.temp, b"GIF89a...").unwrap();
        temp.commit().unwrap();
        let mut got = Vec::new();
        reader.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"GIF89a...");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert!(!written.exists(), "temporary file left behind");
        // A frames directory cannot go into a FIFO.
        let message = check_output(&fifo, OutputKind::Frames, true)
            .unwrap_err()
            .to_string();
        assert!(message.contains("is a FIFO, not a directory"), "{message}");
        let message = check_output(&dir.join("pipe.gif/"), OutputKind::Frames, true)
            .unwrap_err()
            .to_string();
        assert!(message.contains("not a directory"), "{message}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_clip_for_a_character_device_is_written_into_it_and_the_device_stays() {
        use std::os::unix::fs::FileTypeExt;
        let dir = scratch("chardev");
        // A private null device (major 1, minor 3): never the system's /dev/null. Needs root.
        let null = dir.join("mynull.gif");
        let made = Command::new("mknod")
            .arg(&null)
            .args(["c", "1", "3"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        // On a file system mounted `nodev` the node is made but cannot be opened.
        let usable = made && fs::OpenOptions::new().write(true).open(&null).is_ok();
        if !usable {
            eprintln!("skipped: cannot make a usable character device here");
            fs::remove_dir_all(&dir).unwrap();
            return;
        }
        let destination = check_output(&null, OutputKind::Gif, true).unwrap();
        assert_eq!(destination, Destination::Stream(null.clone()));
        let temp = TempOutput::create(&destination, OutputKind::Gif, true).unwrap();
        fs::write(&temp.temp, vec![7u8; 100_000]).unwrap();
        temp.commit().unwrap();
        assert!(
            fs::symlink_metadata(&null)
                .unwrap()
                .file_type()
                .is_char_device()
        );
        assert!(
            check_output(&null, OutputKind::Frames, true)
                .unwrap_err()
                .to_string()
                .contains("is a character device, not a directory")
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_socket_or_a_target_that_changes_kind_is_never_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = scratch("special");
        let socket = dir.join("sock.gif");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let message = check_output(&socket, OutputKind::Gif, true)
            .unwrap_err()
            .to_string();
        assert!(message.contains("is a socket"), "{message}");
        // The target was missing when the export started and is a FIFO when it ends.
        let late = dir.join("late.gif");
        let destination = check_output(&late, OutputKind::Gif, true).unwrap();
        let temp = TempOutput::create(&destination, OutputKind::Gif, true).unwrap();
        fs::write(&temp.temp, b"new").unwrap();
        let kept = temp.temp.clone();
        if crate::testing::make_fifo(&late) {
            let message = temp.commit().unwrap_err().to_string();
            assert!(message.contains("became a FIFO"), "{message}");
            assert!(fs::symlink_metadata(&late).unwrap().file_type().is_fifo());
            let beside = dir.join("late-2.gif");
            assert!(
                message.ends_with(&format!("'{}'", beside.display())),
                "{message}"
            );
            assert_eq!(fs::read(&beside).unwrap(), b"new", "the output is kept");
            assert!(!kept.exists());
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
