//! The windowed sandbox: rendering ([`render`]), input ([`input`]), egui panels ([`panels`]), the Demo window
//! (record, replay viewer, export: [`demo_panel`]), the seed's energy landscape ([`landscape`]), the scripted
//! screenshot mode ([`screenshot`]) and the offscreen demo exporter ([`export`]). It drives the same
//! [`SimPlugin`] as the tests and never steps physics itself.
//!
//! Environment variables read by [`run_gui`] (the binary's argument parsing belongs to `main.rs`):
//!
//! - `CONTACT_SANDBOX_SCENE=assets/scenes/x.ron`: the scene to open (default: wall throw).
//! - `CONTACT_SANDBOX_SCREENSHOT=out.png`: screenshot mode. The app runs one fixed step per frame (deterministic),
//!   scripts an action (wall throw: the seed's 5 m/s throw; ball pit: a dropped ball; rod drop: a dropped rod;
//!   gauntlet: a fast ball), saves the window to this PNG after `CONTACT_SANDBOX_FRAMES` frames and exits 0
//!   (non-zero if the capture never arrives).
//! - `CONTACT_SANDBOX_FRAMES=N`: frames before the screenshot (default 15).
//! - `CONTACT_SANDBOX_REPLAY=demo.ron`: open this demo in the replay viewer at start.
//! - `CONTACT_SANDBOX_FPS_LOG=SECONDS`: print the frame rate to stderr every SECONDS; `CONTACT_SANDBOX_HIDE_UI=1`:
//!   start with the UI hidden ([`frame_log`], used by `tools/window-fps`).
//!
//! Outside those two modes, which count frames, a window in which nothing moves ([`idle`]: paused, or at the
//! run's end) draws five frames a second, and wakes at once for input.

pub mod badge;
pub mod ball_mesh;
pub mod canvas;
pub mod decimate;
pub mod demo_panel;
pub mod export;
pub mod fonts;
pub mod frame_log;
pub mod idle;
pub mod input;
pub mod inspector;
pub mod labels;
pub mod landscape;
pub mod lane_bands;
pub mod panels;
pub mod render;
pub mod screenshot;

use std::path::{Path, PathBuf};

use anyhow::Context;
use bevy::prelude::*;
use bevy::window::WindowResolution;
use bevy_egui::EguiPlugin;

use crate::physics::world::ContactMethod;
use crate::sim::{
    ActiveScene, BUILT_IN_SCENES, DEFAULT_SCENE, Lane, SceneCatalogue, SimLog, SimPlugin, Stepping,
};

/// Colour of the first penalty lane (sRGB 8-bit; `.ci/gui-check` looks for it); later ones take its shades.
pub const PENALTY_RGB: [u8; 3] = [235, 64, 52];
/// Colour of the first IPC lane (sRGB 8-bit; `.ci/gui-check` looks for it); later ones take its shades.
pub const IPC_RGB: [u8; 3] = [46, 204, 64];
/// Background colour.
pub const BACKGROUND_RGB: [u8; 3] = [24, 26, 32];
/// Wall colour.
pub const WALL_RGB: [u8; 3] = [150, 155, 170];

/// The colour of a method's balls.
pub fn method_color(method: ContactMethod) -> Color {
    let [r, g, b] = match method {
        ContactMethod::Penalty => PENALTY_RGB,
        ContactMethod::Ipc => IPC_RGB,
    };
    Color::srgb_u8(r, g, b)
}

/// A lane's colour on the canvas (its balls, rods, markers and title), as in its panel and plots: its method's
/// colour in the shade of its rank among that method's lanes in lane order ([`panels::lane_rgb`]), so that two
/// IPC lanes can be told apart. The first lane of a method has the method's colour. Lanes' indices are distinct
/// (0 to n − 1, as the scene lists them), and the panels rank them in the same order.
pub fn lane_color<'a>(lane: &Lane, lanes: impl IntoIterator<Item = &'a Lane>) -> Color {
    let method = lane.world.settings.method;
    let rank = lanes
        .into_iter()
        .filter(|l| l.index < lane.index && l.world.settings.method == method)
        .count();
    let [r, g, b] = panels::lane_rgb(method, rank);
    Color::srgb_u8(r, g, b)
}

/// What the UI shows and how the user is interacting; not simulation state.
#[derive(Resource, Debug, Clone)]
pub struct UiState {
    pub show_ui: bool,
    pub show_inspector: bool,
    pub show_landscape: bool,
    pub show_plots: bool,
    /// The wall-throw sliders.
    pub throw_v0: f64,
    pub throw_h: f64,
    pub throw_log10_k: f64,
    pub throw_dhat_mm: f64,
    /// The lanes' `(h, penalty k, IPC d̂)` the throw sliders last followed (an inspector edit moves them too).
    pub throw_followed: Option<(f64, Option<f64>, Option<f64>)>,
    /// The scene's throw speed the v0 slider last followed (a scene picked again, or a throw, moves it).
    pub throw_v0_followed: Option<f64>,
    /// Radius and mass of balls spawned by the mouse and by rain.
    pub spawn_radius: f64,
    pub spawn_mass: f64,
    /// Energy landscape: the predicted position x̃ along the throw line [m].
    pub landscape_x_tilde: f64,
    /// The wall's faces (front, back) `landscape_x_tilde` was set for: another wall (another scene) starts from
    /// its own x̃, 33 mm in front of its face.
    pub landscape_wall: Option<(f64, f64)>,
    /// The time-scale slider (virtual time speed).
    pub time_scale: f64,
    /// The fixed-rate field [Hz].
    pub fixed_rate_hz: f64,
    /// The body the user clicked.
    pub selected: Option<Entity>,
    /// Canvas (the window minus the panels) in logical pixels: (min, max), top-left origin.
    pub canvas: Option<(Vec2, Vec2)>,
    /// egui's windows and pop-ups as drawn last frame (the World Inspector, an open menu), in the same pixels:
    /// a press over one of them is theirs, even where they lie over the canvas.
    pub floating: Vec<(Vec2, Vec2)>,
    /// State of a simple LCG for rain positions (deterministic, no extra dependency).
    pub rain_seed: u64,
    /// Steps taken over the last second of real time, for the "× real time" readout.
    pub step_rate: StepRate,
    /// Frames drawn per real second, measured the same way.
    pub frame_rate: StepRate,
}

/// How fast the lanes step in real time: `(real seconds, steps taken)` samples over the last second.
///
/// When a step costs more than its fixed timestep (a 2 000-ball pile landing), the simulation runs in slow
/// motion; the controls say by how much instead of leaving the user to guess.
#[derive(Debug, Clone, Default)]
pub struct StepRate {
    samples: std::collections::VecDeque<(f64, u64)>,
}

impl StepRate {
    /// The window the rate is measured over [s].
    const WINDOW: f64 = 1.0;

    /// Adds a sample; a restart (fewer steps than before) or a clock going back starts over.
    pub fn record(&mut self, now: f64, steps: u64) {
        if self
            .samples
            .back()
            .is_some_and(|&(t, n)| steps < n || now < t)
        {
            self.samples.clear();
        }
        self.samples.push_back((now, steps));
        // Keep one sample at or beyond the window, so slow frames (longer than the window) still give a rate.
        while self
            .samples
            .get(1)
            .is_some_and(|&(t, _)| now - t >= Self::WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// Adds a sample of the run at `now` with `steps` taken, forgetting the earlier ones while no step is due
    /// (`paused`, or `ticks_left` 0 at the run's end), so that the rate is measured afresh once steps run again.
    /// Idle time kept in the window read as "0 steps/s" for a second after Resume, then as a rate diluted by the
    /// pause, and a throw that ran a finished scene again read "11 steps/s (0.11× real time)".
    pub fn record_run(&mut self, now: f64, steps: u64, paused: bool, ticks_left: Option<u64>) {
        if paused || ticks_left == Some(0) {
            self.samples.clear();
        }
        self.record(now, steps);
    }

    /// Steps per real second since the newest sample at least a window old (or the oldest, once they span half a
    /// window).
    pub fn steps_per_second(&self) -> Option<f64> {
        let (&(t0, n0), &(t1, n1)) = (self.samples.front()?, self.samples.back()?);
        let span = t1 - t0;
        (span >= 0.5 * Self::WINDOW).then(|| (n1 - n0) as f64 / span)
    }
}

impl Default for UiState {
    fn default() -> Self {
        UiState {
            show_ui: true,
            show_inspector: false,
            show_landscape: true,
            show_plots: true,
            throw_v0: 5.0,
            throw_h: 0.01,
            throw_log10_k: 4.0,
            throw_dhat_mm: 1.0,
            throw_followed: None,
            throw_v0_followed: None,
            spawn_radius: 0.01,
            spawn_mass: 1.0,
            landscape_x_tilde: 0.47,
            landscape_wall: None,
            time_scale: 1.0,
            fixed_rate_hz: 100.0,
            selected: None,
            canvas: None,
            floating: Vec::new(),
            rain_seed: 0x2545_f491_4f6c_dd1d,
            step_rate: StepRate::default(),
            frame_rate: StepRate::default(),
        }
    }
}

/// Bevy panics, with a backtrace, where it finds no GPU adapter to draw with. From here on that panic is one
/// line that says what is missing and how to get it, any unfinished output is removed, and the exit status is 1;
/// any other panic is reported as before. `what` names what needs the GPU ("the window", "export"). Called by the
/// binary before the window or an export starts (not by the library's functions, which tests call).
pub fn explain_a_missing_gpu(what: &'static str) {
    // Once per process: a second hook would wrap the first.
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| install_gpu_panic_hook(what));
}

fn install_gpu_panic_hook(what: &'static str) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.to_string().contains("Unable to find a GPU") {
            crate::demo::remove_unfinished_writes();
            crate::cli::stdout::errln!(
                "error: {what} found no GPU adapter to draw with (Vulkan, or OpenGL through EGL). Without a \
                 graphics card, Mesa's software drivers will do: on Debian or Ubuntu, `apt-get install \
                 mesa-vulkan-drivers libvulkan1`"
            );
            std::process::exit(1);
        }
        default(info);
    }));
}

/// Opens the sandbox window on the wall-throw scene (or `CONTACT_SANDBOX_SCENE`); see the module docs for the
/// screenshot mode.
pub fn run_gui() -> anyhow::Result<()> {
    let scene_path = std::env::var_os("CONTACT_SANDBOX_SCENE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SCENE));
    // A scene file that does not load opens the default scene with the file's error on screen (it stays in the
    // scene menu, to be picked again once mended), as a bad file picked from the menu does.
    let mut startup_log = SimLog::default();
    let mut active = match ActiveScene::load(&scene_path) {
        Ok(active) => active,
        Err(e) if scene_path != Path::new(DEFAULT_SCENE) => {
            startup_log.error(format!("{e}; opened {DEFAULT_SCENE} instead"));
            ActiveScene::load(Path::new(DEFAULT_SCENE)).map_err(anyhow::Error::new)?
        }
        Err(e) => return Err(anyhow::Error::new(e)),
    };
    if let Some(note) = crate::demo::mixed_h_note(&active.current, None) {
        startup_log.info(format!("{}: {note}", active.path.display()));
    }
    let screenshot =
        screenshot::ScreenshotPlan::from_env().context("reading the screenshot variables")?;
    let frames = frame_log::FramePlan::from_env().context("reading the frame-rate variables")?;

    let mut catalogue = SceneCatalogue {
        paths: BUILT_IN_SCENES.iter().map(PathBuf::from).collect(),
    };
    active.path = catalogue.add(&active.path);
    catalogue.add(&scene_path);

    // Ctrl-C, SIGTERM and SIGHUP end the app through its exit systems, which save a recording in progress. Bevy's
    // own handler (ctrlc's `try_set_handler`) installs nothing at all where SIGINT is ignored, as in a script's
    // background job, so a SIGTERM there killed the window and its recording with it; this one keeps an ignored
    // signal ignored and handles the others (Bevy's plugin then only watches the flag this sets).
    crate::cli::on_stop_signal(bevy::app::TerminalCtrlCHandlerPlugin::gracefully_exit);
    let mut app = App::new();
    app.add_plugins(
        DefaultPlugins
            .set(WindowPlugin {
                primary_window: Some(Window {
                    title: "contact-sandbox: penalty vs IPC".into(),
                    resolution: WindowResolution::new(1600, 900),
                    ..default()
                }),
                ..default()
            })
            .set(AssetPlugin {
                file_path: ".".into(),
                ..default()
            }),
    )
    .insert_resource(ClearColor(Color::srgb_u8(
        BACKGROUND_RGB[0],
        BACKGROUND_RGB[1],
        BACKGROUND_RGB[2],
    )))
    .insert_resource(active)
    .insert_resource(startup_log)
    .insert_resource(catalogue)
    .insert_resource(UiState {
        show_ui: !frames.hide_ui,
        ..default()
    })
    // A slow step (a landing pile) slows the simulation, not the window.
    .insert_resource(Stepping::Background)
    .add_plugins(SimPlugin)
    .add_plugins(EguiPlugin::default())
    .register_type::<GizmoConfigStore>()
    .add_plugins(inspector::InspectorPlugin)
    .add_plugins((
        render::RenderPlugin,
        canvas::CanvasPlugin,
        fonts::FontsPlugin,
        labels::LabelsPlugin,
        badge::BadgePlugin,
        input::InputPlugin,
        panels::PanelsPlugin,
        demo_panel::DemoPanelPlugin,
        frame_log::FrameLogPlugin {
            log_every: frames.log_every,
        },
    ));
    app.add_systems(Update, fit_window_to_monitor);
    if let Some(demo) = std::env::var_os("CONTACT_SANDBOX_REPLAY") {
        let demo = PathBuf::from(demo);
        app.add_systems(
            Startup,
            move |mut replay: MessageWriter<crate::sim::StartReplay>| {
                replay.write(crate::sim::StartReplay(demo.clone()));
            },
        );
    }
    if frames.log_every.is_none() && screenshot.is_none() {
        app.add_plugins(idle::IdlePlugin);
    }
    if let Some(plan) = screenshot {
        app.add_plugins(screenshot::ScreenshotPlugin { plan });
    }
    gui_exit(app.run())
}

/// The window's size [logical px] on a screen of `screen` logical px: `None` where the size `wanted` fits, else
/// shrunk to 95 % of the screen's width and 90 % of its height (room for a desktop's panels) where it does not
/// fit, but never below 640 × 360.
fn fitted_window(wanted: Vec2, screen: Vec2) -> Option<Vec2> {
    (wanted.x > screen.x || wanted.y > screen.y).then(|| {
        Vec2::new(wanted.x.min(0.95 * screen.x), wanted.y.min(0.9 * screen.y))
            .max(Vec2::new(640.0, 360.0))
    })
}

/// Once the primary monitor is known, a window that opened larger than it (1 600 × 900 on a 1 366 × 768 laptop)
/// is shrunk to fit and centred, so that the right panel and the plots are not off the screen; a window that fits
/// keeps its size, and the user's later resizing is never undone.
fn fit_window_to_monitor(
    mut done: Local<bool>,
    monitors: Query<&bevy::window::Monitor, With<bevy::window::PrimaryMonitor>>,
    mut windows: Query<&mut Window, With<bevy::window::PrimaryWindow>>,
) {
    if *done {
        return;
    }
    let (Ok(monitor), Ok(mut window)) = (monitors.single(), windows.single_mut()) else {
        return;
    };
    *done = true;
    let scale = monitor.scale_factor.max(1e-3) as f32;
    let screen = Vec2::new(
        monitor.physical_width as f32,
        monitor.physical_height as f32,
    ) / scale;
    let wanted = Vec2::new(window.resolution.width(), window.resolution.height());
    if let Some(fitted) = fitted_window(wanted, screen) {
        window.resolution.set(fitted.x, fitted.y);
        window.position =
            bevy::window::WindowPosition::Centered(bevy::window::MonitorSelection::Primary);
    }
}

/// The window was closed by Ctrl-C in the terminal that started it: Bevy's handler exits the app with status 130
/// (the shell's code for an interrupted command), after the last frame saved a recording in progress. The user
/// asked for it, so `main` exits with that status and no error line.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by Ctrl-C")]
pub struct Interrupted;

/// What the window's exit means to `main`: a close is a success, Ctrl-C is [`Interrupted`], any other code an
/// error that names it.
fn gui_exit(exit: AppExit) -> anyhow::Result<()> {
    match exit {
        AppExit::Success => Ok(()),
        AppExit::Error(code) if code.get() == 130 => Err(Interrupted.into()),
        AppExit::Error(code) => anyhow::bail!("the sandbox exited with code {code}"),
    }
}

#[cfg(test)]
mod exit_tests {
    use super::*;

    /// A window that fits its screen keeps its size, a 1 600 × 900 one on a 1 366 × 768 laptop is shrunk within
    /// it, and no screen makes it smaller than 640 × 360.
    #[test]
    fn a_window_larger_than_its_screen_is_shrunk_to_fit() {
        let wanted = Vec2::new(1600.0, 900.0);
        assert_eq!(fitted_window(wanted, Vec2::new(1600.0, 900.0)), None);
        assert_eq!(fitted_window(wanted, Vec2::new(2560.0, 1440.0)), None);
        let laptop = fitted_window(wanted, Vec2::new(1366.0, 768.0)).expect("shrunk");
        assert!(laptop.x <= 1366.0 && laptop.y <= 768.0, "{laptop}");
        assert!(
            (laptop - Vec2::new(1297.7, 691.2)).length() < 0.1,
            "{laptop}"
        );
        // Only the side that does not fit shrinks.
        assert_eq!(
            fitted_window(wanted, Vec2::new(1024.0, 1280.0)),
            Some(Vec2::new(972.8, 900.0))
        );
        assert_eq!(
            fitted_window(wanted, Vec2::new(320.0, 240.0)),
            Some(Vec2::new(640.0, 360.0))
        );
    }

    /// Ctrl-C (Bevy's handler exits with 130) is told apart from a failure, which keeps its code in the message.
    #[test]
    fn ctrl_c_is_an_interruption_and_other_codes_are_errors() {
        assert!(gui_exit(AppExit::Success).is_ok());
        let interrupted = gui_exit(AppExit::from_code(130)).expect_err("an interruption");
        assert!(interrupted.downcast_ref::<Interrupted>().is_some());
        let failed = gui_exit(AppExit::from_code(3)).expect_err("a failure");
        assert!(failed.downcast_ref::<Interrupted>().is_none());
        assert_eq!(failed.to_string(), "the sandbox exited with code 3");
    }
}

/// egui input events for the tests that drive the panels as a user does.
#[cfg(test)]
pub(crate) mod test_events {
    use bevy_egui::egui;

    /// `key` pressed, without modifiers.
    pub fn key(key: egui::Key) -> egui::Event {
        egui::Event::Key {
            key,
            physical_key: None,
            pressed: true,
            repeat: false,
            modifiers: egui::Modifiers::NONE,
        }
    }

    /// The primary button pressed (or released) at `pos`.
    pub fn button(pos: egui::Pos2, pressed: bool) -> egui::Event {
        egui::Event::PointerButton {
            pos,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: egui::Modifiers::NONE,
        }
    }

    /// One frame's input: `events` on a screen of `size` points.
    pub fn input(events: Vec<egui::Event>, size: egui::Vec2) -> egui::RawInput {
        egui::RawInput {
            events,
            screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, size)),
            ..Default::default()
        }
    }

    /// Where a slider laid out in `rect` shows its number (right of its rail), to click into it.
    pub fn slider_value_point(ui: &egui::Ui, rect: egui::Rect) -> egui::Pos2 {
        let rail = ui.spacing().slider_width + ui.spacing().item_spacing.x;
        egui::pos2(rect.left() + rail + 8.0, rect.center().y)
    }

    /// Clicks the widget `add` draws (a number field or slider, holding the value), clears its text, types `typed`
    /// one key per frame, then presses Enter: the value after each key and after Enter, starting from `start`.
    /// `add` returns the point to click.
    pub fn type_into_widget(
        start: f64,
        add: impl Fn(&mut egui::Ui, &mut f64) -> egui::Pos2,
        typed: &str,
    ) -> (Vec<f64>, f64) {
        let ctx = egui::Context::default();
        let mut value = start;
        let at = std::cell::Cell::new(egui::Pos2::ZERO);
        let frame = |events: Vec<egui::Event>, value: &mut f64| {
            let _ = ctx.run_ui(input(events, egui::vec2(400.0, 300.0)), |ui| {
                at.set(add(ui, value));
            });
        };
        frame(vec![], &mut value);
        let button = |pressed| button(at.get(), pressed);
        frame(
            vec![egui::Event::PointerMoved(at.get()), button(true)],
            &mut value,
        );
        frame(vec![button(false)], &mut value);
        frame(vec![], &mut value);
        // The field's text out of the way, so what is typed is the whole text.
        frame(vec![key(egui::Key::Backspace)], &mut value);
        let mut after_each_key = Vec::new();
        for c in typed.chars() {
            frame(vec![egui::Event::Text(c.to_string())], &mut value);
            after_each_key.push(value);
        }
        frame(vec![key(egui::Key::Enter)], &mut value);
        frame(vec![], &mut value);
        (after_each_key, value)
    }
}

#[cfg(test)]
mod tests {
    use super::StepRate;

    #[test]
    fn the_step_rate_is_steps_over_the_last_second_of_real_time() {
        let mut rate = StepRate::default();
        rate.record(10.0, 100);
        assert_eq!(rate.steps_per_second(), None, "one sample spans nothing");
        rate.record(10.3, 109);
        assert_eq!(rate.steps_per_second(), None, "0.3 s is too short to say");
        // 30 steps per second, sampled every 0.1 s for 2 s, after 9 steps in the first 0.3 s: only the last
        // second counts.
        for k in 4u32..=20 {
            rate.record(10.0 + 0.1 * f64::from(k), 100 + 3 * u64::from(k));
        }
        let measured = rate.steps_per_second().expect("a full window");
        assert!((measured - 30.0).abs() < 1e-9, "{measured}");
        // Frames slower than the window (1.5 s each, 6 steps each) still give a rate.
        rate.record(13.5, 166);
        rate.record(15.0, 172);
        let slow = rate.steps_per_second().expect("two slow frames");
        assert!((slow - 4.0).abs() < 1e-9, "{slow}");
        // A restart (the counter goes back to 0) starts a new window.
        rate.record(16.1, 0);
        assert_eq!(rate.steps_per_second(), None);
        rate.record(16.7, 12);
        let restarted = rate.steps_per_second().expect("0.6 s window");
        assert!((restarted - 20.0).abs() < 1e-9, "{restarted}");
        // Paused for 3 s, or at the run's end for 3 s, then running at 20 steps per second: no rate until half a
        // window has passed, then the rate since, not one diluted by the idle time.
        for (paused, ticks_left) in [(true, Some(50)), (false, Some(0)), (true, None)] {
            for k in 0..30 {
                rate.record_run(17.0 + 0.1 * f64::from(k), 30, paused, ticks_left);
            }
            for k in 1u32..=4 {
                rate.record_run(
                    19.9 + 0.1 * f64::from(k),
                    30 + 2 * u64::from(k),
                    false,
                    Some(9),
                );
                assert_eq!(rate.steps_per_second(), None, "{k}");
            }
            rate.record_run(20.4, 40, false, Some(9));
            let resumed = rate.steps_per_second().expect("half a window");
            assert!(
                (resumed - 20.0).abs() < 1e-9,
                "{paused} {ticks_left:?}: {resumed}"
            );
            // Running on, the window is not cleared.
            rate.record_run(20.6, 44, false, None);
            assert!(rate.steps_per_second().is_some());
            rate.record(16.0, 0);
        }
    }
}
