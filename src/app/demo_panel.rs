//! The Demo section of the left panel: Record / Stop & save (F5), open a demo in the replay viewer (play/pause,
//! timeline, speed, the "match / MISMATCH at tick T" badge), and Export… (runs `contact-sandbox export` in a
//! child process so the window stays responsive). The recording and replay themselves live in [`crate::sim`].
//!
//! It is part of the left panel, not a window over the canvas: floating, it covered the top lane's title while
//! a demo replayed.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bevy::prelude::*;
use bevy_egui::egui;

use crate::cli::export::{ProgressStage, parse_progress_line};
use crate::demo::unused_path;
use crate::sim::{
    ActiveScene, ErrorTopic, Recorder, Replay, SavedDemo, SimControl, SimLog, StartRecording,
    StartReplay, StopRecording, StopReplay,
};

/// Where recordings are saved unless the user types another path.
pub const DEMO_DIR: &str = "demos";

pub struct DemoPanelPlugin;

impl Plugin for DemoPanelPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<DemoUi>()
            .init_resource::<SavedOnClose>()
            .add_systems(PreUpdate, save_recording_on_close)
            .add_systems(Update, (record_key, poll_export))
            // After bevy_window's, which write AppExit in Last when the window has closed.
            .add_systems(
                Last,
                (
                    stop_export_on_exit,
                    save_recording_on_exit,
                    report_save_on_exit,
                )
                    .chain()
                    .after(bevy::window::ExitSystems),
            );
    }
}

/// Whether the window's close or the app's exit saved a recording, for [`report_save_on_exit`]: the count of
/// errors raised by then.
#[derive(Resource, Default)]
struct SavedOnClose(Option<u64>);

/// PreUpdate: closing the window while recording saves the recording first, as F5 would (where "save as" says,
/// or if that is refused, under a fresh name in `demos/`): the window used to close and the recording went with
/// it, without a word. The save happens in this frame's Update; the window closes in the next.
fn save_recording_on_close(
    mut closes: MessageReader<bevy::window::WindowCloseRequested>,
    recorder: Res<Recorder>,
    exit_save: ExitSave,
) {
    if closes.read().count() > 0 && recorder.is_recording() {
        exit_save.ask(&recorder);
    }
}

/// What a save at the app's end needs besides the recorder.
#[derive(bevy::ecs::system::SystemParam)]
struct ExitSave<'w> {
    ui: ResMut<'w, DemoUi>,
    active: Option<Res<'w, ActiveScene>>,
    log: ResMut<'w, SimLog>,
    start: MessageWriter<'w, StartRecording>,
    stop: MessageWriter<'w, StopRecording>,
    saved: ResMut<'w, SavedOnClose>,
}

impl ExitSave<'_> {
    /// Sends the recording to be saved as F5 would, once.
    fn ask(mut self, recorder: &Recorder) {
        if self.saved.0.is_some() {
            return;
        }
        let raised = self.log.raised;
        let ExitSave {
            ui,
            active,
            log,
            start,
            stop,
            ..
        } = &mut self;
        let active = active.as_deref();
        toggle_recording(recorder, ui, active, log, start, stop);
        if log.raised > raised && !ui.save_path.trim().is_empty() {
            // "save as" names a folder, or a name whose every number is taken: a fresh name instead.
            let typed = std::mem::take(&mut ui.save_path);
            toggle_recording(recorder, ui, active, log, start, stop);
            ui.save_path = typed;
        }
        self.saved.0 = Some(self.log.raised);
    }
}

/// Last, after bevy_window's exit systems: an exit with the window still open (Ctrl-C in the terminal that started
/// it, SIGTERM) while recording saves the recording too, as F5 would. No later frame will run, so the batch in
/// flight is collected and the recording stopped and saved here, by the systems that do it in Update.
fn save_recording_on_exit(world: &mut World) {
    let exiting = world
        .get_resource::<Messages<AppExit>>()
        .is_some_and(|m| !m.is_empty());
    let recording = |world: &World| {
        world
            .get_resource::<Recorder>()
            .is_some_and(Recorder::is_recording)
    };
    if !exiting || !recording(world) {
        return;
    }
    let _ = world.run_system_cached(crate::sim::collect_now);
    // Where "save as" says (unless the close's save there failed), then, if that write fails, under a fresh name.
    for fresh in [false, true] {
        if !recording(world) {
            break;
        }
        let retry = fresh || world.resource::<SavedOnClose>().0.is_some();
        if retry {
            world.resource_mut::<DemoUi>().save_path.clear();
            world.resource_mut::<SavedOnClose>().0 = None;
        }
        // This frame's messages that would start or stop a recording are moot, and `recording_messages`, run
        // here afresh, would read them.
        if let Some(mut messages) = world.get_resource_mut::<Messages<StartRecording>>() {
            messages.clear();
        }
        if let Some(mut messages) = world.get_resource_mut::<Messages<StopRecording>>() {
            messages.clear();
        }
        let _ = world.run_system_cached(|recorder: Res<Recorder>, exit_save: ExitSave| {
            exit_save.ask(&recorder);
        });
        let _ = world.run_system_cached(crate::sim::recording_messages);
    }
}

/// Last: as the app exits after its window closed (or a signal ended it) while recording, says on stderr where
/// the recording was saved (or why it was not): the window that would have said it is gone.
fn report_save_on_exit(
    mut exits: MessageReader<AppExit>,
    saved: Res<SavedOnClose>,
    recorder: Res<Recorder>,
    log: Res<SimLog>,
) {
    if saved.0.is_none() || exits.read().count() == 0 {
        return;
    }
    // Still recording: the save failed, and its error is the latest.
    let said = match (recorder.is_recording(), &log.error, &log.info) {
        (true, Some(error), _) => error.as_str(),
        (true, None, _) => "the recording was not saved",
        (false, _, Some(info)) => info.as_str(),
        (false, _, None) => "the recording was saved",
    };
    crate::cli::stdout::errln!("contact-sandbox: the sandbox ended while recording: {said}");
}

/// What the Demo section remembers between frames.
#[derive(Resource)]
pub struct DemoUi {
    /// Where Stop & save writes (empty: a fresh name under `demos/`).
    pub save_path: String,
    /// The demo the Replay button opens.
    pub replay_path: String,
    /// Where Export… writes (empty: [`clip_path`] names the clip after the demo it exports).
    pub export_out: String,
    pub export_fps: u32,
    export: Option<ExportJob>,
    /// The last export's outcome.
    pub export_status: Option<String>,
    /// The save the replay field was last set to: a newer one replaces the field's guess (the name can be taken
    /// between the guess and the save, which then numbers from the name asked for).
    replay_follows: Option<PathBuf>,
    /// "demos on disk", as last read.
    demos_on_disk: Listing,
}

/// How often an open "demos on disk" reads its folders again: it read them, and each file's time, on every
/// frame, which a folder of thousands of demos would have made cost a frame.
const LISTING_REFRESH: Duration = Duration::from_secs(1);

/// A list of files read at most once per [`LISTING_REFRESH`].
#[derive(Default, Debug, Clone)]
struct Listing {
    read_at: Option<std::time::Instant>,
    paths: Vec<PathBuf>,
}

impl Listing {
    /// The list, read again by `read` when it is older than [`LISTING_REFRESH`] at `now` (or was never read).
    fn current(
        &mut self,
        now: std::time::Instant,
        read: impl FnOnce() -> Vec<PathBuf>,
    ) -> &[PathBuf] {
        let stale = self
            .read_at
            .is_none_or(|at| now.saturating_duration_since(at) >= LISTING_REFRESH);
        if stale {
            self.paths = read();
            self.read_at = Some(now);
        }
        &self.paths
    }
}

impl Default for DemoUi {
    fn default() -> Self {
        DemoUi {
            save_path: String::new(),
            replay_path: crate::demo::SHIPPED_DEMO.into(),
            export_out: String::new(),
            export_fps: 30,
            export: None,
            export_status: None,
            replay_follows: None,
            demos_on_disk: Listing::default(),
        }
    }
}

/// How long a stopped exporter may take to remove its partial output before it is killed.
const EXPORT_STOP_GRACE: Duration = Duration::from_secs(5);
/// Lines of the exporter's standard error kept for its failure message.
const EXPORT_STDERR_LINES: usize = 20;

/// A running `contact-sandbox export` child. Dropping the job (the window closes, the app exits) stops the
/// child, so it never goes on rendering on its own.
struct ExportJob {
    child: Child,
    out: PathBuf,
    /// The name asked for, when a file there made the export take a numbered one.
    kept: Option<PathBuf>,
    started: Instant,
    /// What the child said on its standard error, read by `reader`.
    report: Arc<Mutex<ExportReport>>,
    reader: Option<std::thread::JoinHandle<()>>,
    /// Cancel was pressed: the child was asked to stop.
    cancelled: bool,
}

/// The exporter's progress (its `--progress-lines`) and its other lines.
#[derive(Default)]
struct ExportReport {
    /// The latest progress line: stage, done, total.
    progress: Option<(ProgressStage, u64, u64)>,
    /// When the first frame count arrived, for the estimate of the time left.
    frames_since: Option<Instant>,
    /// The last lines that were not progress, oldest first.
    said: VecDeque<String>,
}

impl ExportReport {
    fn read(&mut self, line: String) {
        match parse_progress_line(&line) {
            Some(progress) => {
                if progress.0 == ProgressStage::Frames && self.frames_since.is_none() {
                    self.frames_since = Some(Instant::now());
                }
                self.progress = Some(progress);
            }
            None => {
                if self.said.len() == EXPORT_STDERR_LINES {
                    self.said.pop_front();
                }
                self.said.push_back(line);
            }
        }
    }
}

impl ExportJob {
    /// Watches `child`: its standard error is read on a thread of its own (so a full pipe never blocks it).
    fn watch(mut child: Child, out: PathBuf, kept: Option<PathBuf>) -> ExportJob {
        let report = Arc::new(Mutex::new(ExportReport::default()));
        let reader = child.stderr.take().map(|pipe| {
            let report = Arc::clone(&report);
            std::thread::spawn(move || {
                use std::io::BufRead;
                // Read to the end whatever the bytes are: a line that is not UTF-8 must not stop the draining, or
                // the exporter would block on a full pipe.
                let mut pipe = std::io::BufReader::new(pipe);
                let mut line = Vec::new();
                while pipe.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                    let text = String::from_utf8_lossy(&line)
                        .trim_end_matches(['\n', '\r'])
                        .to_string();
                    if let Ok(mut report) = report.lock() {
                        report.read(text);
                    }
                    line.clear();
                }
            })
        });
        ExportJob {
            child,
            out,
            kept,
            started: Instant::now(),
            report,
            reader,
            cancelled: false,
        }
    }

    /// Asks the child to stop: SIGTERM, on which it removes its partial output and exits (an old file at the
    /// target stays as it was).
    fn ask_to_stop(&mut self) {
        #[cfg(unix)]
        {
            if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
                // SAFETY: kill(2) on the child's own pid; it is not reaped before try_wait/wait below, so the pid
                // is still the child's.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = self.child.kill();
        }
    }

    /// Stops the child and waits for it: [`EXPORT_STOP_GRACE`] to clean up after SIGTERM, then SIGKILL.
    fn stop_and_wait(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        self.ask_to_stop();
        let asked = Instant::now();
        while asked.elapsed() < EXPORT_STOP_GRACE {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Where the export stands, e.g. "frame 30/91 (33%), about 12 s left".
    fn progress_text(&self) -> (Option<f32>, String) {
        let Ok(report) = self.report.lock() else {
            return (None, "exporting".into());
        };
        let percent = |done: u64, total: u64| done as f64 / total.max(1) as f64;
        match report.progress {
            None => (None, "starting the exporter".into()),
            Some((ProgressStage::Check, done, total)) => (
                Some(percent(done, total) as f32),
                format!(
                    "checking the demo's hashes: tick {done}/{total} ({:.0}%)",
                    100.0 * percent(done, total)
                ),
            ),
            Some((ProgressStage::Frames, done, total)) => {
                let left = report
                    .frames_since
                    .filter(|_| done > 0 && done < total)
                    .map(|since| {
                        let seconds =
                            since.elapsed().as_secs_f64() * (total - done) as f64 / done as f64;
                        format!(", about {seconds:.0} s left")
                    })
                    .unwrap_or_default();
                (
                    Some(percent(done, total) as f32),
                    format!(
                        "frame {done}/{total} ({:.0}%){left}",
                        100.0 * percent(done, total)
                    ),
                )
            }
        }
    }

    /// What the Demo section's heading says while the export runs: "exporting 30/91".
    fn heading(&self) -> String {
        match self.report.lock().ok().and_then(|r| r.progress) {
            Some((ProgressStage::Frames, done, total)) => format!("exporting {done}/{total}"),
            Some((ProgressStage::Check, ..)) => "exporting (checking hashes)".into(),
            None => "exporting".into(),
        }
    }

    /// The child has exited: waits for the last of its standard error, and says how the export ended.
    fn outcome(&mut self, status: std::process::ExitStatus) -> Result<String, String> {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let seconds = self.started.elapsed().as_secs_f64();
        // The exit status first: a cancel that arrives once the clip is written is too late to stop it.
        if status.success() {
            let kept = self
                .kept
                .as_ref()
                .map(|k| format!(" ({} exists, kept)", k.display()))
                .unwrap_or_default();
            let late = if self.cancelled {
                "; the cancel came after it had finished"
            } else {
                ""
            };
            return Ok(format!(
                "exported {}{kept} in {seconds:.1} s{late}",
                self.out.display()
            ));
        }
        if self.cancelled {
            return Ok("export cancelled".into());
        }
        let said: Vec<String> = self
            .report
            .lock()
            .map(|r| r.said.iter().cloned().collect())
            .unwrap_or_default();
        Err(format!("export failed: {}", failure_reason(&said, status)))
    }
}

impl Drop for ExportJob {
    fn drop(&mut self) {
        self.stop_and_wait();
    }
}

/// The exporter's last word on its failure, without the "error: " every CLI error starts with (the window puts
/// "export failed: " in front). Its advice to pass `--allow-mismatch`, an option the window has not, is told as
/// the terminal's.
fn failure_reason(said: &[String], status: std::process::ExitStatus) -> String {
    said.iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| !l.is_empty())
        .map(|l| {
            l.strip_prefix("error: ")
                .unwrap_or(l)
                .replace(
                    "(pass --allow-mismatch to export it",
                    "(the window exports only checked replays; in a terminal, `contact-sandbox export` with \
                     --allow-mismatch exports it",
                )
        })
        .unwrap_or_else(|| format!("the exporter stopped ({status})"))
}

/// A fresh file name for a recording of `scene`: `demos/<scene>-<unix seconds>.demo.ron`.
pub fn fresh_demo_path(scene: &str) -> PathBuf {
    let slug: String = scene
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let slug = slug.trim_matches('-');
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Path::new(DEMO_DIR).join(format!(
        "{}-{seconds}.demo.ron",
        if slug.is_empty() { "demo" } else { slug }
    ))
}

/// Where a name typed into "save as" saves: a bare name goes into `demos/` and a name not ending in `.demo.ron`
/// gets it (`run.ron` → `run.demo.ron`), so `prof` saves as `demos/prof.demo.ron`, where "demos on disk" lists it (it was written as
/// `./prof`, which no list showed). A name with a folder (`./prof.demo.ron`, `/tmp/x.ron`) is kept as typed,
/// and a folder (ending in `/`) is left for the caller to refuse.
pub fn typed_demo_path(typed: &str) -> PathBuf {
    // A folder, `.` and `..` included, is left as typed, for the caller to refuse.
    if typed.ends_with('/') || matches!(typed, "." | "..") {
        return PathBuf::from(typed);
    }
    let path = in_demos_if_bare(typed);
    // The panel lists `*.demo.ron`: `run.ron` saves as `run.demo.ron`.
    let text = path.to_string_lossy();
    if text.ends_with(".demo.ron") {
        path
    } else if let Some(stem) = text.strip_suffix(".ron") {
        PathBuf::from(format!("{stem}.demo.ron"))
    } else {
        let mut name = path.into_os_string();
        name.push(".demo.ron");
        PathBuf::from(name)
    }
}

/// "last saved: …", and when the name asked for at that save (`asked`, not the field's text now) was taken, that
/// the file there was kept.
fn saved_note(saved: &Path, asked: Option<&Path>) -> String {
    match asked {
        Some(asked) if asked != saved => format!(
            "last saved: {} ({} exists, kept)",
            saved.display(),
            asked.display()
        ),
        _ => format!("last saved: {}", saved.display()),
    }
}

fn toggle_recording(
    recorder: &Recorder,
    ui: &mut DemoUi,
    active: Option<&ActiveScene>,
    log: &mut SimLog,
    start: &mut MessageWriter<StartRecording>,
    stop: &mut MessageWriter<StopRecording>,
) {
    if recorder.is_recording() {
        // Named after the scene the demo starts from, where a replay opens it (not the one on screen now).
        let started_in = recorder
            .recording
            .as_ref()
            .map(|r| r.demo.scene.name.as_str());
        let asked = if ui.save_path.trim().is_empty() {
            fresh_demo_path(
                started_in
                    .or(active.map(|a| a.current.name.as_str()))
                    .unwrap_or("demo"),
            )
        } else {
            typed_demo_path(ui.save_path.trim())
        };
        // A folder is not a demo's name: numbered, it would become another folder the user never named.
        if ui.save_path.trim().ends_with('/') || asked.is_dir() {
            log.error_about(
                ErrorTopic::SaveAs,
                format!(
                    "save as {}: that is a folder; name the file, e.g. {}; still recording",
                    asked.display(),
                    asked.join("mine.demo.ron").display()
                ),
            );
            return;
        }
        // Never over an earlier recording: the field keeps its text, and fresh names are whole seconds.
        let Some(path) = unused_path(&asked) else {
            log.error_about(
                ErrorTopic::SaveAs,
                format!(
                    "{}: it and every numbered name beside it are taken; still recording",
                    asked.display()
                ),
            );
            return;
        };
        if let Err(problem) = make_folder_for(&path) {
            log.error_about(
                ErrorTopic::SaveAs,
                format!("save as {}: {problem}; still recording", path.display()),
            );
            return;
        }
        // A refusal of an earlier name is answered (it stayed on screen, "still recording", after the save).
        log.withdraw(&ErrorTopic::SaveAs);
        // The name asked for, not the free one found: if that is taken before the save, the save numbers from the
        // name asked for (`mine-3`), not from the free one (`mine-2-2`).
        stop.write(StopRecording(asked.clone()));
        // The replay field takes the saved path once the save lands (`replay_follows`); set here, a save that then
        // failed (a FIFO that nothing reads) left the field naming a demo that was never written.
    } else {
        start.write(StartRecording);
    }
}

/// Makes the folder `path` goes into when it is missing (`demos/` at first, or a folder typed into "save as"), one
/// level only: a folder whose own parent is missing too is refused, so a slip of the keyboard ("a/tmp/…" for
/// "/tmp/…") does not leave a tree of folders in the working folder.
fn make_folder_for(path: &std::path::Path) -> Result<(), String> {
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.is_dir() {
        return Ok(());
    }
    // The outermost missing folder, which is the one to name.
    let mut missing = dir;
    while let Some(parent) = missing.parent()
        && !parent.as_os_str().is_empty()
        && !parent.is_dir()
    {
        missing = parent;
    }
    if missing != dir {
        return Err(format!(
            "the folder '{}' does not exist (only the last folder of the path is made when missing)",
            missing.display()
        ));
    }
    std::fs::create_dir(dir)
        .or_else(|e| if dir.is_dir() { Ok(()) } else { Err(e) })
        .map_err(|e| format!("cannot create the folder '{}': {e}", dir.display()))
}

#[allow(clippy::too_many_arguments)]
fn record_key(
    keys: Res<ButtonInput<KeyCode>>,
    recorder: Res<Recorder>,
    mut ui: ResMut<DemoUi>,
    active: Option<Res<ActiveScene>>,
    mut log: ResMut<SimLog>,
    mut start: MessageWriter<StartRecording>,
    mut stop: MessageWriter<StopRecording>,
) {
    if keys.just_pressed(KeyCode::F5) {
        toggle_recording(
            &recorder,
            &mut ui,
            active.as_deref(),
            &mut log,
            &mut start,
            &mut stop,
        );
    }
}

/// Collects the finished export's outcome.
fn poll_export(mut ui: ResMut<DemoUi>, mut log: ResMut<SimLog>) {
    let Some(job) = &mut ui.export else {
        return;
    };
    match job.child.try_wait() {
        Ok(None) => {
            // A new export is under way: an earlier export's failure no longer describes what the panel shows.
            log.withdraw(&ErrorTopic::Export);
        }
        Ok(Some(status)) => {
            let message = match job.outcome(status) {
                Ok(message) => {
                    log.info(message.clone());
                    message
                }
                Err(message) => {
                    log.error_about(ErrorTopic::Export, message.clone());
                    message
                }
            };
            ui.export_status = Some(message);
            ui.export = None;
        }
        Err(e) => {
            ui.export_status = Some(format!("export: cannot watch the exporter: {e}"));
            ui.export = None;
        }
    }
}

/// Cancel: asks the running exporter to stop; [`poll_export`] reports "export cancelled" once it has.
fn cancel_export(ui: &mut DemoUi) {
    if let Some(job) = &mut ui.export {
        job.ask_to_stop();
        job.cancelled = true;
    }
}

/// Last: when the app exits (its window closed), a running export is stopped with it rather than left running
/// on its own. Dropping the job stops the child too; this does it while the app still runs, whatever the runner
/// does with the world afterwards.
fn stop_export_on_exit(mut exits: MessageReader<AppExit>, mut ui: ResMut<DemoUi>) {
    if exits.read().count() > 0
        && let Some(mut job) = ui.export.take()
    {
        job.stop_and_wait();
    }
}

/// `typed` inside `demos/` when it names no folder (`clip.gif`, `frames/`, `run`), else as typed (`./clip.gif`,
/// `/tmp/x`); `.`, `..` and `/` stay as typed. The one rule of "save as" and "export to".
fn in_demos_if_bare(typed: &str) -> PathBuf {
    let name = typed.trim_end_matches('/');
    let bare = Path::new(name)
        .parent()
        .is_some_and(|p| p.as_os_str().is_empty());
    if bare && !matches!(name, "" | "." | "..") {
        Path::new(DEMO_DIR).join(typed)
    } else {
        PathBuf::from(typed)
    }
}

/// Where a clip of `demo` goes: the "export to" text, or when that is empty `demos/<demo>.gif`, named after the
/// demo exported (not after the last recording, which the replay field may no longer show). A bare name goes
/// into `demos/` as a bare "save as" name does (`clip.gif` was written to the working directory while `run`
/// went to `demos/run.demo.ron`); one with a folder (`./clip.gif`, `/tmp/frames/`) is kept as typed.
pub fn clip_path(export_out: &str, demo: &Path) -> PathBuf {
    let typed = export_out.trim();
    if !typed.is_empty() {
        return in_demos_if_bare(typed);
    }
    let name = demo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = match name.strip_suffix(".demo.ron") {
        Some(stem) if !stem.is_empty() => stem.to_string(),
        _ => Path::new(&name)
            .file_stem()
            .map_or_else(|| "clip".into(), |s| s.to_string_lossy().into_owned()),
    };
    Path::new(DEMO_DIR).join(format!("{stem}.gif"))
}

/// The recording's line in the panel: "REC tick 401 · 1 action".
/// The recording line: its ticks and actions so far, or where it ended at a limit (nothing after that is
/// recorded, so it says to save it).
fn recording_label(ticks: u64, actions: usize, ended: bool) -> String {
    let actions = crate::text::counted(actions as u64, "action", "actions");
    if ended {
        format!("REC full: ended at tick {ticks} · {actions}; save it (F5)")
    } else {
        format!("REC tick {ticks} · {actions}")
    }
}

fn start_export(ui: &mut DemoUi, demo: &Path) {
    let asked = clip_path(&ui.export_out, demo);
    // The exporter's own refusal would name its --fps option, which the window does not have.
    if ui.export_fps > crate::cli::export::GIF_MAX_FPS
        && asked
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gif"))
    {
        ui.export_status = Some(format!(
            "export: a GIF plays at most {} fps, and the fps field says {}; set it to {} or less, or export an \
             .mp4",
            crate::cli::export::GIF_MAX_FPS,
            ui.export_fps,
            crate::cli::export::GIF_MAX_FPS
        ));
        return;
    }
    // The exporter's refusal of a name without a format would name its --out option too.
    if let Err(problem) = crate::cli::export::classify_output(&asked, asked.is_dir()) {
        let problem = problem.strip_prefix("--out ").unwrap_or(&problem);
        ui.export_status = Some(format!("export: {problem}"));
        return;
    }
    // As for a recording, the folder (`demos/` at first) is made when missing.
    if let Err(problem) = make_folder_for(&asked) {
        ui.export_status = Some(format!("export: {}: {problem}", asked.display()));
        return;
    }
    // The exporter refuses an existing clip (no --force): the window takes the next free name instead.
    let Some(out) = unused_path(&asked) else {
        ui.export_status = Some(format!(
            "export: {} and every numbered name beside it are taken",
            asked.display()
        ));
        return;
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            ui.export_status = Some(format!("export: cannot find this program: {e}"));
            return;
        }
    };
    let child = Command::new(exe)
        .arg("export")
        .arg(demo)
        .arg("--out")
        .arg(&out)
        .arg("--fps")
        .arg(ui.export_fps.to_string())
        .arg("--progress-lines")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    match child {
        Ok(child) => {
            ui.export_status = None;
            ui.export = Some(ExportJob::watch(
                child,
                out.clone(),
                (out != asked).then_some(asked),
            ));
        }
        Err(e) => ui.export_status = Some(format!("export: cannot start the exporter: {e}")),
    }
}

/// Demo files to offer: the shipped ones and the user's recordings. The shipped demo is offered wherever the
/// program runs: outside the repository it replays from its compiled-in copy.
fn known_demos() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if !Path::new("assets/demos").is_dir() {
        out.push(PathBuf::from(crate::demo::SHIPPED_DEMO));
    }
    for dir in ["assets/demos", DEMO_DIR] {
        out.extend(newest_demos(Path::new(dir), 8));
    }
    out
}

/// The `count` demo files in `dir` written last, newest first (in reverse order of name where the times are
/// equal). By name
/// alone, newest first only held for the automatic names: `lesson1.demo.ron`, just saved, came below
/// `wall-throw-1796575777.demo.ron`, or fell off the list.
fn newest_demos(dir: &Path, count: usize) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".demo.ron"))
        .map(|e| {
            let written = e
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            (written, e.path())
        })
        .collect();
    found.sort_by(|a, b| b.cmp(a));
    found.into_iter().take(count).map(|(_, p)| p).collect()
}

/// What the Demo section reads and sends; a part of the left panel's system (`panels::sandbox_ui`).
#[derive(bevy::ecs::system::SystemParam)]
pub struct DemoParams<'w> {
    pub replay: Option<ResMut<'w, Replay>>,
    pub controls: DemoControls<'w>,
}

/// The Demo section's state and messages, apart from the replay (which the panels read meanwhile).
#[derive(bevy::ecs::system::SystemParam)]
pub struct DemoControls<'w> {
    pub ui: ResMut<'w, DemoUi>,
    pub recorder: Res<'w, Recorder>,
    pub start: MessageWriter<'w, StartRecording>,
    pub stop: MessageWriter<'w, StopRecording>,
    pub open_replay: MessageWriter<'w, StartReplay>,
    pub stop_replay: MessageWriter<'w, StopReplay>,
}

/// What the replay viewer's controls asked for this frame. They are applied once the panels are drawn, since the
/// panels read the replayed scene meanwhile.
#[derive(Default, Debug, PartialEq)]
pub struct ReplayEdits {
    playing: Option<bool>,
    seek: Option<u64>,
    speed: Option<f64>,
    /// A typed tick that was refused, with why: for the window's error note, not the replay.
    pub refused: Option<String>,
}

impl ReplayEdits {
    /// Play or pause (P); playing from the last tick starts over.
    pub fn toggle_play(replay: &Replay) -> Self {
        let at_end = replay.player.tick() >= replay.player.demo.ticks;
        ReplayEdits {
            playing: Some(!replay.playing),
            seek: (!replay.playing && at_end).then_some(0),
            speed: None,

            refused: None,
        }
    }

    /// One tick forward, paused (O).
    pub fn step(replay: &Replay) -> Self {
        ReplayEdits {
            playing: Some(false),
            seek: Some(replay.player.tick() + 1),
            speed: None,

            refused: None,
        }
    }

    /// Back to the start (R).
    pub fn rewind() -> Self {
        ReplayEdits {
            seek: Some(0),
            ..default()
        }
    }

    pub fn apply(self, replay: &mut Replay) {
        if let Some(playing) = self.playing {
            replay.playing = playing;
        }
        if let Some(seek) = self.seek {
            replay.seek = Some(seek);
        }
        if let Some(speed) = self.speed {
            replay.speed = speed;
        }
    }
}

/// The heading of the Demo section: it says what is going on while the section is collapsed (F5 records without
/// opening it), an export's progress (`exporting 30/91`) included.
pub fn demo_heading(replaying: bool, recording: bool, export: Option<&str>) -> String {
    let state = if replaying {
        "Demo · replaying"
    } else if recording {
        "Demo · ● recording"
    } else if export.is_some() {
        "Demo"
    } else {
        "Demo: record, replay, export"
    };
    match export {
        Some(export) => format!("{state} · {export}"),
        None => state.to_string(),
    }
}

/// The Demo section while no demo replays: a collapsing header, closed at first.
pub fn demo_section(
    ui: &mut egui::Ui,
    demo: &mut DemoControls,
    control: &SimControl,
    active: Option<&ActiveScene>,
    log: &mut SimLog,
) {
    let export = demo.ui.export.as_ref().map(ExportJob::heading);
    let heading = demo_heading(false, demo.recorder.is_recording(), export.as_deref());
    let text = if demo.recorder.is_recording() {
        egui::RichText::new(heading).color(egui::Color32::from_rgb(235, 64, 52))
    } else {
        egui::RichText::new(heading)
    };
    egui::CollapsingHeader::new(text)
        .id_salt("demo section")
        .show(ui, |ui| recorder_controls(ui, demo, control, active, log));
}

fn recorder_controls(
    ui: &mut egui::Ui,
    demo: &mut DemoControls,
    control: &SimControl,
    active: Option<&ActiveScene>,
    log: &mut SimLog,
) {
    let recorder = &*demo.recorder;
    let demo_ui = &mut *demo.ui;
    ui.horizontal(|ui| {
        let label = if recorder.is_recording() {
            "■ Stop & save (F5)"
        } else {
            "● Record (F5)"
        };
        let hover = if recorder.is_recording() {
            "Saves the demo (atomically) under demos/ or where \"save as\" says."
        } else {
            "Restarts the scene from its start (with the lanes' settings as edited) and records from there, so the \
             demo replays from a state a file can give: the balls rained or thrown so far are not kept."
        };
        if ui.button(label).on_hover_text(hover).clicked() {
            toggle_recording(
                recorder,
                demo_ui,
                active,
                log,
                &mut demo.start,
                &mut demo.stop,
            );
        }
        if recorder.is_recording() {
            ui.colored_label(
                egui::Color32::from_rgb(235, 64, 52),
                recording_label(
                    recorder.ticks(control.ticks),
                    recorder.actions(),
                    recorder.recording.as_ref().and_then(|r| r.ended).is_some(),
                ),
            );
        }
    });
    ui.horizontal(|ui| {
        ui.label("save as");
        ui.add(
            egui::TextEdit::singleline(&mut demo_ui.save_path)
                .hint_text("demos/<scene>-<time>.demo.ron")
                .desired_width((ui.available_width() - 8.0).max(80.0)),
        )
        .on_hover_text(
            "A bare name saves into demos/ and gets .demo.ron (mine → demos/mine.demo.ron); a name with a folder \
             (./mine.demo.ron) saves there.",
        );
    });
    if let Some(SavedDemo { path: saved, asked }) = &recorder.last_saved {
        ui.small(saved_note(saved, Some(asked)));
        if demo_ui.replay_follows.as_ref() != Some(saved) {
            demo_ui.replay_path = saved.display().to_string();
            demo_ui.replay_follows = Some(saved.clone());
        }
    }
    ui.separator();
    ui.horizontal(|ui| {
        let width = (ui.available_width() - 84.0).max(80.0);
        ui.add(egui::TextEdit::singleline(&mut demo_ui.replay_path).desired_width(width));
        if ui.button("▶ Replay").clicked() {
            demo.open_replay
                .write(StartReplay(PathBuf::from(demo_ui.replay_path.trim())));
        }
    });
    egui::CollapsingHeader::new("demos on disk").show(ui, |ui| {
        let known = demo_ui
            .demos_on_disk
            .current(std::time::Instant::now(), known_demos);
        if known.is_empty() {
            ui.small(format!("none found in assets/demos or {DEMO_DIR}"));
        }
        let mut picked = None;
        for path in known {
            if ui.small_button(path.display().to_string()).clicked() {
                picked = Some(path.display().to_string());
            }
        }
        if let Some(picked) = picked {
            demo_ui.replay_path = picked;
        }
    });
    ui.separator();
    let demo = PathBuf::from(demo_ui.replay_path.trim());
    export_controls(ui, demo_ui, &demo);
}

/// How the export fps field's refusal begins.
const FPS_REFUSAL: &str = "export fps: ";

fn export_controls(ui: &mut egui::Ui, demo_ui: &mut DemoUi, demo: &Path) {
    ui.horizontal(|ui| {
        ui.label("export to");
        let width = (ui.available_width() - 120.0).max(80.0);
        let named_after_the_demo = clip_path("", demo).display().to_string();
        ui.add(
            egui::TextEdit::singleline(&mut demo_ui.export_out)
                .hint_text(named_after_the_demo)
                .desired_width(width),
        );
        // A typed rate outside 1–120 is refused with a word, not clamped to the nearest end without one.
        let refused = std::cell::RefCell::new(None);
        let kept = demo_ui.export_fps;
        let field = egui::DragValue::new(&mut demo_ui.export_fps)
            .update_while_editing(false)
            .range(1..=120)
            .suffix(" fps")
            .custom_parser(|text| {
                let typed = text.trim().trim_end_matches("fps").trim();
                match super::panels::parse_setting(typed, &(1.0..=120.0), true) {
                    Ok(fps) => Some(fps),
                    Err(problem) => {
                        *refused.borrow_mut() = Some(format!(
                            "{FPS_REFUSAL}\"{}\" {problem}; kept {kept}",
                            crate::text::abbreviate(typed, 40)
                        ));
                        None
                    }
                }
            });
        let accepted = ui.add(field).changed();
        if let Some(message) = refused.take() {
            demo_ui.export_status = Some(message);
        } else if accepted
            && demo_ui
                .export_status
                .as_deref()
                .is_some_and(|s| s.starts_with(FPS_REFUSAL))
        {
            // A rate taken answers the refusal of the one before it.
            demo_ui.export_status = None;
        }
    });
    match &demo_ui.export {
        Some(job) => {
            let (fraction, text) = job.progress_text();
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label(format!("exporting to {}", job.out.display()));
            });
            match fraction {
                Some(fraction) => ui.add(egui::ProgressBar::new(fraction).text(text)),
                None => ui.label(text),
            };
            let cancel = ui
                .add_enabled(!job.cancelled, egui::Button::new("■ Cancel export"))
                .on_hover_text("Stop the exporter; the partial clip is removed");
            if cancel.clicked() {
                cancel_export(demo_ui);
            }
        }
        None => {
            if ui
                .button("Export…")
                .on_hover_text(".gif, .mp4, or a folder/ of PNG frames")
                .clicked()
            {
                start_export(demo_ui, demo);
            }
        }
    }
    if let Some(status) = &demo_ui.export_status {
        ui.small(status);
    }
}

/// The replay's tick slider over a demo of `ticks` ticks, its lanes' clock at `time` [s] (the lanes' own time: the
/// demo's recorded rate is capped at 1 000 Hz and counts the ticks after a run's end, so at h = 0.5 ms its
/// ticks read 3.08 s where the lanes stood at 1.03 s), the replay now at tick `now`. A typed tick
/// beyond the demo is refused with a word into `refused`, as every number field's is (egui clamped 99999999 to the
/// last tick without one); a typed tick takes effect on Enter, not on each key.
fn tick_slider<'a>(
    tick: &'a mut u64,
    ticks: u64,
    time: f64,
    now: u64,
    refused: &super::panels::Refusals,
) -> egui::Slider<'a> {
    egui::Slider::new(tick, 0..=ticks)
        .text(format!("tick (t = {time:.3} s)"))
        .clamping(egui::SliderClamping::Never)
        .update_while_editing(false)
        .custom_parser(super::panels::refusing_parser(
            "replay tick",
            0.0..=ticks as f64,
            true,
            now.to_string(),
            refused,
        ))
}

/// The replay viewer: the badge, play/pause, step, speed, the timeline and export. Its controls are returned as
/// edits (see [`ReplayEdits`]).
pub fn replay_viewer(ui: &mut egui::Ui, replay: &Replay, demo: &mut DemoControls) -> ReplayEdits {
    let demo_ui = &mut *demo.ui;
    let mut edits = ReplayEdits::default();
    let export = demo_ui.export.as_ref().map(ExportJob::heading);
    ui.strong(demo_heading(true, false, export.as_deref()));
    let badge = replay.badge();
    let colour = if badge.starts_with("match") {
        egui::Color32::from_rgb(46, 204, 64)
    } else if badge.starts_with("MISMATCH") || badge.starts_with("cannot") {
        egui::Color32::from_rgb(235, 64, 52)
    } else {
        egui::Color32::GRAY
    };
    let file = Path::new(&replay.player.file);
    let name = file.file_name().map_or_else(
        || replay.player.file.clone(),
        |n| n.to_string_lossy().into_owned(),
    );
    ui.label(format!("file {name}"))
        .on_hover_text(&replay.player.file);
    ui.colored_label(colour, egui::RichText::new(badge).strong());
    let ticks = replay.player.demo.ticks;
    let mut tick = replay.player.tick();
    ui.horizontal(|ui| {
        let label = if replay.playing {
            "⏸ Pause (P)"
        } else {
            "▶ Play (P)"
        };
        if ui.button(label).clicked() {
            edits = ReplayEdits::toggle_play(replay);
        }
        if ui
            .button("⏮")
            .on_hover_text("back to the start (R)")
            .clicked()
        {
            edits = ReplayEdits::rewind();
        }
        if ui.button("Step (O)").on_hover_text("one tick").clicked() {
            edits = ReplayEdits::step(replay);
        }
        let mut speed = replay.speed;
        egui::ComboBox::from_id_salt("replay speed")
            .width(60.0)
            .selected_text(format!("{speed}×"))
            .show_ui(ui, |ui| {
                for option in [0.25, 0.5, 1.0, 2.0, 4.0, 8.0] {
                    ui.selectable_value(&mut speed, option, format!("{option}×"));
                }
            });
        if speed != replay.speed {
            edits.speed = Some(speed);
        }
    });
    let refused = super::panels::Refusals::default();
    let now = replay.player.tick();
    if ui
        .add(tick_slider(
            &mut tick,
            ticks,
            crate::demo::lanes_time(&replay.player.session.lanes),
            now,
            &refused,
        ))
        .changed()
    {
        edits.seek = Some(tick.min(ticks));
    }
    edits.refused = refused.take().map(|r| r.text());
    if let Some((at, label)) = &replay.player.last_action {
        ui.small(format!("last action: {label} (tick {at})"));
    }
    if replay.player.session.paused {
        ui.small("the recording was paused here (pauses do not change the physics)");
    }
    if let Some(error) = &replay.error {
        ui.colored_label(egui::Color32::from_rgb(235, 64, 52), error);
    }
    ui.small("input that would change the simulation is ignored while replaying");
    if ui
        .button("■ Stop replay")
        .on_hover_text("Back to the sandbox as it was when the replay started")
        .clicked()
    {
        demo.stop_replay.write(StopReplay);
    }
    ui.separator();
    export_controls(ui, demo_ui, file);
    edits
}

#[cfg(test)]
mod tests {
    /// "save as" and "export to" make a missing last folder (`demos/`), and refuse a path whose outer folders are
    /// missing too, naming the outermost, without making any.
    #[test]
    fn only_the_last_missing_folder_of_a_typed_path_is_made() {
        let root = std::env::temp_dir().join(format!("cs-folders-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("a scratch folder");
        let one = root.join("demos").join("mine.demo.ron");
        assert_eq!(super::make_folder_for(&one), Ok(()));
        assert!(root.join("demos").is_dir());
        assert_eq!(super::make_folder_for(&one), Ok(()), "already there");
        let deep = root.join("a").join("tmp").join("x").join("mine.demo.ron");
        let refused = super::make_folder_for(&deep).expect_err("two missing levels");
        assert_eq!(
            refused,
            format!(
                "the folder '{}' does not exist (only the last folder of the path is made when missing)",
                root.join("a").display()
            )
        );
        assert!(!root.join("a").exists(), "nothing made");
        assert_eq!(
            super::make_folder_for(std::path::Path::new("bare.demo.ron")),
            Ok(())
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    use super::*;
    use crate::scene::Scene;

    /// The list is read when first shown and again only once it is a second old.
    #[test]
    fn demos_on_disk_are_read_at_most_once_a_second() {
        let mut listing = Listing::default();
        let reads = std::cell::Cell::new(0);
        let read = |name: &str| {
            reads.set(reads.get() + 1);
            vec![PathBuf::from(name)]
        };
        let start = std::time::Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        assert_eq!(listing.current(at(0), || read("a")), [PathBuf::from("a")]);
        assert_eq!(listing.current(at(16), || read("b")), [PathBuf::from("a")]);
        assert_eq!(listing.current(at(999), || read("b")), [PathBuf::from("a")]);
        assert_eq!(reads.get(), 1);
        assert_eq!(
            listing.current(at(1000), || read("b")),
            [PathBuf::from("b")]
        );
        // A clock read before the last read (another thread's instant) counts as no time passed.
        assert_eq!(listing.current(at(500), || read("c")), [PathBuf::from("b")]);
        assert_eq!(reads.get(), 2);
    }

    /// A target without a format is refused in the window's words, before the exporter starts: its own refusal
    /// named an `--out` option the window does not have.
    #[test]
    fn an_export_target_without_a_format_is_refused_without_naming_an_option() {
        let mut ui = DemoUi {
            export_out: "clipnoext".into(),
            ..DemoUi::default()
        };
        start_export(&mut ui, Path::new(crate::demo::SHIPPED_DEMO));
        let status = ui.export_status.clone().unwrap_or_default();
        assert!(
            status.starts_with("export: demos/clipnoext: unknown format (no extension)"),
            "{status}"
        );
        assert!(!status.contains("--out"), "{status}");
    }

    /// The replay's tick slider, typed into as a user does: a tick within the demo seeks on Enter and not on each
    /// key; one beyond it, or no number, is refused with a word and the replay stays where it was.
    #[test]
    fn the_replay_s_tick_field_seeks_on_enter_and_refuses_a_tick_beyond_the_demo_with_a_word() {
        let typed = |text: &str| {
            let refused = super::super::panels::Refusals::default();
            let (each_key, entered) = crate::app::test_events::type_into_widget(
                40.0,
                |ui, value| {
                    let mut tick = *value as u64;
                    let response = ui.add(tick_slider(&mut tick, 300, 0.4, 40, &refused));
                    *value = tick as f64;
                    crate::app::test_events::slider_value_point(ui, response.rect)
                },
                text,
            );
            (each_key, entered, refused.take().map(|r| r.text()))
        };
        let (each_key, entered, refused) = typed("123");
        assert_eq!(each_key, [40.0; 3], "no seek before Enter");
        assert_eq!((entered, refused), (123.0, None));
        let long = "9".repeat(60);
        for text in ["99999999", "-1", "abc", long.as_str()] {
            let (_, entered, refused) = typed(text);
            assert_eq!(entered, 40.0, "{text}");
            let refused = refused.unwrap_or_else(|| panic!("{text} taken without a word"));
            let quoted = crate::text::abbreviate(text, 40);
            assert!(
                refused.starts_with(&format!("replay tick: \"{quoted}\" "))
                    && refused.ends_with("; kept 40")
                    && refused.len() < 120,
                "{refused}"
            );
        }
    }

    /// The saves asked for since the last look (the `StopRecording` messages), taken.
    fn drained_stops(app: &mut App) -> Vec<PathBuf> {
        app.world_mut()
            .resource_mut::<Messages<StopRecording>>()
            .drain()
            .map(|s| s.0)
            .collect()
    }

    /// F5 pressed once in a window recording `recorded_scene` with the panel `ui`, `active` on screen: the app, and
    /// the paths the StopRecording messages it sent name.
    fn press_f5_while_recording(
        recorded_scene: &str,
        ui: DemoUi,
        active: Option<&str>,
    ) -> (App, Vec<PathBuf>) {
        let mut recorder = Recorder::default();
        let scene = Scene::load(Path::new(recorded_scene)).expect("a built-in scene loads");
        recorder.begin(scene, 100.0, 0);
        let mut app = App::new();
        app.insert_resource(recorder)
            .insert_resource(ui)
            .init_resource::<ButtonInput<KeyCode>>()
            .init_resource::<SimLog>()
            .add_message::<StartRecording>()
            .add_message::<StopRecording>()
            .add_systems(Update, record_key);
        if let Some(active) = active {
            app.insert_resource(ActiveScene::load(Path::new(active)).expect("loads"));
        }
        app.world_mut()
            .resource_mut::<ButtonInput<KeyCode>>()
            .press(KeyCode::F5);
        app.update();
        let stops = drained_stops(&mut app);
        (app, stops)
    }

    /// Closing the window while recording sends the recording to be saved, once, where "save as" says; a "save
    /// as" the save would refuse (a folder) falls back to a fresh name, and its text stays.
    #[test]
    fn closing_the_window_while_recording_saves_the_recording() {
        let dir = std::env::temp_dir().join(format!("cs-close-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let closing = |save_path: String| {
            let mut recorder = Recorder::default();
            let scene = Scene::load(Path::new("assets/scenes/slope.ron")).expect("loads");
            recorder.begin(scene, 100.0, 0);
            let mut app = App::new();
            app.insert_resource(recorder)
                .insert_resource(DemoUi {
                    save_path,
                    ..default()
                })
                .init_resource::<SimLog>()
                .init_resource::<SavedOnClose>()
                .add_message::<StartRecording>()
                .add_message::<StopRecording>()
                .add_message::<bevy::window::WindowCloseRequested>()
                .add_systems(Update, save_recording_on_close);
            let window = app.world_mut().spawn_empty().id();
            for _ in 0..2 {
                app.world_mut()
                    .write_message(bevy::window::WindowCloseRequested { window });
                app.update();
            }
            let stops = drained_stops(&mut app);
            let typed = app.world().resource::<DemoUi>().save_path.clone();
            (stops, typed)
        };
        let named = dir.join("lesson.demo.ron");
        let (stops, _) = closing(named.display().to_string());
        assert_eq!(stops, [named], "once, where save as says");
        let folder = format!("{}/", dir.display());
        let (stops, typed) = closing(folder.clone());
        assert_eq!(stops.len(), 1, "{stops:?}");
        assert!(
            stops[0].starts_with(DEMO_DIR) && stops[0].to_string_lossy().contains("slope-"),
            "{stops:?}"
        );
        assert_eq!(typed, folder);
        let _ = std::fs::remove_dir(DEMO_DIR);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An exit with the window still open (Ctrl-C in the terminal) while recording saves the recording where
    /// "save as" says, and it replays to the tick where the app ended.
    #[test]
    fn an_exit_while_recording_saves_the_recording_as_f5_would() {
        let dir = std::env::temp_dir().join(format!("cs-exit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("exit.demo.ron");
        let mut app = App::new();
        app.add_plugins(MinimalPlugins)
            .add_plugins(crate::sim::SimPlugin)
            .insert_resource(bevy::time::TimeUpdateStrategy::FixedTimesteps(1))
            .insert_resource(
                ActiveScene::load(Path::new("assets/scenes/slope.ron")).expect("loads"),
            )
            .insert_resource(DemoUi {
                save_path: path.display().to_string(),
                ..default()
            })
            .init_resource::<SavedOnClose>()
            .add_systems(Last, (save_recording_on_exit, report_save_on_exit).chain());
        app.update();
        app.world_mut().write_message(StartRecording);
        for _ in 0..20 {
            app.update();
        }
        app.world_mut().write_message(AppExit::Success);
        app.update();
        let demo = crate::demo::Demo::load(&path).expect("saved at the exit");
        assert!(demo.ticks >= 15, "{}", demo.ticks);
        let mut player = crate::demo::Player::new(demo.clone(), path.display().to_string());
        let verdict = player.run_to_end(false).expect("replays").clone();
        assert_eq!(verdict.mismatch, None, "{verdict}");
        assert!(!app.world().resource::<Recorder>().is_recording());
        let said = app
            .world()
            .resource::<SimLog>()
            .info
            .clone()
            .unwrap_or_default();
        assert!(
            said.starts_with(&format!("saved {}", path.display())),
            "{said}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A bare name typed into "save as" lands in `demos/` as a demo, where the panel lists it.
    #[test]
    fn a_typed_save_name_lands_where_the_panel_lists_demos() {
        let p = |typed: &str| typed_demo_path(typed).display().to_string();
        assert_eq!(p("prof"), "demos/prof.demo.ron");
        assert_eq!(p("prof.demo.ron"), "demos/prof.demo.ron");
        assert_eq!(p("run.ron"), "demos/run.demo.ron");
        assert_eq!(p("."), ".");
        assert_eq!(p(".."), "..");
        assert_eq!(p("./prof"), "./prof.demo.ron");
        assert_eq!(p("/tmp/x.demo.ron"), "/tmp/x.demo.ron");
        assert_eq!(p("out/"), "out/");
    }

    /// A refused "save as" (two missing folders) stays while recording goes on, and the stop that then saves
    /// takes it off the screen: "…; still recording" stayed beside the saved demo.
    #[test]
    fn a_refused_save_as_goes_when_a_later_stop_saves() {
        // A folder of its own: another test here uses `cs-save-as-PID`.
        let dir = std::env::temp_dir().join(format!("cs-refused-save-as-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        let missing = dir.join("zz").join("yy").join("x.demo.ron");
        let (mut app, stops) = press_f5_while_recording(
            "assets/scenes/slope.ron",
            DemoUi {
                save_path: missing.display().to_string(),
                ..DemoUi::default()
            },
            None,
        );
        assert!(stops.is_empty(), "refused: {stops:?}");
        let refused = app.world().resource::<SimLog>().error.clone();
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("does not exist") && e.ends_with("still recording")),
            "{refused:?}"
        );
        app.world_mut().resource_mut::<DemoUi>().save_path =
            dir.join("x.demo.ron").display().to_string();
        let mut keys = app.world_mut().resource_mut::<ButtonInput<KeyCode>>();
        keys.reset_all();
        keys.press(KeyCode::F5);
        app.update();
        let stops = drained_stops(&mut app);
        assert_eq!(stops, [dir.join("x.demo.ron")]);
        assert_eq!(app.world().resource::<SimLog>().error, None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A recording that began in one scene and ends in another is named after the one it starts from (where
    /// its replay opens), not the scene on screen when it stops.
    #[test]
    fn a_recording_is_named_after_the_scene_it_starts_in() {
        let (app, stops) = press_f5_while_recording(
            "assets/scenes/ball_pit.ron",
            DemoUi::default(),
            Some("assets/scenes/slope.ron"),
        );
        assert_eq!(stops.len(), 1);
        let name = stops[0].display().to_string();
        assert!(name.contains("ball-pit-"), "{name}");
        // Export… then names the clip after the demo it exports, whichever the replay field shows, not after
        // this recording.
        let ui = app.world().resource::<DemoUi>();
        // Nothing saved yet (the test takes the stop's message): the field names the demo it named before.
        assert_eq!(ui.replay_path, DemoUi::default().replay_path);
        let shipped = Path::new("assets/demos/wall_throw.demo.ron");
        assert_eq!(
            clip_path(&ui.export_out, shipped),
            Path::new("demos/wall_throw.gif")
        );
        let _ = std::fs::remove_dir(DEMO_DIR);
    }

    #[test]
    fn the_recording_line_counts_actions_in_the_singular_and_plural() {
        assert_eq!(recording_label(401, 1, false), "REC tick 401 · 1 action");
        assert_eq!(recording_label(401, 0, false), "REC tick 401 · 0 actions");
        assert_eq!(recording_label(7, 2, false), "REC tick 7 · 2 actions");
        assert_eq!(
            recording_label(40, 6, true),
            "REC full: ended at tick 40 · 6 actions; save it (F5)"
        );
    }

    #[test]
    fn demos_on_disk_are_listed_newest_first() {
        let dir = std::env::temp_dir().join(format!("cs-newest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let at = |seconds: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds);
        for (name, written) in [
            ("wall-throw-1796575777.demo.ron", 100),
            ("lesson1.demo.ron", 300),
            ("ball-pit-1796575000.demo.ron", 200),
            ("b.demo.ron", 50),
            ("a.demo.ron", 50),
            ("notes.txt", 400),
        ] {
            let file = std::fs::File::create(dir.join(name)).unwrap();
            file.set_modified(at(written)).unwrap();
        }
        let names: Vec<String> = newest_demos(&dir, 4)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "lesson1.demo.ron",
                "ball-pit-1796575000.demo.ron",
                "wall-throw-1796575777.demo.ron",
                "b.demo.ron"
            ]
        );
        assert!(newest_demos(&dir.join("none"), 4).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_clip_is_named_after_its_demo_unless_a_name_is_typed() {
        let demo = Path::new("demos/ball-pit-1700000000.demo.ron");
        assert_eq!(
            clip_path("", demo),
            Path::new("demos/ball-pit-1700000000.gif")
        );
        assert_eq!(
            clip_path("  ", Path::new("x/run.ron")),
            Path::new("demos/run.gif")
        );
        assert_eq!(clip_path(" out/a.mp4 ", demo), Path::new("out/a.mp4"));
        // A bare name goes where a bare demo name goes; one with a folder stays as typed.
        assert_eq!(clip_path("a.mp4", demo), Path::new("demos/a.mp4"));
        // The slash kept: it is what makes the target a folder of frames (Path equality ignores it).
        assert_eq!(clip_path("frames/", demo).as_os_str(), "demos/frames/");
        assert_eq!(clip_path("./a.gif", demo), Path::new("./a.gif"));
        assert_eq!(clip_path("/tmp/a.gif", demo), Path::new("/tmp/a.gif"));
        assert_eq!(clip_path("/", demo), Path::new("/"));
        assert_eq!(clip_path("..", demo), Path::new(".."));
    }

    /// The "save as" field keeps its text: the next recording goes beside the last one, and the panel says so.
    #[test]
    fn a_recording_saved_as_a_taken_name_goes_beside_it() {
        let dir = std::env::temp_dir().join(format!("cs-save-as-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        let taken = dir.join("mine.demo.ron");
        std::fs::write(&taken, b"the first recording").expect("writes");
        let (app, stops) = press_f5_while_recording(
            "assets/scenes/wall_throw.ron",
            DemoUi {
                save_path: taken.display().to_string(),
                ..default()
            },
            None,
        );
        let beside = dir.join("mine-2.demo.ron");
        // A folder given as the name is refused, and the recording goes on.
        let (app_folder, folder_stops) = press_f5_while_recording(
            "assets/scenes/wall_throw.ron",
            DemoUi {
                save_path: format!("{}/", dir.display()),
                ..default()
            },
            None,
        );
        assert!(folder_stops.is_empty());
        let said = app_folder.world().resource::<SimLog>().error.clone();
        assert!(
            said.as_deref()
                .is_some_and(|e| e.contains("that is a folder")),
            "{said:?}"
        );
        assert_eq!(stops, std::slice::from_ref(&taken));
        // Nothing saved yet (the test takes the stop's message): the replay field is as it was.
        assert_eq!(
            app.world().resource::<DemoUi>().replay_path,
            DemoUi::default().replay_path
        );
        assert_eq!(
            saved_note(&beside, Some(&taken)),
            format!(
                "last saved: {} ({} exists, kept)",
                beside.display(),
                taken.display()
            )
        );
        std::fs::remove_dir_all(&dir).expect("removed");
    }

    /// A stand-in exporter that runs until it is stopped.
    fn sleeping_job() -> (ExportJob, PathBuf) {
        let child = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sleep runs");
        let proc = PathBuf::from(format!("/proc/{}", child.id()));
        (
            ExportJob::watch(child, PathBuf::from("clip.gif"), None),
            proc,
        )
    }

    /// A job around `sh -c script`.
    #[cfg(unix)]
    fn shell_job(script: &str) -> ExportJob {
        let child = Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh runs");
        ExportJob::watch(child, PathBuf::from("clip.gif"), None)
    }

    /// A line of the exporter's standard error that is not UTF-8 does not stop the reading: the progress after
    /// it still arrives (the reader once stopped there, and the exporter would have blocked on a full pipe).
    #[cfg(unix)]
    #[test]
    fn progress_after_a_line_that_is_not_utf8_still_arrives() {
        let mut job = shell_job("printf '\\377\\376 driver noise\\nprogress frames 5/9\\n' >&2");
        let started = Instant::now();
        let status = loop {
            if let Ok(Some(status)) = job.child.try_wait() {
                break status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "sh did not end"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(job.outcome(status).is_ok());
        assert_eq!(job.heading(), "exporting 5/9");
    }

    /// A cancel that arrives after the clip was written does not claim the export was cancelled.
    #[cfg(unix)]
    #[test]
    fn a_cancel_after_the_clip_was_written_says_it_came_too_late() {
        let mut job = shell_job("exit 0");
        job.cancelled = true;
        let status = job.child.wait().expect("sh ends");
        let said = job.outcome(status).expect("succeeded");
        assert!(said.starts_with("exported clip.gif"), "{said}");
        assert!(
            said.ends_with("the cancel came after it had finished"),
            "{said}"
        );
    }

    /// An exporter child is not left running on its own: dropping its job (the app's world going away) stops it.
    #[cfg(target_os = "linux")]
    #[test]
    fn dropping_an_export_job_stops_the_exporter() {
        let (job, proc) = sleeping_job();
        assert!(proc.exists());
        drop(job);
        assert!(!proc.exists(), "{} still runs", proc.display());
    }

    /// Closing the window (AppExit) stops a running export, while the app still runs.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_app_exiting_stops_a_running_export() {
        let (job, proc) = sleeping_job();
        let mut app = App::new();
        app.insert_resource(DemoUi {
            export: Some(job),
            ..default()
        })
        .add_systems(Last, stop_export_on_exit);
        app.update();
        assert!(proc.exists(), "stopped without an exit");
        app.world_mut().write_message(AppExit::Success);
        app.update();
        assert!(app.world().resource::<DemoUi>().export.is_none());
        assert!(!proc.exists(), "{} still runs", proc.display());
    }

    /// Cancel stops the exporter and says so. While it ran, an earlier export's failure was taken off the screen
    /// (it stayed above a new export's progress); other errors stay.
    #[cfg(unix)]
    #[test]
    fn cancel_stops_the_exporter_and_says_export_cancelled() {
        let (job, _) = sleeping_job();
        let mut app = App::new();
        app.insert_resource(DemoUi {
            export: Some(job),
            ..default()
        })
        .init_resource::<SimLog>()
        .add_systems(Update, poll_export);
        app.world_mut().resource_mut::<SimLog>().error_about(
            ErrorTopic::Export,
            "export failed: demos/x.demo.ron: cannot read the file",
        );
        app.update();
        assert_eq!(app.world().resource::<SimLog>().error, None);
        // Not about an export, though it says so: it stays.
        app.world_mut()
            .resource_mut::<SimLog>()
            .error("export failed, says a spawn refused in lane 'a'");
        app.update();
        assert!(app.world().resource::<SimLog>().error.is_some());
        cancel_export(&mut app.world_mut().resource_mut::<DemoUi>());
        let started = Instant::now();
        while app.world().resource::<DemoUi>().export.is_some() {
            assert!(started.elapsed() < Duration::from_secs(10), "not stopped");
            app.update();
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            app.world().resource::<DemoUi>().export_status.as_deref(),
            Some("export cancelled")
        );
    }

    /// The exporter's progress lines give frames done and total, in the section and in its heading (which
    /// shows while the section is collapsed); other lines are kept for a failure's message, without "error: ".
    #[test]
    fn an_exports_progress_shows_frames_done_of_all() {
        let (job, _) = sleeping_job();
        assert_eq!(job.heading(), "exporting");
        if let Ok(mut report) = job.report.lock() {
            report.read("progress check 640/3000".into());
        }
        assert_eq!(job.heading(), "exporting (checking hashes)");
        let (fraction, text) = job.progress_text();
        assert_eq!(text, "checking the demo's hashes: tick 640/3000 (21%)");
        assert!(fraction.is_some_and(|f| (f - 0.2133).abs() < 1e-3));
        if let Ok(mut report) = job.report.lock() {
            report.read("progress frames 0/91".into());
            report.read("progress frames 30/91".into());
            report.read("error: output folder '/proc' does not take new files".into());
        }
        assert_eq!(job.heading(), "exporting 30/91");
        let (_, text) = job.progress_text();
        assert!(text.starts_with("frame 30/91 (33%), about "), "{text}");
        assert_eq!(
            demo_heading(false, false, Some(&job.heading())),
            "Demo · exporting 30/91"
        );
        assert_eq!(
            demo_heading(false, true, Some(&job.heading())),
            "Demo · ● recording · exporting 30/91"
        );
        assert_eq!(
            demo_heading(false, false, None),
            "Demo: record, replay, export"
        );
        let said: Vec<String> = job
            .report
            .lock()
            .map(|r| r.said.iter().cloned().collect())
            .unwrap();
        let failed = std::process::ExitStatus::default();
        assert_eq!(
            failure_reason(&said, failed),
            "output folder '/proc' does not take new files"
        );
        // The exporter's advice on an option the window has not is told as a terminal's.
        let mismatch = [
            "error: d.demo.ron: MISMATCH at tick 120 (recorded 01, replayed 02); not exporting a replay that differs \
             from the recording (pass --allow-mismatch to export it labelled \"MISMATCH at tick 120\")"
                .to_string(),
        ];
        let reason = failure_reason(&mismatch, failed);
        assert!(
            reason.ends_with(
                "(the window exports only checked replays; in a terminal, `contact-sandbox export` with \
                 --allow-mismatch exports it labelled \"MISMATCH at tick 120\")"
            ),
            "{reason}"
        );
        assert!(!reason.contains("pass --"), "{reason}");
    }
}
