//! Offscreen export (SPEC §5): the sandbox's own renderer ([`super::render`]) draws a demo's replay into an image
//! instead of a window, bevy_capture reads every frame back, and a [`ClipWriter`] encodes it as GIF, MP4
//! (openh264 or the ffmpeg CLI) or PNG frames. The command line around it is [`crate::cli::export`].
//!
//! Each `Update` shows one frame's tick: the [`Replay`]'s player seeks forward to it (checking hashes on the
//! way) and the lanes' worlds are copied into the lane entities in place, so the camera fit, which follows the
//! lanes' build-time bounds, holds still; the lanes are rebuilt only when the demo rebuilds them (a restart or
//! a scene switch). Interpolation is pinned to the current state, so frame k shows exactly its tick.
//!
//! Each lane is titled with its name and method as in the window ([`super::labels`]), the titles scaled with the
//! frame like the overlay; with the overlay, the lanes are framed below its band so neither covers the other.
//!
//! GIFs are written by [`GifWriter`] (bevy_capture 0.6's GIF encoder leaves every delay at 0 and quantises far
//! too slowly in a debug build). Its openh264 MP4 encoder stamps frames 100 ms apart whatever the rate, so the
//! finished MP4 is retimed: its media time scale becomes `100 · fps` units per second.
//!
//! bevy_capture 0.6 hands frames of some widths (multiples of 64 px but not of 256) over with a tail of unused
//! bytes; [`frame_rows`] trims every frame before a writer sees it, and each writer checks the size it gets.

use std::borrow::Cow;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, anyhow, bail};
use bevy::app::{RunMode, ScheduleRunnerPlugin};
use bevy::camera::RenderTarget;
use bevy::image::TextureFormatPixelInfo;
use bevy::log::LogPlugin;
use bevy::prelude::*;
use bevy::render::RenderPlugin as GpuRenderPlugin;
use bevy::render::renderer::RenderDevice;
use bevy::sprite::Anchor;
use bevy::transform::TransformSystems;
use bevy::window::ExitCondition;
use bevy::winit::WinitPlugin;
use bevy_capture::encoder::mp4_openh264::{Mp4Openh264Encoder, openh264};
use bevy_capture::{Capture, CaptureBundle, CapturePlugin, Encoder, RenderTargetHeadless};

use super::labels::{LabelScale, LabelsPlugin, TITLE_PX};
use super::render::{CameraView, MainCamera, RenderPlugin, camera_scale, fit_camera, scene_bounds};
use super::{BACKGROUND_RGB, UiState};
use crate::demo::Player;
use crate::sim::{
    ActiveScene, Lane, LaneSettings, Replay, SimPlugin, SimSet, remember_previous_states,
    seek_replay,
};

/// Frames rendered before the capture starts, so pipelines, meshes and the camera's target are ready
/// (bevy_capture's example waits one; llvmpipe compiles pipelines on first use).
const WARMUP_FRAMES: u32 = 4;
/// Give up when the offscreen camera has no target after this many frames.
const WARMUP_LIMIT: u32 = 600;
/// openh264 bit budget per pixel per frame; 0.1 bit gives clean edges on this flat-coloured scene.
const H264_BITS_PER_PIXEL: f64 = 0.1;
/// openh264's coarsest quantiser: text stays legible at 320 × 180 however small the bit budget.
const H264_MAX_QP: u8 = 28;
/// openh264's finest quantiser for camera-style input: a range whose minimum is 0 is not taken, and the library puts
/// its own (12 to 42) in its place without a word, so the cap above never held until the minimum was 12.
const H264_MIN_QP: u8 = 12;
/// libx264 constant rate factor (18 = visually lossless, 23 = ffmpeg's default).
const X264_CRF: &str = "20";
/// Lines of ffmpeg's stderr kept for an error message.
const FFMPEG_STDERR_LINES: usize = 20;

/// The encoder an export writes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClipFormat {
    Gif,
    Mp4Openh264,
    Mp4Ffmpeg,
    Frames,
}

/// The overlay's text at the player's tick: the demo, the scene it shows then, the tick, the lanes' time and the
/// verdict. The time is the lanes' own clock, as in the window's replay: ticks over the recorded rate differ from it
/// where the rate was capped (an h below 1 ms) and after the run's end, when ticks pass and the lanes stand.
/// The first line, the demo's and the scene's names, is cut with "..." to `max_chars` (a long demo name in a
/// 320 × 180 clip wrapped to a third line over the top lane's title).
fn overlay_label(overlay: &Overlay, player: &crate::demo::Player, max_chars: usize) -> String {
    let names = super::labels::elided(
        format!("{} - {}", overlay.demo_name, player.session.loaded.name),
        max_chars,
    );
    format!(
        "{names}\ntick {}/{}   t = {:.3} s   hashes: {}",
        player.tick(),
        player.demo.ticks,
        crate::demo::lanes_time(&player.session.lanes),
        overlay.verdict
    )
}

/// The text drawn in the top-left corner of every frame.
#[derive(Clone, Debug)]
pub struct Overlay {
    /// The demo's file name: the first line is it and the scene the replay shows at that frame, e.g.
    /// "wall_throw.demo.ron - Wall throw" (the default font has no middle dot), the scene a `Scene` action switched
    /// to once it has.
    pub demo_name: String,
    /// The demo's hash verdict, e.g. "match (4 hashes)" or "MISMATCH at tick 120".
    pub verdict: String,
    /// Draw the overlay in red.
    pub mismatch: bool,
}

/// One export: the demo's player (started), the frame size and rate, the tick of each frame, and where to
/// write (a temporary file or directory the caller renames into place).
pub struct ExportPlan {
    pub player: Player,
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    pub frame_ticks: Vec<u64>,
    pub format: ClipFormat,
    pub temp: PathBuf,
    pub overlay: Option<Overlay>,
    /// Told the number of frames encoded so far, each time it grows.
    pub on_frames: Box<dyn FnMut(u64) + Send + Sync>,
}

/// What an export produced.
#[derive(Clone, Copy, Debug)]
pub struct ExportOutcome {
    pub frames: u64,
}

/// Encodes frames into one output.
trait ClipWriter: Send + Sync {
    /// Encodes the next frame (RGBA8, sRGB).
    fn frame(&mut self, image: &Image) -> Result<()>;
    /// Completes the output after `frames` frames: trailers, timing fixes, fsync.
    fn close(self: Box<Self>, frames: u64) -> Result<()>;
}

fn open_writer(plan: &ExportPlan) -> Result<Box<dyn ClipWriter>> {
    let path = plan.temp.clone();
    Ok(match plan.format {
        ClipFormat::Gif => Box::new(GifClip::create(path, plan.width, plan.height, plan.fps)?),
        ClipFormat::Mp4Openh264 => Box::new(Openh264Clip::create(
            path,
            plan.width,
            plan.height,
            plan.fps,
        )?),
        ClipFormat::Mp4Ffmpeg => {
            Box::new(FfmpegClip::spawn(path, plan.width, plan.height, plan.fps)?)
        }
        ClipFormat::Frames => Box::new(FramesClip {
            dir: path,
            width: plan.width,
            height: plan.height,
            next: 0,
        }),
    })
}

/// The RGBA8 pixels of a `width × height` frame, or an error naming the sizes (the image crate and the encoders
/// panic on a buffer of the wrong length).
fn frame_pixels(image: &Image, width: u32, height: u32) -> Result<&[u8]> {
    let data = image
        .data
        .as_deref()
        .context("a frame arrived without pixels")?;
    let expected = width as usize * height as usize * 4;
    if (image.width(), image.height()) != (width, height) || data.len() != expected {
        bail!(
            "a {}x{} frame of {} bytes arrived for a {width}x{height} clip ({expected} bytes of RGBA8 expected)",
            image.width(),
            image.height(),
            data.len()
        );
    }
    Ok(data)
}

fn create_file(path: &Path) -> Result<BufWriter<File>> {
    let file = File::create(path).with_context(|| format!("cannot write '{}'", path.display()))?;
    Ok(BufWriter::new(file))
}

fn sync_file(path: &Path) -> Result<()> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .with_context(|| format!("cannot sync '{}'", path.display()))
}

/// GIF through [`GifWriter`], frame k shown for [`gif_delay_cs`]`(k, fps)`.
struct GifClip {
    writer: GifWriter<BufWriter<File>>,
    path: PathBuf,
    width: u32,
    height: u32,
    fps: u32,
    frames: u64,
}

impl GifClip {
    fn create(path: PathBuf, width: u32, height: u32, fps: u32) -> Result<GifClip> {
        let (w, h) = (
            u16::try_from(width).context("GIF width")?,
            u16::try_from(height).context("GIF height")?,
        );
        let writer = GifWriter::new(create_file(&path)?, w, h)
            .with_context(|| format!("cannot write '{}'", path.display()))?;
        Ok(GifClip {
            writer,
            path,
            width,
            height,
            fps,
            frames: 0,
        })
    }
}

impl ClipWriter for GifClip {
    fn frame(&mut self, image: &Image) -> Result<()> {
        let data = frame_pixels(image, self.width, self.height)?;
        self.writer
            .frame(data, gif_delay_cs(self.frames, self.fps))
            .with_context(|| format!("cannot write '{}'", self.path.display()))?;
        self.frames += 1;
        Ok(())
    }

    fn close(self: Box<Self>, frames: u64) -> Result<()> {
        let GifClip { writer, path, .. } = *self;
        let file = writer
            .finish()
            .and_then(|w| w.into_inner().map_err(|e| e.into_error()))
            .with_context(|| format!("cannot write '{}'", path.display()))?;
        file.sync_all()
            .with_context(|| format!("cannot sync '{}'", path.display()))?;
        drop(file);
        let bytes = fs::read(&path).with_context(|| format!("cannot read '{}'", path.display()))?;
        let written = gif_frame_delays(&bytes)
            .map_err(|e| anyhow!("'{}' is not a valid GIF: {e}", path.display()))?
            .len() as u64;
        if written != frames {
            bail!("the GIF holds {written} frames, {frames} were encoded");
        }
        Ok(())
    }
}

/// MP4 through bevy_capture's openh264 encoder (built from source, always available), retimed afterwards.
struct Openh264Clip {
    encoder: Mp4Openh264Encoder<BufWriter<File>>,
    path: PathBuf,
    width: u32,
    height: u32,
    fps: u32,
}

impl Openh264Clip {
    fn create(path: PathBuf, width: u32, height: u32, fps: u32) -> Result<Openh264Clip> {
        use openh264::encoder::{BitRate, EncoderConfig, FrameRate, QpRange, RateControlMode};
        let bits = (width as f64 * height as f64 * fps as f64 * H264_BITS_PER_PIXEL)
            .clamp(250e3, 50e6) as u32;
        let config = EncoderConfig::new()
            .bitrate(BitRate::from_bps(bits))
            .max_frame_rate(FrameRate::from_hz(fps as f32))
            // Every frame is coded, and no coarser than H264_MAX_QP: under the bit budget alone, a small clip's
            // changing numbers stayed at old values for many frames.
            .skip_frames(false)
            .background_detection(false)
            .qp(QpRange::new(H264_MIN_QP, H264_MAX_QP))
            // Buffer-based: the quality, bitrate and timestamp modes need frame skipping to meet their rate, and
            // without it the library printed a warning on standard error at every export.
            .rate_control_mode(RateControlMode::Bufferbased);
        let (w, h) = (
            u16::try_from(width).context("MP4 width")?,
            u16::try_from(height).context("MP4 height")?,
        );
        let encoder = Mp4Openh264Encoder::new_with_config(create_file(&path)?, w, h, config)
            .map_err(|e| anyhow!("the openh264 MP4 encoder did not start: {e}"))?;
        Ok(Openh264Clip {
            encoder,
            path,
            width,
            height,
            fps,
        })
    }
}

impl ClipWriter for Openh264Clip {
    fn frame(&mut self, image: &Image) -> Result<()> {
        frame_pixels(image, self.width, self.height)?;
        self.encoder
            .encode(image)
            .map_err(|e| anyhow!("openh264 MP4 encoder: {e}"))
    }

    fn close(self: Box<Self>, _frames: u64) -> Result<()> {
        let Openh264Clip {
            encoder, path, fps, ..
        } = *self;
        // Writes the moov box; bevy_capture only logs a failure, which the retiming below then reports.
        Box::new(encoder).finish();
        retime_mp4_file(&path, 100 * fps)?;
        sync_file(&path)
    }
}

/// MP4 through the ffmpeg CLI (libx264), raw RGBA frames piped to its stdin at the clip's rate.
struct FfmpegClip {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    stderr: Arc<Mutex<Vec<String>>>,
    path: PathBuf,
    frame_bytes: usize,
}

impl FfmpegClip {
    fn spawn(path: PathBuf, width: u32, height: u32, fps: u32) -> Result<FfmpegClip> {
        let mut child = Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-nostdin", "-y"])
            .args(["-f", "rawvideo", "-pix_fmt", "rgba"])
            .args(["-s", &format!("{width}x{height}"), "-r", &fps.to_string()])
            .args(["-i", "pipe:0", "-c:v", "libx264", "-pix_fmt", "yuv420p"])
            .args(["-crf", X264_CRF, "-movflags", "+faststart", "-f", "mp4"])
            .arg(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start ffmpeg")?;
        let stdin = child.stdin.take();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(pipe) = child.stderr.take() {
            let lines = Arc::clone(&stderr);
            // Drained on its own thread so a chatty ffmpeg never blocks on a full pipe.
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if let Ok(mut lines) = lines.lock() {
                        if lines.len() == FFMPEG_STDERR_LINES {
                            lines.remove(0);
                        }
                        lines.push(line);
                    }
                }
            });
        }
        Ok(FfmpegClip {
            child: Some(child),
            stdin,
            stderr,
            path,
            frame_bytes: width as usize * height as usize * 4,
        })
    }

    fn stderr_tail(&self) -> String {
        self.stderr.lock().map(|l| l.join("; ")).unwrap_or_default()
    }
}

impl ClipWriter for FfmpegClip {
    fn frame(&mut self, image: &Image) -> Result<()> {
        let data = image
            .data
            .as_deref()
            .context("a frame arrived without pixels")?;
        if data.len() != self.frame_bytes {
            bail!(
                "a frame of {} bytes arrived, {} expected",
                data.len(),
                self.frame_bytes
            );
        }
        let stdin = self.stdin.as_mut().context("ffmpeg's input is closed")?;
        if let Err(e) = stdin.write_all(data) {
            bail!(
                "ffmpeg stopped reading frames ({e}): {}",
                self.stderr_tail()
            );
        }
        Ok(())
    }

    fn close(mut self: Box<Self>, _frames: u64) -> Result<()> {
        drop(self.stdin.take());
        let status = match self.child.take() {
            Some(mut child) => child.wait().context("waiting for ffmpeg")?,
            None => bail!("ffmpeg is gone"),
        };
        if !status.success() {
            // Let the stderr thread catch the last lines.
            std::thread::sleep(std::time::Duration::from_millis(100));
            bail!("ffmpeg failed ({status}): {}", self.stderr_tail());
        }
        sync_file(&self.path)
    }
}

impl Drop for FfmpegClip {
    fn drop(&mut self) {
        // An abandoned export must not leave ffmpeg writing into the folder.
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// PNG frames `frame_00000.png`, `frame_00001.png`, … in a directory.
struct FramesClip {
    dir: PathBuf,
    width: u32,
    height: u32,
    next: u64,
}

impl ClipWriter for FramesClip {
    fn frame(&mut self, image: &Image) -> Result<()> {
        let path = self.dir.join(format!("frame_{:05}.png", self.next));
        frame_pixels(image, self.width, self.height)
            .with_context(|| format!("frame {}", self.next))?;
        image
            .clone()
            .try_into_dynamic()
            .map_err(|e| anyhow!("frame {}: {e}", self.next))?
            .save(&path)
            .with_context(|| format!("cannot write '{}'", path.display()))?;
        sync_file(&path)?;
        self.next += 1;
        Ok(())
    }

    fn close(self: Box<Self>, _frames: u64) -> Result<()> {
        sync_file(&self.dir)
    }
}

/// Progress and errors shared by the main world, the render world's encoder and the caller.
#[derive(Default)]
struct Shared {
    encoded: AtomicU64,
    finished: AtomicBool,
    /// The export was interrupted or failed: the writer is dropped, not completed.
    abandoned: AtomicBool,
    error: Mutex<Option<String>>,
}

impl Shared {
    fn fail(&self, message: String) {
        if let Ok(mut error) = self.error.lock() {
            error.get_or_insert(message);
        }
    }

    fn error(&self) -> Option<String> {
        self.error.lock().ok().and_then(|e| e.clone())
    }
}

/// The encoder bevy_capture calls in the render world: counts frames and keeps the first error.
struct Sink {
    writer: Option<Box<dyn ClipWriter>>,
    shared: Arc<Shared>,
}

impl Encoder for Sink {
    fn encode(&mut self, image: &Image) -> bevy_capture::encoder::Result<()> {
        if self.shared.error().is_some() {
            return Ok(());
        }
        if let Some(writer) = &mut self.writer {
            let written = tight_frame(image)
                .map_err(anyhow::Error::msg)
                .and_then(|frame| writer.frame(&frame));
            match written {
                Ok(()) => {
                    self.shared.encoded.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => self.shared.fail(format!("{e:#}")),
            }
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) {
        if let Some(writer) = self.writer.take()
            && !self.shared.abandoned.load(Ordering::SeqCst)
            && self.shared.error().is_none()
            && let Err(e) = writer.close(self.shared.encoded.load(Ordering::SeqCst))
        {
            self.shared.fail(format!("{e:#}"));
        }
        self.shared.finished.store(true, Ordering::SeqCst);
    }
}

/// The rows of a frame read back from the GPU, `width · pixel_bytes` bytes each, without padding.
///
/// The GPU copies a frame into a buffer whose rows start `stride = align_copy_bytes_per_row(width ·
/// pixel_bytes)` bytes apart (wgpu pads rows to 256 bytes). bevy_capture 0.6 strips that padding when a row is
/// not 256-byte aligned; but it sizes the buffer as `align_copy_bytes_per_row(width) · pixel_bytes` per row
/// instead of `align_copy_bytes_per_row(width · pixel_bytes)`, and hands an aligned row's buffer over whole, so
/// for widths that are a multiple of 64 pixels but not of 256 (64, 640, 1920, …) the frame ends in
/// `(align(width) − width) · pixel_bytes · height` unused bytes. Both shapes (rows back to back, or rows
/// `stride` apart followed by anything) are read here; a shorter buffer is an error naming the sizes.
pub fn frame_rows(
    data: &[u8],
    width: u32,
    height: u32,
    pixel_bytes: usize,
) -> Result<Cow<'_, [u8]>, String> {
    let row = width as usize * pixel_bytes;
    let tight = row * height as usize;
    if data.len() == tight {
        return Ok(Cow::Borrowed(data));
    }
    let stride = RenderDevice::align_copy_bytes_per_row(row);
    let needed = stride * (height as usize).saturating_sub(1) + row;
    if height == 0 || data.len() < needed {
        return Err(format!(
            "a frame of {} bytes arrived for {width}x{height} pixels of {pixel_bytes} bytes: expected {tight} \
             bytes, or {height} rows {stride} bytes apart ({needed} bytes or more)",
            data.len()
        ));
    }
    if stride == row {
        return Ok(Cow::Borrowed(&data[..tight]));
    }
    Ok(Cow::Owned(
        data.chunks(stride)
            .take(height as usize)
            .flat_map(|r| &r[..row])
            .copied()
            .collect(),
    ))
}

/// `image` with its pixels' rows back to back ([`frame_rows`]); borrowed when they already are.
fn tight_frame(image: &Image) -> Result<Cow<'_, Image>, String> {
    let data = image
        .data
        .as_deref()
        .ok_or("a frame arrived without pixels")?;
    let format = image.texture_descriptor.format;
    let pixel_bytes = format
        .pixel_size()
        .map_err(|e| format!("a frame in format {format:?}: {e}"))?;
    match frame_rows(data, image.width(), image.height(), pixel_bytes)? {
        Cow::Borrowed(rows) if rows.len() == data.len() => Ok(Cow::Borrowed(image)),
        rows => {
            let mut tight = image.clone();
            tight.data = Some(rows.into_owned());
            Ok(Cow::Owned(tight))
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Warmup(u32),
    Capturing,
    Finishing,
    Done,
}

/// The export's state in the main world.
#[derive(Resource)]
struct ExportDriver {
    frame_ticks: Vec<u64>,
    /// Index of the next frame to show.
    next: usize,
    phase: Phase,
    /// Handed to bevy_capture when the capture starts.
    sink: Option<Sink>,
    shared: Arc<Shared>,
    on_frames: Box<dyn FnMut(u64) + Send + Sync>,
    /// Frames encoded when `on_frames` was last called.
    reported: u64,
    /// The session generation the lane entities mirror.
    synced_generation: Option<u64>,
    width: u32,
    height: u32,
    overlay: Option<Overlay>,
}

#[derive(Component)]
struct OverlayText;

/// Keeps Mesa's Vulkan device-selection layer from looking for a Wayland display where there is no session.
///
/// The layer (VK_LAYER_MESA_device_select, loaded implicitly by the Vulkan loader) calls `wl_display_connect`
/// while wgpu enumerates adapters, and without `XDG_RUNTIME_DIR` libwayland prints "error: XDG_RUNTIME_DIR is
/// invalid or not set in the environment." on stderr, twice, though the export works. Without a session the
/// layer has no display to pick a GPU for, so it is switched off (`NODEVICE_SELECT=1`, the switch its manifest
/// names), unless the user set that switch or asked the layer for a device (`MESA_VK_DEVICE_SELECT`,
/// `DRI_PRIME`). Call before any thread starts: the environment is only changed while the process has one
/// thread, since `set_var` races with other threads reading the environment.
pub fn quiet_headless_gpu_probe() {
    #[cfg(target_os = "linux")]
    {
        use std::env::var_os;
        let session = var_os("XDG_RUNTIME_DIR")
            .is_some_and(|d| d.to_string_lossy().starts_with('/'))
            || var_os("WAYLAND_SOCKET").is_some();
        let user_choice = ["NODEVICE_SELECT", "MESA_VK_DEVICE_SELECT", "DRI_PRIME"]
            .iter()
            .any(|name| var_os(name).is_some());
        let single_thread = fs::read_dir("/proc/self/task").is_ok_and(|tasks| tasks.count() == 1);
        if !session && !user_choice && single_thread {
            // SAFETY: this process has one thread (checked just above), so nothing reads the environment
            // while it changes.
            unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
        }
    }
}

/// Renders `plan` offscreen into `plan.temp`. Returns once the writer has completed the output (or failed).
pub fn render_clip(plan: ExportPlan) -> Result<ExportOutcome> {
    let expected = plan.frame_ticks.len() as u64;
    if expected == 0 {
        bail!("nothing to export: no frames");
    }
    let writer = open_writer(&plan)?;
    let shared = Arc::new(Shared::default());
    let scene = plan.player.demo.scene.clone();
    let active = ActiveScene {
        path: PathBuf::from(&plan.player.file),
        loaded: scene.clone(),
        current: scene,
    };
    // With an overlay, the lanes are fitted to the frame below its band (see `fit_below_the_overlay`).
    let overlay_canvas = plan.overlay.as_ref().map(|_| {
        let band = overlay_band_px(plan.width, plan.height);
        (
            Vec2::new(0.0, band),
            Vec2::new(plan.width as f32, plan.height as f32),
        )
    });
    let mut replay = Replay::without_check(plan.player);
    replay.playing = false;
    let driver = ExportDriver {
        frame_ticks: plan.frame_ticks,
        next: 0,
        phase: Phase::Warmup(0),
        sink: Some(Sink {
            writer: Some(writer),
            shared: Arc::clone(&shared),
        }),
        shared: Arc::clone(&shared),
        on_frames: plan.on_frames,
        reported: 0,
        synced_generation: None,
        width: plan.width,
        height: plan.height,
        overlay: plan.overlay,
    };

    let mut app = App::new();
    app.add_plugins(
        DefaultPlugins
            .build()
            .disable::<WinitPlugin>()
            .set(WindowPlugin {
                primary_window: None,
                exit_condition: ExitCondition::DontExit,
                close_when_requested: false,
                ..default()
            })
            .set(AssetPlugin {
                file_path: ".".into(),
                ..default()
            })
            .set(GpuRenderPlugin {
                synchronous_pipeline_compilation: true,
                ..default()
            })
            .set(LogPlugin {
                level: bevy::log::Level::WARN,
                // llvmpipe is expected on machines without a GPU; its "software rendering" warning is noise here.
                filter: "wgpu=error,naga=warn,bevy_render::renderer=error".into(),
                ..default()
            }),
    )
    .add_plugins(ScheduleRunnerPlugin {
        run_mode: RunMode::Loop { wait: None },
    })
    .add_plugins(CapturePlugin)
    .insert_resource(ClearColor(Color::srgb_u8(
        BACKGROUND_RGB[0],
        BACKGROUND_RGB[1],
        BACKGROUND_RGB[2],
    )))
    .insert_resource(active)
    .insert_resource(UiState {
        canvas: overlay_canvas,
        ..default()
    })
    .insert_resource(label_scale(plan.height))
    .add_plugins((SimPlugin, RenderPlugin, LabelsPlugin))
    .insert_resource(replay)
    .insert_resource(driver)
    .add_systems(PostStartup, aim_camera_at_image)
    .add_systems(
        Update,
        (
            drive_export
                .in_set(SimSet::ApplyMessages)
                .before(seek_replay),
            remember_previous_states
                .after(SimSet::Writeback)
                .before(SimSet::Interpolate),
            fit_below_the_overlay.after(fit_camera),
        ),
    )
    .add_systems(
        PostUpdate,
        place_overlay
            .before(TransformSystems::Propagate)
            .before(bevy::sprite::update_text2d_layout),
    );

    let exit = app.run();
    let completed = exit == AppExit::Success && shared.finished.load(Ordering::SeqCst);
    if !completed {
        shared.abandoned.store(true, Ordering::SeqCst);
    }
    // Dropping the app drops a running capture, which finishes (here: abandons) its writer.
    drop(app);
    if let Some(error) = shared.error() {
        bail!(error);
    }
    match exit {
        AppExit::Success if completed => {}
        AppExit::Success => bail!("the exporter stopped before the clip was complete"),
        AppExit::Error(code) if code.get() == 130 => bail!(
            "interrupted by {}",
            crate::cli::stop_signal_name().unwrap_or("a stop signal")
        ),
        AppExit::Error(code) => bail!("the exporter stopped with code {code}"),
    }
    let frames = shared.encoded.load(Ordering::SeqCst);
    if frames != expected {
        bail!("{frames} frames were encoded, {expected} expected");
    }
    Ok(ExportOutcome { frames })
}

/// PostStartup: the sandbox's camera renders into an image that bevy_capture reads back; the overlay text is
/// spawned.
fn aim_camera_at_image(
    mut commands: Commands,
    mut images: ResMut<Assets<Image>>,
    driver: Res<ExportDriver>,
    cameras: Query<Entity, With<MainCamera>>,
) {
    for camera in &cameras {
        commands.entity(camera).insert((
            RenderTarget::target_headless(driver.width, driver.height, &mut images),
            CaptureBundle::default(),
        ));
    }
    if let Some(overlay) = &driver.overlay {
        let color = if overlay.mismatch {
            Color::srgb(1.0, 0.3, 0.25)
        } else {
            Color::srgb(0.85, 0.87, 0.92)
        };
        commands.spawn((
            OverlayText,
            Text2d::new(""),
            TextFont {
                font_size: FontSize::Px(overlay_font_px(driver.width, driver.height)),
                ..default()
            },
            TextColor(color),
            Anchor::TOP_LEFT,
            // Wrapped at the frame's right margin: a portrait clip (360 × 640) cut the verdict to "hashes: m".
            bevy::text::TextBounds::new_horizontal(overlay_room_px(driver.width, driver.height)),
        ));
    }
}

/// Frame height at which the lane labels are drawn at the window's sizes [px].
const LABELS_FULL_SIZE_HEIGHT_PX: f32 = 720.0;

/// Smallest height of a lane's title in an export [px]; smaller text is a blur.
const MIN_TITLE_PX: f32 = 10.0;

/// The lane labels' scale in a frame `height` px tall: in proportion to the frame, like the overlay, but never
/// below [`MIN_TITLE_PX`].
fn label_scale(height: u32) -> LabelScale {
    LabelScale((height as f32 / LABELS_FULL_SIZE_HEIGHT_PX).max(MIN_TITLE_PX / TITLE_PX))
}

/// Characters the overlay's longer line is sized for: "tick 12616/12616   t = 123.700 s   hashes: match (212
/// hashes)" has 61.
const OVERLAY_LINE_CHARS: f32 = 64.0;

/// Advance of one character of the overlay's monospaced font (Fira Mono), in units of its size.
const MONO_ADVANCE: f32 = 0.6;

/// Height of the overlay's text in a frame `width` × `height` px [px]: a 40th of the height, smaller where a line
/// of [`OVERLAY_LINE_CHARS`] would not fit the width (a portrait 360 × 640 clip cut the verdict to "hashes: m"),
/// never below 8 px (the text then wraps at the frame's margin).
fn overlay_font_px(width: u32, height: u32) -> f32 {
    let fits = overlay_room_px(width, height) / (MONO_ADVANCE * OVERLAY_LINE_CHARS);
    (height as f32 / 40.0).min(fits).max(8.0)
}

/// Characters of the overlay's font that fit across a frame `width` × `height` px inside its margins.
fn overlay_line_chars(width: u32, height: u32) -> usize {
    (overlay_room_px(width, height) / (MONO_ADVANCE * overlay_font_px(width, height)))
        .floor()
        .max(4.0) as usize
}

/// The width the overlay's text may take in a frame `width` × `height` px: inside its margins [px].
fn overlay_room_px(width: u32, height: u32) -> f32 {
    (width as f32 - 2.0 * overlay_margin_px(height)).max(1.0)
}

/// Gap between the frame's edge and the overlay [px].
fn overlay_margin_px(height: u32) -> f32 {
    height as f32 / 60.0
}

/// Height of the band the overlay takes at the top of a frame `height` px tall [px]: its two lines at Bevy's
/// default line height (1.2 times the text's height) with a margin above and below.
fn overlay_band_px(width: u32, height: u32) -> f32 {
    2.4 * overlay_font_px(width, height) + 2.0 * overlay_margin_px(height)
}

/// Update, after the camera's fit: with an overlay, the lanes are framed in the frame below its band (the band
/// is left out of `UiState::canvas`, which sets the fit's scale, and the view is moved up by half of it), so the
/// overlay's text never covers the top lane's title or its balls.
fn fit_below_the_overlay(
    ui: Res<UiState>,
    view: Res<CameraView>,
    lanes: Query<&Lane>,
    mut cameras: Query<(&mut Transform, &Projection), With<MainCamera>>,
) {
    let (Some((c0, _)), true) = (ui.canvas, view.auto_fit) else {
        return;
    };
    let Some((lo, hi)) = scene_bounds(&lanes) else {
        return;
    };
    for (mut transform, projection) in &mut cameras {
        transform.translation.y = (lo.y + hi.y) / 2.0 + c0.y / 2.0 * camera_scale(projection);
    }
}

/// Update (before the replay's seek): brings the lanes to the next frame's tick, starts the capture after the
/// warm-up, stops it after the last frame, and exits once the writer has completed the output.
fn drive_export(
    mut driver: ResMut<ExportDriver>,
    mut replay: ResMut<Replay>,
    mut lanes: Query<(&mut Lane, &mut LaneSettings)>,
    mut cameras: Query<(&Camera, &mut Capture), With<MainCamera>>,
    mut exit: MessageWriter<AppExit>,
) {
    let driver = &mut *driver;
    if driver.shared.error().is_some() {
        exit.write(AppExit::from_code(1));
        return;
    }
    let encoded = driver.shared.encoded.load(Ordering::SeqCst);
    if encoded != driver.reported {
        driver.reported = encoded;
        (driver.on_frames)(encoded);
    }
    let Ok((camera, mut capture)) = cameras.single_mut() else {
        return;
    };
    let shown = match driver.phase {
        Phase::Warmup(n) => {
            let ready = n >= WARMUP_FRAMES
                && camera.logical_viewport_size().is_some()
                && driver.synced_generation.is_some();
            if ready {
                if let Some(sink) = driver.sink.take() {
                    capture.start(sink);
                }
                driver.phase = Phase::Capturing;
                driver.next = 1;
            } else if n >= WARMUP_LIMIT {
                driver
                    .shared
                    .fail("the offscreen camera never got its image target".into());
                return;
            } else {
                driver.phase = Phase::Warmup(n + 1);
            }
            Some(driver.frame_ticks[0])
        }
        Phase::Capturing => match driver.frame_ticks.get(driver.next) {
            Some(&tick) => {
                driver.next += 1;
                Some(tick)
            }
            None => {
                // The last frame was rendered (and encoded) in the previous frame; dropping the encoders
                // completes the output in the render world.
                capture.stop();
                driver.phase = Phase::Finishing;
                None
            }
        },
        Phase::Finishing => {
            if driver.shared.finished.load(Ordering::SeqCst) {
                driver.phase = Phase::Done;
                exit.write(AppExit::Success);
            }
            None
        }
        Phase::Done => None,
    };
    if let Some(tick) = shown
        && let Err(e) = show_tick(driver, &mut replay, &mut lanes, tick)
    {
        driver.shared.fail(e);
    }
}

/// Moves the replay to `tick` and mirrors it into the lane entities: in place within one session generation,
/// by a rebuild (through [`seek_replay`]) when the demo rebuilt its lanes.
fn show_tick(
    driver: &mut ExportDriver,
    replay: &mut Replay,
    lanes: &mut Query<(&mut Lane, &mut LaneSettings)>,
    tick: u64,
) -> Result<(), String> {
    replay.player.seek(tick).map_err(|e| e.to_string())?;
    let session = &replay.player.session;
    if driver.synced_generation != Some(session.generation) {
        driver.synced_generation = Some(session.generation);
        replay.seek = Some(tick);
        return Ok(());
    }
    for (mut lane, mut settings) in lanes.iter_mut() {
        if let Some(world) = session.lanes.get(lane.index) {
            lane.world.clone_from(world);
            if settings.0 != world.settings {
                settings.0 = world.settings.clone();
            }
        }
    }
    Ok(())
}

/// The export camera, read without the overlay's own transform.
type ExportCamera<'w, 's> = Query<
    'w,
    's,
    (&'static Camera, &'static Transform, &'static Projection),
    (With<MainCamera>, Without<OverlayText>),
>;

/// PostUpdate: the overlay text in the camera's top-left corner, a fixed size in pixels.
fn place_overlay(
    driver: Res<ExportDriver>,
    replay: Res<Replay>,
    cameras: ExportCamera,
    mut texts: Query<(&mut Text2d, &mut Transform), With<OverlayText>>,
) {
    let (Some(overlay), Ok((camera, camera_transform, projection))) =
        (&driver.overlay, cameras.single())
    else {
        return;
    };
    let Some(size) = camera.logical_viewport_size() else {
        return;
    };
    let scale = camera_scale(projection);
    let margin = overlay_margin_px(driver.height);
    let label = overlay_label(
        overlay,
        &replay.player,
        overlay_line_chars(driver.width, driver.height),
    );
    for (mut text, mut transform) in &mut texts {
        if text.0 != label {
            text.0.clone_from(&label);
        }
        let corner = Vec2::new(-size.x / 2.0 + margin, size.y / 2.0 - margin) * scale;
        transform.translation = camera_transform.translation + corner.extend(0.0) + Vec3::Z * 50.0;
        transform.scale = Vec3::splat(scale);
    }
}

/// The delay of GIF frame `k` at `fps` [cs]: `round((k+1)·100/fps) − round(k·100/fps)`, so the delays add up
/// to the clip's length although each is a whole centisecond.
pub fn gif_delay_cs(k: u64, fps: u32) -> u16 {
    let at = |k: u64| (k as f64 * 100.0 / fps as f64).round() as u64;
    (at(k + 1) - at(k)).min(u16::MAX as u64) as u16
}

fn gif_skip_sub_blocks(gif: &[u8], mut pos: usize) -> Result<usize, String> {
    loop {
        let n = *gif
            .get(pos)
            .ok_or_else(|| format!("truncated in a data block at byte {pos}"))?
            as usize;
        pos += 1 + n;
        if n == 0 {
            return Ok(pos);
        }
        if pos > gif.len() {
            return Err(format!("truncated in a data block at byte {pos}"));
        }
    }
}

/// Walks a GIF stream and returns the delay of each frame [cs] (0 for a frame without a graphic control
/// extension). Errors name the byte where the stream breaks.
pub fn gif_frame_delays(gif: &[u8]) -> Result<Vec<u16>, String> {
    if gif.len() < 13 || &gif[..3] != b"GIF" {
        return Err("not a GIF (no GIF header)".into());
    }
    let table = |flags: u8| {
        if flags & 0x80 != 0 {
            3usize << ((flags & 7) + 1)
        } else {
            0
        }
    };
    let mut pos = 13 + table(gif[10]);
    let mut delays = Vec::new();
    let mut pending = 0u16;
    loop {
        match gif.get(pos) {
            Some(0x21) => {
                let label = *gif.get(pos + 1).ok_or("truncated extension")?;
                pos += 2;
                if label == 0xF9 {
                    if gif.get(pos) != Some(&4) || pos + 5 > gif.len() {
                        return Err(format!("malformed graphic control extension at byte {pos}"));
                    }
                    pending = u16::from_le_bytes([gif[pos + 2], gif[pos + 3]]);
                }
                pos = gif_skip_sub_blocks(gif, pos)?;
            }
            Some(0x2C) => {
                let flags = *gif
                    .get(pos + 9)
                    .ok_or_else(|| format!("truncated image descriptor at byte {pos}"))?;
                pos += 10 + table(flags) + 1;
                pos = gif_skip_sub_blocks(gif, pos)?;
                delays.push(std::mem::take(&mut pending));
            }
            Some(0x3B) => return Ok(delays),
            Some(b) => return Err(format!("unexpected block 0x{b:02x} at byte {pos}")),
            None => {
                return Err(format!(
                    "truncated after {} frames (no trailer)",
                    delays.len()
                ));
            }
        }
    }
}

/// A GIF89a writer for the exporter, compiled with the crate's optimisation (the image crate's NeuQuant
/// encoder runs at well under one frame per second in a debug build). Each frame stores only the rectangle
/// that changed since the previous one (drawn over it: disposal "do not dispose"), with a local palette that
/// is exact when the rectangle has at most 256 colours and otherwise keeps every colour's hue (`quantise`).
/// Loops forever.
pub struct GifWriter<W: Write> {
    out: W,
    width: usize,
    height: usize,
    previous: Vec<u32>,
    /// LZW trie: `trie[code · 256 + index]` = the code for string(code) + index, 0 when absent.
    trie: Vec<u16>,
}

/// Largest LZW code in a GIF (12-bit codes).
const LZW_MAX_CODE: u16 = 4095;

impl<W: Write> GifWriter<W> {
    /// Writes the header, the screen descriptor (no global palette) and the loop extension.
    pub fn new(mut out: W, width: u16, height: u16) -> std::io::Result<GifWriter<W>> {
        out.write_all(b"GIF89a")?;
        out.write_all(&width.to_le_bytes())?;
        out.write_all(&height.to_le_bytes())?;
        out.write_all(&[0, 0, 0])?;
        out.write_all(&[0x21, 0xFF, 11])?;
        out.write_all(b"NETSCAPE2.0")?;
        out.write_all(&[3, 1, 0, 0, 0])?;
        Ok(GifWriter {
            out,
            width: width as usize,
            height: height as usize,
            previous: Vec::new(),
            trie: vec![0; (LZW_MAX_CODE as usize + 1) * 256],
        })
    }

    /// Appends a frame of `width · height` RGBA8 pixels (alpha ignored) shown for `delay_cs` centiseconds.
    pub fn frame(&mut self, rgba: &[u8], delay_cs: u16) -> std::io::Result<()> {
        let (w, h) = (self.width, self.height);
        if rgba.len() != w * h * 4 {
            return Err(std::io::Error::other(format!(
                "a frame of {} bytes for {w}x{h} pixels",
                rgba.len()
            )));
        }
        let pixels: Vec<u32> = rgba
            .chunks_exact(4)
            .map(|p| u32::from_be_bytes([0, p[0], p[1], p[2]]))
            .collect();
        // The rectangle that differs from the previous frame (all of the first frame; one pixel when nothing
        // changed, so the frame still carries its delay).
        let (mut x0, mut y0, mut x1, mut y1) = (w, h, 0, 0);
        if self.previous.len() == pixels.len() {
            for y in 0..h {
                let row = &pixels[y * w..(y + 1) * w];
                let old = &self.previous[y * w..(y + 1) * w];
                if row == old {
                    continue;
                }
                let first = (0..w).find(|&x| row[x] != old[x]).unwrap_or(0);
                let last = (0..w).rev().find(|&x| row[x] != old[x]).unwrap_or(w - 1);
                x0 = x0.min(first);
                x1 = x1.max(last + 1);
                y0 = y0.min(y);
                y1 = y + 1;
            }
            if x0 >= x1 {
                (x0, y0, x1, y1) = (0, 0, 1, 1);
            }
        } else {
            (x0, y0, x1, y1) = (0, 0, w, h);
        }
        let region: Vec<u32> = (y0..y1)
            .flat_map(|y| pixels[y * w + x0..y * w + x1].iter().copied())
            .collect();
        let (palette, indices) = quantise(&region);
        let bits = (usize::BITS - (palette.len().max(2) - 1).leading_zeros()) as u8;

        self.out.write_all(&[0x21, 0xF9, 4, 1 << 2])?;
        self.out.write_all(&delay_cs.to_le_bytes())?;
        self.out.write_all(&[0, 0, 0x2C])?;
        for v in [x0, y0, x1 - x0, y1 - y0] {
            self.out.write_all(&(v as u16).to_le_bytes())?;
        }
        self.out.write_all(&[0x80 | (bits - 1)])?;
        let mut table = vec![0u8; 3 << bits];
        for (i, c) in palette.iter().enumerate() {
            table[3 * i..3 * i + 3].copy_from_slice(&c.to_be_bytes()[1..]);
        }
        self.out.write_all(&table)?;
        let min_code_size = bits.max(2);
        self.out.write_all(&[min_code_size])?;
        let data = lzw_encode(&indices, min_code_size, &mut self.trie);
        for block in data.chunks(255) {
            self.out.write_all(&[block.len() as u8])?;
            self.out.write_all(block)?;
        }
        self.out.write_all(&[0])?;
        self.previous = pixels;
        Ok(())
    }

    /// Writes the trailer and returns the writer (flushed).
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.write_all(&[0x3B])?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A palette (0x00RRGGBB, at most 256 entries) and each pixel's index in it.
///
/// Exact when the pixels have at most 256 colours. Beyond that, the colours are cut into 256 boxes, each time
/// halving the box that spans most levels in one channel halfway along that channel, and each box is drawn in the
/// middle of its span: a colour moves by at most half the widest span left, and a few
/// pixels of a hue of their own (a small ball's shading) get boxes of their own rather than the nearest frequent
/// colour. (Keeping the 256 most frequent colours dropped the slope's balls for the greys of text and walls; a
/// uniform grid with a cell for each occupied colour held them, but where Mesa antialiased text into more
/// colours it fell to 16 levels a channel, and a title's green moved by 15.)
fn quantise(pixels: &[u32]) -> (Vec<u32>, Vec<u8>) {
    use std::collections::HashMap;
    // Sorted, so that nothing depends on hash order.
    let mut colours: Vec<u32> = pixels.to_vec();
    colours.sort_unstable();
    colours.dedup();
    let channel = |c: u32, k: usize| (c >> (8 * k)) & 0xFF;
    // The channel a box spans most levels in, and how many.
    let widest = |colours: &[u32]| {
        (0..3)
            .map(|k| {
                let (lo, hi) = colours.iter().fold((255, 0), |(lo, hi), &c| {
                    (u32::min(lo, channel(c, k)), u32::max(hi, channel(c, k)))
                });
                (hi.saturating_sub(lo), k)
            })
            .max()
            .unwrap_or((0, 0))
    };
    // Each box with its widest channel, worked out once per box.
    let first = widest(&colours);
    let mut boxes: Vec<(Vec<u32>, (u32, usize))> = vec![(colours, first)];
    while boxes.len() < 256 {
        let Some((at, (span, k))) = boxes
            .iter()
            .enumerate()
            .map(|(i, b)| (i, b.1))
            .max_by_key(|&(i, (span, _))| (span, std::cmp::Reverse(i)))
        else {
            break;
        };
        if span == 0 {
            break;
        }
        let mut cut = std::mem::take(&mut boxes[at].0);
        cut.sort_unstable_by_key(|&c| (channel(c, k), c));
        // Halfway along the span, so each half spans at most half as many levels; both keep a colour.
        let middle = channel(cut[0], k) + span.div_ceil(2);
        let upper = cut.split_off(cut.partition_point(|&c| channel(c, k) < middle));
        let (lower_span, upper_span) = (widest(&cut), widest(&upper));
        boxes[at] = (cut, lower_span);
        boxes.push((upper, upper_span));
    }
    let mut palette = Vec::with_capacity(boxes.len());
    let mut index: HashMap<u32, u8> = HashMap::new();
    for (i, (b, _)) in boxes.iter().enumerate() {
        let mid = (0..3).fold(0u32, |rgb, k| {
            let (lo, hi) = b.iter().fold((255, 0), |(lo, hi), &c| {
                (u32::min(lo, channel(c, k)), u32::max(hi, channel(c, k)))
            });
            rgb | ((lo + hi) / 2) << (8 * k)
        });
        palette.push(mid);
        for &c in b {
            index.insert(c, i as u8);
        }
    }
    let indices = pixels
        .iter()
        .map(|p| index.get(p).copied().unwrap_or(0))
        .collect();
    (palette, indices)
}

/// GIF's variable-width LZW (codes of `min_code_size + 1` to 12 bits, LSB first, a clear code when the table
/// is full), the scheme of the widely used gif.h. `trie` is scratch space of 4096 · 256 entries.
fn lzw_encode(indices: &[u8], min_code_size: u8, trie: &mut [u16]) -> Vec<u8> {
    let clear = 1u16 << min_code_size;
    let mut out = Vec::with_capacity(indices.len() / 2);
    let mut acc = 0u32;
    let mut nbits = 0u32;
    let mut emit = |code: u16, width: u8, out: &mut Vec<u8>| {
        acc |= (code as u32) << nbits;
        nbits += width as u32;
        while nbits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            nbits -= 8;
        }
    };
    trie.fill(0);
    let mut width = min_code_size + 1;
    let mut max_code = clear + 1;
    emit(clear, width, &mut out);
    let Some((&first, rest)) = indices.split_first() else {
        emit(clear + 1, width, &mut out);
        if nbits > 0 {
            out.push(acc as u8);
        }
        return out;
    };
    let mut current = first as u16;
    for &k in rest {
        let slot = current as usize * 256 + k as usize;
        if trie[slot] != 0 {
            current = trie[slot];
            continue;
        }
        emit(current, width, &mut out);
        max_code += 1;
        trie[slot] = max_code;
        if max_code >= 1 << width {
            width += 1;
        }
        if max_code == LZW_MAX_CODE {
            emit(clear, width, &mut out);
            trie.fill(0);
            width = min_code_size + 1;
            max_code = clear + 1;
        }
        current = k as u16;
    }
    emit(current, width, &mut out);
    // Reading that code, the decoder adds the entry this encoder would have added next; if that fills the
    // present width, it reads the closing clear one bit wider.
    if max_code + 1 >= 1 << width && width < 12 && max_code > clear + 1 {
        width += 1;
    }
    emit(clear, width, &mut out);
    emit(clear + 1, min_code_size + 1, &mut out);
    if nbits > 0 {
        out.push(acc as u8);
    }
    out
}

/// Children of an MP4 box payload `data[start..end]`: (type, payload start, end).
fn mp4_children(
    data: &[u8],
    start: usize,
    end: usize,
) -> Result<Vec<([u8; 4], usize, usize)>, String> {
    let mut children = Vec::new();
    let mut pos = start;
    while pos < end {
        if pos + 8 > end {
            return Err(format!("truncated box header at byte {pos}"));
        }
        let size32 = u32::from_be_bytes([data[pos], data[pos + 1], data[pos + 2], data[pos + 3]]);
        let kind = [data[pos + 4], data[pos + 5], data[pos + 6], data[pos + 7]];
        let (header, size) = match size32 {
            0 => (8, end - pos),
            1 => {
                if pos + 16 > end {
                    return Err(format!("truncated box header at byte {pos}"));
                }
                let mut large = [0u8; 8];
                large.copy_from_slice(&data[pos + 8..pos + 16]);
                (16, u64::from_be_bytes(large) as usize)
            }
            n => (8, n as usize),
        };
        if size < header || pos + size > end {
            return Err(format!(
                "box '{}' at byte {pos} claims {size} bytes",
                String::from_utf8_lossy(&kind)
            ));
        }
        children.push((kind, pos + header, pos + size));
        pos += size;
    }
    Ok(children)
}

fn read_be(data: &[u8], at: usize, wide: bool) -> u64 {
    if wide {
        let mut b = [0u8; 8];
        b.copy_from_slice(&data[at..at + 8]);
        u64::from_be_bytes(b)
    } else {
        let mut b = [0u8; 4];
        b.copy_from_slice(&data[at..at + 4]);
        u32::from_be_bytes(b) as u64
    }
}

fn write_be(data: &mut [u8], at: usize, wide: bool, value: u64) {
    if wide {
        data[at..at + 8].copy_from_slice(&value.to_be_bytes());
    } else {
        let value = u32::try_from(value).unwrap_or(u32::MAX);
        data[at..at + 4].copy_from_slice(&value.to_be_bytes());
    }
}

/// Sets every track's media time scale (`mdhd`) in a `moov` payload to `track_timescale` units per second and
/// rescales the track (`tkhd`) and movie (`mvhd`) durations to match: a sample of d units then lasts
/// d / track_timescale s. With bevy_capture's 100-unit samples, `track_timescale = 100 · fps`.
pub fn retime_mp4_moov(moov: &mut [u8], track_timescale: u32) -> Result<(), String> {
    if track_timescale == 0 {
        return Err("time scale 0".into());
    }
    let children = mp4_children(moov, 0, moov.len())?;
    let (_, mvhd, mvhd_end) = *children
        .iter()
        .find(|c| &c.0 == b"mvhd")
        .ok_or("no mvhd box")?;
    let mvhd_wide = moov[mvhd] == 1;
    // version/flags, creation, modification, then time scale and duration.
    let mvhd_timescale_at = mvhd + 4 + if mvhd_wide { 16 } else { 8 };
    if mvhd_timescale_at + if mvhd_wide { 12 } else { 8 } > mvhd_end {
        return Err("short mvhd box".into());
    }
    let movie_timescale = read_be(moov, mvhd_timescale_at, false);
    let mut movie_duration = 0u64;
    let mut tracks = 0;
    for &(kind, trak, trak_end) in &children {
        if &kind != b"trak" {
            continue;
        }
        let parts = mp4_children(moov, trak, trak_end)?;
        let tkhd = parts
            .iter()
            .find(|c| &c.0 == b"tkhd")
            .ok_or("trak without tkhd")?;
        let mdia = parts
            .iter()
            .find(|c| &c.0 == b"mdia")
            .ok_or("trak without mdia")?;
        let media = mp4_children(moov, mdia.1, mdia.2)?;
        let (_, mdhd, mdhd_end) = *media
            .iter()
            .find(|c| &c.0 == b"mdhd")
            .ok_or("mdia without mdhd")?;
        let mdhd_wide = moov[mdhd] == 1;
        let timescale_at = mdhd + 4 + if mdhd_wide { 16 } else { 8 };
        if timescale_at + if mdhd_wide { 12 } else { 8 } > mdhd_end {
            return Err("short mdhd box".into());
        }
        let media_duration = read_be(moov, timescale_at + 4, mdhd_wide);
        write_be(moov, timescale_at, false, track_timescale as u64);
        let duration = (media_duration as u128 * movie_timescale as u128
            + track_timescale as u128 / 2)
            / track_timescale as u128;
        let duration = duration as u64;
        let tkhd_wide = moov[tkhd.1] == 1;
        // version/flags, creation, modification, track id, reserved, then duration.
        let duration_at = tkhd.1 + 4 + if tkhd_wide { 24 } else { 16 };
        if duration_at + if tkhd_wide { 8 } else { 4 } > tkhd.2 {
            return Err("short tkhd box".into());
        }
        write_be(moov, duration_at, tkhd_wide, duration);
        movie_duration = movie_duration.max(duration);
        tracks += 1;
    }
    if tracks == 0 {
        return Err("no trak box".into());
    }
    write_be(moov, mvhd_timescale_at + 4, mvhd_wide, movie_duration);
    Ok(())
}

/// Finds the top-level `moov` box of an MP4 file and retimes it in place ([`retime_mp4_moov`]).
fn retime_mp4_file(path: &Path, track_timescale: u32) -> Result<()> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open '{}'", path.display()))?;
    let len = file.metadata()?.len();
    let mut pos = 0u64;
    while pos + 8 <= len {
        file.seek(SeekFrom::Start(pos))?;
        let mut header = [0u8; 16];
        file.read_exact(&mut header[..8])?;
        let size32 = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as u64;
        let (header_len, size) = match size32 {
            0 => (8, len - pos),
            1 => {
                file.read_exact(&mut header[8..16])?;
                let mut large = [0u8; 8];
                large.copy_from_slice(&header[8..16]);
                (16, u64::from_be_bytes(large))
            }
            n => (8, n),
        };
        if size < header_len || pos + size > len {
            bail!("'{}': broken MP4 box at byte {pos}", path.display());
        }
        if &header[4..8] == b"moov" {
            let mut moov = vec![0u8; (size - header_len) as usize];
            file.read_exact(&mut moov)?;
            retime_mp4_moov(&mut moov, track_timescale)
                .map_err(|e| anyhow!("'{}': {e}", path.display()))?;
            file.seek(SeekFrom::Start(pos + header_len))?;
            file.write_all(&moov)?;
            file.sync_all()?;
            return Ok(());
        }
        pos += size;
    }
    bail!(
        "'{}' has no moov box: the MP4 encoder did not complete the file",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The overlay names the scene a frame shows: after a `Scene` action, the scene switched to, not the demo's
    /// first.
    #[test]
    fn the_overlay_names_the_scene_a_scene_action_switched_to() {
        let slope = std::fs::read_to_string("assets/scenes/slope.ron").expect("the shipped slope");
        let script = crate::demo::Script::parse(
            &format!("Script(ticks: 4, actions: [(tick: 2, action: Scene({slope}))])"),
            "sw.script.ron",
        )
        .expect("a valid script");
        let start = crate::scene::Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
            .expect("the shipped wall throw");
        let demo = crate::demo::record_script(&start, &script, "sw.script.ron", |_, _| {})
            .expect("records");
        let switched = match &demo.actions[0].action {
            crate::demo::Action::Scene(scene) => scene.name.clone(),
            other => panic!("{other:?}"),
        };
        let mut player = crate::demo::Player::new(demo, "sw");
        player.start().expect("starts");
        let overlay = Overlay {
            demo_name: "sw.demo.ron".into(),
            verdict: "match (1 hash)".into(),
            mismatch: false,
        };
        let first = |label: String| label.lines().next().unwrap_or_default().to_string();
        assert_eq!(
            first(overlay_label(&overlay, &player, usize::MAX)),
            "sw.demo.ron - Wall throw"
        );
        player.seek(4).expect("seeks past the switch");
        assert_eq!(
            first(overlay_label(&overlay, &player, usize::MAX)),
            format!("sw.demo.ron - {switched}")
        );
        assert_ne!(switched, "Wall throw");
    }

    /// The overlay's text is a 40th of the frame's height, smaller where its longer line would not fit the width:
    /// a portrait 360 × 640 clip cut the verdict to "hashes: m".
    #[test]
    fn the_overlay_fits_a_narrow_frame() {
        assert_eq!(overlay_font_px(1280, 720), 18.0);
        assert_eq!(overlay_font_px(640, 360), 9.0);
        assert_eq!(overlay_font_px(64, 64), 8.0);
        let line = "tick 12616/12616   t = 123.700 s   hashes: match (212 hashes)";
        let font = overlay_font_px(360, 640);
        assert!((8.0..16.0).contains(&font), "{font}");
        let room = overlay_room_px(360, 640);
        assert!(
            line.chars().count() as f32 * MONO_ADVANCE * font <= room,
            "{font} px"
        );
        assert!(overlay_band_px(360, 640) < overlay_band_px(640, 640));
    }

    /// The overlay's time is the lanes' clock: lanes at h = 0.1 ms are recorded at the capped 1 000 Hz, so ticks over
    /// the rate ran ten times ahead of them, and after the run's 80 steps the ticks go on while the lanes stand.
    #[test]
    fn the_overlay_gives_the_lanes_time_not_ticks_over_the_rate() {
        let mut scene =
            crate::scene::Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
                .expect("the shipped wall throw");
        for lane in &mut scene.lanes {
            lane.contact.h = 1e-4;
        }
        let script =
            crate::demo::Script::parse("Script(ticks: 100, actions: [])", "fine.script.ron")
                .expect("a valid script");
        let demo = crate::demo::record_script(&scene, &script, "fine.script.ron", |_, _| {})
            .expect("records");
        assert_eq!(demo.fixed_hz, 1_000.0);
        let mut player = crate::demo::Player::new(demo, "fine");
        player.start().expect("starts");
        let overlay = Overlay {
            demo_name: "fine.demo.ron".into(),
            verdict: "match (1 hash)".into(),
            mismatch: false,
        };
        let second = |label: String| label.lines().nth(1).unwrap_or_default().to_string();
        player.seek(40).expect("seeks within the run");
        assert_eq!(
            second(overlay_label(&overlay, &player, usize::MAX)),
            "tick 40/100   t = 0.004 s   hashes: match (1 hash)"
        );
        player.seek(100).expect("seeks past the run's end");
        assert_eq!(
            second(overlay_label(&overlay, &player, usize::MAX)),
            "tick 100/100   t = 0.008 s   hashes: match (1 hash)"
        );
        // A long demo name is cut to the frame's width, so the overlay keeps its two lines (in a 320 × 180 clip it
        // wrapped to a third, over the top lane's title).
        let long = Overlay {
            demo_name: "a_rather_long_demo_name_for_the_physics_class_on_monday.demo.ron".into(),
            ..overlay.clone()
        };
        let fits = overlay_line_chars(320, 180);
        let label = overlay_label(&long, &player, fits);
        let first = label.lines().next().unwrap_or_default();
        assert!(
            first.ends_with("...") && first.chars().count() == fits,
            "{first} ({fits})"
        );
        assert_eq!(label.lines().count(), 2);
    }

    /// A 1×1 GIF89a with a 2-colour table, a NETSCAPE loop extension and frames of the given delays.
    fn tiny_gif(delays: &[u16]) -> Vec<u8> {
        let mut g = b"GIF89a".to_vec();
        g.extend_from_slice(&[1, 0, 1, 0, 0x80, 0, 0]);
        g.extend_from_slice(&[0, 0, 0, 255, 255, 255]);
        g.extend_from_slice(&[0x21, 0xFF, 11]);
        g.extend_from_slice(b"NETSCAPE2.0");
        g.extend_from_slice(&[3, 1, 0, 0, 0]);
        for d in delays {
            g.extend_from_slice(&[0x21, 0xF9, 4, 0]);
            g.extend_from_slice(&d.to_le_bytes());
            g.extend_from_slice(&[0, 0]);
            g.extend_from_slice(&[0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0]);
            g.extend_from_slice(&[2, 2, 0x44, 0x01, 0]);
        }
        g.push(0x3B);
        g
    }

    /// What bevy_capture 0.6 hands an encoder for the `width × height` RGBA8 frame `pixels` (its
    /// render_world.rs): a buffer of `align(width) · 4` bytes per row, the rows copied `align(width · 4)` bytes
    /// apart, then the padding stripped only when a row is not 256-byte aligned.
    fn bevy_capture_readback(pixels: &[u8], width: u32, height: u32) -> Vec<u8> {
        let align = RenderDevice::align_copy_bytes_per_row;
        let row = width as usize * 4;
        let stride = align(row);
        let mut buffer = vec![0u8; align(width as usize) * 4 * height as usize];
        for (y, source) in pixels.chunks(row).enumerate() {
            buffer[y * stride..y * stride + row].copy_from_slice(source);
        }
        if row == stride {
            return buffer;
        }
        buffer
            .chunks(stride)
            .take(height as usize)
            .flat_map(|r| &r[..row.min(r.len())])
            .copied()
            .collect()
    }

    /// A frame whose every byte says where it is.
    fn test_pattern(width: u32, height: u32) -> Vec<u8> {
        (0..height as usize)
            .flat_map(|y| (0..width as usize * 4).map(move |i| (i * 7 + y * 13 + i / 256) as u8))
            .collect()
    }

    /// An RGBA8 sRGB frame of `width × height` holding `data` (of any length).
    fn frame_image(width: u32, height: u32, data: Vec<u8>) -> Image {
        let mut image = Image::new_fill(
            bevy::render::render_resource::Extent3d {
                width,
                height,
                depth_or_array_layers: 1,
            },
            bevy::render::render_resource::TextureDimension::D2,
            &[0; 4],
            bevy::render::render_resource::TextureFormat::Rgba8UnormSrgb,
            bevy::asset::RenderAssetUsages::default(),
        );
        image.data = Some(data);
        image
    }

    #[test]
    fn read_back_rows_come_out_back_to_back_at_every_width() {
        // Widths that are multiples of 64 but not of 256 used to arrive with a tail of unused bytes.
        for width in [
            16, 17, 32, 63, 64, 65, 100, 128, 192, 256, 320, 480, 512, 576, 640, 720, 800, 854,
            960, 1024, 1280, 1600, 1920, 2560, 3840,
        ] {
            for height in [1, 2, 64] {
                let pixels = test_pattern(width, height);
                let read_back = bevy_capture_readback(&pixels, width, height);
                let rows = frame_rows(&read_back, width, height, 4)
                    .unwrap_or_else(|e| panic!("{width}x{height}: {e}"));
                assert!(rows[..] == pixels[..], "{width}x{height}");
                let image = frame_image(width, height, read_back);
                let tight = tight_frame(&image).unwrap();
                assert_eq!(tight.data.as_deref(), Some(&pixels[..]), "{width}x{height}");
                assert!(frame_pixels(&tight, width, height).is_ok());
            }
        }
        // The reviewer's case: 8192 bytes per row of buffer for a 1920-wide frame.
        assert_eq!(
            bevy_capture_readback(&test_pattern(1920, 1080), 1920, 1080).len(),
            8_847_360
        );
    }

    #[test]
    fn a_short_or_mis_sized_frame_is_an_error_naming_the_sizes() {
        let message = frame_rows(&[0; 10], 64, 64, 4).unwrap_err();
        assert!(
            message.contains("10 bytes") && message.contains("64x64"),
            "{message}"
        );
        // 854 · 4 = 3416 bytes a row, 3584 apart: two rows need 7000 bytes.
        assert!(frame_rows(&[0; 6999], 854, 2, 4).is_err());
        assert_eq!(frame_rows(&[0; 7000], 854, 2, 4).map(|r| r.len()), Ok(6832));
        let image = frame_image(64, 64, vec![0; 64 * 64 * 4 + 4]);
        let message = frame_pixels(&image, 64, 64).unwrap_err().to_string();
        assert!(message.contains("16388 bytes"), "{message}");
        let image = frame_image(64, 32, vec![0; 64 * 32 * 4]);
        assert!(frame_pixels(&image, 64, 64).is_err());
    }

    #[test]
    fn png_frames_of_a_padded_read_back_hold_the_rendered_pixels_and_a_bad_frame_is_an_error() {
        let dir = std::env::temp_dir().join(format!("cs-export-png-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let (width, height) = (640, 4);
        let mut clip = FramesClip {
            dir: dir.clone(),
            width,
            height,
            next: 0,
        };
        let pixels = test_pattern(width, height);
        let read_back = frame_image(width, height, bevy_capture_readback(&pixels, width, height));
        clip.frame(&tight_frame(&read_back).unwrap()).unwrap();
        let png = Image::from_buffer(
            &fs::read(dir.join("frame_00000.png")).unwrap(),
            bevy::image::ImageType::Extension("png"),
            bevy::image::CompressedImageFormats::NONE,
            true,
            bevy::image::ImageSampler::Default,
            bevy::asset::RenderAssetUsages::default(),
        )
        .unwrap();
        assert_eq!((png.width(), png.height()), (width, height));
        assert!(png.data.as_deref() == Some(&pixels[..]));
        // Handed over untrimmed, the frame is refused with its sizes (the image crate used to panic).
        let message = format!("{:#}", clip.frame(&read_back).unwrap_err());
        assert!(
            message.contains("frame 1") && message.contains("bytes"),
            "{message}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn gif_delays_add_up_to_the_clip_length() {
        // 30 fps: 3.33 cs per frame, as 3, 4, 3, 3, 4, 3, …
        let delays: Vec<u16> = (0..6).map(|k| gif_delay_cs(k, 30)).collect();
        assert_eq!(delays, [3, 4, 3, 3, 4, 3]);
        assert_eq!(
            (0..30).map(|k| gif_delay_cs(k, 30) as u64).sum::<u64>(),
            100
        );
        assert!((0..50).all(|k| gif_delay_cs(k, 25) == 4));
        assert_eq!(gif_delay_cs(0, 1), 100);
    }

    #[test]
    fn gif_walker_reads_every_frame_delay() {
        assert_eq!(gif_frame_delays(&tiny_gif(&[3, 4, 3])), Ok(vec![3, 4, 3]));
        assert_eq!(gif_frame_delays(&tiny_gif(&[])), Ok(vec![]));
    }

    #[test]
    fn gif_walker_rejects_a_truncated_file() {
        let mut g = tiny_gif(&[1, 1]);
        g.pop();
        assert!(gif_frame_delays(&g).unwrap_err().contains("no trailer"));
        assert!(gif_frame_delays(&tiny_gif(&[1, 1])[..40]).is_err());
        assert!(gif_frame_delays(b"PNG").is_err());
    }

    /// A plain GIF LZW decoder, written from the GIF89a specification, to check the encoder against.
    fn lzw_decode(data: &[u8], min_code_size: u8) -> Vec<u8> {
        let clear = 1usize << min_code_size;
        let mut table: Vec<Vec<u8>> = Vec::new();
        let reset = |table: &mut Vec<Vec<u8>>| {
            table.clear();
            table.extend((0..clear).map(|i| vec![i as u8]));
            table.push(vec![]);
            table.push(vec![]);
        };
        reset(&mut table);
        let (mut width, mut pos, mut out) = (min_code_size as usize + 1, 0usize, Vec::new());
        let mut previous: Option<Vec<u8>> = None;
        loop {
            let mut code = 0usize;
            for i in 0..width {
                let bit = (data[(pos + i) / 8] >> ((pos + i) % 8)) & 1;
                code |= (bit as usize) << i;
            }
            pos += width;
            if code == clear {
                reset(&mut table);
                width = min_code_size as usize + 1;
                previous = None;
                continue;
            }
            if code == clear + 1 {
                return out;
            }
            let entry = match (&previous, table.get(code)) {
                (_, Some(e)) => e.clone(),
                (Some(p), None) => [p.clone(), vec![p[0]]].concat(),
                (None, None) => panic!("code {code} before any string"),
            };
            out.extend_from_slice(&entry);
            if let Some(p) = previous
                && table.len() < 4096
            {
                table.push([p, vec![entry[0]]].concat());
            }
            if table.len() == 1 << width && width < 12 {
                width += 1;
            }
            previous = Some(entry);
        }
    }

    #[test]
    fn lzw_round_trips_through_a_reference_decoder_across_table_resets() {
        let mut trie = vec![0u16; 4096 * 256];
        // A pseudo-random stream long enough to fill the 4096-entry table several times, and runs.
        let mut state = 0x2545_f491_u32;
        let noisy: Vec<u8> = (0..60_000)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 24) as u8
            })
            .collect();
        for (indices, bits) in [
            (noisy.clone(), 8u8),
            (noisy.iter().map(|v| v & 3).collect(), 2),
            (noisy.iter().map(|v| v & 1).collect(), 2),
            (vec![5u8; 100_000], 3),
            (vec![0u8], 2),
        ] {
            let data = lzw_encode(&indices, bits, &mut trie);
            assert_eq!(lzw_decode(&data, bits), indices, "{bits}-bit indices");
        }
    }

    #[test]
    fn gif_writer_stores_changed_rectangles_with_their_delays() {
        let (w, h) = (40usize, 30usize);
        let background = [24u8, 26, 32, 255];
        let mut frame = background.repeat(w * h);
        let mut writer = GifWriter::new(Vec::new(), w as u16, h as u16).unwrap();
        writer.frame(&frame, 3).unwrap();
        // A red dot moves: frame 1 changes a small rectangle only.
        for (x, y) in [(10, 10), (11, 10), (10, 11)] {
            frame[4 * (y * w + x)..4 * (y * w + x) + 4].copy_from_slice(&[235, 64, 52, 255]);
        }
        writer.frame(&frame, 4).unwrap();
        writer.frame(&frame, 3).unwrap();
        let gif = writer.finish().unwrap();
        assert_eq!(gif_frame_delays(&gif), Ok(vec![3, 4, 3]));
        // Image descriptors: full frame, then the 2×2 rectangle at (10, 10), then one unchanged pixel.
        let rects: Vec<[u16; 4]> = gif
            .windows(3)
            .enumerate()
            .filter(|(_, win)| win[0] == 0 && win[1] == 0 && win[2] == 0x2C)
            .map(|(i, _)| {
                let v = |k: usize| u16::from_le_bytes([gif[i + 3 + 2 * k], gif[i + 4 + 2 * k]]);
                [v(0), v(1), v(2), v(3)]
            })
            .collect();
        assert_eq!(rects, [[0, 0, 40, 30], [10, 10, 2, 2], [0, 0, 1, 1]]);
    }

    /// The largest difference in any channel between two 0x00RRGGBB colours.
    fn channel_error(a: u32, b: u32) -> u32 {
        (0..3)
            .map(|k| ((a >> (8 * k)) & 255).abs_diff((b >> (8 * k)) & 255))
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn quantise_is_exact_up_to_256_colours_and_close_in_every_channel_beyond() {
        let few: Vec<u32> = (0..1000).map(|i| (i % 7) * 0x010203).collect();
        let (palette, indices) = quantise(&few);
        assert_eq!(palette.len(), 7);
        assert!(
            few.iter()
                .zip(&indices)
                .all(|(&p, &i)| palette[i as usize] == p)
        );
        // 300 colours: each is drawn within one level.
        let mut many: Vec<u32> = (0..256u32).flat_map(|r| [r << 16; 2]).collect();
        many.extend((0..44u32).map(|r| (r * 5) << 16 | 1 << 8));
        let (palette, indices) = quantise(&many);
        assert!(palette.len() <= 256, "{}", palette.len());
        for (&p, &i) in many.iter().zip(&indices) {
            assert!(channel_error(palette[i as usize], p) <= 1, "{p:06x}");
        }
        // 172 967 colours spread over the whole cube: 256 boxes, each at most 64 levels wide.
        let cube: Vec<u32> = (0..1u32 << 24).step_by(97).collect();
        let (palette, indices) = quantise(&cube);
        assert!(palette.len() <= 256, "{}", palette.len());
        for (&p, &i) in cube.iter().zip(&indices) {
            assert!(channel_error(palette[i as usize], p) <= 32, "{p:06x}");
        }
        // Antialiased text in eight colours over a dark background (every blend of each, 2 000 colours), and the
        // few shaded pixels of a small ball of a hue of its own: each within 5 levels, the ball's among them.
        let background = 0x1a1c20u32;
        let blend = |to: u32, t: u32| {
            (0..3).fold(0, |rgb, k| {
                let (a, b) = ((background >> (8 * k)) & 255, (to >> (8 * k)) & 255);
                rgb | ((a * (250 - t) + b * t) / 250) << (8 * k)
            })
        };
        let mut text: Vec<u32> = [
            0x2ecc40u32,
            0xff4136,
            0x0074d9,
            0xffdc00,
            0xb10dc9,
            0xdddddd,
            0x39cccc,
            0xff851b,
        ]
        .iter()
        .flat_map(|&c| (0..250).map(move |t| (c, t)))
        .flat_map(|(c, t)| [blend(c, t); 3])
        .collect();
        let ball: Vec<u32> = (0..12).map(|t| 0x20a040 + t * 0x000301).collect();
        text.extend(&ball);
        let (palette, indices) = quantise(&text);
        assert!(palette.len() <= 256, "{}", palette.len());
        for (&p, &i) in text.iter().zip(&indices) {
            assert!(channel_error(palette[i as usize], p) <= 5, "{p:06x}");
        }
    }

    /// Every frame of a GIF as the `gif` crate decodes it, drawn over the frame before (disposal "keep"), as
    /// 0x00RRGGBB pixels.
    fn decode_gif(bytes: &[u8]) -> Vec<Vec<u32>> {
        let mut options = gif::DecodeOptions::new();
        options.set_color_output(gif::ColorOutput::RGBA);
        let mut decoder = options.read_info(bytes).unwrap();
        let width = decoder.width() as usize;
        let mut canvas = vec![0u32; width * decoder.height() as usize];
        let mut frames = Vec::new();
        while let Some(frame) = decoder.read_next_frame().unwrap() {
            let (left, top, w) = (
                frame.left as usize,
                frame.top as usize,
                frame.width as usize,
            );
            for (k, p) in frame.buffer.chunks_exact(4).enumerate() {
                canvas[(top + k / w) * width + left + k % w] =
                    u32::from_be_bytes([0, p[0], p[1], p[2]]);
            }
            frames.push(canvas.clone());
        }
        frames
    }

    /// Frames of every length from 1 to 700 pixels in 2, 4 and 5 colours, through the `gif` crate's decoder:
    /// the stream's last codes must be read at the width the decoder has reached. Where the decoder's table had
    /// just filled a width (its next code `2^w`), it read the closing clear code one bit wider than it was written
    /// and failed with `LzwError(InvalidCode)`.
    #[test]
    fn every_frame_length_decodes_to_its_pixels() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(n)) as u32
        };
        for colours in [2u32, 4, 5] {
            for width in 1..=700usize {
                let pixels: Vec<u32> = (0..width).map(|_| next(colours) * 0x30_2010).collect();
                let rgba: Vec<u8> = pixels
                    .iter()
                    .flat_map(|p| {
                        let [_, r, g, b] = p.to_be_bytes();
                        [r, g, b, 255]
                    })
                    .collect();
                let mut writer = GifWriter::new(Vec::new(), width as u16, 1).expect("header");
                writer.frame(&rgba, 5).expect("a frame");
                let bytes = writer.finish().expect("trailer");
                let frames = decode_gif(&bytes);
                assert_eq!(frames, vec![pixels], "{colours} colours, {width} pixels");
            }
        }
    }

    #[test]
    fn a_gif_keeps_small_balls_in_their_lane_colours_among_hundreds_of_greys() {
        // The slope scene's GIF had no green or red pixel: its balls are a dozen pixels, each of its own shade
        // (darker towards the rim), and the antialiased greys of text and walls outnumbered them. Here 300 greys
        // (4 pixels each) fill the top rows; a green and a red ball of 12 shades lie below, then move by a pixel.
        let (width, height) = (64usize, 32usize);
        let rgb = |[r, g, b]: [f64; 3]| u32::from_be_bytes([0, r as u8, g as u8, b as u8]);
        let shade = |[r, g, b]: [u8; 3], s: f64| rgb([r as f64 * s, g as f64 * s, b as f64 * s]);
        let frame = |shift: usize| {
            let mut pixels = vec![rgb([24.0, 26.0, 32.0]); width * height];
            for (k, pixel) in pixels.iter_mut().take(1200).enumerate() {
                let t = ((k + 7 * shift) % 300) as f64 / 299.0;
                *pixel = rgb([24.0 + 193.0 * t, 26.0 + 196.0 * t, 32.0 + 203.0 * t]);
            }
            for i in 0..12 {
                let s = 1.0 - 0.45 * i as f64 / 11.0;
                pixels[24 * width + 10 + shift + i] = shade(super::super::IPC_RGB, s);
                pixels[24 * width + 40 + shift + i] = shade(super::super::PENALTY_RGB, s);
            }
            pixels
        };
        let frames = [frame(0), frame(1)];
        let path =
            std::env::temp_dir().join(format!("cs-export-colours-{}.gif", std::process::id()));
        let mut clip = GifClip::create(path.clone(), width as u32, height as u32, 30).unwrap();
        for pixels in &frames {
            let rgba = pixels.iter().flat_map(|p| {
                let [_, r, g, b] = p.to_be_bytes();
                [r, g, b, 255]
            });
            clip.frame(&frame_image(width as u32, height as u32, rgba.collect()))
                .unwrap();
        }
        Box::new(clip).close(2).unwrap();
        let decoded = decode_gif(&fs::read(&path).unwrap());
        fs::remove_file(&path).unwrap();
        assert_eq!(decoded.len(), 2);
        for (k, (sent, got)) in frames.iter().zip(&decoded).enumerate() {
            let [mut green, mut red] = [0, 0];
            for &q in got {
                let [_, r, g, _] = q.to_be_bytes();
                green += usize::from(g > r.saturating_add(60));
                red += usize::from(r > g.saturating_add(60));
            }
            assert_eq!((green, red), (12, 12), "frame {k}: green and red pixels");
            for (&p, &q) in sent.iter().zip(got) {
                assert!(
                    channel_error(p, q) <= 7,
                    "frame {k}: {p:06x} came back as {q:06x}"
                );
            }
        }
    }

    fn mp4_box(kind: &[u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut b = ((payload.len() + 8) as u32).to_be_bytes().to_vec();
        b.extend_from_slice(kind);
        b.extend_from_slice(payload);
        b
    }

    /// A moov payload as the mp4 crate writes it (version-0 boxes, movie time scale 1000): one track of
    /// `samples` samples of 100 units at a media time scale of 1000.
    fn tiny_moov(samples: u32) -> Vec<u8> {
        let duration = 100 * samples;
        let mut mvhd = vec![0u8; 4 + 8];
        mvhd.extend_from_slice(&1000u32.to_be_bytes());
        mvhd.extend_from_slice(&duration.to_be_bytes());
        mvhd.extend_from_slice(&[0u8; 80]);
        let mut tkhd = vec![0u8; 4 + 8];
        tkhd.extend_from_slice(&1u32.to_be_bytes());
        tkhd.extend_from_slice(&[0u8; 4]);
        tkhd.extend_from_slice(&duration.to_be_bytes());
        tkhd.extend_from_slice(&[0u8; 60]);
        let mut mdhd = vec![0u8; 4 + 8];
        mdhd.extend_from_slice(&1000u32.to_be_bytes());
        mdhd.extend_from_slice(&duration.to_be_bytes());
        mdhd.extend_from_slice(&[0u8; 4]);
        let mdia = [mp4_box(b"mdhd", &mdhd), mp4_box(b"hdlr", &[0u8; 25])].concat();
        let trak = [mp4_box(b"tkhd", &tkhd), mp4_box(b"mdia", &mdia)].concat();
        [mp4_box(b"mvhd", &mvhd), mp4_box(b"trak", &trak)].concat()
    }

    #[test]
    fn mp4_retiming_makes_91_samples_of_100_units_last_91_frames_at_30_fps() {
        let mut moov = tiny_moov(91);
        retime_mp4_moov(&mut moov, 3000).unwrap();
        let be =
            |at: usize| u32::from_be_bytes([moov[at], moov[at + 1], moov[at + 2], moov[at + 3]]);
        // mvhd payload starts at 8: time scale at 8+12, duration at 8+16.
        assert_eq!(be(20), 1000);
        // 91 frames at 30 fps = 3.0333 s = 3033 movie units.
        assert_eq!(be(24), 3033);
        let trak = 8 + 4 + 8 + 8 + 80;
        let tkhd = trak + 8;
        assert_eq!(&moov[tkhd + 4..tkhd + 8], b"tkhd");
        assert_eq!(be(tkhd + 8 + 20), 3033);
        let mdhd = tkhd + 8 + 4 + 8 + 4 + 4 + 4 + 60 + 8;
        assert_eq!(&moov[mdhd + 4..mdhd + 8], b"mdhd");
        assert_eq!(be(mdhd + 8 + 12), 3000);
        assert_eq!(
            be(mdhd + 8 + 16),
            9100,
            "media duration stays in samples' units"
        );
    }

    #[test]
    fn mp4_retiming_refuses_a_moov_without_tracks_or_with_a_bad_box() {
        let mut mvhd_only = tiny_moov(3)[..8 + 4 + 8 + 8 + 80].to_vec();
        assert!(
            retime_mp4_moov(&mut mvhd_only, 3000)
                .unwrap_err()
                .contains("no trak")
        );
        let mut broken = tiny_moov(3);
        broken[3] = 0xFF;
        assert!(retime_mp4_moov(&mut broken, 3000).is_err());
    }
}
