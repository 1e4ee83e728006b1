//! `contact-sandbox export DEMO --out clip.gif|clip.mp4|frames/ [--fps 30] [--size 1280x720]` (SPEC §5):
//! renders a demo's replay offscreen with the sandbox's renderer ([`crate::app::export`]) into a GIF, an MP4 or
//! a directory of PNG frames.
//!
//! Frame k shows the demo at tick `round(k · fixed_hz / fps)`; a demo of T ticks gives
//! `floor(T · fps / fixed_hz) + 1` frames (the first shows tick 0, the last the end or just before it).
//!
//! Before anything is rendered the demo is replayed headless and every stored hash checked. A demo this build
//! does not reproduce is refused unless `--allow-mismatch` is given: a clip is evidence, and one of a run that
//! differs from the recording must not pass for the recording. With the flag the clip is exported, a warning is
//! printed and the overlay says "MISMATCH at tick T" in red.
//!
//! The output is written to a temporary file (or directory) beside the target and renamed into place only when
//! it is complete, so an interrupted or failed export leaves the target as it was.

use std::fs::{self, File, OpenOptions};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

use crate::app::export::{ClipFormat, ExportPlan, Overlay, render_clip};
use crate::demo::{Demo, Player};

/// Frame rates `--fps` accepts [frames/s].
pub const FPS_RANGE: RangeInclusive<u32> = 1..=120;
/// Widths and heights `--size` accepts [px].
pub const SIDE_RANGE: RangeInclusive<u32> = 16..=3840;
/// Most frames one export renders (an hour at 30 fps plus change); more is almost surely a typo in `--fps`.
pub const MAX_FRAMES: u64 = 120_000;
/// GIF delays are whole centiseconds and most viewers slow delays under 2 cs down to 10 cs.
const GIF_SMOOTH_FPS: u32 = 50;

/// Arguments of `contact-sandbox export`.
#[derive(clap::Args, Debug, Clone)]
pub struct ExportArgs {
    /// The demo to render (RON; see docs/demos.md).
    pub demo: PathBuf,
    /// The clip: a .gif or .mp4 file, or a directory for PNG frames (a path ending in '/' or an existing
    /// directory). Written atomically.
    #[arg(long)]
    pub out: PathBuf,
    /// Frames per second of the clip (1..=120); frame k shows tick round(k · fixed_hz / fps).
    #[arg(long, default_value = "30", value_parser = parse_fps)]
    pub fps: u32,
    /// Frame size WIDTHxHEIGHT in pixels, each side 16..=3840 (even for MP4).
    #[arg(long, default_value = "1280x720", value_parser = parse_size)]
    pub size: FrameSize,
    /// MP4 encoder: ffmpeg (libx264, when `ffmpeg` is on PATH), openh264 (built in), or auto (ffmpeg when
    /// present, else openh264).
    #[arg(long, value_enum, default_value_t = Mp4Encoder::Auto)]
    pub encoder: Mp4Encoder,
    /// Export even if the demo's stored hashes do not match this build's replay (the clip is labelled
    /// "MISMATCH at tick T").
    #[arg(long)]
    pub allow_mismatch: bool,
    /// Leave out the text overlay (demo, tick, time, hash verdict).
    #[arg(long)]
    pub no_overlay: bool,
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

/// Frames in a clip of a `ticks`-tick demo at `fixed_hz`: `floor(ticks · fps / fixed_hz) + 1`.
pub fn frame_count(ticks: u64, fixed_hz: f64, fps: u32) -> u64 {
    let seconds_in_frames = ticks as f64 * fps as f64 / fixed_hz;
    // A whole number of frames computed as 89.999… must still count as 90.
    (seconds_in_frames * (1.0 + 1e-12)).floor() as u64 + 1
}

/// The demo tick frame `k` shows: `round(k · fixed_hz / fps)`, never past the end.
pub fn frame_tick(k: u64, fixed_hz: f64, fps: u32, ticks: u64) -> u64 {
    ((k as f64 * fixed_hz / fps as f64).round() as u64).min(ticks)
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

/// The folder an output goes into (`.` for a bare name).
fn output_folder(out: &Path) -> PathBuf {
    match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Checks before any work that the output can be created: its folder exists and is writable, and a frames
/// directory does not already hold files.
fn check_output(out: &Path, kind: OutputKind) -> Result<()> {
    let folder = output_folder(out);
    match fs::metadata(&folder) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("output folder '{}' is not a directory", folder.display()),
        Err(e) => bail!("output folder '{}' does not exist ({e})", folder.display()),
    }
    if out.file_name().is_none() {
        bail!(
            "--out {}: name the file or directory to create, e.g. clip.gif or frames/",
            out.display()
        );
    }
    if kind == OutputKind::Frames && out.exists() {
        let entries = fs::read_dir(out)
            .with_context(|| format!("cannot read the frames directory '{}'", out.display()))?;
        if entries.count() > 0 {
            bail!(
                "frames directory '{}' already holds files: export into a new or empty directory",
                out.display()
            );
        }
    }
    let probe = temp_path(out);
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .with_context(|| format!("cannot write in output folder '{}'", folder.display()))?;
    let _ = fs::remove_file(&probe);
    Ok(())
}

/// `dir/.name.partial-PID`: the temporary file or directory an export writes before its rename.
fn temp_path(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "clip".into());
    output_folder(out).join(format!(".{name}.partial-{}", std::process::id()))
}

/// The temporary output: removed on drop unless committed (renamed onto the target).
struct TempOutput {
    temp: PathBuf,
    target: PathBuf,
    dir: bool,
    committed: bool,
}

impl TempOutput {
    fn create(target: &Path, kind: OutputKind) -> Result<TempOutput> {
        let temp = temp_path(target);
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
            temp,
            target: target.to_path_buf(),
            dir,
            committed: false,
        })
    }

    /// Renames the finished output onto the target and syncs the folder, so the rename survives a crash.
    fn commit(mut self) -> Result<()> {
        if self.dir {
            // rename(2) replaces an empty directory; check_output refused a non-empty one, but it may have
            // filled up since.
            if self.target.is_dir() && fs::read_dir(&self.target)?.next().is_some() {
                bail!(
                    "frames directory '{}' filled up during the export; the frames are in '{}'",
                    self.target.display(),
                    self.temp.display()
                );
            }
        }
        fs::rename(&self.temp, &self.target).with_context(|| {
            format!(
                "cannot rename '{}' to '{}'",
                self.temp.display(),
                self.target.display()
            )
        })?;
        self.committed = true;
        if let Ok(folder) = File::open(output_folder(&self.target)) {
            let _ = folder.sync_all();
        }
        Ok(())
    }
}

impl Drop for TempOutput {
    fn drop(&mut self) {
        if !self.committed {
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

fn progress_bar(len: u64, template: &str, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}

pub fn run_export(args: &ExportArgs) -> Result<()> {
    let kind = classify_output(&args.out, args.out.is_dir()).map_err(anyhow::Error::msg)?;
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
                (Mp4Encoder::Openh264, _) | (Mp4Encoder::Auto, false) => ClipFormat::Mp4Openh264,
            }
        }
    };
    if kind != OutputKind::Mp4 && args.encoder != Mp4Encoder::Auto {
        bail!("--encoder applies to .mp4 output only");
    }

    let file = args.demo.display().to_string();
    let demo = Demo::load(&args.demo)?;
    let frames = frame_count(demo.ticks, demo.fixed_hz, args.fps);
    if frames > MAX_FRAMES {
        bail!(
            "{file}: {} ticks at {} Hz make {frames} frames at {} fps; exports are limited to {MAX_FRAMES} \
             frames (lower --fps)",
            demo.ticks,
            demo.fixed_hz,
            args.fps
        );
    }
    check_output(&args.out, kind)?;
    if kind == OutputKind::Gif && args.fps > GIF_SMOOTH_FPS {
        eprintln!(
            "warning: GIF delays are whole centiseconds; above {GIF_SMOOTH_FPS} fps many viewers play the clip \
             slower than real time (MP4 keeps the rate)"
        );
    }

    // Check every stored hash before rendering: the clip is labelled with the verdict.
    let mut checker = Player::new(demo.clone(), file.clone());
    let bar = progress_bar(
        demo.ticks,
        "{msg} [{bar:40}] {pos}/{len} ticks, ETA {eta}",
        "checking hashes",
    );
    checker.start()?;
    while checker.advance()? {
        if checker.tick().is_multiple_of(64) {
            bar.set_position(checker.tick());
        }
    }
    bar.finish_and_clear();
    let verdict = checker.verdict.clone();
    drop(checker);
    if let Some((tick, _, _)) = &verdict.mismatch {
        if !args.allow_mismatch {
            bail!(
                "{file}: {verdict}; not exporting a replay that differs from the recording \
                 (pass --allow-mismatch to export it labelled \"MISMATCH at tick {tick}\")"
            );
        }
        eprintln!(
            "WARNING: {file}: {verdict}. Exporting anyway (--allow-mismatch); the clip is labelled \
             \"MISMATCH at tick {tick}\" and is NOT the recorded run"
        );
    }
    let verdict_text = match &verdict.mismatch {
        Some((tick, _, _)) => format!("MISMATCH at tick {tick}"),
        None => format!("match ({} hashes)", verdict.matched),
    };

    // From here a Ctrl-C stops the export cleanly: the app exits at its next frame and the temporary output is
    // removed (Bevy's own handler, installed later, would leave a gap). Not installed when SIGINT is ignored.
    let _ =
        bevy::app::ctrlc::try_set_handler(bevy::app::TerminalCtrlCHandlerPlugin::gracefully_exit);
    let temp = TempOutput::create(&args.out, kind)?;
    let frame_ticks: Vec<u64> = (0..frames)
        .map(|k| frame_tick(k, demo.fixed_hz, args.fps, demo.ticks))
        .collect();
    let demo_name = args
        .demo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.clone());
    let overlay = (!args.no_overlay).then(|| Overlay {
        title: format!("{demo_name} - {}", demo.scene.name),
        verdict: verdict_text,
        mismatch: verdict.mismatch.is_some(),
    });
    let mut player = Player::new(demo.clone(), file.clone());
    player.start()?;
    let progress = progress_bar(
        frames,
        "{msg} [{bar:40}] {pos}/{len} frames, {per_sec}, ETA {eta}",
        "exporting",
    );
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
        progress: progress.clone(),
    });
    progress.finish_and_clear();
    let rendered = outcome.with_context(|| {
        format!(
            "exporting {file} to {} failed; nothing was written there",
            args.out.display()
        )
    })?;
    let seconds = started.elapsed().as_secs_f64();
    temp.commit()?;
    let size = output_bytes(&args.out);
    let encoder = match format {
        ClipFormat::Gif => "GIF",
        ClipFormat::Mp4Openh264 => "MP4, openh264",
        ClipFormat::Mp4Ffmpeg => "MP4, ffmpeg libx264",
        ClipFormat::Frames => "PNG frames",
    };
    println!(
        "exported {} frames ({width}x{height}, {} fps, {:.2} s of play; {encoder}) in {seconds:.1} s, \
         {:.1} frames/s -> {} ({}); hashes: {}",
        rendered.frames,
        args.fps,
        demo.ticks as f64 / demo.fixed_hz,
        rendered.frames as f64 / seconds.max(1e-9),
        args.out.display(),
        human_bytes(size),
        verdict
    );
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
        assert_eq!(frame_count(300, 100.0, 30), 91);
        let ticks: Vec<u64> = (0..91).map(|k| frame_tick(k, 100.0, 30, 300)).collect();
        assert_eq!(&ticks[..4], &[0, 3, 7, 10]);
        assert_eq!(ticks[90], 300);
        assert!(ticks.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn frame_ticks_round_to_the_nearest_tick_and_stay_inside_the_demo() {
        // One frame per tick when fps = fixed_hz.
        assert_eq!(frame_count(100, 60.0, 60), 101);
        assert!((0..101).all(|k| frame_tick(k, 60.0, 60, 100) == k));
        // More frames than ticks: ticks repeat.
        assert_eq!(frame_count(10, 10.0, 30), 31);
        assert_eq!(frame_tick(1, 10.0, 30, 10), 0); // 0.33 → 0
        assert_eq!(frame_tick(2, 10.0, 30, 10), 1); // 0.67 → 1
        // A fractional clip length: 301 ticks at 60 Hz at 30 fps → 150.5 intervals, 151 frames, last tick 300.
        assert_eq!(frame_count(301, 60.0, 30), 151);
        assert_eq!(frame_tick(150, 60.0, 30, 301), 300);
        // An empty demo is one frame of tick 0.
        assert_eq!(frame_count(0, 100.0, 30), 1);
        assert_eq!(frame_tick(0, 100.0, 30, 0), 0);
        // The last frame never passes the end, whatever the rates.
        for (ticks, hz, fps) in [(299, 100.0, 30), (7, 1000.0, 1), (1000, 59.94, 24)] {
            let last = frame_count(ticks, hz, fps) - 1;
            assert!(frame_tick(last, hz, fps, ticks) <= ticks);
        }
    }

    #[test]
    fn a_missing_or_unwritable_output_folder_is_refused_before_rendering() {
        let missing = Path::new("/nonexistent-contact-sandbox-dir/clip.gif");
        let message = check_output(missing, OutputKind::Gif)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("/nonexistent-contact-sandbox-dir")
                && message.contains("does not exist"),
            "{message}"
        );
        let not_a_dir = Path::new("Cargo.toml/clip.gif");
        assert!(
            check_output(not_a_dir, OutputKind::Gif)
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
            let temp = TempOutput::create(&target, OutputKind::Gif).unwrap();
            fs::write(&temp.temp, b"partial").unwrap();
        }
        assert_eq!(fs::read(&target).unwrap(), b"old");
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "temp file left behind"
        );
        let temp = TempOutput::create(&target, OutputKind::Gif).unwrap();
        fs::write(&temp.temp, b"new").unwrap();
        temp.commit().unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);

        let frames = dir.join("frames/");
        let temp = TempOutput::create(&frames, OutputKind::Frames).unwrap();
        fs::write(temp.temp.join("frame_00000.png"), b"png").unwrap();
        temp.commit().unwrap();
        assert!(dir.join("frames").join("frame_00000.png").is_file());
        assert!(check_output(&frames, OutputKind::Frames).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
