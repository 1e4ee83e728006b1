//! Export (SPEC §5) rendered for real by the binary: the slope scene, four lanes of small balls, to PNG frames
//! and to a GIF.
//!
//! Rendering needs a Vulkan driver (Mesa's llvmpipe will do). Without one the test says so and passes;
//! `.ci/export-check`, which installs llvmpipe, checks the shipped demo's clips.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use bevy::asset::RenderAssetUsages;
use bevy::color::ColorToPacked;
use bevy::image::{CompressedImageFormats, Image, ImageSampler, ImageType};
use contact_sandbox::app::{BACKGROUND_RGB, IPC_RGB, PENALTY_RGB};
use contact_sandbox::demo::{Script, record_script};
use contact_sandbox::physics::world::ContactMethod;
use contact_sandbox::scene::Scene;

const SLOPE: &str = "assets/scenes/slope.ron";
const WIDTH: u32 = 640;
const HEIGHT: u32 = 360;
/// The overlay's text colour (`src/app/export.rs`).
const OVERLAY_RGB: [u8; 3] = [217, 222, 235];
/// 30 ticks at 100 Hz exported at 10 fps: ticks 0, 10, 20 and 30.
const FRAMES: usize = 4;

fn vulkan_driver_present() -> bool {
    ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"]
        .iter()
        .any(|dir| fs::read_dir(dir).is_ok_and(|mut files| files.next().is_some()))
}

/// Records 30 ticks of the slope scene, untouched, into `path`.
fn record_slope(path: &Path) {
    let scene = Scene::load(Path::new(SLOPE)).expect("the shipped scene loads");
    let script = Script::parse("Script(ticks: 30, actions: [])", "empty.script.ron")
        .expect("an empty script parses");
    record_script(&scene, &script, "empty.script.ron", |_, _| {})
        .expect("the script records")
        .save(path)
        .expect("the demo is saved");
}

/// `contact-sandbox export demo --out out --fps 10 --size 640x360`.
fn export(demo: &Path, out: &str) {
    let run = Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
        .arg("export")
        .arg(demo)
        .args(["--out", out, "--fps", "10"])
        .args(["--size", &format!("{WIDTH}x{HEIGHT}")])
        .output()
        .expect("the binary runs");
    assert!(
        run.status.success(),
        "export --out {out}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// A PNG frame's pixels as [r, g, b], checked to be `size` (width, height).
fn png_pixels(path: &Path, size: (u32, u32)) -> Vec<[u8; 3]> {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let image = Image::from_buffer(
        &bytes,
        ImageType::Extension("png"),
        CompressedImageFormats::NONE,
        true,
        ImageSampler::Default,
        RenderAssetUsages::default(),
    )
    .expect("an exported frame decodes");
    assert_eq!((image.width(), image.height()), size);
    let data = image.data.expect("pixels");
    data.chunks_exact(4).map(|p| [p[0], p[1], p[2]]).collect()
}

/// Every frame of a GIF as the `gif` crate decodes it, each drawn over the one before (disposal "keep").
fn gif_frames(path: &Path) -> Vec<Vec<[u8; 3]>> {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    let mut decoder = options.read_info(&bytes[..]).expect("a GIF header");
    let width = decoder.width() as usize;
    let mut canvas = vec![[0u8; 3]; width * decoder.height() as usize];
    let mut frames = Vec::new();
    while let Some(frame) = decoder.read_next_frame().expect("a GIF frame") {
        let (left, top, w) = (
            frame.left as usize,
            frame.top as usize,
            frame.width as usize,
        );
        for (k, p) in frame.buffer.chunks_exact(4).enumerate() {
            canvas[(top + k / w) * width + left + k % w] = [p[0], p[1], p[2]];
        }
        frames.push(canvas.clone());
    }
    frames
}

/// Whether `p` is within 12 levels of `rgb` in every channel.
fn near(p: [u8; 3], rgb: [u8; 3]) -> bool {
    (0..3).all(|c| p[c].abs_diff(rgb[c]) <= 12)
}

/// Whether `p` is `rgb` over the background, at least half covered (as the antialiased edge of a title's glyphs
/// is): on the line from the background to `rgb`, within 12 levels in every channel.
fn blended(p: [u8; 3], rgb: [u8; 3]) -> bool {
    let [p, c, bg] = [p, rgb, BACKGROUND_RGB].map(|v| v.map(f64::from));
    let along: f64 = (0..3).map(|i| (p[i] - bg[i]) * (c[i] - bg[i])).sum::<f64>()
        / (0..3).map(|i| (c[i] - bg[i]).powi(2)).sum::<f64>();
    along >= 0.5 && (0..3).all(|i| (p[i] - (bg[i] + along.min(1.0) * (c[i] - bg[i]))).abs() <= 12.0)
}

/// The rows that hold a pixel for which `is` holds, top first.
fn rows_where(frame: &[[u8; 3]], is: impl Fn([u8; 3]) -> bool) -> Vec<usize> {
    let mut rows: Vec<usize> = (0..frame.len())
        .filter(|&i| is(frame[i]))
        .map(|i| i / WIDTH as usize)
        .collect();
    rows.dedup();
    rows
}

#[test]
fn exported_frames_title_every_lane_and_a_gif_keeps_the_lane_colours() {
    if !vulkan_driver_present() {
        eprintln!("export test skipped: no Vulkan driver (install mesa-vulkan-drivers)");
        return;
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("cs-export-it-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("a scratch folder");
    let demo = dir.join("slope.demo.ron");
    record_slope(&demo);
    let frames_dir = dir.join("frames");
    export(&demo, &format!("{}/", frames_dir.display()));
    export(&demo, &dir.join("slope.gif").display().to_string());

    let pngs: Vec<_> = (0..FRAMES)
        .map(|k| {
            png_pixels(
                &frames_dir.join(format!("frame_{k:05}.png")),
                (WIDTH, HEIGHT),
            )
        })
        .collect();
    // Each lane's title ("ipc mu=0.49 [ipc]", …) is drawn in its lane's shade, as its panel is: the first lane
    // of a method in the method's colour, the second in the method's next shade. Measured in frame 0: 313, 270,
    // 491 and 455 pixels of them over the background; with every lane in its method's colour, 579, 0, 945, 0.
    let shades = [
        (ContactMethod::Ipc, 0),
        (ContactMethod::Ipc, 1),
        (ContactMethod::Penalty, 0),
        (ContactMethod::Penalty, 1),
    ]
    .map(|(method, rank)| contact_sandbox::app::panels::lane_rgb(method, rank));
    assert_eq!((shades[0], shades[2]), (IPC_RGB, PENALTY_RGB));
    for (k, frame) in pngs.iter().enumerate() {
        let counts = shades.map(|rgb| frame.iter().filter(|&&p| blended(p, rgb)).count());
        assert!(
            counts.iter().all(|&n| n >= 150),
            "frame {k}: {counts:?} pixels of the four lanes' shades {shades:?}; a lane's title is missing"
        );
        // The overlay's two lines (light grey, in the top-left corner) stay above the top lane's title.
        let overlay = rows_where(frame, |p| near(p, OVERLAY_RGB));
        let titles = rows_where(frame, |p| shades.iter().any(|&c| blended(p, c)));
        assert!(!overlay.is_empty(), "frame {k}: no overlay");
        assert!(
            overlay.last() < titles.first(),
            "frame {k}: the overlay's text reaches row {:?}, the lane titles start at row {:?}",
            overlay.last(),
            titles.first()
        );
    }
    // The GIF shows what the PNG frames show, each channel within the palette's rounding (the slope's GIF had
    // lost every green and red ball pixel to a grey).
    let gifs = gif_frames(&dir.join("slope.gif"));
    assert_eq!(gifs.len(), pngs.len());
    for (k, (png, gif)) in pngs.iter().zip(&gifs).enumerate() {
        let (worst, at) = png
            .iter()
            .zip(gif)
            .enumerate()
            .map(|(i, (p, g))| ((0..3).map(|c| p[c].abs_diff(g[c])).max().unwrap_or(0), i))
            .max()
            .unwrap_or((0, 0));
        assert!(
            worst <= 7,
            "frame {k}: pixel ({}, {}) is {:?} in the PNG and {:?} in the GIF",
            at % WIDTH as usize,
            at / WIDTH as usize,
            png[at],
            gif[at]
        );
    }
    fs::remove_dir_all(&dir).expect("scratch folder removed");
}

/// A GIF's delays are whole centiseconds; frame k lasts round((k+1)·100/fps) − round(k·100/fps) cs, so the
/// rounding never accumulates: at 30 fps 3, 4, 3, 3, 4, … adding up to the clip's length, at 7 fps 14s and 15s.
#[test]
fn gif_delays_decoded_from_an_export_add_up_to_the_clip_length() {
    if !vulkan_driver_present() {
        eprintln!("export test skipped: no Vulkan driver (install mesa-vulkan-drivers)");
        return;
    }
    let dir: PathBuf =
        std::env::temp_dir().join(format!("cs-export-delays-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("a scratch folder");
    let demo = dir.join("slope.demo.ron");
    record_slope(&demo);
    // At 7 fps, 2.1 frame intervals: a fourth frame shows the last tick (the third shows tick 29).
    for (fps, frames) in [(30u32, 10usize), (7, 4), (50, 16)] {
        let gif = dir.join(format!("at{fps}.gif"));
        let run = Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
            .arg("export")
            .arg(&demo)
            .arg("--out")
            .arg(&gif)
            .args(["--fps", &fps.to_string(), "--size", "64x64", "--no-overlay"])
            .args((fps == 7).then_some("--progress-lines"))
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        // The window's Export… reads `--progress-lines`: the ticks checked, then frames done of all; without the
        // flag standard error has none of them.
        let progress: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("progress "))
            .collect();
        if fps == 7 {
            // Frames are counted as the encoder finishes them, so a count may be passed over between looks.
            assert_eq!(
                progress[..3],
                [
                    "progress check 0/30",
                    "progress check 30/30",
                    "progress frames 0/4"
                ],
                "{stderr}"
            );
            assert_eq!(progress.last(), Some(&"progress frames 4/4"), "{stderr}");
            assert!(progress.len() <= 7, "{stderr}");
        } else {
            assert!(progress.is_empty(), "{stderr}");
        }
        let bytes = fs::read(&gif).expect("the GIF");
        let mut decoder = gif::DecodeOptions::new()
            .read_info(&bytes[..])
            .expect("a GIF header");
        let mut delays = Vec::new();
        while let Some(frame) = decoder.read_next_frame().expect("a GIF frame") {
            delays.push(u64::from(frame.delay));
        }
        // 30 ticks at 100 Hz: floor(0.3 s · fps) + 1 frames (and one for the end), each shown for 1/fps s.
        assert_eq!(delays.len(), frames, "{fps} fps: {delays:?}");
        let total: u64 = delays.iter().sum();
        let expected = (frames as f64 * 100.0 / f64::from(fps)).round() as u64;
        assert_eq!(total, expected, "{fps} fps: {delays:?}");
        let nominal = 100.0 / f64::from(fps);
        assert!(
            delays
                .iter()
                .all(|&d| (d as f64 - nominal).abs() < 1.0 && d >= 2),
            "{fps} fps: {delays:?}"
        );
    }
    fs::remove_dir_all(&dir).expect("scratch folder removed");
}

/// `--from` and `--to` cut the clip to the ticks between them (the whole demo still checked), and a demo whose
/// lanes went from 10 ms to 1 ms part-way plays each tick at its lanes' rate: ticks 100 to 200 of a throw at
/// 10 ms and then at 1 ms are 0.1 s and 0.1 s of play (the recorded 100 Hz made the second 1 s).
#[test]
fn a_clip_cut_by_from_and_to_plays_its_ticks_at_their_lanes_rates() {
    if !vulkan_driver_present() {
        eprintln!("export test skipped: no Vulkan driver (install mesa-vulkan-drivers)");
        return;
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("cs-export-cut-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("a scratch folder");
    let demo = dir.join("two.demo.ron");
    let scene = Scene::load(Path::new("assets/scenes/wall_throw.ron")).expect("the shipped scene");
    let script = Script::parse(
        "Script(ticks: 300, actions: [(tick: 150, action: Throw(v0: 5.0, h: Some(0.001), steps: Some(800)))])",
        "two.script.ron",
    )
    .expect("parses");
    record_script(&scene, &script, "two.script.ron", |_, _| {})
        .expect("records")
        .save(&demo)
        .expect("saved");
    let frames = dir.join("frames/");
    let run = Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
        .arg("export")
        .arg(&demo)
        .arg("--out")
        .arg(&frames)
        .args([
            "--fps", "100", "--size", "64x64", "--from", "140", "--to", "250",
        ])
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // Ticks 140–150 at 10 ms (0.1 s) and 150–250 at 1 ms (0.1 s): 0.2 s at 100 fps, 21 frames.
    assert!(
        stdout.contains("exported 21 frames") && stdout.contains("0.20 s of play"),
        "{stdout}"
    );
    assert_eq!(fs::read_dir(&frames).expect("the frames").count(), 21);
    for (to, says) in [("301", "--to 301: "), ("x", "--to")] {
        let refused = Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
            .arg("export")
            .arg(&demo)
            .arg("--out")
            .arg(dir.join("never.gif"))
            .args(["--to", to])
            .output()
            .expect("the binary runs");
        assert_eq!(refused.status.code(), Some(1), "--to {to}");
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains(says),
            "--to {to}"
        );
    }
    assert!(!dir.join("never.gif").exists());
    fs::remove_dir_all(&dir).expect("scratch folder removed");
}

/// SIGTERM (or SIGHUP) stops an export as Ctrl-C does: no hidden `.NAME.partial-PID` file or folder stays, what
/// was at the destination is untouched, and the message names the signal.
#[test]
fn an_export_killed_by_sigterm_leaves_no_partial_output_and_the_old_clip() {
    if !vulkan_driver_present() {
        eprintln!("export test skipped: no Vulkan driver (install mesa-vulkan-drivers)");
        return;
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("cs-export-term-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("a scratch folder");
    let demo = dir.join("long.demo.ron");
    let scene = Scene::load(Path::new(SLOPE)).expect("the shipped scene loads");
    let script =
        Script::parse("Script(ticks: 3000, actions: [])", "long.script.ron").expect("parses");
    record_script(&scene, &script, "long.script.ron", |_, _| {})
        .expect("records")
        .save(&demo)
        .expect("saved");
    // A clip over an old one (--force), and PNG frames into a new folder (a folder with files in it is refused).
    for (signal, out) in [("TERM", "clip.gif"), ("HUP", "frames/")] {
        let target = dir.join(out);
        if out == "clip.gif" {
            fs::write(&target, b"the old clip").expect("an old clip");
        }
        // As a script's background job: SIGINT ignored (ctrlc then used to install no handler at all).
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"trap '' INT; exec "$0" export "$1" --out "$2" --force --fps 30 --size 320x180"#)
            .arg(env!("CARGO_BIN_EXE_contact-sandbox"))
            .arg(&demo)
            .arg(&target)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the binary starts");
        // Wait until the temporary output exists: the export is under way.
        let partial = |dir: &Path| {
            fs::read_dir(dir)
                .expect("the folder")
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".partial-"))
                .collect::<Vec<_>>()
        };
        let started = std::time::Instant::now();
        while partial(&dir).is_empty() {
            assert!(
                started.elapsed().as_secs() < 120 && child.try_wait().expect("status").is_none(),
                "the export never started writing"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        let killed = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        let run = child.wait_with_output().expect("the export exits");
        assert_eq!(run.status.code(), Some(130), "SIG{signal}: {}", run.status);
        // The message names the signal that came (SIGTERM used to be reported as "interrupted (Ctrl-C)").
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(
            stderr.contains(&format!("interrupted by SIG{signal}")),
            "SIG{signal}: {stderr}"
        );
        assert_eq!(partial(&dir), Vec::<String>::new(), "SIG{signal}");
        if out == "frames/" {
            assert!(!target.exists(), "SIG{signal}: a frames folder was left");
        } else {
            assert_eq!(fs::read(&target).expect("the old clip"), b"the old clip");
        }
    }
    fs::remove_dir_all(&dir).expect("scratch folder removed");
}

/// Ctrl-C pressed twice exits at once and still removes the temporary output (the second signal used to exit
/// through Bevy's handler and leave `.clip.gif.partial-PID`); an export into a FIFO that no one reads stops on
/// its first signal (it sat in `open` and took a second signal, which left its temporary clip behind).
#[cfg(unix)]
#[test]
fn an_export_stops_on_a_second_signal_and_while_its_fifo_has_no_reader() {
    if !vulkan_driver_present() {
        eprintln!("export test skipped: no Vulkan driver (install mesa-vulkan-drivers)");
        return;
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("cs-export-twice-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("a scratch folder");
    let partials = |dir: &Path, pid: u32| {
        fs::read_dir(dir)
            .expect("the folder")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(&format!(".partial-{pid}")))
            .collect::<Vec<_>>()
    };
    // Whether the signal was delivered (the process may have ended).
    let kill = |signal: &str, pid: u32| {
        Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .stderr(std::process::Stdio::null())
            .status()
            .expect("kill runs")
            .success()
    };
    let wait_for = |what: &str, done: &dyn Fn() -> bool, child: &mut std::process::Child| {
        let started = std::time::Instant::now();
        while !done() {
            assert!(
                started.elapsed().as_secs() < 120 && child.try_wait().expect("status").is_none(),
                "never {what}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    // Two signals while rendering.
    let long = dir.join("long.demo.ron");
    let scene = Scene::load(Path::new(SLOPE)).expect("the shipped scene loads");
    let script =
        Script::parse("Script(ticks: 3000, actions: [])", "long.script.ron").expect("parses");
    record_script(&scene, &script, "long.script.ron", |_, _| {})
        .expect("records")
        .save(&long)
        .expect("saved");
    let twice_stderr = dir.join("twice.txt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
        .arg("export")
        .arg(&long)
        .arg("--out")
        .arg(dir.join("clip.gif"))
        .args(["--fps", "30", "--size", "320x180"])
        .stdout(std::process::Stdio::null())
        .stderr(fs::File::create(&twice_stderr).expect("a stderr file"))
        .spawn()
        .expect("the binary starts");
    let pid = child.id();
    wait_for(
        "started writing",
        &|| !partials(&dir, pid).is_empty(),
        &mut child,
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Two different signals back to back, so the kernel cannot merge them and the second reaches the handler
    // before the app's next frame could act on the first: the second one's own exit is what is checked.
    let signal = |signal| {
        // SAFETY: `kill` only sends a signal; the child is ours and not yet waited for, so its pid is not reused.
        let sent = unsafe { libc::kill(pid as libc::pid_t, signal) };
        assert_eq!(sent, 0, "signal {signal} sent");
    };
    // Sent while the child is stopped, so both are pending when it runs again: sent one after the other to a
    // running child, the first could end the export before the second arrived if this thread were descheduled
    // between them on a loaded machine.
    signal(libc::SIGSTOP);
    signal(libc::SIGINT);
    signal(libc::SIGTERM);
    signal(libc::SIGCONT);
    let status = child.wait().expect("the export exits");
    assert_eq!(status.code(), Some(130), "{status}");
    // The kernel may run the two handlers in either order, so the signal named may be either.
    let said = fs::read_to_string(&twice_stderr).expect("the stderr file");
    assert!(
        said.contains("export stopped at once by a second signal (")
            && said.contains("); its unfinished output was removed"),
        "{said}"
    );
    assert_eq!(partials(&dir, pid), Vec::<String>::new());
    assert!(!dir.join("clip.gif").exists());
    // A FIFO without a reader: the clip is rendered, then the export waits for one, and stops on SIGTERM.
    let short = dir.join("short.demo.ron");
    record_slope(&short);
    let fifo = dir.join("pipe.gif");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let stderr_path = dir.join("stderr.txt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
        .arg("export")
        .arg(&short)
        .arg("--out")
        .arg(&fifo)
        .args(["--fps", "10", "--size", "64x36"])
        .stdout(std::process::Stdio::null())
        .stderr(fs::File::create(&stderr_path).expect("a file for stderr"))
        .spawn()
        .expect("the binary starts");
    let pid = child.id();
    let stderr = || fs::read_to_string(&stderr_path).unwrap_or_default();
    wait_for(
        "waited for a reader",
        &|| stderr().contains("waiting for a reader"),
        &mut child,
    );
    assert!(kill("TERM", pid));
    let status = child.wait().expect("the export exits on its first signal");
    assert!(!status.success(), "{status}");
    assert!(
        stderr().contains("stopped (SIGTERM) while waiting for a reader"),
        "{}",
        stderr()
    );
    assert_eq!(partials(&std::env::temp_dir(), pid), Vec::<String>::new());
    fs::remove_dir_all(&dir).expect("scratch folder removed");
}

/// A rod dropped mid-run is drawn whole in the frame of its tick: its body's gizmo group drew nothing the first
/// time it was used, so an exported frame showed the rod's centre ring without its body.
#[test]
fn a_rod_dropped_mid_run_is_drawn_whole_in_the_frame_of_its_tick() {
    if !vulkan_driver_present() {
        eprintln!("export test skipped: no Vulkan driver (install mesa-vulkan-drivers)");
        return;
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("cs-export-rod-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("a scratch folder");
    let demo = dir.join("rod.demo.ron");
    let scene = Scene::load(Path::new("assets/scenes/wall_throw.ron")).expect("the shipped scene");
    let script = Script::parse(
        "Script(ticks: 12, actions: [(tick: 10, action: Rod(RodSpec(center: (0.1, 0.15), angle: 0.5, \
         length: 0.2, mass: 1.0)))])",
        "rod.script.ron",
    )
    .expect("parses");
    record_script(&scene, &script, "rod.script.ron", |_, _| {})
        .expect("records")
        .save(&demo)
        .expect("saved");
    let frames = dir.join("frames");
    // One frame per tick (the scene runs at 100 Hz).
    let run = Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
        .arg("export")
        .arg(&demo)
        .arg("--out")
        .arg(format!("{}/", frames.display()))
        .args(["--fps", "100", "--size", &format!("{WIDTH}x{HEIGHT}")])
        .output()
        .expect("the binary runs");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let [r, g, b, _] = contact_sandbox::app::render::ROD_COLOR
        .to_srgba()
        .to_u8_array();
    let rod_pixels = |k: usize| {
        png_pixels(&frames.join(format!("frame_{k:05}.png")), (WIDTH, HEIGHT))
            .iter()
            .filter(|&&p| near(p, [r, g, b]))
            .count()
    };
    assert_eq!(rod_pixels(9), 0, "no rod before its tick");
    let (dropped, after) = (rod_pixels(10), rod_pixels(11));
    assert!(
        dropped >= 20 && dropped * 2 >= after,
        "the rod's body: {dropped} pixels in the frame of its tick, {after} in the next"
    );
    fs::remove_dir_all(&dir).expect("scratch folder removed");
}

/// The frames of an MP4's H.264 track as openh264 decodes them, in RGB. The track's samples hold NAL units after
/// their 4-byte lengths, and its parameter sets sit in the `avcC` box: the decoder wants each after a start code.
fn mp4_frames(path: &Path) -> (usize, usize, Vec<Vec<u8>>) {
    use bevy_capture::encoder::mp4_openh264::openh264::decoder::Decoder;
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut mp4 = mp4::Mp4Reader::read_header(std::io::Cursor::new(&bytes), bytes.len() as u64)
        .expect("an MP4 header");
    let (id, width, height, count, mut stream) = {
        let track = mp4
            .tracks()
            .values()
            .find(|t| t.media_type().is_ok_and(|m| m == mp4::MediaType::H264))
            .expect("an H.264 track");
        let mut stream = Vec::new();
        for set in [
            track.sequence_parameter_set(),
            track.picture_parameter_set(),
        ] {
            stream.extend_from_slice(&[0, 0, 0, 1]);
            stream.extend_from_slice(set.expect("a parameter set"));
        }
        let (w, h) = (usize::from(track.width()), usize::from(track.height()));
        (track.track_id(), w, h, track.sample_count(), stream)
    };
    let mut decoder = Decoder::new().expect("openh264's decoder starts");
    let mut frames = Vec::new();
    for sample in 1..=count {
        let sample = mp4
            .read_sample(id, sample)
            .expect("a sample reads")
            .expect("a sample");
        let mut rest = &sample.bytes[..];
        while rest.len() >= 4 {
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            stream.extend_from_slice(&[0, 0, 0, 1]);
            stream.extend_from_slice(&rest[4..4 + len]);
            rest = &rest[4 + len..];
        }
        if let Some(image) = decoder.decode(&stream).expect("the frame decodes") {
            let mut rgb = vec![0; width * height * 3];
            image.write_rgb8(&mut rgb);
            frames.push(rgb);
        }
        stream.clear();
    }
    for image in decoder.flush_remaining().expect("the decoder flushes") {
        let mut rgb = vec![0; width * height * 3];
        image.write_rgb8(&mut rgb);
        frames.push(rgb);
    }
    (width, height, frames)
}

/// An MP4 from openh264 shows what the PNG frames of the same export show, frame by frame: under its bit budget
/// alone, a small clip's changing labels stayed at old values for its last seven frames (twenty-ninth session).
#[test]
fn an_openh264_mp4_shows_every_frame_as_the_png_frames_do() {
    if !vulkan_driver_present() {
        eprintln!("no Vulkan driver: skipping the rendered export check");
        return;
    }
    let dir = std::env::temp_dir().join(format!("cs-mp4-frames-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("a scratch directory");
    let demo = Path::new(contact_sandbox::demo::SHIPPED_DEMO);
    let clip = dir.join("c.mp4");
    let pngs = dir.join("png");
    for (out, encoder) in [
        (clip.display().to_string(), "openh264"),
        (format!("{}/", pngs.display()), "auto"),
    ] {
        let run = Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
            .arg("export")
            .arg(demo)
            .args(["--out", &out])
            .args(["--fps", "25", "--size", "320x180", "--encoder", encoder])
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{out}: {stderr}");
        // The library's own warnings are not the export's words.
        assert!(!stderr.contains("[OpenH264]"), "{stderr}");
    }
    let (width, height, decoded) = mp4_frames(&clip);
    assert_eq!((width, height), (320, 180));
    let mut names: Vec<PathBuf> = fs::read_dir(&pngs)
        .expect("the frames directory")
        .map(|e| e.expect("an entry").path())
        .collect();
    names.sort();
    assert_eq!(decoded.len(), names.len(), "one MP4 frame per PNG frame");
    let grey =
        |[r, g, b]: [u8; 3]| (u32::from(r) * 299 + u32::from(g) * 587 + u32::from(b) * 114) / 1000;
    for (k, (mp4, name)) in decoded.iter().zip(&names).enumerate() {
        let off = png_pixels(name, (320, 180))
            .into_iter()
            .zip(mp4.chunks_exact(3))
            .filter(|(p, m)| grey(*p).abs_diff(grey([m[0], m[1], m[2]])) > 40)
            .count();
        // Every frame coded at QP 28 or finer matches to the pixel here; under the bit budget alone 2 to 10 pixels
        // of most frames were off (a label's digits left at an earlier value).
        assert!(
            off <= 1,
            "frame {k}: {off} pixels off by more than 40 grey levels"
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

/// With no GPU adapter (Vulkan alone asked for, its drivers hidden), an export ends on one line naming Mesa's
/// packages, exits 1 and leaves nothing at `--out`: Bevy's own panic printed a backtrace and exited 101.
#[test]
fn an_export_without_a_gpu_adapter_says_so_in_one_line() {
    let out = std::env::temp_dir().join(format!("cs-no-gpu-{}", std::process::id()));
    let _ = fs::remove_dir_all(&out);
    let run = Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
        .args([
            "export",
            "assets/demos/wall_throw.demo.ron",
            "--to",
            "3",
            "--out",
        ])
        .arg(format!("{}/", out.display()))
        .env("WGPU_BACKEND", "vulkan")
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .env_remove("VK_ADD_DRIVER_FILES")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    // (A debug build's Vulkan loader also logs that it found no driver file, before the message.)
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
    assert!(
        stderr
            .trim_end()
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("error: export found no GPU adapter"))
            && stderr.contains("apt-get install mesa-vulkan-drivers libvulkan1"),
        "{stderr}"
    );
    assert!(!out.exists(), "the frames folder was left behind");
}
