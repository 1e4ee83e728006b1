//! The Demo window: Record / Stop & save (F5), open a demo in the replay viewer (play/pause, timeline, speed,
//! the "match / MISMATCH at tick T" badge), and Export… (runs `contact-sandbox export` in a child process so
//! the window stays responsive). The recording and replay themselves live in [`crate::sim`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use bevy::prelude::*;
use bevy_egui::{EguiContexts, EguiPrimaryContextPass, egui};

use super::UiState;
use crate::sim::{
    ActiveScene, Recorder, Replay, SimControl, SimLog, StartRecording, StartReplay, StopRecording,
    StopReplay,
};

/// Where recordings are saved unless the user types another path.
pub const DEMO_DIR: &str = "demos";

pub struct DemoPanelPlugin;

impl Plugin for DemoPanelPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<DemoUi>()
            .add_systems(Update, (record_key, poll_export))
            .add_systems(EguiPrimaryContextPass, demo_window);
    }
}

/// What the Demo window remembers between frames.
#[derive(Resource)]
pub struct DemoUi {
    /// Where Stop & save writes (empty: a fresh name under `demos/`).
    pub save_path: String,
    /// The demo the Replay button opens.
    pub replay_path: String,
    pub export_out: String,
    pub export_fps: u32,
    export: Option<ExportJob>,
    /// The last export's outcome.
    pub export_status: Option<String>,
}

impl Default for DemoUi {
    fn default() -> Self {
        DemoUi {
            save_path: String::new(),
            replay_path: "assets/demos/wall_throw.demo.ron".into(),
            export_out: format!("{DEMO_DIR}/clip.gif"),
            export_fps: 30,
            export: None,
            export_status: None,
        }
    }
}

struct ExportJob {
    child: Child,
    out: PathBuf,
    started: Instant,
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

fn toggle_recording(
    recorder: &Recorder,
    ui: &mut DemoUi,
    active: Option<&ActiveScene>,
    log: &mut SimLog,
    start: &mut MessageWriter<StartRecording>,
    stop: &mut MessageWriter<StopRecording>,
) {
    if recorder.is_recording() {
        let path = if ui.save_path.trim().is_empty() {
            fresh_demo_path(active.map_or("demo", |a| a.current.name.as_str()))
        } else {
            PathBuf::from(ui.save_path.trim())
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            log.error(format!(
                "{}: cannot create the folder: {e}; still recording",
                dir.display()
            ));
            return;
        }
        stop.write(StopRecording(path.clone()));
        ui.replay_path = path.display().to_string();
        ui.export_out = path
            .with_extension("")
            .with_extension("gif")
            .display()
            .to_string();
    } else {
        start.write(StartRecording);
    }
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
        Ok(None) => {}
        Ok(Some(status)) => {
            let mut stderr = String::new();
            if let Some(mut pipe) = job.child.stderr.take() {
                use std::io::Read;
                let _ = pipe.read_to_string(&mut stderr);
            }
            let seconds = job.started.elapsed().as_secs_f64();
            let message = if status.success() {
                format!("exported {} in {seconds:.1} s", job.out.display())
            } else {
                let reason = stderr
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("the exporter failed")
                    .to_string();
                log.error(format!("export failed: {reason}"));
                format!("export failed: {reason}")
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

fn start_export(ui: &mut DemoUi, demo: &Path) {
    let out = PathBuf::from(ui.export_out.trim());
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
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    match child {
        Ok(child) => {
            ui.export_status = None;
            ui.export = Some(ExportJob {
                child,
                out,
                started: Instant::now(),
            });
        }
        Err(e) => ui.export_status = Some(format!("export: cannot start the exporter: {e}")),
    }
}

/// Demo files to offer: the shipped ones and the user's recordings.
fn known_demos() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["assets/demos", DEMO_DIR] {
        if let Ok(entries) = std::fs::read_dir(dir) {
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(".demo.ron"))
                .collect();
            found.sort();
            out.extend(found.into_iter().rev().take(8));
        }
    }
    out
}

#[derive(bevy::ecs::system::SystemParam)]
struct DemoMessages<'w> {
    start: MessageWriter<'w, StartRecording>,
    stop: MessageWriter<'w, StopRecording>,
    replay: MessageWriter<'w, StartReplay>,
    stop_replay: MessageWriter<'w, StopReplay>,
}

#[allow(clippy::too_many_arguments)]
fn demo_window(
    mut contexts: EguiContexts,
    ui_state: Res<UiState>,
    mut demo_ui: ResMut<DemoUi>,
    recorder: Res<Recorder>,
    replay: Option<ResMut<Replay>>,
    control: Res<SimControl>,
    active: Option<Res<ActiveScene>>,
    mut log: ResMut<SimLog>,
    mut messages: DemoMessages,
) -> Result {
    if !ui_state.show_ui {
        return Ok(());
    }
    let ctx = contexts.ctx_mut()?.clone();
    // The title says what is going on while the window is collapsed (F5 records without opening it).
    let title = if replay.is_some() {
        "Demo · replaying"
    } else if recorder.is_recording() {
        "Demo · ● recording"
    } else {
        "Demo"
    };
    // It floats over the canvas, so it starts collapsed to its title bar unless a replay is open at start. It has
    // no close button: nothing would bring it back, and collapsed it is one title bar.
    egui::Window::new(title)
        .id(egui::Id::new("demo window"))
        .default_pos(egui::pos2(360.0, 8.0))
        .default_open(replay.is_some())
        .resizable(false)
        .show(&ctx, |ui| match replay {
            Some(mut replay) => replay_viewer(ui, &mut replay, &mut demo_ui, &mut messages),
            None => recorder_controls(
                ui,
                &recorder,
                &control,
                active.as_deref(),
                &mut demo_ui,
                &mut log,
                &mut messages,
            ),
        });
    Ok(())
}

fn recorder_controls(
    ui: &mut egui::Ui,
    recorder: &Recorder,
    control: &SimControl,
    active: Option<&ActiveScene>,
    demo_ui: &mut DemoUi,
    log: &mut SimLog,
    messages: &mut DemoMessages,
) {
    ui.horizontal(|ui| {
        let label = if recorder.is_recording() {
            "■ Stop & save (F5)"
        } else {
            "● Record (F5)"
        };
        if ui.button(label).clicked() {
            toggle_recording(
                recorder,
                demo_ui,
                active,
                log,
                &mut messages.start,
                &mut messages.stop,
            );
        }
        if recorder.is_recording() {
            ui.colored_label(
                egui::Color32::from_rgb(235, 64, 52),
                format!(
                    "REC tick {} · {} actions",
                    recorder.ticks(control.ticks),
                    recorder.actions()
                ),
            );
        }
    });
    ui.horizontal(|ui| {
        ui.label("save as");
        ui.add(
            egui::TextEdit::singleline(&mut demo_ui.save_path)
                .hint_text("demos/<scene>-<time>.demo.ron")
                .desired_width(220.0),
        );
    });
    if let Some(saved) = &recorder.last_saved {
        ui.small(format!("last saved: {}", saved.display()));
    }
    ui.separator();
    ui.horizontal(|ui| {
        ui.add(egui::TextEdit::singleline(&mut demo_ui.replay_path).desired_width(230.0));
        if ui.button("▶ Replay").clicked() {
            messages
                .replay
                .write(StartReplay(PathBuf::from(demo_ui.replay_path.trim())));
        }
    });
    egui::CollapsingHeader::new("demos on disk").show(ui, |ui| {
        for path in known_demos() {
            if ui.small_button(path.display().to_string()).clicked() {
                demo_ui.replay_path = path.display().to_string();
            }
        }
    });
    ui.separator();
    let demo = PathBuf::from(demo_ui.replay_path.trim());
    export_controls(ui, demo_ui, &demo);
}

fn export_controls(ui: &mut egui::Ui, demo_ui: &mut DemoUi, demo: &Path) {
    ui.horizontal(|ui| {
        ui.label("export to");
        ui.add(egui::TextEdit::singleline(&mut demo_ui.export_out).desired_width(150.0));
        ui.add(
            egui::DragValue::new(&mut demo_ui.export_fps)
                .update_while_editing(false)
                .range(1..=120)
                .suffix(" fps"),
        );
    });
    match &demo_ui.export {
        Some(job) => {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label(format!(
                    "exporting {} … {:.0} s",
                    job.out.display(),
                    job.started.elapsed().as_secs_f64()
                ));
            });
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

fn replay_viewer(
    ui: &mut egui::Ui,
    replay: &mut Replay,
    demo_ui: &mut DemoUi,
    messages: &mut DemoMessages,
) {
    let badge = replay.badge();
    let colour = if badge.starts_with("match") {
        egui::Color32::from_rgb(46, 204, 64)
    } else if badge.starts_with("MISMATCH") || badge.starts_with("cannot") {
        egui::Color32::from_rgb(235, 64, 52)
    } else {
        egui::Color32::GRAY
    };
    ui.label(format!("replaying {}", replay.player.file));
    ui.colored_label(colour, egui::RichText::new(badge).strong());
    let ticks = replay.player.demo.ticks;
    let hz = replay.player.demo.fixed_hz;
    let mut tick = replay.player.tick();
    ui.horizontal(|ui| {
        let label = if replay.playing {
            "⏸ Pause"
        } else {
            "▶ Play"
        };
        if ui.button(label).clicked() {
            if !replay.playing && tick >= ticks {
                replay.seek = Some(0);
            }
            replay.playing = !replay.playing;
        }
        if ui.button("⏮").on_hover_text("back to the start").clicked() {
            replay.seek = Some(0);
        }
        if ui.button("Step").on_hover_text("one tick").clicked() {
            replay.playing = false;
            replay.seek = Some(tick + 1);
        }
        egui::ComboBox::from_id_salt("replay speed")
            .selected_text(format!("{}×", replay.speed))
            .show_ui(ui, |ui| {
                for speed in [0.25, 0.5, 1.0, 2.0, 4.0, 8.0] {
                    ui.selectable_value(&mut replay.speed, speed, format!("{speed}×"));
                }
            });
    });
    let slider = ui.add(
        egui::Slider::new(&mut tick, 0..=ticks)
            .text(format!("tick ({:.2} s)", replay.player.tick() as f64 / hz)),
    );
    if slider.changed() {
        replay.seek = Some(tick);
    }
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
    if ui.button("■ Stop replay").clicked() {
        messages.stop_replay.write(StopReplay);
    }
    ui.separator();
    let demo = PathBuf::from(&replay.player.file);
    export_controls(ui, demo_ui, &demo);
}
