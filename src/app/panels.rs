//! egui panels. They read the lanes and their diagnostics and write messages or settings; they compute no
//! physics themselves (the energy landscape asks the core, see [`super::landscape`]).
//!
//! Left: scene menu, run controls, the wall-throw panel (sliders, Throw, per-lane status, magnified gap inset),
//! spawning, the selected body. Right: per-lane settings and pre-flight numbers, the energy landscape.
//! Bottom: live plots per lane. The lane labels are scene text ([`super::labels`]).

use bevy::ecs::system::SystemParam;
use bevy::prelude::*;
use bevy_egui::{EguiContexts, EguiPrimaryContextPass, egui};
use egui_plot::{Legend, Line, Plot, PlotPoints, Points, VLine};

use super::decimate::min_max_per_column;
use super::demo_panel::{DemoParams, ReplayEdits, demo_section, replay_viewer};
use super::fonts::displayable;
use super::landscape::{LandscapeInput, landscape};
use super::render::CameraView;
use super::{IPC_RGB, PENALTY_RGB, UiState};
use crate::physics::DVec2;
use crate::physics::geometry::ball_wall_gap;
use crate::physics::newton::{NewtonSettings, StopReason};
use crate::physics::world::{ContactMethod, LaneWorld};
use crate::scene::Scene;
use crate::sim::{
    ActiveScene, Ball, BodyState, CycleScene, ErrorTopic, Lane, LaneDiagnostics, LaneMember,
    LaneSetting, LaneSettings, LoadScene, RestartScene, Rod, SceneCatalogue, SimControl, SimLog,
    SpawnBall, Stepping, ThrowBall,
};

/// Bodies as the selected-body panel lists them.
type BodyRows<'w, 's> = Query<
    'w,
    's,
    (
        &'static Name,
        &'static LaneMember,
        &'static BodyState,
        Option<&'static Ball>,
        Option<&'static Rod>,
    ),
>;

pub struct PanelsPlugin;

impl Plugin for PanelsPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<RodImpactLog>()
            .add_systems(Update, record_rod_impacts)
            .add_systems(EguiPrimaryContextPass, sandbox_ui);
    }
}

/// The latest rod impacts as before/after lines, newest first.
#[derive(Resource, Default)]
pub struct RodImpactLog(pub Vec<String>);

/// Adds each lane's new rod impacts to the log; a restart or another scene (new lane entities) starts it over.
/// A lane changes for other reasons than a step (a spawn, an edit), so each lane's step is listed once: `listed`
/// holds the step whose impacts were last listed, by lane.
fn record_rod_impacts(
    lanes: Query<(Entity, &Lane), Changed<Lane>>,
    new_lanes: Query<(), Added<Lane>>,
    mut log: ResMut<RodImpactLog>,
    mut listed: Local<Vec<(Entity, u64)>>,
) {
    if !new_lanes.is_empty() {
        log.0.clear();
        listed.clear();
    }
    for (entity, lane) in &lanes {
        let Some(last) = &lane.world.last else {
            continue;
        };
        match listed.iter_mut().find(|(e, _)| *e == entity) {
            Some((_, step)) if *step == last.step => continue,
            Some((_, step)) => *step = last.step,
            None => listed.push((entity, last.step)),
        }
        for (r, report) in last.rods.iter().enumerate() {
            for impact in &report.impacts {
                log.0
                    .insert(0, rod_impact_line(last.step, r, impact, &report.impacts));
            }
        }
    }
    log.0.truncate(8);
}

/// One line of the rod impact log. ΔK belongs to the whole resolution an impact was part of: when both ends hit
/// at once, each end's line says so, since the two lines' ΔK are one loss, not two to add.
fn rod_impact_line(
    step: u64,
    rod: usize,
    impact: &crate::physics::rod_flight::RodImpact,
    impacts: &[crate::physics::rod_flight::RodImpact],
) -> String {
    let shared = impacts
        .iter()
        .filter(|other| other.time == impact.time)
        .count()
        > 1;
    format!(
        "step {step} rod {rod} {}: c⁻ {:+.3} → c⁺ {:+.3} m/s, j = ({:.3}, {:.3}) N·s, ΔK {:.4} J{}",
        impact.end_words(),
        impact.normal_velocity_before,
        impact.normal_velocity_after,
        impact.impulse.x,
        impact.impulse.y,
        impact.kinetic_energy_change,
        if shared { " (both ends together)" } else { "" }
    )
}

/// The colour of a method in egui.
pub fn method_color32(method: ContactMethod) -> egui::Color32 {
    let [r, g, b] = match method {
        ContactMethod::Penalty => PENALTY_RGB,
        ContactMethod::Ipc => IPC_RGB,
    };
    egui::Color32::from_rgb(r, g, b)
}

/// Shades of each method's hue, one per lane of that method in lane order, so lanes of one method can be told
/// apart in the plots; a method's first lane keeps the method's colour (its balls' colour on the canvas).
const PENALTY_SHADES: [[u8; 3]; 4] = [PENALTY_RGB, [255, 165, 40], [225, 80, 175], [255, 195, 175]];
const IPC_SHADES: [[u8; 3]; 4] = [IPC_RGB, [180, 235, 50], [40, 185, 210], [170, 255, 200]];

/// The colour of the `rank`-th lane (from 0) that uses `method`.
pub fn lane_rgb(method: ContactMethod, rank: usize) -> [u8; 3] {
    let shades = match method {
        ContactMethod::Penalty => &PENALTY_SHADES,
        ContactMethod::Ipc => &IPC_SHADES,
    };
    shades[rank % shades.len()]
}

/// Each lane's colour, the same in its settings, its status line, the gap inset and the plots.
struct LaneColors(Vec<(Entity, egui::Color32, String)>);

impl LaneColors {
    /// Each of `lanes` in its colour on the canvas ([`crate::app::lane_color`]): one ranking of a method's
    /// lanes for the panels, the plots and the canvas; and its title there ([`crate::sim::lane_title`], what
    /// an edit changed from `scene`).
    fn new<'a>(
        lanes: impl IntoIterator<Item = (Entity, &'a Lane)>,
        scene: Option<&Scene>,
    ) -> LaneColors {
        let lanes: Vec<(Entity, &Lane)> = lanes.into_iter().collect();
        LaneColors(
            lanes
                .iter()
                .map(|&(entity, lane)| {
                    let color = crate::app::lane_color(lane, lanes.iter().map(|&(_, l)| l));
                    let [r, g, b, _] = color.to_srgba().to_u8_array();
                    let was = scene
                        .and_then(|scene| scene.lanes.get(lane.index))
                        .map(|spec| &spec.contact);
                    let title = displayable(&crate::sim::lane_title(&lane.world, was)).into_owned();
                    (entity, egui::Color32::from_rgb(r, g, b), title)
                })
                .collect(),
        )
    }

    fn of(&self, lane: Entity) -> egui::Color32 {
        self.0
            .iter()
            .find(|(e, _, _)| *e == lane)
            .map_or(egui::Color32::GRAY, |(_, color, _)| *color)
    }

    /// The lane's name, with what an edit changed.
    fn title(&self, lane: Entity) -> &str {
        self.0
            .iter()
            .find(|(e, _, _)| *e == lane)
            .map_or("", |(_, _, title)| title.as_str())
    }
}

#[derive(SystemParam)]
struct Actions<'w> {
    throw: MessageWriter<'w, ThrowBall>,
    load: MessageWriter<'w, LoadScene>,
    cycle: MessageWriter<'w, CycleScene>,
    restart: MessageWriter<'w, RestartScene>,
    spawn: MessageWriter<'w, SpawnBall>,
}

#[derive(SystemParam)]
struct Clocks<'w> {
    virtual_time: ResMut<'w, Time<Virtual>>,
    fixed: ResMut<'w, Time<Fixed>>,
    real: Res<'w, Time<Real>>,
    frames: Option<Res<'w, bevy::diagnostic::FrameCount>>,
    stepping: Option<ResMut<'w, Stepping>>,
    idle: Option<Res<'w, super::idle::Idle>>,
}

#[allow(clippy::too_many_arguments)]
fn sandbox_ui(
    mut contexts: EguiContexts,
    active: Option<Res<ActiveScene>>,
    catalogue: Res<SceneCatalogue>,
    mut control: ResMut<SimControl>,
    mut log: ResMut<SimLog>,
    mut ui_state: ResMut<UiState>,
    mut view: ResMut<CameraView>,
    mut lanes: Query<(Entity, &Lane, &mut LaneSettings, &LaneDiagnostics)>,
    bodies: BodyRows,
    rod_log: Res<RodImpactLog>,
    mut actions: Actions,
    mut clocks: Clocks,
    mut demo: DemoParams,
    mut menu: Local<SceneMenuNames>,
) -> Result {
    if !ui_state.show_ui {
        ui_state.canvas = None;
        return Ok(());
    }
    menu.follow(&catalogue, std::time::Instant::now());
    let ctx = contexts.ctx_mut()?.clone();
    let mut viewport_ui = egui::Ui::new(
        ctx.clone(),
        "viewport".into(),
        egui::UiBuilder::new()
            .layer_id(egui::LayerId::background())
            .max_rect(ctx.viewport_rect()),
    );
    let limits = PanelLimits::for_window(ctx.viewport_rect().size());
    // While a demo replays, the lanes are the demo's: its scene is the one to describe, not the one loaded.
    let shown = demo
        .replay
        .as_deref()
        .map(|r| &r.player.session.scene)
        .or(active.as_deref().map(|a| &a.current));
    let replay_ticks = demo
        .replay
        .as_deref()
        .map(|r| (r.player.session.tick, r.player.demo.ticks));
    let mut sorted: Vec<Entity> = lanes.iter().map(|l| l.0).collect();
    sorted.sort_by_key(|e| lanes.get(*e).map(|l| l.1.index).unwrap_or(usize::MAX));
    let colors = LaneColors::new(
        lanes.iter().map(|l| (l.0, l.1)),
        super::labels::named_scene(demo.replay.as_deref(), active.as_deref()),
    );
    // What a tick advances the run by: the smallest h of the lanes that still step (once a lane of 1 ms has
    // faulted, a tick is its neighbour's 10 ms).
    let smallest_h = crate::demo::tick_h(lanes.iter().map(|l| &l.1.world), control.run_end);
    // The lanes' clocks run alone to the end: a tick may be a coarse lane's alone (its last step after a finer
    // lane's end), which the most steps a lane has left would miss.
    let ticks_left = control.run_end.map(|end| {
        let clocks: Vec<_> = lanes
            .iter()
            .map(|l| crate::demo::LaneClock::of(&l.1.world))
            .collect();
        crate::demo::ticks_until(&clocks, end, TICKS_COUNTED)
    });

    let mut replay_edits = ReplayEdits::default();
    LimitedPanel::Sandbox
        .panel(&ctx, limits)
        .show_inside(&mut viewport_ui, |ui| {
            // Both ways: in a narrow window a wide row (the lane grid, the landscape's labels) scrolls into view
            // instead of being cut off; egui still fits what it can to the width first.
            egui::ScrollArea::both().show(ui, |ui| {
                fit_sliders(ui);
                scene_menu(
                    ui,
                    active.as_deref(),
                    replay_ticks.and(shown),
                    &menu,
                    &mut actions,
                    &mut view,
                );
                ui.separator();
                if let Some(replay) = demo.replay.as_deref() {
                    replay_edits =
                        replay_viewer(ui, replay, &mut demo.controls);
                    if let Some(refusal) = replay_edits.refused.take() {
                        log.error_about(ErrorTopic::RunControl, refusal);
                    }
                    ui.separator();
                }
                run_controls(
                    ui,
                    RunInfo {
                        smallest_h,
                        ticks_left,
                        replay_ticks,
                    },
                    &mut control,
                    &mut ui_state,
                    &mut clocks,
                    &mut actions,
                    &mut view,
                    &mut log,
                );
                // The latest event (a save and its name, a throw, a scene loaded, a hint): quiet, under the run.
                // Always one line at least, so that the controls below keep their places when one comes.
                ui.label(egui::RichText::new(log.info.as_deref().unwrap_or(" ")).small().weak());
                // The throw and spawn controls would be refused while a demo replays.
                if demo.replay.is_none() {
                    ui.separator();
                    demo_section(ui, &mut demo.controls, &control, active.as_deref(), &mut log);
                    ui.separator();
                    if let Some(scene) = shown.filter(|s| s.name == "Wall throw") {
                        follow_scene_speed(&mut ui_state, scene);
                        wall_throw_panel(
                            ui,
                            &mut ui_state,
                            &control,
                            &lanes,
                            &sorted,
                            &colors,
                            (&mut actions, &mut log),
                        );
                        ui.separator();
                    }
                    spawn_panel(ui, &mut ui_state, &lanes, &mut actions, &mut log);
                }
                if !rod_log.0.is_empty() {
                    ui.separator();
                    ui.strong("Rod impacts (before → after)");
                    ui.small(format!(
                        "On the canvas: magenta arrows are impulses ({} px per N·s, at most {} px) and magenta \
                         rings the touching ends; yellow arrows are velocities (0.1 s of travel).",
                        super::render::IMPULSE_PX_PER_NS,
                        super::render::IMPULSE_MAX_PX
                    ));
                    for line in &rod_log.0 {
                        ui.small(line);
                    }
                }
                ui.separator();
                let section = ui
                    .scope(|ui| selected_body_panel(ui, &ui_state, &bodies, &lanes))
                    .response
                    .rect;
                show_a_new_selection(ui, section, ui_state.selected);
            });
        });

    LimitedPanel::Lanes
        .panel(&ctx, limits)
        .show_inside(&mut viewport_ui, |ui| {
            // Both ways: in a narrow window a wide row (the lane grid, the landscape's labels) scrolls into view
            // instead of being cut off; egui still fits what it can to the width first.
            egui::ScrollArea::both().show(ui, |ui| {
                fit_sliders(ui);
                for &entity in &sorted {
                    if let Ok((_, lane, mut settings, diagnostics)) = lanes.get_mut(entity) {
                        // The scene's own start, so the same throw reads the same in every lane after
                        // one of them has stopped it.
                        let start_speed = shown
                            .and_then(|scene| scene.lanes.get(lane.index))
                            .map_or(0.0, |spec| {
                                spec.balls
                                    .iter()
                                    .map(|b| b.velocity.length())
                                    .fold(0.0, f64::max)
                            });
                        lane_panel(
                            ui,
                            lane,
                            PanelHead {
                                color: colors.of(entity),
                                title: colors.title(entity),
                                // A replay's lanes are the demo's: an edit would be thrown away.
                                editable: demo.replay.is_none(),
                            },
                            &mut settings,
                            diagnostics,
                            start_speed,
                            &mut log,
                        );
                        ui.separator();
                    }
                }
                if ui_state.show_landscape {
                    let section = ui.scope(|ui| {
                        if shown.is_some_and(landscape_applies) {
                            landscape_panel(ui, &mut ui_state, &lanes, &sorted, &mut log);
                        } else {
                            ui.strong("Energy landscape E(x) of one step");
                            ui.small(
                                "The seed's figure of one ball thrown at a wall: it is drawn for scenes whose \
                                 first ball starts in front of its lane's first wall (Wall throw, Thin-wall \
                                 gauntlet).",
                            );
                        }
                    });
                    show_the_landscape_when_asked(ui, section.response.rect);
                }
            });
        });

    if ui_state.show_plots {
        LimitedPanel::Plots
            .panel(&ctx, limits)
            .show_inside(&mut viewport_ui, |ui| {
                plots_panel(ui, &lanes, &sorted, &colors)
            });
    }

    // In the window's logical pixels, as the cursor and `input::floating_rects` are: egui's points times its
    // zoom (Ctrl + / −).
    let canvas = viewport_ui.available_rect_before_wrap();
    let zoom = ctx.zoom_factor();
    ui_state.canvas = Some((
        Vec2::new(canvas.min.x, canvas.min.y) * zoom,
        Vec2::new(canvas.max.x, canvas.max.y) * zoom,
    ));
    error_note(&ctx, canvas, &mut log);
    if replay_edits != ReplayEdits::default()
        && let Some(replay) = demo.replay.as_deref_mut()
    {
        replay_edits.apply(replay);
    }
    Ok(())
}

/// The shown error, floating over the canvas until it is answered or dismissed, beside the panel control it
/// answers: a refusal that follows within [`TOUCH_SECONDS`] a field or button of a side panel ([`last_touch`]: the
/// field whose edit just ended, else the control last pressed) sits at that panel's edge of the canvas, level with
/// it, with a pointer towards it; any other error sits at the canvas's bottom left. It used to sit in the left panel
/// under the run controls, where its coming and going moved every control below it: the click into a field that
/// withdrew a refusal landed on the field that had moved under the pointer, and the number typed next went to d̂
/// instead of v0. Over the canvas it moves no control, and it stays beside the same control until it goes.
fn error_note(ctx: &egui::Context, canvas: egui::Rect, log: &mut SimLog) {
    let touch = last_touch(ctx);
    let anchor_id = egui::Id::new("error note's anchor");
    let Some(error) = log.error.clone() else {
        // The same text raised again later answers whatever was touched then.
        ctx.data_mut(|d| d.remove::<(String, Option<Touched>)>(anchor_id));
        return;
    };
    let anchored: Option<(String, Option<Touched>)> = ctx.data(|d| d.get_temp(anchor_id));
    let beside = match anchored {
        Some((shown, beside)) if shown == error => beside,
        _ => {
            let now = ctx.input(|i| i.time);
            let beside = touch
                .filter(|(at, time)| {
                    now - time <= TOUCH_SECONDS && !canvas.contains(at.rect.center())
                })
                .map(|(at, _)| at);
            ctx.data_mut(|d| d.insert_temp(anchor_id, (error.clone(), beside)));
            beside
        }
    };
    // Where the control is now: a panel that scrolled, or a lane above that folded, moves it.
    let beside = beside.map(|touched| {
        touched
            .widget
            .and_then(|id| ctx.read_response(id))
            .map_or(touched.rect, |response| response.rect)
    });
    // The note may stand beside the canvas's edge from the window's top to its bottom (over the plots, for a
    // field below the canvas), level with the control.
    let screen = ctx.content_rect();
    let column = egui::Rect::from_x_y_ranges(canvas.x_range(), screen.y_range());
    let side = beside.and_then(|at| {
        let low = column.top() + 24.0;
        let y = at.center().y.clamp(low, (column.bottom() - 24.0).max(low));
        if at.center().x < canvas.left() {
            Some((
                egui::Align2::LEFT_CENTER,
                egui::pos2(canvas.left() + 14.0, y),
            ))
        } else if at.center().x > canvas.right() {
            Some((
                egui::Align2::RIGHT_CENTER,
                egui::pos2(canvas.right() - 14.0, y),
            ))
        } else {
            None
        }
    });
    let (pivot, at, within, widest) = match side {
        // Narrow beside a panel, so it covers less of the lanes and their titles.
        Some((pivot, at)) => (pivot, at, column, 320.0),
        None => (
            egui::Align2::LEFT_BOTTOM,
            canvas.left_bottom() + egui::vec2(8.0, -8.0),
            canvas,
            640.0,
        ),
    };
    let area_id = egui::Id::new("error note");
    let shown = egui::Area::new(area_id)
        .order(egui::Order::Foreground)
        .pivot(pivot)
        .fixed_pos(at)
        .constrain_to(within)
        .show(ctx, |ui| {
            egui::Frame::popup(ui.style()).show(ui, |ui| {
                ui.set_max_width((canvas.width() - 40.0).clamp(160.0, widest));
                ui.colored_label(NOTE_RED, format!("⚠ {error}"));
                if ui.small_button("dismiss").clicked() {
                    log.clear_error();
                }
            });
        });
    // A pointer from the note's edge towards the control, level with the control where the note reaches it; not
    // in the unseen pass that measures a new note.
    let measured = ctx.memory(|m| m.areas().is_visible(&shown.response.layer_id));
    if let Some((pivot, _)) = side.filter(|_| measured) {
        let note = shown.response.rect;
        let y = at.y.clamp(
            note.top() + 8.0,
            (note.bottom() - 8.0).max(note.top() + 8.0),
        );
        let (edge, tip) = if pivot == egui::Align2::LEFT_CENTER {
            (note.left(), note.left() - 9.0)
        } else {
            (note.right(), note.right() + 9.0)
        };
        ctx.layer_painter(shown.response.layer_id)
            .add(egui::Shape::convex_polygon(
                vec![
                    egui::pos2(edge, y - 7.0),
                    egui::pos2(tip, y),
                    egui::pos2(edge, y + 7.0),
                ],
                NOTE_RED,
                egui::Stroke::NONE,
            ));
    }
}

/// The error note's colour.
const NOTE_RED: egui::Color32 = egui::Color32::from_rgb(255, 110, 90);

/// How long after the user last touched a control an error is taken to answer it [s].
const TOUCH_SECONDS: f64 = 2.0;

/// A control the user touched: the widget, where known, and where it was then (or the point pressed).
#[derive(Clone, Copy, Debug)]
struct Touched {
    widget: Option<egui::Id>,
    rect: egui::Rect,
}

/// The control the user last touched and when (egui's input time), updated by each call, once a frame after the
/// panels: the field whose edit ended this frame (it lost the keyboard focus, to Enter, Escape or a click
/// elsewhere: a typed value is read, and refused, then), else, on a press, the field the press focused or the
/// point pressed. A field that loses the focus to another wins over the press that moved it: the refusal is the
/// first field's. (The window keeps Tab for hiding the panels, so egui never moves the focus by Tab there.)
fn last_touch(ctx: &egui::Context) -> Option<(Touched, f64)> {
    let id = egui::Id::new("last touched control");
    let focus_id = egui::Id::new("focused last frame");
    let now = ctx.input(|i| i.time);
    let focused = ctx.memory(|m| m.focused()).and_then(|focused| {
        ctx.read_response(focused).map(|response| Touched {
            widget: Some(focused),
            rect: response.rect,
        })
    });
    let before: Option<Touched> = ctx.data(|d| d.get_temp(focus_id));
    ctx.data_mut(|d| match focused {
        Some(focused) => {
            d.insert_temp(focus_id, focused);
        }
        None => d.remove::<Touched>(focus_id),
    });
    let ended = before.filter(|b| focused.is_none_or(|f| f.widget != b.widget));
    let pressed = ctx.input(|i| {
        i.pointer
            .any_pressed()
            .then(|| i.pointer.interact_pos())
            .flatten()
    });
    let touched = ended.or(pressed.map(|p| {
        focused.unwrap_or(Touched {
            widget: None,
            rect: egui::Rect::from_center_size(p, egui::Vec2::ZERO),
        })
    }));
    if let Some(at) = touched {
        ctx.data_mut(|d| d.insert_temp(id, (at, now)));
    }
    ctx.data(|d| d.get_temp(id))
}

/// The sizes the panels may take in a window of `size` (egui points), so that the canvas keeps most of the
/// window whatever the user drags and however the window is resized: each side panel at most 30 % of the width,
/// the plots at most 40 % of the height. Without a limit, egui keeps a panel's size when the window shrinks
/// round it, and the plots could take nearly all of the middle column.
#[derive(Clone, Copy, Debug, PartialEq)]
struct PanelLimits {
    side: egui::Rangef,
    bottom: egui::Rangef,
}

impl PanelLimits {
    fn for_window(size: egui::Vec2) -> PanelLimits {
        let side_max = (0.3 * size.x).max(1.0);
        let bottom_max = (0.4 * size.y).max(1.0);
        PanelLimits {
            // The side panels' text needs about 200 points, the plots 170 under their legend; a window too small
            // for both gets the limits' maxima.
            side: egui::Rangef::new(200.0f32.min(side_max), side_max),
            bottom: egui::Rangef::new(170.0f32.min(bottom_max), bottom_max),
        }
    }
}

/// The panels [`PanelLimits`] limits.
#[derive(Clone, Copy, Debug)]
enum LimitedPanel {
    /// Left: scene menu, run controls, throw and spawn.
    Sandbox,
    /// Right: per-lane settings, the energy landscape.
    Lanes,
    /// Bottom of the middle column: the plots.
    Plots,
}

impl LimitedPanel {
    /// The panel, resizable within `limits` and shown at the size its user chose as far as they allow (see
    /// [`show_chosen_size`]).
    fn panel(self, ctx: &egui::Context, limits: PanelLimits) -> egui::Panel {
        let (panel, name, default_size, size_range): (fn(egui::Id) -> egui::Panel, _, _, _) =
            match self {
                LimitedPanel::Sandbox => (egui::Panel::left, "sandbox", 330.0, limits.side),
                LimitedPanel::Lanes => (egui::Panel::right, "lanes", 400.0, limits.side),
                // At least tall enough to read the curves under their legend (sized to its content the panel
                // left the plots 45 px tall).
                LimitedPanel::Plots => (egui::Panel::bottom, "plots", 200.0, limits.bottom),
            };
        let id = egui::Id::new(name);
        show_chosen_size(ctx, id, default_size, !matches!(self, LimitedPanel::Plots));
        panel(id)
            .frame(unfilled_panel(ctx))
            .resizable(true)
            .default_size(default_size)
            .size_range(size_range)
    }
}

/// egui sizes a panel by its size the frame before (its `PanelState`), clamped to the panel's range, so a panel
/// that a small window clamped stayed small when the window grew again, until the user dragged it. Here a panel
/// keeps the size its user chose apart from the size it is shown at: the chosen size is `default_size` until the
/// user drags the panel's edge, then the size they dragged it to, in whatever window; each frame egui is handed
/// the chosen size to clamp to the window's limits afresh. `vertical`: a side panel, sized by its width.
fn show_chosen_size(ctx: &egui::Context, id: egui::Id, default_size: f32, vertical: bool) {
    // egui's id for the panel's edge; while the user drags it, egui sizes the panel by the pointer.
    let edge = id.with("__resize");
    // The panel's size as the drag began: a click on the edge that does not move it is no choice of size (a
    // window that clamped the panel would otherwise make the clamped size the chosen one).
    let before_drag = id.with("size before the drag");
    let size_of = |state: &egui::containers::panel::PanelState| {
        if vertical {
            state.rect.width()
        } else {
            state.rect.height()
        }
    };
    if ctx.is_being_dragged(edge) {
        ctx.data_mut(|data| {
            if data.get_temp::<f32>(before_drag).is_none()
                && let Some(state) = data.get_persisted::<egui::containers::panel::PanelState>(id)
            {
                data.insert_temp(before_drag, size_of(&state));
            }
        });
        return;
    }
    let drag_ended = ctx.drag_stopped_id() == Some(edge);
    ctx.data_mut(|data| {
        // None in the panel's first frame, which egui shows at its default size.
        let Some(state) = data.get_persisted::<egui::containers::panel::PanelState>(id) else {
            return;
        };
        let before = data.remove_temp::<f32>(before_drag);
        let chosen = data.get_temp_mut_or(id.with("chosen size"), default_size);
        if drag_ended {
            // The size the drag left the panel at, within the limits of the window it was dragged in.
            let size = size_of(&state);
            if before.is_none_or(|before| (before - size).abs() > 0.5) {
                *chosen = size;
                return;
            }
        }
        let chosen = *chosen;
        // In place, not a new entry: this runs every frame.
        let rect = &mut data.get_persisted_mut_or(id, state).rect;
        if vertical {
            rect.set_width(chosen);
        } else {
            rect.set_height(chosen);
        }
    });
}

/// A y range the energy plot shows at least: a thousandth of the energy's size around its values (and at least
/// a microjoule). A conserved energy differs from step to step only by rounding (12.5 J ± 10⁻¹⁵); fitted to that,
/// the axis would read "12.5000000000000" and the rounding would look like a trend. `None` without finite values.
fn least_visible_span(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    span_at_least(values, |mid| (5e-4 * mid.abs()).max(5e-7))
}

/// The range of the finite `values`, widened about its middle to at least `least_half(middle)` either side.
/// `None` without finite values.
fn span_at_least(
    values: impl Iterator<Item = f64>,
    least_half: impl Fn(f64) -> f64,
) -> Option<(f64, f64)> {
    let (lo, hi) =
        values
            .filter(|v| v.is_finite())
            .fold(None, |range: Option<(f64, f64)>, v| {
                let (lo, hi) = range.unwrap_or((v, v));
                Some((lo.min(v), hi.max(v)))
            })?;
    let mid = 0.5 * (lo + hi);
    let half = (0.5 * (hi - lo)).max(least_half(mid));
    Some((mid - half, mid + half))
}

/// The min-gap plot's y axis over `gaps` (on the [`signed_log_gap`] axis of `scale`): lines at round gaps, each
/// labelled as the gap it stands for, over at least a decade ([`least_gap_span`]); no axis over no gaps, whose
/// ±1 µm, ±10 µm, … labels crowded one another round an empty zero line.
fn gap_axis<'a>(chart: Plot<'a>, gaps: impl Iterator<Item = f64>, scale: f64) -> Plot<'a> {
    let chart = chart
        .y_grid_spacer(move |input| gap_grid_marks(input, scale))
        .y_axis_formatter(move |mark, _| gap_axis_text(mark.value, scale));
    match least_gap_span(gaps) {
        Some((lo, hi)) => chart.include_y(lo).include_y(hi),
        None => chart.show_axes([true, false]).show_grid([true, false]),
    }
}

/// A y range the min-gap plot shows at least, on its [`signed_log_gap`] axis: a decade around its values. A
/// settled pile's gap held still (388.8 nm for minutes in the 2 000-ball pit), and egui_plot made a range of no
/// height as tall as the time axis is wide: 35 s of history became 35 decades, whose sparse labels egui_plot faded
/// out, and the curve had no label to be read by. `None` without finite values.
fn least_gap_span(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    span_at_least(values, |_| 0.5)
}

/// The height of a plot under its title: `below_legend`, the panel's height left under the legend, less what the
/// title took (`title_top`, the column's cursor before the title; `ui`, the column after it). The plots fill the
/// panel exactly, so the panel keeps the size it was given: content taller than the panel grows it each
/// frame, and shorter content makes it shrink. (Inside the row of plots, a column's own available height is the
/// row's, not the panel's.)
fn plot_height(ui: &egui::Ui, below_legend: f32, title_top: f32) -> f32 {
    (below_legend - (ui.cursor().min.y - title_top)).max(40.0)
}

/// A panel frame without fill: the clear colour shows under the panels, and the scene is clipped to the canvas
/// (see `canvas`), so nothing else does.
fn unfilled_panel(ctx: &egui::Context) -> egui::Frame {
    egui::Frame::side_top_panel(&ctx.global_style()).fill(egui::Color32::TRANSPARENT)
}

/// The scene menu's entries: the catalogue's files with the names their scenes give themselves. A file is read
/// when it joins the catalogue and again when it changes on disk (its modification time or length, looked at
/// once a second), not each frame: the 2000-ball pit is 2000 balls to parse. So a broken file that is mended, or
/// a scene renamed in an editor, shows its new name within a second.
#[derive(Default)]
struct SceneMenuNames {
    paths: Vec<std::path::PathBuf>,
    /// What each file's scene calls itself (its stem where it does not load).
    names: Vec<String>,
    /// The menu's labels: the names, with the file added where two entries share one.
    labels: Vec<String>,
    /// The file as each name was read from it.
    stamps: Vec<Option<FileStamp>>,
    checked: Option<std::time::Instant>,
    /// Files read so far (for the tests).
    reads: usize,
}

/// A file's modification time and length: a change in either means its scene is read again. An edit that keeps
/// the length on a file system with coarse times (FAT's 2 s) can go unseen until the next change; a file that
/// cannot be looked at (gone) is read again at each look, which fails at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    modified: Option<std::time::SystemTime>,
    len: u64,
}

impl FileStamp {
    fn of(path: &std::path::Path) -> Option<FileStamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(FileStamp {
            modified: meta.modified().ok(),
            len: meta.len(),
        })
    }
}

impl SceneMenuNames {
    /// How often the files are looked at for changes.
    const RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

    /// Names the catalogue's entries: an entry new to the menu is read, and a known one is read again when its
    /// file changed since (looked at when the catalogue changes, and at most once per [`Self::RECHECK`]).
    fn follow(&mut self, catalogue: &SceneCatalogue, now: std::time::Instant) {
        let due = self
            .checked
            .is_none_or(|at| now.saturating_duration_since(at) >= Self::RECHECK);
        if self.paths == catalogue.paths && !due {
            return;
        }
        self.checked = Some(now);
        let mut names = Vec::with_capacity(catalogue.paths.len());
        let mut stamps = Vec::with_capacity(catalogue.paths.len());
        for path in &catalogue.paths {
            let stamp = FileStamp::of(path);
            let known = self.paths.iter().position(|p| p == path);
            match known.filter(|&i| self.stamps[i].is_some() && self.stamps[i] == stamp) {
                Some(i) => names.push(self.names[i].clone()),
                None => {
                    self.reads += 1;
                    names.push(SceneCatalogue::name_of(path));
                }
            }
            stamps.push(stamp);
        }
        self.labels = menu_labels(&catalogue.paths, &names);
        self.names = names;
        self.stamps = stamps;
        self.paths = catalogue.paths.clone();
    }
}

/// The menu's label for each entry: its scene's name, followed by its file's name where another entry has the
/// same scene name, so two files of one scene (a copy being edited, say) can be told apart; by the whole path
/// where the files' names are the same too.
fn menu_labels(paths: &[std::path::PathBuf], names: &[String]) -> Vec<String> {
    let shared =
        |labels: &[String], label: &String| labels.iter().filter(|l| *l == label).count() > 1;
    let by_file: Vec<String> = names
        .iter()
        .zip(paths)
        .map(|(name, path)| match path.file_name() {
            Some(file) if shared(names, name) => format!("{name} ({})", file.to_string_lossy()),
            _ => name.clone(),
        })
        .collect();
    by_file
        .iter()
        .zip(names.iter().zip(paths))
        .map(|(label, (name, path))| match shared(&by_file, label) {
            true => format!("{name} ({})", path.display()),
            false => label.clone(),
        })
        .collect()
}

fn scene_menu(
    ui: &mut egui::Ui,
    active: Option<&ActiveScene>,
    replaying: Option<&crate::scene::Scene>,
    menu: &SceneMenuNames,
    actions: &mut Actions,
    view: &mut CameraView,
) {
    ui.heading("contact-sandbox");
    let current = active.map(|a| a.path.clone());
    // While a demo replays, its scene is the one shown, and another cannot be picked until the replay stops.
    let shown_name = replaying
        .map(|scene| displayable(&scene.name).into_owned())
        .or_else(|| active.map(|a| displayable(&a.current.name).into_owned()))
        .unwrap_or_else(|| "no scene".into());
    ui.add_enabled_ui(replaying.is_none(), |ui| {
        ui.horizontal(|ui| {
            if ui.button("◀ [").on_hover_text("previous scene").clicked() {
                actions.cycle.write(CycleScene(-1));
                view.auto_fit = true;
            }
            // One width whatever the scene's name, so that "] ▶" stays put under the pointer while cycling (a
            // long name pushed it away, and the next click opened the menu); a long name is cut, whole on hover.
            let next_button = 44.0 + ui.spacing().item_spacing.x;
            egui::ComboBox::from_id_salt("scene")
                .selected_text(shown_name)
                .width((ui.available_width() - next_button).clamp(80.0, 200.0))
                .truncate()
                .show_ui(ui, |ui| {
                    // By the scenes' names, as the button shows the one picked; the file on hover.
                    for (path, name) in menu.paths.iter().zip(&menu.labels) {
                        if ui
                            .selectable_label(current.as_ref() == Some(path), displayable(name))
                            .on_hover_text(path.display().to_string())
                            .clicked()
                        {
                            actions.load.write(LoadScene(path.clone()));
                            view.auto_fit = true;
                        }
                    }
                });
            if ui.button("] ▶").on_hover_text("next scene").clicked() {
                actions.cycle.write(CycleScene(1));
                view.auto_fit = true;
            }
        });
    })
    .response
    .on_disabled_hover_text("stop the replay to pick another scene");
    match (replaying, active) {
        (Some(scene), _) => {
            ui.colored_label(
                egui::Color32::from_rgb(120, 190, 255),
                format!("▶ replaying a demo of: {}", displayable(&scene.name)),
            );
            ui.small(displayable(&scene.description));
        }
        (None, Some(a)) => {
            ui.small(displayable(&a.current.description));
            if let Some(note) = thrown_since_loaded(&a.loaded, &a.current) {
                ui.small(egui::RichText::new(note).italics());
            }
        }
        (None, None) => {}
    }
}

/// The energy plot's hover text: why a lane's energy falls or rises with no loss or source in the scene.
const ENERGY_PLOT_NOTE: &str = "energy [J]: each lane's kinetic, gravitational and contact energy at the end of each \
     step. Implicit Euler damps it: the IPC ball that the wall turns back leaves with a small part of its energy \
     (SPEC §1). Penalty can add energy: a ball pushed out through a wall's far face gains the spring's energy \
     (SPEC §1.1).";

/// The energy plot's title: it says that its hover text explains the energy a lane loses or gains.
const ENERGY_PLOT_TITLE: &str = "energy [J] · hover for why it changes";

/// The plots' titles that a narrow plot shows in fewer words (the whole title on hover).
const SHORT_PLOT_TITLES: [(&str, &str); 3] = [
    (
        "min gap, log scale (negative = penetration)",
        "min gap, log (< 0: overlap)",
    ),
    ("Newton iterations per step", "Newton iterations"),
    (ENERGY_PLOT_TITLE, "energy [J] (hover)"),
];

/// Whether `text` in the small style fits the width left in `ui` on one line.
fn fits_one_small_line(ui: &egui::Ui, text: &str) -> bool {
    let font = egui::TextStyle::Small.resolve(ui.style());
    let galley = ui
        .painter()
        .layout_no_wrap(text.to_owned(), font, egui::Color32::WHITE);
    galley.size().x <= ui.available_width()
}

/// A word under the scene's description once a throw has given its balls another speed than the file's, which the
/// description still quotes ("the same 5 m/s throw …" over a throw at 1 m/s): "(as loaded; thrown since at 1 m/s)".
fn thrown_since_loaded(
    loaded: &crate::scene::Scene,
    current: &crate::scene::Scene,
) -> Option<String> {
    let first_ball = |scene: &crate::scene::Scene| {
        scene
            .lanes
            .iter()
            .find_map(|lane| lane.balls.first())
            .map(|ball| ball.velocity)
    };
    let (Some(was), Some(now)) = (first_ball(loaded), first_ball(current)) else {
        return None;
    };
    (was != now && now.y == 0.0).then(|| {
        format!(
            "(as loaded; thrown since at {} m/s)",
            crate::text::number(now.x)
        )
    })
}

/// "step N / stop · S steps/s (F× real time)", counting ticks, each of which advances every lane by the smallest
/// h ([`crate::demo::step_lanes`]). A scene that has reached its last step says so instead of showing a rate of 0,
/// which would read as a stalled simulation. The frame rate is its own label ([`status_row`]).
fn status_line(
    control: &SimControl,
    steps_per_second: Option<f64>,
    RunInfo {
        smallest_h,
        ticks_left,
        replay_ticks,
    }: RunInfo,
) -> String {
    if let Some((tick, ticks)) = replay_ticks {
        // The replay's own clock; the sandbox's step counter stands still while a demo plays.
        return format!("replay tick {tick} / {ticks}");
    }
    let stop = ticks_left
        .map(|left| format!(" / {}", control.steps_taken.saturating_add(left)))
        .unwrap_or_default();
    let rate = if ticks_left == Some(0) {
        " · finished (R runs it again)".to_string()
    } else {
        steps_per_second
            .filter(|_| !control.paused)
            .map(|r| match smallest_h {
                // A tick advances every lane by the smallest h, whatever the fixed rate.
                Some(h) => format!(" · {r:.0} steps/s ({:.2}× real time)", r * h),
                None => format!(" · {r:.0} steps/s"),
            })
            .unwrap_or_default()
    };
    format!("step {}{stop}{rate}", control.steps_taken)
}

/// The status row's frame rate: "· 60 fps", or "· idle" while the window idles ([`super::idle`]): its few frames
/// a second would read as a slow machine, and the rate it measured, as the pointer wakes it, as a busy one.
fn frame_rate_text(frames_per_second: f64, idle: bool) -> String {
    if idle {
        "· idle".into()
    } else {
        format!("· {frames_per_second:.0} fps")
    }
}

/// The status line on one row, whatever its digits (wrapping by turns at "100 steps/s" and "97 steps/s" moved every
/// control below it up and down several times a second in a narrow panel), with the frame rate at its right end
/// and the run's text cut before it with "…" when the row is too narrow for both (at 960 px the end of the line,
/// the frame rate, was what was cut).
fn status_row(
    ui: &mut egui::Ui,
    status: String,
    frame_rate: Option<String>,
    explanation: &str,
) -> egui::Response {
    let row = egui::vec2(ui.available_width(), ui.spacing().interact_size.y);
    ui.allocate_ui_with_layout(
        row,
        egui::Layout::right_to_left(egui::Align::Center),
        |ui| {
            // Over each label too: a label under the pointer takes the hover from the row it sits in.
            if let Some(frame_rate) = frame_rate {
                ui.label(frame_rate).on_hover_text(explanation);
            }
            ui.with_layout(egui::Layout::left_to_right(egui::Align::Center), |ui| {
                ui.add(egui::Label::new(status).truncate())
                    .on_hover_text(explanation)
            });
        },
    )
    // The whole row, so that its explanation shows over the space between the two labels too.
    .response
    .on_hover_text(explanation)
}

/// What the status line reports besides the run control: the lanes' step sizes (min, max) and, while a demo
/// replays, its tick and length.
#[derive(Clone, Copy)]
struct RunInfo {
    /// The smallest h of the lanes: what a tick advances the run by.
    smallest_h: Option<f64>,
    /// Ticks before the run's end ([`crate::demo::ticks_until`]); none without an end.
    ticks_left: Option<u64>,
    replay_ticks: Option<(u64, u64)>,
}

#[allow(clippy::too_many_arguments)]
fn run_controls(
    ui: &mut egui::Ui,
    info: RunInfo,
    control: &mut SimControl,
    ui_state: &mut UiState,
    clocks: &mut Clocks,
    actions: &mut Actions,
    view: &mut CameraView,
    log: &mut SimLog,
) {
    ui.horizontal_wrapped(|ui| {
        // A replay has its own play, step and rewind (the Demo section above); these would be refused.
        if info.replay_ticks.is_none() {
            const RESUME: &str = "▶ Resume (P)";
            const PAUSE: &str = "⏸ Pause (P)";
            let label = if control.paused { RESUME } else { PAUSE };
            // As wide as the wider of its two words, so that pausing does not push "Fit" onto a line of its own
            // in a narrow panel, and everything below it down.
            let font = egui::TextStyle::Button.resolve(ui.style());
            let widest = [RESUME, PAUSE]
                .map(|text| {
                    ui.painter()
                        .layout_no_wrap(text.to_string(), font.clone(), egui::Color32::WHITE)
                        .size()
                        .x
                })
                .into_iter()
                .fold(0.0, f32::max);
            let width = widest + 2.0 * ui.spacing().button_padding.x;
            if ui
                .add(egui::Button::new(label).min_size(egui::vec2(width, 0.0)))
                .clicked()
            {
                control.toggle_pause();
            }
            if ui.button("Step (O)").clicked() {
                control.single_step();
            }
            if ui
                .button("Restart (R)")
                .on_hover_text(
                    "The scene from its start, with the lanes' settings as edited. Pick the scene in the menu \
                     again for the scene's own settings.",
                )
                .clicked()
            {
                actions.restart.write(RestartScene);
            }
        }
        if ui.button("Fit (F)").clicked() {
            view.fit_everything();
        }
    });
    ui_state.step_rate.record_run(
        clocks.real.elapsed_secs_f64(),
        control.steps_taken,
        control.paused,
        info.ticks_left,
    );
    if let Some(frames) = &clocks.frames {
        ui_state
            .frame_rate
            .record(clocks.real.elapsed_secs_f64(), u64::from(frames.0));
    }
    let status = status_line(control, ui_state.step_rate.steps_per_second(), info);
    let idle = clocks.idle.as_deref().is_some_and(|idle| idle.0);
    status_row(
        ui,
        status,
        ui_state
            .frame_rate
            .steps_per_second()
            .map(|fps| frame_rate_text(fps, idle)),
        "Steps taken per second and how fast that runs against real time (1.00× is real time), and frames drawn \
         per second. The physics steps on its own thread: when the steps cost more than the frame budget (a large \
         pile landing), the simulation runs in slow motion while the window keeps its frame rate. While nothing \
         moves (paused, or at the run's end) the window idles at a few frames a second, and a key, the pointer or \
         a step wakes it at once.",
    );
    let refused = Refusals::default();
    let mut applied = false;
    if ui
        .add(run_slider(
            &mut ui_state.time_scale,
            "time scale",
            0.01..=4.0,
            &refused,
        ))
        .changed()
    {
        clocks
            .virtual_time
            .set_relative_speed_f64(ui_state.time_scale);
        applied = true;
    }
    ui_state.fixed_rate_hz = clocks.fixed.timestep().as_secs_f64().recip();
    // The range a scene's clock may run at (`demo::fixed_rate_hz`), so the slider shows the rate a scene
    // of long steps runs at, and accepts it typed.
    if ui
        .add(run_slider(
            &mut ui_state.fixed_rate_hz,
            "fixed rate [Hz]",
            crate::demo::FIXED_RATES_HZ,
            &refused,
        ))
        .changed()
    {
        clocks.fixed.set_timestep_hz(ui_state.fixed_rate_hz);
        applied = true;
    }
    report_run_controls(refused.take(), applied, log);
    ui.horizontal_wrapped(|ui| {
        ui.checkbox(&mut ui_state.show_inspector, "inspector");
        if ui
            .checkbox(&mut ui_state.show_landscape, "landscape")
            .changed()
            && ui_state.show_landscape
        {
            ask_to_show_the_landscape(ui.ctx());
        }
        ui.checkbox(&mut ui_state.show_plots, "plots");
        if let Some(stepping) = clocks.stepping.as_deref_mut() {
            let mut background = *stepping == Stepping::Background;
            if ui
                .checkbox(&mut background, "physics thread")
                .on_hover_text(
                    "On: the physics steps on its own thread and the window keeps drawing while a slow step \
                     (a large pile landing) runs; the simulation then plays in slow motion. Off: every frame \
                     waits for its steps, so the physics gets the whole machine but the window stalls. The \
                     results are bit-identical either way.",
                )
                .changed()
            {
                *stepping = if background {
                    Stepping::Background
                } else {
                    Stepping::Inline
                };
            }
        }
    });
    ui.small("drag: throw · click: select/drop · right-drag: pan · wheel: zoom · Tab: hide UI");
}

/// The throw's penalty k and IPC d̂ sliders. Each acts only on lanes of its method: with none left (a lane
/// switched in the panel), its slider is greyed rather than moved to no effect. Whether either was changed, and
/// where each was drawn.
fn method_sliders(
    ui: &mut egui::Ui,
    ui_state: &mut UiState,
    worlds: &[&LaneWorld],
    refused: &Refusals,
) -> (bool, [egui::Rect; 2]) {
    let runs = |method: ContactMethod| worlds.iter().any(|w| w.settings.method == method);
    let log10_k = ui_state.throw_log10_k;
    let log10_k_range = log10_k.min(2.0)..=log10_k.max(9.0);
    let k_slider = ui.add_enabled_ui(runs(ContactMethod::Penalty), |ui| {
        add_checked_slider(
            ui,
            &mut ui_state.throw_log10_k,
            ("penalty log10 k", log10_k_range, -3.0..=12.0),
            false,
            refused,
        )
    });
    let k_rect = k_slider
        .response
        .on_disabled_hover_text("no lane runs penalty")
        .rect;
    let dhat_mm = ui_state.throw_dhat_mm;
    let dhat_range = dhat_mm.min(0.05)..=dhat_mm.max(5.0);
    let dhat_slider = ui.add_enabled_ui(runs(ContactMethod::Ipc), |ui| {
        add_checked_slider(
            ui,
            &mut ui_state.throw_dhat_mm,
            ("IPC dhat [mm]", dhat_range, 1e-6..=1e3),
            true,
            refused,
        )
    });
    let dhat_rect = dhat_slider
        .response
        .on_disabled_hover_text("no lane runs IPC")
        .rect;
    (k_slider.inner | dhat_slider.inner, [k_rect, dhat_rect])
}

/// What the energy landscape draws for each method: the settings of the first lane that runs it, or where no
/// lane runs it (a lane switched in the panel) the seed's (k = 10⁴, d̂ = 1 mm, κ = 10⁴, s = 0.9), said in its
/// legend.
#[derive(Debug, Clone, PartialEq)]
struct LandscapeModels {
    penalty_k: f64,
    dhat: f64,
    kappa: f64,
    ccd_factor: f64,
    penalty_run: bool,
    ipc_run: bool,
}

impl LandscapeModels {
    fn of(worlds: &[&LaneWorld]) -> Self {
        let penalty = worlds
            .iter()
            .find(|w| w.settings.method == ContactMethod::Penalty);
        let ipc = worlds
            .iter()
            .find(|w| w.settings.method == ContactMethod::Ipc);
        LandscapeModels {
            penalty_k: penalty.map_or(1e4, |w| w.settings.stiffness),
            dhat: ipc.map_or(1e-3, |w| w.dhat()),
            kappa: ipc.map_or(1e4, |w| w.settings.kappa),
            ccd_factor: ipc.map_or(0.9, |w| w.settings.ccd_factor),
            penalty_run: penalty.is_some(),
            ipc_run: ipc.is_some(),
        }
    }

    fn unrun(runs: bool) -> &'static str {
        if runs {
            ""
        } else {
            " (the seed's; no lane runs it)"
        }
    }

    fn ipc_name(&self) -> String {
        format!(
            "IPC dhat = {}{}",
            crate::sim::length_text(self.dhat),
            Self::unrun(self.ipc_run)
        )
    }

    fn penalty_name(&self) -> String {
        format!(
            "penalty k = {}{}",
            crate::text::number(self.penalty_k),
            Self::unrun(self.penalty_run)
        )
    }
}

fn wall_throw_panel(
    ui: &mut egui::Ui,
    ui_state: &mut UiState,
    control: &SimControl,
    lanes: &Query<(Entity, &Lane, &mut LaneSettings, &LaneDiagnostics)>,
    sorted: &[Entity],
    colors: &LaneColors,
    (actions, log): (&mut Actions, &mut SimLog),
) {
    ui.strong("Wall throw (seed §2)");
    let worlds: Vec<&LaneWorld> = sorted
        .iter()
        .filter_map(|&e| lanes.get(e).ok())
        .map(|(_, lane, ..)| &lane.world)
        .collect();
    follow_lane_settings(ui_state, &worlds);
    let refused = Refusals::default();
    let mut applied = false;
    // Each range reaches the value the lanes run, so that a slider shows it rather than its end; typed, each
    // takes what a lane takes (a speed to ±10⁶ m/s, h from 10⁻⁶ to 10 s, k and κ to 10¹², d̂ from 10⁻⁹ to 1 m).
    let v0 = ui_state.throw_v0;
    let v0_range = v0.min(0.5)..=v0.max(60.0);
    applied |= add_checked_slider(
        ui,
        &mut ui_state.throw_v0,
        ("v0 [m/s]", v0_range, 1e-3..=1e6),
        true,
        &refused,
    );
    let mut h_ms = ui_state.throw_h * 1e3;
    let h_ms_range = h_ms.min(0.5)..=h_ms.max(20.0);
    let h_ms_typed = crate::scene::MIN_STEP * 1e3..=crate::scene::MAX_STEP * 1e3;
    if add_checked_slider(
        ui,
        &mut h_ms,
        ("h [ms]", h_ms_range, h_ms_typed),
        false,
        &refused,
    ) {
        ui_state.throw_h = h_ms * 1e-3;
        applied = true;
    }
    applied |= method_sliders(ui, ui_state, &worlds, &refused).0;
    if let Some(note) = lanes_differ_note(&worlds) {
        ui.label(egui::RichText::new(displayable(&note)).weak());
    }
    report_run_controls(refused.take(), applied, log);
    if ui.button("Throw").clicked() {
        actions.throw.write(throw_from_sliders(ui_state));
    }
    for &entity in sorted {
        let Ok((_, lane, _, _)) = lanes.get(entity) else {
            continue;
        };
        let w = &lane.world;
        let left = crate::demo::lane_steps_left(w, control.run_end);
        let run_over = left == Some(0);
        ui.colored_label(
            colors.of(entity),
            format!(
                "{} — {}",
                colors.title(entity),
                displayable(&crate::sim::lane_outcome_of_run(w, run_over))
            ),
        );
        ui.label(format!("   {}", crate::sim::lane_summary(w)));
        // The lane's own clock, on a line of its own so that neither wraps in the panel: lanes of different h
        // keep time together, each taking its own number of steps.
        let stop = left.map(|left| w.stats.steps.saturating_add(left));
        ui.label(egui::RichText::new(lane_clock_line(w.stats.steps, stop, w.time)).weak());
    }
    gap_inset(ui, lanes, sorted, colors);
}

/// The landscape's legend corner, from the energy at the plot's two ends (`cap` is the top of the plot). The
/// energy is a bowl about x̃: its lower end leaves the top corner on its side empty; when both ends are high
/// (x̃ in the middle) the bowl leaves the bottom corners empty instead. The legend used to sit at the bottom
/// left whatever x̃, over the bowl's left side when x̃ lay left of the middle.
fn legend_corner(left: Option<f64>, right: Option<f64>, cap: f64) -> egui_plot::Corner {
    use egui_plot::Corner;
    let (Some(left), Some(right)) = (left, right) else {
        return Corner::LeftTop;
    };
    let free = |y: f64| y.min(cap) < 0.6 * cap;
    if left <= right && free(left) {
        Corner::LeftTop
    } else if free(right) {
        Corner::RightTop
    } else {
        Corner::LeftBottom
    }
}

/// A lane's step count against the steps its run holds at its h (none without an end) and its own time.
fn lane_clock_line(steps: u64, stop: Option<u64>, time: f64) -> String {
    match stop {
        Some(stop) => format!("   step {steps}/{stop} · t = {time:.3} s"),
        None => format!("   step {steps} · t = {time:.3} s"),
    }
}

/// The throw's h, penalty k and IPC d̂ sliders follow the lanes when their settings change (an edit in the lane
/// panel, a restart), so that they show what runs and a Throw keeps it. Moving a slider changes no lane, so the
/// slider keeps the value until Throw.
fn follow_lane_settings(ui_state: &mut UiState, lanes: &[&LaneWorld]) {
    let Some(first) = lanes.first() else {
        return;
    };
    let of = |method: ContactMethod| lanes.iter().find(|w| w.settings.method == method);
    let now = (
        first.settings.h,
        of(ContactMethod::Penalty).map(|w| w.settings.stiffness),
        of(ContactMethod::Ipc).map(|w| w.dhat()),
    );
    if ui_state.throw_followed == Some(now) {
        return;
    }
    ui_state.throw_followed = Some(now);
    ui_state.throw_h = now.0;
    if let Some(k) = now.1 {
        ui_state.throw_log10_k = k.log10();
    }
    if let Some(dhat) = now.2 {
        ui_state.throw_dhat_mm = dhat * 1e3;
    }
}

/// Where the lanes run different values of a throw slider's setting, what each runs: a slider shows only the
/// first such lane's value ([`follow_lane_settings`]), and Throw keeps every lane's own unless the slider is
/// moved ([`throw_from_sliders`]). The wall throw's two penalty lanes always differ in k.
fn lanes_differ_note(lanes: &[&LaneWorld]) -> Option<String> {
    // Three decimals at most, as the sliders show them: 1/60 s reads "16.667 ms".
    let short = |v: f64| {
        let text = format!("{v:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    let values = |method: Option<ContactMethod>, value: &dyn Fn(&LaneWorld) -> String| {
        let mut seen: Vec<String> = Vec::new();
        for w in lanes {
            let text = value(w);
            if method.is_none_or(|m| w.settings.method == m) && !seen.contains(&text) {
                seen.push(text);
            }
        }
        seen
    };
    let parts: Vec<String> = [
        (
            "h",
            values(None, &|w| format!("{} ms", short(w.settings.h * 1e3))),
        ),
        (
            "k",
            values(Some(ContactMethod::Penalty), &|w| {
                format!("{:e} N/m", w.settings.stiffness)
            }),
        ),
        (
            "d\u{302}",
            values(Some(ContactMethod::Ipc), &|w| {
                format!("{} mm", short(w.dhat() * 1e3))
            }),
        ),
    ]
    .into_iter()
    .filter(|(_, values)| values.len() > 1)
    .map(|(name, values)| format!("{name} {}", values.join(" / ")))
    .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "Lanes run {}. A slider shows the first; Throw keeps each lane's own unless it is moved.",
            parts.join("; ")
        )
    })
}

/// The v0 slider follows the scene's throw speed (its first ball's) when that changes: a scene picked again
/// runs at its file's speed, and the slider showed the last throw's, which the next Throw then used. Moving the
/// slider changes nothing until Throw.
fn follow_scene_speed(ui_state: &mut UiState, scene: &crate::scene::Scene) {
    let Some(v0) = scene
        .lanes
        .first()
        .and_then(|lane| lane.balls.first())
        .map(|ball| ball.velocity.x)
    else {
        return;
    };
    if ui_state.throw_v0_followed != Some(v0) {
        ui_state.throw_v0_followed = Some(v0);
        ui_state.throw_v0 = v0;
    }
}

/// The throw the panel asks for: its speed, and of h, k and d̂ only what the user moved away from the lanes'
/// values. An untouched slider shows only one lane's value (h follows the first lane); sent, it would replace
/// the edits of lanes that run another.
fn throw_from_sliders(ui_state: &UiState) -> ThrowBall {
    let followed = ui_state.throw_followed;
    let moved = |now: f64, then: Option<f64>| then != Some(now);
    ThrowBall {
        v0: ui_state.throw_v0,
        h: moved(ui_state.throw_h, followed.map(|f| f.0)).then_some(ui_state.throw_h),
        stiffness: moved(
            ui_state.throw_log10_k,
            followed.and_then(|f| f.1).map(f64::log10),
        )
        .then(|| 10f64.powf(ui_state.throw_log10_k)),
        dhat: moved(
            ui_state.throw_dhat_mm,
            followed.and_then(|f| f.2).map(|d| d * 1e3),
        )
        .then_some(ui_state.throw_dhat_mm * 1e-3),
    }
}

/// The gap is far below a pixel: a magnified view of the first ball of each lane against the first wall's face.
fn gap_inset(
    ui: &mut egui::Ui,
    lanes: &Query<(Entity, &Lane, &mut LaneSettings, &LaneDiagnostics)>,
    sorted: &[Entity],
    colors: &LaneColors,
) {
    let gaps: Vec<(egui::Color32, Option<f64>, bool)> = sorted
        .iter()
        .filter_map(|e| lanes.get(*e).ok())
        .map(|(entity, lane, _, _)| {
            let w = &lane.world;
            let gap = match (w.balls.first(), w.walls.first()) {
                (Some(b), Some(wall)) => Some(ball_wall_gap(b.position, b.radius, wall)),
                _ => None,
            };
            (colors.of(entity), gap, w.ball_tunneled(0))
        })
        .collect();
    // Span of the inset: 3× the smallest positive gap, between 20 µm and 2 mm.
    let smallest = gaps
        .iter()
        .filter_map(|g| g.1)
        .filter(|g| *g > 0.0)
        .fold(f64::INFINITY, f64::min);
    let span = (3.0 * smallest).clamp(20e-6, 2e-3);
    ui.label(format!(
        "magnified gap now (window width {:.0} µm):",
        span * 1e6
    ));
    let (rect, _) = ui.allocate_exact_size(
        egui::vec2(
            ui.available_width().min(300.0),
            22.0 * gaps.len() as f32 + 8.0,
        ),
        egui::Sense::hover(),
    );
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 2.0, egui::Color32::from_gray(20));
    let face_x = rect.right() - 40.0;
    painter.rect_filled(
        egui::Rect::from_min_max(egui::pos2(face_x, rect.top()), rect.right_bottom()),
        0.0,
        egui::Color32::from_gray(150),
    );
    let px_per_m = (face_x - rect.left() - 10.0) as f64 / span;
    for (row, &(color, gap, through)) in gaps.iter().enumerate() {
        let y = rect.top() + 15.0 + 22.0 * row as f32;
        let text = match (gap, through) {
            (_, true) => "through".to_string(),
            (Some(g), _) if g >= 0.0 => crate::sim::length_text(g),
            (Some(g), _) => format!("{} deep", crate::sim::length_text(-g)),
            _ => "—".into(),
        };
        let mut text_x = rect.left() + 6.0;
        if let (Some(g), false) = (gap, through) {
            let x = face_x as f64 - g * px_per_m;
            if x < rect.left() as f64 + 4.0 {
                // Farther than the window reaches: an arrow at its left edge, and the number beside it.
                let tip = egui::pos2(rect.left() + 3.0, y);
                painter.add(egui::Shape::convex_polygon(
                    vec![
                        tip,
                        egui::pos2(tip.x + 8.0, y + 5.0),
                        egui::pos2(tip.x + 8.0, y - 5.0),
                    ],
                    color,
                    egui::Stroke::NONE,
                ));
                text_x = rect.left() + 16.0;
            } else {
                let x = x.min(rect.right() as f64 - 4.0) as f32;
                painter.circle_filled(egui::pos2(x, y), 5.0, color);
                // A marker over the number would hide a digit: the number goes after the marker then.
                let width = painter
                    .layout_no_wrap(text.clone(), egui::FontId::monospace(12.0), color)
                    .size()
                    .x;
                if x - 6.0 < text_x + width {
                    text_x = x + 8.0;
                }
            }
        }
        painter.text(
            egui::pos2(text_x, y),
            egui::Align2::LEFT_CENTER,
            text,
            egui::FontId::monospace(12.0),
            color,
        );
    }
}

fn spawn_panel(
    ui: &mut egui::Ui,
    ui_state: &mut UiState,
    lanes: &Query<(Entity, &Lane, &mut LaneSettings, &LaneDiagnostics)>,
    actions: &mut Actions,
    log: &mut SimLog,
) {
    ui.strong("Spawning (every lane, mirrored)");
    let refused = Refusals::default();
    let mut applied = false;
    let mut radius_mm = ui_state.spawn_radius * 1e3;
    let radius_range = 0.0..=radius_mm.max(100.0);
    // Typed, a radius up to 1 m and a mass a lane takes.
    if add_checked_slider(
        ui,
        &mut radius_mm,
        ("radius [mm]", radius_range, 0.0..=1e3),
        false,
        &refused,
    ) {
        ui_state.spawn_radius = radius_mm * 1e-3;
        applied = true;
    }
    let mass = ui_state.spawn_mass;
    let mass_range = mass.min(0.01)..=mass.max(10.0);
    let mass_typed = crate::physics::world::MIN_MASS..=crate::physics::world::MAX_MASS;
    applied |= add_checked_slider(
        ui,
        &mut ui_state.spawn_mass,
        ("mass [kg]", mass_range, mass_typed),
        true,
        &refused,
    );
    report_run_controls(refused.take(), applied, log);
    if ui
        .button("Rain (10 balls)")
        .on_hover_text(
            "Drops 10 balls of the spawning radius and mass above each lane, at the same spots in every lane",
        )
        .clicked()
    {
        let mut sorted: Vec<&Lane> = lanes.iter().map(|l| l.1).collect();
        sorted.sort_by_key(|lane| lane.index);
        let worlds: Vec<&LaneWorld> = sorted.iter().map(|lane| &lane.world).collect();
        let Some(lane) = sorted.first() else {
            return;
        };
        let (balls, missing) = rain(
            &worlds,
            lane.bounds,
            ui_state.spawn_radius,
            ui_state.spawn_mass,
            &mut ui_state.rain_seed,
        );
        actions.spawn.write_batch(balls);
        if missing > 0 {
            let was = if missing == 1 { "was" } else { "were" };
            log.error(format!(
                "rain: {missing} of {RAIN_BALLS} balls found no free place in every lane and {was} not dropped"
            ));
        }
    }
}

/// The most ticks the status line runs the lanes' clocks through each frame to count the run's ticks exactly (about
/// 0.1 ms); a longer run's count may be one tick short a lane ([`crate::demo::ticks_until`]).
const TICKS_COUNTED: u64 = 20_000;

/// Balls per press of the Rain button.
const RAIN_BALLS: usize = 10;
/// Places tried for each rain ball before it is given up.
const RAIN_TRIES: usize = 100;

/// Up to [`RAIN_BALLS`] balls of `radius` and `mass` for every lane in `worlds` (in lane order), placed in
/// `bounds` (the first lane's, lane-local): falling from near the top under the first lane's gravity, or streaming
/// in from the left edge without it.
/// Each is placed where every lane would accept it (no overlap with a lane's balls, nor with an IPC lane's walls)
/// and clear of the others of its batch, trying up to [`RAIN_TRIES`] random places; the second value counts the
/// balls that found none.
fn rain(
    worlds: &[&LaneWorld],
    (lo, hi): (DVec2, DVec2),
    radius: f64,
    mass: f64,
    seed: &mut u64,
) -> (Vec<SpawnBall>, usize) {
    let no_gravity = worlds
        .first()
        .is_none_or(|w| w.settings.gravity.length() < 1e-9);
    // Each try is checked against the balls near it only.
    let grids: Vec<crate::physics::spawn_grid::SpawnGrid> = worlds
        .iter()
        .map(|w| crate::physics::spawn_grid::SpawnGrid::new(&w.balls))
        .collect();
    let mut placed: Vec<SpawnBall> = Vec::with_capacity(RAIN_BALLS);
    for _ in 0..RAIN_BALLS {
        for _ in 0..RAIN_TRIES {
            let (a, b) = (next_unit(seed), next_unit(seed));
            let (position, velocity) = if no_gravity {
                // A stream from the left edge toward +x at 3–30 m/s.
                (
                    DVec2::new(lo.x, lo.y + (hi.y - lo.y) * (0.05 + 0.9 * a)),
                    DVec2::new(3.0 + 27.0 * b, 0.0),
                )
            } else {
                (
                    DVec2::new(
                        lo.x + (hi.x - lo.x) * (0.15 + 0.7 * a),
                        hi.y - 0.15 * (hi.y - lo.y) * b,
                    ),
                    DVec2::ZERO,
                )
            };
            let ball = crate::physics::geometry::Ball {
                position,
                velocity,
                radius,
                mass,
            };
            // A clearance of a tenth of the radius (at least a micrometre) between the batch's balls.
            let clearance = (0.1 * radius).max(1e-6);
            let clear_of_batch = placed.iter().all(|other| {
                (other.position - position).length() > other.radius + radius + clearance
            });
            if clear_of_batch
                && worlds
                    .iter()
                    .zip(&grids)
                    .all(|(w, grid)| w.check_spawn(&ball, Some(grid)).is_ok())
            {
                placed.push(SpawnBall {
                    position,
                    velocity,
                    radius,
                    mass,
                });
                break;
            }
        }
    }
    let missing = RAIN_BALLS - placed.len();
    (placed, missing)
}

fn next_unit(seed: &mut u64) -> f64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 11) as f64 / (1u64 << 53) as f64
}

/// A wall's or a ball's index and the signed surface gap to it [m].
type Nearest = (usize, f64);

/// The smallest signed surface gap [m] from a ball (centre `position`, `radius`) to any wall of `world` and to
/// any other of its balls, each with that wall's or ball's index; `None` where there is none. Ball `ball` itself
/// is skipped.
fn nearest_gaps(
    world: &LaneWorld,
    ball: usize,
    position: DVec2,
    radius: f64,
) -> (Option<Nearest>, Option<Nearest>) {
    let smallest = |gaps: &mut dyn Iterator<Item = (usize, f64)>| {
        gaps.filter(|(_, gap)| !gap.is_nan())
            .min_by(|a, b| a.1.total_cmp(&b.1))
    };
    let wall = smallest(
        &mut world
            .walls
            .iter()
            .enumerate()
            .map(|(k, wall)| (k, ball_wall_gap(position, radius, wall))),
    );
    let other = smallest(
        &mut world
            .balls
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != ball)
            .map(|(j, other)| {
                (
                    j,
                    (other.position - position).length() - other.radius - radius,
                )
            }),
    );
    (wall, other)
}

/// A gap as the selected-body panel shows it: micrometres to the nanometre near contact, where IPC's gaps live;
/// in a suitable unit farther off ("4431237590.702 µm" was a ball 4.4 km away). Negative is overlap.
fn gap_text(gap: f64) -> String {
    if gap.abs() < 1e-3 {
        crate::text::fixed(gap * 1e6, 3) + " µm"
    } else if gap < 0.0 {
        format!("-{}", crate::sim::length_text(-gap))
    } else {
        crate::sim::length_text(gap)
    }
}

/// Scrolls the left panel to the selected-body section once, when a body is newly selected: in a short window
/// (1 366 × 768, or 1 920 × 1 080 at 150 %) the section lies below the panel's bottom, and a click on a ball
/// seemed to select nothing. While the selection stays, the panel stays where the user scrolls it.
fn show_a_new_selection(ui: &egui::Ui, section: egui::Rect, selected: Option<Entity>) {
    let id = egui::Id::new("contact-sandbox: the selection scrolled to");
    let last = ui.data(|d| d.get_temp::<Option<Entity>>(id)).flatten();
    if selected.is_some() && selected != last {
        ui.scroll_to_rect_animation(section, None, egui::style::ScrollAnimation::none());
    }
    ui.data_mut(|d| d.insert_temp(id, selected));
}

/// Where [`ask_to_show_the_landscape`] leaves its request, in egui's temporary data.
const LANDSCAPE_ASKED_FOR: &str = "contact-sandbox: the landscape switched on";

/// Asks the lanes' panel to scroll the landscape into view: its box ticked in a short window (1 366 × 768, or
/// 1 920 × 1 080 at 150 %) put the landscape below two lanes' settings, and nothing on screen changed.
fn ask_to_show_the_landscape(ctx: &egui::Context) {
    ctx.data_mut(|d| d.insert_temp(egui::Id::new(LANDSCAPE_ASKED_FOR), true));
}

/// Scrolls the lanes' panel to the landscape's `section` once, if [`ask_to_show_the_landscape`] asked for it.
fn show_the_landscape_when_asked(ui: &egui::Ui, section: egui::Rect) {
    let id = egui::Id::new(LANDSCAPE_ASKED_FOR);
    if ui.data_mut(|d| d.remove_temp::<bool>(id)).unwrap_or(false) {
        ui.scroll_to_rect_animation(section, None, egui::style::ScrollAnimation::none());
    }
}

fn selected_body_panel(
    ui: &mut egui::Ui,
    ui_state: &UiState,
    bodies: &BodyRows,
    lanes: &Query<(Entity, &Lane, &mut LaneSettings, &LaneDiagnostics)>,
) {
    ui.strong("Selected body (click one)");
    let Some((name, member, state, ball, rod)) = ui_state.selected.and_then(|e| bodies.get(e).ok())
    else {
        ui.small("nothing selected");
        return;
    };
    ui.label(name.as_str());
    ui.monospace(format!(
        "x = ({}, {}) m",
        crate::text::fixed(state.position.x, 6),
        crate::text::fixed(state.position.y, 6)
    ));
    ui.monospace(format!(
        "v = ({}, {}) m/s",
        crate::text::fixed(state.velocity.x, 4),
        crate::text::fixed(state.velocity.y, 4)
    ));
    let lane = lanes.get(member.0).ok().map(|l| l.1);
    if let Some(b) = ball {
        ui.monospace(format!("r = {:.4} m, m = {:.3} kg", b.radius, b.mass));
        if let Some(lane) = lane {
            ui.monospace(format!("tunnelled: {}", lane.world.ball_tunneled(b.index)));
            let (wall, ball) = nearest_gaps(&lane.world, b.index, state.position, b.radius);
            for (kind, nearest) in [("wall", wall), ("ball", ball)] {
                if let Some((index, gap)) = nearest {
                    ui.monospace(format!(
                        "nearest {kind}: {kind} {index}, gap {}",
                        gap_text(gap)
                    ));
                }
            }
        }
    }
    if let Some(r) = rod {
        ui.monospace(format!(
            "θ = {} rad, ω = {} rad/s",
            crate::text::fixed(crate::physics::rod_flight::wrapped_angle(state.angle), 4),
            crate::text::fixed(state.omega, 4)
        ));
        ui.monospace(format!(
            "L = {:.3} m, m = {:.3} kg, e = {:.2}",
            r.length, r.mass, r.restitution
        ));
        if let Some(lane) = lane
            && let Some(body) = lane.world.rods.get(r.index)
        {
            ui.monospace(format!(
                "E = {:.5} J, lowest end {:.3e} m above floor",
                body.energy(lane.world.settings.gravity, lane.world.rod_floor_y),
                body.lowest_end_height() - lane.world.rod_floor_y
            ));
        }
    }
}

/// What heads a lane's panel: its colour and title, and whether its settings take edits (not while a demo
/// replays: an edit is then refused with a word).
struct PanelHead<'a> {
    color: egui::Color32,
    title: &'a str,
    editable: bool,
}

/// A collapsing header's `title`, cut with "…" to the panel's width. egui lays a header's text out on one line
/// however long: a lane's title with its edits ("… (edited: h = 0.005 s, g = (0, -20) m/s²)") widened the
/// scrolled panel past the window, and the settings grid beneath, laid out two a row to that width, put its right
/// column out of sight; the title itself was cut at the window's edge mid-number ("CCD factor = 0.000" for 1e-4).
fn panel_title(ui: &egui::Ui, title: egui::RichText) -> egui::WidgetText {
    let room = ui.available_width() - ui.spacing().indent - ui.spacing().button_padding.x;
    let mut job = egui::WidgetText::from(title).into_layout_job(
        ui.style(),
        egui::FontSelection::Style(egui::TextStyle::Button),
        egui::Align::Center,
    );
    std::sync::Arc::make_mut(&mut job).wrap =
        egui::text::TextWrapping::truncate_at_width(room.max(40.0));
    egui::WidgetText::Galley(ui.fonts_mut(|f| f.layout_job(std::sync::Arc::unwrap_or_clone(job))))
}

/// Lane settings (edited live; a value the lane cannot run is refused here, the sim checks the rest and reports)
/// and the seed's pre-flight numbers.
fn lane_panel(
    ui: &mut egui::Ui,
    lane: &Lane,
    PanelHead {
        color,
        title,
        editable,
    }: PanelHead<'_>,
    settings: &mut Mut<LaneSettings>,
    diagnostics: &LaneDiagnostics,
    start_speed: f64,
    log: &mut SimLog,
) {
    let w = &lane.world;
    egui::CollapsingHeader::new(panel_title(
        ui,
        egui::RichText::new(format!("lane {}: {title}", lane.index))
            .color(color)
            .strong(),
    ))
    .id_salt(("lane", lane.index))
    .default_open(true)
    .show(ui, |ui| {
        let mut edit = settings.0.clone();
        let refused = Refusals::default();
        settings_grid(ui, lane.index, w, &mut edit, &refused);
        // A replay runs the demo's settings. Its grid stays as it is drawn otherwise (the other method's fields
        // greyed, the hover notes), and an edit is answered with a word instead of being dropped without one.
        if !editable && edit != settings.0 {
            edit = settings.0.clone();
            log.error(format!(
                "lane {}: a replay runs the demo's settings; stop the replay to edit them",
                lane.index
            ));
        }
        if let Some(refusal) = refused.take() {
            // egui may read the same text twice as the field loses focus: one message for it.
            let message = refusal.message(&w.name);
            if log.error.as_deref() != Some(message.as_str()) {
                // A later edit of this setting that applies answers it (`gather_settings`); an edit of another
                // setting of the lane (the field that took the focus) does not.
                let settings = settings_labelled(refusal.setting);
                log.error_about(
                    ErrorTopic::LaneEdit {
                        lane: lane.index,
                        settings,
                    },
                    message,
                );
            }
        }
        if edit != settings.0
            && let Err((field, problem)) = crate::scene::check_contact(&edit)
            && LaneSetting::of_field(&field)
                .is_some_and(|s| LaneSetting::changed(&settings.0, &edit).contains(&s))
        {
            // A number the field takes but the lane cannot run (h = 0): refused here in the words of a typed
            // refusal (`lane '…': LABEL: why; kept VALUE`), not sent for the sim to refuse in a script's words
            // (`contact.h ("h [s]") must be …; the edit was not applied`).
            // Only for the setting edited: a lane whose other setting fails (from an older demo) is not locked.
            let setting = LaneSetting::of_field(&field);
            // The value kept, as a typed refusal quotes it: "0.01 s" of "h = 0.01 s".
            let kept = setting.map_or_else(String::new, |s| {
                let text = s.value_text(&settings.0);
                text.split_once(" = ")
                    .map_or(text.clone(), |(_, value)| value.to_string())
            });
            let message = format!(
                "lane '{}': {}: {problem}; kept {kept}",
                displayable(&w.name),
                setting.map_or(field.clone(), |s| s.label().to_string()),
            );
            if log.error.as_deref() != Some(message.as_str()) {
                log.error_about(
                    ErrorTopic::LaneEdit {
                        lane: lane.index,
                        settings: setting.into_iter().collect(),
                    },
                    message,
                );
            }
            edit = settings.0.clone();
        }
        if edit != settings.0 {
            settings.0 = edit;
        }
        preflight(ui, w, diagnostics, start_speed);
    });
}

/// The lane's settings as label–field pairs, editing `edit`; the method's own settings are enabled, the other's
/// greyed out. `w` is the lane as it runs (for d̂'s automatic value).
fn settings_grid(
    ui: &mut egui::Ui,
    lane_index: usize,
    w: &LaneWorld,
    edit: &mut crate::physics::world::ContactSettings,
    refused: &Refusals,
) -> egui::Response {
    // Two settings a row, so both lanes of the wall throw and the energy landscape below them fit a
    // 900 px window without scrolling; one a row in a panel narrower than two a row were when last drawn,
    // whose right-hand column would be cut off.
    // By layout: a manual d̂ field makes the row wider than "auto" does.
    let two_a_row_id = egui::Id::new((
        "two settings a row",
        lane_index,
        edit.method == ContactMethod::Ipc,
        edit.dhat.is_some(),
    ));
    let two_a_row_width = ui.ctx().data(|d| d.get_temp::<f32>(two_a_row_id));
    let narrow = two_a_row_width.is_some_and(|width| ui.available_width() < width);
    let next_setting = |ui: &mut egui::Ui| {
        if narrow {
            ui.end_row();
        }
    };
    let grid = egui::Grid::new(("settings", lane_index, narrow))
        .num_columns(if narrow { 2 } else { 4 })
        .show(ui, |ui| {
            // Each method's own settings; the other's stay visible (switching the method uses them) but
            // greyed out, since they do nothing in this lane now.
            let penalty = edit.method == ContactMethod::Penalty;
            let ipc = edit.method == ContactMethod::Ipc;
            setting_label(ui, LaneSetting::Method, true);
            egui::ComboBox::from_id_salt(("method", lane_index))
                .selected_text(edit.method.label())
                .width(70.0)
                .show_ui(ui, |ui| {
                    ui.selectable_value(&mut edit.method, ContactMethod::Penalty, "penalty");
                    ui.selectable_value(&mut edit.method, ContactMethod::Ipc, "ipc");
                });
            next_setting(ui);
            setting_label(ui, LaneSetting::Friction, true);
            ui.add(
                setting_field(
                    &mut edit.friction,
                    LaneSetting::Friction.label(),
                    0.0..=crate::scene::MAX_FRICTION,
                    refused,
                )
                .speed(0.01)
                .max_decimals(3),
            )
            .on_hover_text("Coulomb coefficient (0: frictionless, the seed's setting)");
            ui.end_row();
            setting_label(ui, LaneSetting::Stiffness, penalty);
            ui.add_enabled(
                penalty,
                setting_field(
                    &mut edit.stiffness,
                    LaneSetting::Stiffness.label(),
                    any::<f64>(),
                    refused,
                )
                .speed(100.0),
            );
            next_setting(ui);
            setting_label(ui, LaneSetting::H, true);
            ui.add(
                setting_field(&mut edit.h, LaneSetting::H.label(), any::<f64>(), refused)
                    .speed(1e-4)
                    .max_decimals(5),
            );
            ui.end_row();
            setting_label(ui, LaneSetting::Dhat, ipc);
            ui.add_enabled_ui(ipc, |ui| {
                ui.horizontal(|ui| {
                    let mut auto = edit.dhat.is_none();
                    let auto_box = ui.checkbox(&mut auto, "auto");
                    if auto_box.changed() {
                        edit.dhat = if auto { None } else { Some(w.dhat()) };
                    }
                    if let Some(dhat) = edit.dhat.as_mut() {
                        ui.add(
                            setting_field(dhat, LaneSetting::Dhat.label(), any::<f64>(), refused)
                                .speed(1e-5)
                                .max_decimals(6),
                        );
                    } else if narrow {
                        // One setting a row: the figure beside the box ran past a narrow panel's edge (a
                        // 640 × 480 window) and every wrapped line of the panel with it. It is in the pre-flight.
                        auto_box.on_hover_text(format!("{:.2e} m", w.dhat()));
                    } else {
                        ui.small(format!("{:.2e}", w.dhat()));
                    }
                })
            });
            next_setting(ui);
            setting_label(ui, LaneSetting::Gravity, true);
            ui.add(
                setting_field(
                    &mut edit.gravity.y,
                    LaneSetting::Gravity.label(),
                    any::<f64>(),
                    refused,
                )
                .speed(0.1),
            );
            ui.end_row();
            // Adaptive κ sets κ itself each step (SPEC §1.4), from the gradient balance: the typed value is
            // unused then, and greyed as the other method's settings are.
            let typed_kappa = ipc && !edit.adaptive_kappa;
            setting_label(ui, LaneSetting::Kappa, typed_kappa);
            ui.add_enabled(
                typed_kappa,
                setting_field(
                    &mut edit.kappa,
                    LaneSetting::Kappa.label(),
                    any::<f64>(),
                    refused,
                )
                .speed(100.0),
            )
            .on_disabled_hover_text(if ipc {
                "Unused while adaptive κ is on: κ is set each step from the gradient balance (its value is beside \
                 \"adaptive κ\")"
            } else {
                "IPC's barrier stiffness; unused by penalty"
            });
            next_setting(ui);
            setting_label(ui, LaneSetting::NewtonTolerance, true);
            ui.add(
                // In scientific notation, every digit kept (a value re-read from its text must not change): 1e-10 m
                // read "0.00000000010" with fixed decimals.
                setting_field(
                    &mut edit.newton_tolerance,
                    LaneSetting::NewtonTolerance.label(),
                    any::<f64>(),
                    refused,
                )
                .speed(1e-11)
                .custom_formatter(|v, _| format!("{v:e}")),
            );
            ui.end_row();
            setting_label(ui, LaneSetting::AdaptiveKappa, ipc);
            ui.add_enabled_ui(ipc, |ui| {
                ui.horizontal(|ui| {
                    let adaptive = ui.add(egui::Checkbox::without_text(&mut edit.adaptive_kappa));
                    // The κ the last step ended with (its largest over the step's contact groups).
                    let in_use = (edit.adaptive_kappa && w.settings.adaptive_kappa)
                        .then(|| w.last.as_ref().and_then(|d| d.kappa))
                        .flatten();
                    if let Some(kappa) = in_use {
                        // Short enough for a narrow panel's one setting a row.
                        let text = format!("now {kappa:.2e}");
                        ui.small(text).on_hover_text("the κ the last step ended with");
                        adaptive.on_hover_text(format!("κ now {kappa:.6e}"));
                    }
                })
            });
            next_setting(ui);
            setting_label(ui, LaneSetting::NewtonMaxIterations, true);
            ui.add(
                setting_field(
                    &mut edit.newton_max_iterations,
                    LaneSetting::NewtonMaxIterations.label(),
                    any::<u32>(),
                    refused,
                )
                .speed(1.0),
            );
            ui.end_row();
            setting_label(ui, LaneSetting::CcdFactor, ipc);
            ui.add_enabled(
                ipc,
                setting_field(
                    &mut edit.ccd_factor,
                    LaneSetting::CcdFactor.label(),
                    any::<f64>(),
                    refused,
                )
                .speed(0.01)
                .max_decimals(3),
            );
            ui.end_row();
        });
    if !narrow {
        let width = grid.response.rect.width();
        ui.ctx().data_mut(|d| d.insert_temp(two_a_row_id, width));
    }
    grid.response
}

/// Shortens the sliders of a narrow panel, so that each slider's value and name stay in the panel: at egui's
/// 100 points a slider, a panel at its 240-point least cut off "fixed rate [Hz]" and "penalty log10 k".
fn fit_sliders(ui: &mut egui::Ui) {
    // About what a slider's value box and a name of 15 letters take beside it.
    const BESIDE_SLIDER: f32 = 150.0;
    ui.spacing_mut().slider_width = (ui.available_width() - BESIDE_SLIDER).clamp(40.0, 100.0);
}

/// Speeds below which a ball's motion can be lost, when they are large enough to see (from 1 mm/s).
///
/// Newton stops once its direction is shorter than the tolerance (SPEC §1), before taking it. A ball solved on
/// its own whose whole step is shorter (each coordinate of `v h`, or `g h²` from rest) stays where it is, and its
/// velocity `(x − xᵗ)/h` becomes 0: at the seed's 10⁻¹⁰ m and 10 ms that is 10⁻⁸ m/s, but a tolerance loosened
/// to 1 mm freezes everything slower than about 0.1 m/s. A ball solved with faster ones moves with them.
pub fn resolution_warning(tolerance: f64, h: f64) -> Option<String> {
    let slowest = tolerance / h;
    (slowest >= 1e-3)
        .then(|| {
            format!(
                "⚠ Newton tol / h = {slowest:.3} m/s: a ball slower than about that can stop dead each step"
            )
        })
}

/// The seed's three numbers: v·h against half the thinnest wall, dhat, and the CCD factor with Newton spikes.
/// v is the fastest any ball has moved in the lane's run (thrown balls included, [`LaneStats::max_speed`]), at
/// the scene's start (`start_speed`) or now, whichever is fastest: once IPC has stopped a throw, its current
/// speed would say nothing about the throw. Balls that tunnelled out are left out from then on.
///
/// [`LaneStats::max_speed`]: crate::physics::world::LaneStats::max_speed
fn preflight(ui: &mut egui::Ui, w: &LaneWorld, diagnostics: &LaneDiagnostics, start_speed: f64) {
    let h = w.settings.h;
    // A ball that went through a wall (out of a pit, falling on for ever) says nothing about the walls any more.
    let v_max = w
        .balls
        .iter()
        .enumerate()
        .filter(|(i, _)| !w.ball_tunneled(*i))
        .map(|(_, b)| b.velocity.length())
        .fold(start_speed.max(w.stats.max_speed), f64::max);
    let thinnest = w
        .walls
        .iter()
        .map(|wall| 2.0 * wall.half_extents[wall.thickness_axis()])
        .fold(f64::INFINITY, f64::min);
    ui.label(egui::RichText::new("pre-flight").strong());
    if w.balls.is_empty() && !w.rods.is_empty() {
        // Rods meet the floor through the impulse law, not the solve: the ball numbers would all read zero.
        ui.label(
            "Rods: exact impulse law at the touching end (SPEC §3), e per rod. The settings above apply to \
             balls dropped into this lane.",
        );
        ui.label(format!(
            "{} · {}",
            crate::sim::lane_summary(w),
            displayable(&crate::sim::lane_outcome(w))
        ));
        fault_line(ui, w);
        return;
    }
    if thinnest.is_finite() {
        let travel = v_max * h;
        let text = format!(
            "v·h = {:.2} mm vs ½ thinnest wall {:.2} mm",
            travel * 1e3,
            thinnest * 0.5e3
        );
        let tunnels = can_tunnel(travel, thinnest) && w.settings.method == ContactMethod::Penalty;
        warning_line(ui, text, tunnels.then_some("penalty can tunnel")).on_hover_text(
            "v is the fastest any ball of this lane has moved in its run so far (a throw's speed stays in it after \
             the wall stopped the ball), and h the lane's step now. A ball that travels more than half a wall's \
             thickness in one step can pass it under penalty contact.",
        );
        let worst = nearest_pass(
            w.balls.iter().map(|b| (b.mass, b.radius)),
            v_max,
            w.settings.stiffness,
            thinnest,
        );
        if let (ContactMethod::Penalty, Some((depth, reach))) = (w.settings.method, worst) {
            let text = format!(
                "stop depth v·√(m/k) ≤ {} vs r + ½ thinnest wall {}",
                crate::text::length_text(depth),
                crate::text::length_text(reach)
            );
            let through = can_tunnel(depth, 2.0 * reach);
            warning_line(ui, text, through.then_some("k too soft, through at any h")).on_hover_text(
                "How deep the wall's spring lets a ball in at the lane's fastest speed before it stops it: \
                 ½ m v² = ½ k d², for the ball that comes nearest to passing. A bound: v is the fastest any ball \
                 has moved, taken for every ball, so the heaviest may never have come so fast. Once its centre passes the wall's \
                 middle (an overlap of its radius and half the wall) the far face is the nearer one, and penalty \
                 pushes the ball out through it whatever h: a smaller h helps only a wall stiff enough to stop the \
                 ball before that.",
            );
        }
    }
    let [dhat, newton] = contact_preflight(w, diagnostics.newton_spikes);
    let show = |ui: &mut egui::Ui, line: PreflightLine| match line {
        PreflightLine::Applies(text) => ui.label(text),
        PreflightLine::Warning(text) => {
            ui.colored_label(egui::Color32::from_rgb(255, 180, 60), text)
        }
        PreflightLine::IpcOnly(text) => ui.add_enabled(false, egui::Label::new(text)),
    };
    show(ui, dhat);
    if let Some(warning) = resolution_warning(w.settings.newton_tolerance, h) {
        ui.colored_label(egui::Color32::from_rgb(255, 180, 60), warning);
    }
    show(ui, newton).on_hover_text(
        "Newton directions per step: the last step's, the most and the mean so far. A spike is a step that took \
         more than twice the median count of the steps in the plots: a contact that cost many clamped directions.",
    );
    // How the solves end (issue 8): a capped or stalled solve still returns a feasible state, but say so.
    let stop = w.last.as_ref().map(|d| match &d.stop {
        StopReason::Converged => "converged".to_string(),
        StopReason::IterationCap => "hit the iteration cap (state kept feasible)".to_string(),
        StopReason::LineSearchStalled => {
            "line search stalled, α < 1e-12 (last feasible state kept)".to_string()
        }
        StopReason::LinearSolveFailed(why) => {
            format!("linear solve failed: {why} (last feasible state kept)")
        }
    });
    let troubled = w.stats.iteration_caps > 0 || w.stats.stalled_line_searches > 0;
    let solves = format!(
        "last solve {}; caps {} · stalls {} so far",
        stop.unwrap_or_else(|| "not yet run".into()),
        w.stats.iteration_caps,
        w.stats.stalled_line_searches
    );
    let solves = if troubled {
        ui.colored_label(egui::Color32::from_rgb(255, 180, 60), solves)
    } else {
        ui.label(solves)
    };
    solves.on_hover_text(
        "How the last Newton solve ended. caps: steps that stopped at the Newton cap (their state is free of \
         overlaps but not converged); stalls: steps whose line search found no decrease down to α = 1e-12.",
    );
    ui.label(format!(
        "t = {:.3} s · tunnelled {} · {} · {}",
        w.time,
        w.stats.tunneled,
        crate::sim::lane_summary(w),
        displayable(&crate::sim::lane_outcome(w))
    ));
    fault_line(ui, w);
}

/// A pre-flight line and how it is shown.
#[derive(Clone, Debug, PartialEq)]
enum PreflightLine {
    Applies(String),
    Warning(String),
    /// A number of IPC's that the lane's method does not use: greyed.
    IpcOnly(String),
}

/// How deep a penalty wall of stiffness `k` [N/m] lets a ball of mass `m` [kg] at speed `v` [m/s] in before its
/// spring stops it [m]: ½ m v² = ½ k d². Once the ball's centre passes the wall's middle (an overlap of its radius
/// and half the wall) the far face is the nearer, and the ball is pushed through it, at any h.
fn penalty_stopping_depth(v: f64, m: f64, k: f64) -> f64 {
    v * (m / k).sqrt()
}

/// A pre-flight line: `text`, or in amber with a "⚠" and `warning` after it.
fn warning_line(ui: &mut egui::Ui, text: String, warning: Option<&str>) -> egui::Response {
    match warning {
        Some(warning) => ui.colored_label(
            egui::Color32::from_rgb(255, 180, 60),
            format!("⚠ {text}: {warning}"),
        ),
        None => ui.label(text),
    }
}

/// The ball (of `(mass, radius)`) that a penalty wall of stiffness `k` comes nearest to letting through at speed
/// `v`, the thinnest wall `thinnest` thick: its stopping depth and the overlap at which its centre passes the
/// wall's middle ([`penalty_stopping_depth`]). None without balls.
fn nearest_pass(
    balls: impl Iterator<Item = (f64, f64)>,
    v: f64,
    k: f64,
    thinnest: f64,
) -> Option<(f64, f64)> {
    balls
        .map(|(mass, radius)| (penalty_stopping_depth(v, mass, k), radius + 0.5 * thinnest))
        .max_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)))
}

/// The seed's first pre-flight number: penalty can tunnel when the step's travel `v·h` *exceeds* half the thinnest
/// wall. A 1 m/s throw at h = 10 ms and a 20 mm wall is exactly at it, and its speed read back from positions is
/// 1.0000000000000009 m/s: past it by rounding alone, it was warned of while the same lane stopped the ball at 5 mm.
fn can_tunnel(travel: f64, thinnest: f64) -> bool {
    travel > 0.5 * thinnest * (1.0 + 1e-9)
}

/// The seed's second and third pre-flight numbers: d̂ as the contact tolerance, and the CCD factor with the Newton
/// counts and their spikes. Penalty has neither a tolerance nor CCD: for it they are greyed as "IPC only" (kept
/// in view, since switching the method uses them), and its Newton counts stand on their own.
fn contact_preflight(w: &LaneWorld, spikes: u32) -> [PreflightLine; 2] {
    let last = w.last.as_ref().map(|d| d.newton_iterations).unwrap_or(0);
    let counts = format!(
        "Newton last {last}, max {}, mean {:.2}, spikes {spikes}",
        w.stats.max_newton,
        w.stats.mean_newton()
    );
    let newton = |text: String| {
        if spikes > 0 {
            PreflightLine::Warning(text)
        } else {
            PreflightLine::Applies(text)
        }
    };
    match w.settings.method {
        ContactMethod::Ipc => [
            dhat_line(
                w.dhat(),
                w.balls
                    .iter()
                    .map(|b| b.radius)
                    .filter(|&r| r > 0.0)
                    .reduce(f64::min),
            ),
            newton(format!(
                "CCD s = {}; {counts}",
                ccd_factor_text(w.settings.ccd_factor)
            )),
        ],
        ContactMethod::Penalty => [
            PreflightLine::IpcOnly(format!(
                "dhat = {}, CCD s = {}: IPC only, unused by penalty",
                crate::sim::length_text(w.dhat()),
                ccd_factor_text(w.settings.ccd_factor)
            )),
            newton(counts),
        ],
    }
}

/// The CCD factor s for the pre-flight: two decimals as the seed writes it (0.90), in powers of ten below 0.01,
/// where two decimals read "0.00", a factor the lane refuses (s = 10⁻⁴ is allowed).
fn ccd_factor_text(s: f64) -> String {
    if s >= 0.01 {
        format!("{s:.2}")
    } else {
        crate::text::scientific(s, 3)
    }
}

/// IPC's d̂ as the contact tolerance, and a warning where it exceeds the smallest ball's radius (point balls have
/// none): the barrier then pushes balls apart, and off the walls, from farther than their own size, so they hover
/// and a pile set to such a d̂ mid-run bursts apart (a review set d̂ = 1 m in the ball pit: 2.3·10⁵ J from 27 J).
fn dhat_line(dhat: f64, smallest_radius: Option<f64>) -> PreflightLine {
    let tolerance = format!("dhat = {}", crate::sim::length_text(dhat));
    match smallest_radius {
        Some(radius) if dhat > radius => PreflightLine::Warning(format!(
            "⚠ {tolerance} exceeds the smallest ball's radius ({}): balls push each other and the walls away \
             from farther than their size",
            crate::sim::length_text(radius)
        )),
        _ => PreflightLine::Applies(format!("{tolerance} (the contact tolerance)")),
    }
}

/// A lane setting's label, greyed when the lane's method does not use it, with what it does on hover (greyed or
/// not: the other method's settings are what a switch would use).
fn setting_label(ui: &mut egui::Ui, setting: LaneSetting, enabled: bool) -> egui::Response {
    let help = displayable(setting.help());
    ui.add_enabled(enabled, egui::Label::new(setting.label()))
        .on_hover_text(help.as_ref())
        .on_disabled_hover_text(help.as_ref())
}

/// What the run controls say after a frame: a refused typed value (`refusal`) is an error about them, which a
/// change of either control that applies (`applied`) withdraws, while an error about anything else stays.
fn report_run_controls(refusal: Option<RefusedText>, applied: bool, log: &mut SimLog) {
    if let Some(refusal) = refusal {
        // egui may read the same text twice as the field loses focus: one message for it.
        let message = refusal.text();
        if log.error.as_deref() != Some(message.as_str()) {
            log.error_about(ErrorTopic::RunControl, message);
        }
    } else if applied {
        log.withdraw(&ErrorTopic::RunControl);
    }
}

/// The lane settings that have a number field.
const NUMBER_FIELDS: [LaneSetting; 9] = [
    LaneSetting::Friction,
    LaneSetting::Stiffness,
    LaneSetting::H,
    LaneSetting::Dhat,
    LaneSetting::Gravity,
    LaneSetting::Kappa,
    LaneSetting::NewtonTolerance,
    LaneSetting::NewtonMaxIterations,
    LaneSetting::CcdFactor,
];

/// The number fields' settings whose field is labelled `label`: the setting a refusal (which names its field by
/// label) is about.
fn settings_labelled(label: &str) -> Vec<LaneSetting> {
    NUMBER_FIELDS
        .into_iter()
        .filter(|&setting| setting.label() == label)
        .collect()
}

/// A number field for a lane setting. A typed value takes effect on Enter or when the field loses focus, not
/// on each key: typing 0.3 into μ would otherwise run (and record) μ = 0 for the ticks between the keys, and
/// typing 0.002 into d̂ would try d̂ = 0 on the way.
///
/// Text that is no number, not finite, not whole for a whole-number setting, or outside `allowed` keeps the old
/// value and is put in `refused` (egui would revert it silently, clamp it into the range, or read "nan" as ∞);
/// the lane panel reports it. A number inside `allowed` is checked against the scene limits by the lane panel
/// (`lane_panel`, in the same words) before it goes to the sim.
fn setting_field<'a, Num: egui::emath::Numeric>(
    value: &'a mut Num,
    setting: &'static str,
    allowed: std::ops::RangeInclusive<f64>,
    refused: &Refusals,
) -> egui::DragValue<'a> {
    let kept = crate::text::number(value.to_f64());
    let (format, parse) = keeping_shown_text(
        |v, decimals| field_text(v, decimals, Num::INTEGRAL),
        refusing_parser(setting, allowed.clone(), Num::INTEGRAL, kept, refused),
    );
    egui::DragValue::new(value)
        .custom_formatter(format)
        .update_while_editing(false)
        .range(allowed)
        // A value from a scene file outside the drag range is shown as it is, not changed by drawing it.
        .clamp_existing_to_range(false)
        .custom_parser(parse)
}

/// The decimals egui offers a number's formatter.
type Decimals = std::ops::RangeInclusive<usize>;

/// A number field's formatter and parser, joined so that the text the field shows, entered untouched, keeps the
/// value it stands for rather than the rounded number it reads as: a slider's "333.33" set a clock of 333.3333 Hz
/// to 333.33 Hz, an x̃ dragged to its range's end (0.4950000000000001) was refused as "0.495", and a lane's h of
/// 1/60 s, shown "0.01667", became 0.01667 s. egui formats the held value before it parses an edit in the same
/// pass, so the parser knows the text shown. Any other text goes to `parse`.
fn keeping_shown_text<'a>(
    format: impl Fn(f64, Decimals) -> String + 'a,
    parse: impl Fn(&str) -> Option<f64> + 'a,
) -> (
    impl Fn(f64, Decimals) -> String + 'a,
    impl Fn(&str) -> Option<f64> + 'a,
) {
    let shown = std::rc::Rc::new(std::cell::RefCell::new(None::<(f64, String)>));
    let recorded = shown.clone();
    let format = move |value: f64, decimals| {
        let text = format(value, decimals);
        *recorded.borrow_mut() = Some((value, text.clone()));
        text
    };
    let parse = move |text: &str| match &*shown.borrow() {
        Some((value, shown)) if text.trim() == shown => Some(*value),
        _ => parse(text),
    };
    (format, parse)
}

/// A setting field's text: egui's, with `decimals`, from 10⁻³ to below 10⁶ where that reads back as the value or
/// shows four significant digits; otherwise scientific notation with at most six. A stiffness of 10¹² read
/// "1000000000000" and pushed the panel past the window's edge, and a d̂ of 10⁻⁹ m read "0.00000".
fn field_text(value: f64, decimals: std::ops::RangeInclusive<usize>, integral: bool) -> String {
    let magnitude = value.abs();
    if integral || value == 0.0 || !value.is_finite() {
        return egui::emath::format_with_decimals_in_range(value, decimals);
    }
    if (1e-3..1e6).contains(&magnitude) {
        let text = egui::emath::format_with_decimals_in_range(value, decimals);
        // Rounded to the field's decimals, a typed 1.23456e-3 read "0.00123". Kept where it reads back as the
        // value (a drag's last-bit noise aside: 0.30000000000000004 reads "0.300") or shows four significant
        // digits (h = 1/60 s reads "0.01667").
        let significant = text
            .chars()
            .filter(char::is_ascii_digit)
            .skip_while(|&c| c == '0')
            .count();
        let reads_back = text
            .parse::<f64>()
            .is_ok_and(|back| (back - value).abs() <= 1e-9 * magnitude);
        if reads_back || significant >= 4 {
            return text;
        }
    }
    // Six significant digits at most: 1/60 read "1.6666666666666666e-2" and pushed the lane grid to one setting a
    // row.
    crate::text::scientific(value, 6)
}

/// A run-control slider (time scale, fixed rate). Dragging is the slider's own; a typed value takes effect on
/// Enter or when the field loses focus, and text that is no number or outside `range` keeps the old value and is
/// put in `refused`, as a lane setting's field does: egui would clamp a typed 5000 Hz to 1000 Hz without a word.
fn run_slider<'a>(
    value: &'a mut f64,
    setting: &'static str,
    range: std::ops::RangeInclusive<f64>,
    refused: &Refusals,
) -> egui::Slider<'a> {
    // Clamped as egui clamps by default: a number dragged past the range would stop the clock (a negative time
    // scale, a rate of 0 Hz).
    checked_slider(value, setting, range.clone(), range, refused)
        .clamping(egui::SliderClamping::Always)
        .logarithmic(true)
}

/// Adds a [`checked_slider`] (`logarithmic` or not) and keeps a dragged value within `typed` too: its number box
/// drags without a range, so that a typed value beyond the drag range is kept as typed. Whether it changed.
fn add_checked_slider(
    ui: &mut egui::Ui,
    value: &mut f64,
    (setting, range, typed): (
        &'static str,
        std::ops::RangeInclusive<f64>,
        std::ops::RangeInclusive<f64>,
    ),
    logarithmic: bool,
    refused: &Refusals,
) -> bool {
    let changed = ui
        .add(checked_slider(value, setting, range, typed.clone(), refused).logarithmic(logarithmic))
        .changed();
    if changed {
        *value = value.clamp(*typed.start(), *typed.end());
    }
    changed
}

/// A slider over `range` whose typed text is checked as a setting field's is: a number within `typed` (which
/// may reach beyond the drag range; the slider then shows it) takes effect on Enter or when the field loses
/// focus, and anything else keeps the old value and is put in `refused`, where egui would clamp a typed −5 m/s
/// to 0.5 m/s or 1e9 to 60 without a word.
fn checked_slider<'a>(
    value: &'a mut f64,
    setting: &'static str,
    range: std::ops::RangeInclusive<f64>,
    typed: std::ops::RangeInclusive<f64>,
    refused: &Refusals,
) -> egui::Slider<'a> {
    // Six significant digits: a rate read back from the fixed clock's nanoseconds is 333.3333333333333 Hz.
    let kept = crate::text::number(format!("{:.5e}", *value).parse().unwrap_or(*value));
    let (format, parse) = keeping_shown_text(
        |value, _| slider_text(value),
        refusing_parser(setting, typed, false, kept, refused),
    );
    egui::Slider::new(value, range)
        .text(setting)
        .custom_formatter(format)
        .clamping(egui::SliderClamping::Never)
        // Read on each key, typing 0.5 into the time scale would refuse its "0" on the way, and typing 500 Hz
        // would run the clock at 5 Hz and 50 Hz first.
        .update_while_editing(false)
        .custom_parser(parse)
}

/// A slider's number: three significant digits at least and five at most (whole numbers of more digits whole), on
/// every screen. egui picks a slider's decimals from one physical pixel of pointer travel, so on a screen at 150 %
/// or 200 % the time scale read "1.0" and the mass "1.0" where they read "1.00" at 100 %.
fn slider_text(value: f64) -> String {
    let (fewest, most) = if value == 0.0 || !value.is_finite() {
        (0, 2)
    } else {
        let exponent = value.abs().log10().floor() as i64;
        let most = (4 - exponent).clamp(0, 16);
        ((2 - exponent).clamp(0, most) as usize, most as usize)
    };
    egui::emath::format_with_decimals_in_range(value, fewest..=most)
}

/// The text parser of a number field: a number [`parse_setting`] takes, or `None` with the refusal put in
/// `refused` (`kept` is the value the field keeps, as the message quotes it).
pub(super) fn refusing_parser(
    setting: &'static str,
    allowed: std::ops::RangeInclusive<f64>,
    integral: bool,
    kept: String,
    refused: &Refusals,
) -> impl Fn(&str) -> Option<f64> + use<> {
    let refused = refused.clone();
    move |text| match parse_setting(text, &allowed, integral) {
        Ok(number) => Some(number),
        Err(problem) => {
            *refused.borrow_mut() = Some(RefusedText {
                setting,
                typed: text.to_string(),
                problem,
                kept: kept.clone(),
            });
            None
        }
    }
}

/// Every value a number of type `Num` can hold, as a setting field's allowed range.
fn any<Num: egui::emath::Numeric>() -> std::ops::RangeInclusive<f64> {
    Num::MIN.to_f64()..=Num::MAX.to_f64()
}

/// Where the setting fields of one panel put the text they refuse.
pub(super) type Refusals = std::rc::Rc<std::cell::RefCell<Option<RefusedText>>>;

/// Text typed into a setting field and not taken.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct RefusedText {
    /// The setting as its field is labelled.
    setting: &'static str,
    typed: String,
    /// Why, e.g. "is not a number".
    problem: String,
    /// The value the setting keeps, as a message quotes it.
    kept: String,
}

impl RefusedText {
    /// The message in the UI for a lane's setting, e.g. `lane 'ipc': k [N/m]: "abc" is not a number; kept 10000`.
    fn message(&self, lane: &str) -> String {
        format!("lane '{}': {}", displayable(lane), self.text())
    }

    /// The refusal on its own, e.g. `fixed rate [Hz]: "5000" is outside 5 to 1000; kept 100`.
    pub(super) fn text(&self) -> String {
        format!(
            "{}: \"{}\" {}; kept {}",
            self.setting,
            crate::text::abbreviate(self.typed.trim(), 40),
            self.problem,
            self.kept
        )
    }
}

/// A typed setting as egui reads numbers (spaces ignored, '−' as '-'), or why it is refused: no number, not
/// finite, not whole when `integral`, or outside `allowed`.
pub(super) fn parse_setting(
    text: &str,
    allowed: &std::ops::RangeInclusive<f64>,
    integral: bool,
) -> Result<f64, String> {
    let cleaned: String = text
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| if c == '−' { '-' } else { c })
        .collect();
    let number: f64 = cleaned.parse().map_err(|_| "is not a number".to_string())?;
    if !number.is_finite() {
        return Err("is not a finite number".into());
    }
    if integral && number.fract() != 0.0 {
        return Err("is not a whole number".into());
    }
    if !allowed.contains(&number) {
        return Err(format!(
            "is outside {} to {}",
            crate::text::number(*allowed.start()),
            crate::text::number(*allowed.end())
        ));
    }
    // −0 is 0: a field showed "-0.00" and the messages quoted "kept -0".
    Ok(number + 0.0)
}

/// Why the lane is paused, if it is (a non-finite state, SPEC §7).
fn fault_line(ui: &mut egui::Ui, w: &LaneWorld) {
    if let Some(fault) = &w.fault {
        ui.colored_label(
            egui::Color32::from_rgb(255, 90, 80),
            format!("paused: {fault}"),
        );
    }
}

fn plots_panel(
    ui: &mut egui::Ui,
    lanes: &Query<(Entity, &Lane, &mut LaneSettings, &LaneDiagnostics)>,
    sorted: &[Entity],
    colors: &LaneColors,
) {
    // One legend for the three plots, above them: in each plot a legend of four lanes covered the curves and,
    // with long lane names, ran off the plot's edge.
    ui.horizontal_wrapped(|ui| {
        for &entity in sorted {
            if lanes.get(entity).is_ok() {
                ui.label(
                    egui::RichText::new(format!("━ {}", colors.title(entity)))
                        .small()
                        .color(colors.of(entity)),
                );
            }
        }
    });
    let spacing = ui.spacing().item_spacing.x;
    let width = ((ui.available_width() - 2.0 * spacing) / 3.0 - 1.0).max(60.0);
    let below_legend = ui.available_height();
    // One time span for the three plots (`shared_time_span`).
    let histories = || {
        sorted
            .iter()
            .filter_map(|&e| lanes.get(e).ok())
            .map(|(_, _, _, d)| &d.history)
    };
    let scale = gap_scale(histories().flat_map(|h| h.iter().filter_map(|s| s.min_gap)));
    type Extract<'a> = &'a dyn Fn(&crate::sim::DiagnosticSample) -> Option<f64>;
    let charts: [(&str, Extract); 3] = [
        ("min gap, log scale (negative = penetration)", &|s| {
            s.min_gap.map(|gap| signed_log_gap(gap, scale))
        }),
        ("Newton iterations per step", &|s| {
            Some(s.newton_iterations as f64)
        }),
        (ENERGY_PLOT_TITLE, &|s| Some(s.energy)),
    ];
    let span = shared_time_span(histories());
    let any_gap = histories().any(|h| h.iter().any(|s| s.min_gap.is_some()));
    ui.horizontal(|ui| {
        for (title, extract) in charts {
            ui.vertical(|ui| {
                ui.set_width(width);
                let title_top = ui.cursor().min.y;
                let heading = if title.starts_with("min gap") && span.is_none() {
                    // Not "nothing measured" before the first step: the scene may well have balls and walls.
                    "min gap: no step taken yet"
                } else if title.starts_with("min gap") && !any_gap {
                    "min gap: nothing measured (no ball with a wall or another ball)"
                } else {
                    title
                };
                // A narrow plot (a 1 024-pixel window) cut the long titles to "min gap, log scale (negativ…": a
                // shorter wording where the whole one does not fit, the whole one on hover.
                let short = SHORT_PLOT_TITLES
                    .iter()
                    .find(|(whole, _)| *whole == heading)
                    .filter(|_| !fits_one_small_line(ui, heading));
                let (heading, shortened) = match short {
                    Some(&(whole, short)) => (short, Some(whole)),
                    None => (heading, None),
                };
                // One line, cut with "…" (whole on hover): wrapped in a narrow plot (800 px), its second line ran
                // into the top label of the plot's axis.
                let heading_label =
                    ui.add(egui::Label::new(egui::RichText::new(heading).small()).truncate());
                if title.starts_with("energy") {
                    // What a student takes for physics otherwise (the seed's point about implicit Euler).
                    heading_label.on_hover_text(ENERGY_PLOT_NOTE);
                } else if let Some(whole) = shortened {
                    heading_label.on_hover_text(whole);
                }
                let mut chart = Plot::new(title);
                chart = match span {
                    Some((t0, t1)) => chart.include_x(t0).include_x(t1),
                    // No step yet: 0 to 1 s and 0 to 1, not egui_plot's -0.5 to 0.5 ("-0.5 s" of no history).
                    None => chart
                        .include_x(0.0)
                        .include_x(1.0)
                        .include_y(0.0)
                        .include_y(1.0),
                };
                if title.starts_with("min gap") {
                    let gaps = histories().flat_map(|h| h.iter().filter_map(extract));
                    chart = gap_axis(chart, gaps, scale);
                }
                if !title.starts_with("min gap") {
                    // Newton counts are whole and never below zero: the axis read 4.2, 4.4, … and, for lanes
                    // of rods alone, -10 to 10.
                    let counts = title.starts_with("Newton");
                    if counts {
                        chart = chart.include_y(0.0).include_y(1.0);
                    }
                    chart = chart
                        .y_grid_spacer(egui_plot::uniform_grid_spacer(labelled_steps(
                            Y_LABEL_LEAST_PX,
                            if counts { 1.0 } else { 0.0 },
                        )))
                        .custom_y_axes(vec![
                            egui_plot::AxisHints::new_y()
                                // The plot's margin reaches below 0; no count is negative.
                                .formatter(move |mark, _| {
                                    if counts && mark.value < 0.0 {
                                        String::new()
                                    } else {
                                        axis_number_text(mark)
                                    }
                                })
                                .label_spacing(
                                    Y_LABEL_LEAST_PX as f32 - 4.0..=Y_LABEL_LEAST_PX as f32 - 2.0,
                                ),
                        ]);
                }
                if title.starts_with("energy") {
                    let values = sorted
                        .iter()
                        .filter_map(|&e| lanes.get(e).ok())
                        .flat_map(|(_, _, _, d)| d.history.iter().filter_map(extract));
                    if let Some((lo, hi)) = least_visible_span(values) {
                        chart = chart.include_y(lo).include_y(hi);
                    }
                }
                chart
                    .height(plot_height(ui, below_legend, title_top))
                    // Room above and below the curves: a lane whose value holds still (the slope's IPC gap)
                    // would otherwise run along the frame's edge.
                    .set_margin_fraction(egui::Vec2::new(0.05, 0.12))
                    // The time axis in simulated seconds, said on its ticks, at steps of 1, 2 or 5: on
                    // egui_plot's powers of ten the finer ticks of 5–8 s of history had no room for labels,
                    // and only "0 s" was written.
                    .grid_spacing(GRID_LEAST_PX..=300.0)
                    .x_grid_spacer(time_marks)
                    .custom_x_axes(vec![
                        egui_plot::AxisHints::new_x()
                            .formatter(|mark, _| seconds_axis_text(mark))
                            // Labels at full strength wherever `time_marks` found room for them (its finer
                            // marks stand at most a quarter of that apart): egui_plot fades them in over this
                            // range, and one exactly at its start is not drawn at all.
                            .label_spacing(20.0..=22.0),
                    ])
                    .allow_scroll(false)
                    .show(ui, |plot| {
                        // Thinned to columns as wide as the plot's pixels as last drawn (egui_plot's transform),
                        // counted from t = 0 rather than from the scrolling left edge: which samples share a
                        // column does not change from frame to frame, so the thinned line does not shimmer.
                        let (x0, columns_per_unit) = (0.0, plot.transform().dpos_dvalue_x());
                        for &entity in sorted {
                            let Ok((_, _, _, diagnostics)) = lanes.get(entity) else {
                                continue;
                            };
                            let mut points = Vec::new();
                            let from = span.map_or(f64::NEG_INFINITY, |(t0, _)| t0);
                            min_max_per_column(
                                diagnostics
                                    .history
                                    .iter()
                                    .filter(|s| s.time >= from)
                                    .filter_map(|s| {
                                        extract(s).filter(|v| v.is_finite()).map(|v| [s.time, v])
                                    }),
                                x0,
                                columns_per_unit,
                                &mut points,
                            );
                            plot.line(
                                Line::new(colors.title(entity), PlotPoints::from(points))
                                    .color(colors.of(entity)),
                            );
                        }
                    });
            });
        }
    });
}

/// The time the three plots share: from the earliest first sample of any lane to the latest last one. Each plot
/// fitted its own samples, and the min-gap plot, which has none while no ball is in a lane (the rod drop), ran
/// from -0.5 s to 0 s beside the others' 0 to 10 s. A lane whose history is full (it has dropped its oldest
/// samples) starts the span at its first sample, so that every lane is drawn over the same time: a lane of 5 ms
/// beside one of 10 ms keeps half as long a history, and its line covered the last 10 s of the other's 20.
fn shared_time_span<'a>(
    histories: impl Iterator<Item = &'a std::collections::VecDeque<crate::sim::DiagnosticSample>>,
) -> Option<(f64, f64)> {
    let spans: Vec<(f64, f64, bool)> = histories
        .filter_map(|h| {
            Some((
                h.front()?.time,
                h.back()?.time,
                h.len() >= crate::sim::HISTORY_LEN,
            ))
        })
        .collect();
    let (first, last) = spans
        .iter()
        .map(|&(a, b, _)| (a, b))
        .reduce(|(a0, a1), (b0, b1)| (a0.min(b0), a1.max(b1)))?;
    let cut = spans
        .iter()
        .filter(|&&(_, _, full)| full)
        .map(|&(a, _, _)| a)
        .fold(first, f64::max);
    Some((cut.min(last), last))
}

/// A gap on the min-gap plot's axis: sign(g)·log₁₀(1 + |g| / s), linear within `scale` s of zero and
/// logarithmic beyond. IPC's micrometre gaps, a penalty ball's millimetre overlap and a ball 40 m off all stay
/// readable on one axis (a linear µm axis ran to 4·10⁷ and put every contact on its zero line).
fn signed_log_gap(gap: f64, scale: f64) -> f64 {
    gap.signum() * (gap.abs() / scale).ln_1p() / std::f64::consts::LN_10
}

/// The min-gap plot's `scale` for [`signed_log_gap`]: 1 µm, or the decade at or below the smallest gap or overlap
/// in `gaps` when that is less (down to 1 pm). With a fixed 1 µm, an IPC lane of d̂ = 0.05 mm that stopped
/// 53.8 nm short was drawn on the zero line, as if in contact.
fn gap_scale(gaps: impl Iterator<Item = f64>) -> f64 {
    let least = gaps
        .map(f64::abs)
        .filter(|g| *g > 0.0 && g.is_finite())
        .fold(1e-6, f64::min);
    10f64.powf(least.log10().floor()).clamp(1e-12, 1e-6)
}

/// The axis label at `value` of [`signed_log_gap`] with `scale`: the gap itself, in the unit that suits it.
fn gap_axis_text(value: f64, scale: f64) -> String {
    if value == 0.0 {
        // The zero line, not "0.0 µm": a length of no unit in particular.
        return "0".into();
    }
    let metres = (value.abs() * std::f64::consts::LN_10).exp_m1() * scale;
    // A grid line at 1 mm comes back as 0.99999999… mm ("1000.0 µm"): snap to the decade it stands for, and
    // write a decade without decimals ("100 mm", not "100.00 mm"): the axis's widest label sets how much of a
    // narrow plot is left for the curves, and "10.000 m" left the min-gap plot a third of its neighbours' width.
    // The finer grid's 2, 5 or any digit of a decade are written so too: "2 µm", not "2.0 µm".
    let mut exponent = metres.log10().floor() as i32;
    let mut digit = (metres / 10f64.powi(exponent)).round();
    if digit == 10.0 {
        // 0.99999999… m, a grid line at 1 m read back.
        (digit, exponent) = (1.0, exponent + 1);
    }
    let decade = 10f64.powi(exponent);
    let text = if ((metres - digit * decade) / metres).abs() < 1e-9 && (1.0..10.0).contains(&digit)
    {
        round_length_text(digit as u64, exponent)
    } else {
        crate::sim::length_text(metres)
    };
    if value < 0.0 {
        format!("-{text}")
    } else {
        text
    }
}

/// `digit` (1 to 9) times 10^`exponent` metres in the unit [`crate::sim::length_text`] would pick, without
/// decimals: 1 µm, 20 µm, 500 nm, 100 mm, 10 m.
fn round_length_text(digit: u64, exponent: i32) -> String {
    let (unit, unit_exponent) = match exponent {
        ..-6 => ("nm", -9),
        -6..=-4 => ("µm", -6),
        -3..=-1 => ("mm", -3),
        _ => ("m", 0),
    };
    match exponent - unit_exponent {
        shift @ 0..=5 => format!("{} {unit}", digit * 10u64.pow(shift as u32)),
        _ => format!("{digit}e{exponent} m"),
    }
}

/// A time axis's tick text, with as many decimals as its step needs: 0.3 s, where `{}` wrote
/// 0.30000000000000004 s, too long for egui_plot to draw, so the tick went unlabelled.
fn seconds_axis_text(mark: egui_plot::GridMark) -> String {
    format!("{} s", axis_number_text(mark))
}

/// A tick's number with the digits its step needs (a step of 0.5 needs one decimal, of 2 none), in powers of
/// ten for steps below 10⁻⁶ or from 10⁶, with as many digits as tell the ticks apart: egui_plot's own rounds
/// the decimals, so ticks 5·10⁻⁷ apart all read "0.000000", and ticks 5·10⁻⁴ apart round 1 J must not all read
/// "1.0e0".
fn axis_number_text(mark: egui_plot::GridMark) -> String {
    let step = mark.step_size.abs();
    let value = mark.value;
    if !(step > 0.0 && step.is_finite() && value.is_finite()) {
        return format!("{value}");
    }
    if (1e-6..1e6).contains(&step) && value.abs() < 1e6 {
        let decimals = (-step.log10() - 1e-9).ceil().clamp(0.0, 6.0) as usize;
        return format!("{value:.decimals$}");
    }
    if value == 0.0 {
        return "0".into();
    }
    // Digits after the mantissa's point: from the value's leading digit down to the step's.
    let digits = (value.abs().log10().floor() - step.log10().floor()).clamp(1.0, 15.0) as usize;
    format!("{value:.digits$e}")
}

/// The least pixels between the plots' grid lines, egui_plot's default, set on each plot so that
/// [`labelled_steps`] can tell its base step in pixels.
const GRID_LEAST_PX: f32 = 8.0;

/// The least pixels between the labels of an axis along y: egui_plot's default.
const Y_LABEL_LEAST_PX: f64 = 20.0;

/// The least pixels between the labels of an axis along x: egui_plot's default.
const X_LABEL_LEAST_PX: f64 = 60.0;

/// The smallest of 1, 2 or 5 times a power of ten from `least` on.
fn one_two_five_at_least(least: f64) -> f64 {
    let least = if least.is_finite() && least > 0.0 {
        least
    } else {
        1.0
    };
    let decade = 10f64.powf(least.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|&step| step >= least * (1.0 - 1e-9))
        .unwrap_or(10.0 * decade)
}

/// Grid steps for an axis whose labels stand at least `label_px` apart (with egui_plot's powers of ten alone, a
/// plot of Newton counts from 2 to 9 had its lines at 1, too close to label, and 10, beyond its range), none
/// finer than `least_step` (1 for counts, which are whole). The middle step is the one labelled: the finest of 1,
/// 2 or 5 times a power of ten whose marks stand `label_px` apart. The finer step is a tenth of it, too close to
/// label, and the coarser one a multiple of it, so the labels of two levels fall on one sequence (steps of 0.5, 2
/// and 5 labelled a time axis "0 s 2 s 4 s 5 s 6 s").
fn labelled_steps(label_px: f64, least_step: f64) -> impl Fn(egui_plot::GridInput) -> [f64; 3] {
    move |input| {
        let per_px = input.base_step_size / f64::from(GRID_LEAST_PX);
        let label = one_two_five_at_least(per_px * label_px).max(least_step);
        [(label / 10.0).max(least_step), label, coarser_step(label)]
    }
}

/// A step that `step` (1, 2 or 5 times a power of ten) divides: 5 times a 1, 10 for a 2 or a 5.
fn coarser_step(step: f64) -> f64 {
    match leading_digit(step) {
        1.0 => step * 5.0,
        leading => step / leading * 10.0,
    }
}

/// The leading digit of 1, 2 or 5 times a power of ten (1 where `powf` lands a hair below a power of ten).
fn leading_digit(step: f64) -> f64 {
    let leading = (step / 10f64.powf(step.log10().floor())).round();
    if leading >= 10.0 { 1.0 } else { leading }
}

/// Pixels of a time tick's text in the axis's font, as a sum over its characters (egui's Body, Ubuntu Light at
/// 12.5 px: a digit about 7 px, a point or a space 3), and the gap kept between two.
fn tick_text_px(text: &str) -> f64 {
    const GAP_PX: f64 = 8.0;
    text.chars()
        .map(|c| match c {
            '.' | ' ' | ',' => 3.0,
            '-' => 4.0,
            _ => 7.0,
        })
        .sum::<f64>()
        + GAP_PX
}

/// The time axes' marks: labelled at the finest 1, 2 or 5 times a power of ten whose labels, as wide as
/// [`tick_text_px`] says the widest in view is, do not touch ("0.02 s0.01 s" ran together at a fixed 36 px, and
/// "10 s20 s"), and with room of their own inside the plot: a labelled mark too close to its right end for half
/// its label keeps its line but not its label ("0.02 s" was cut at a plot's edge, or ran into the next plot's). Where
/// labels 36 px apart would leave only "0 s" in a narrow plot, the text's width is the measure instead.
fn time_marks(input: egui_plot::GridInput) -> Vec<egui_plot::GridMark> {
    let (lo, hi) = input.bounds;
    let per_px = input.base_step_size / f64::from(GRID_LEAST_PX);
    if !(per_px.is_finite() && per_px > 0.0 && lo.is_finite() && hi.is_finite() && hi > lo) {
        return Vec::new();
    }
    let widest = |step: f64| {
        let mark = |value: f64| egui_plot::GridMark {
            value,
            step_size: step,
        };
        // The first and last marks in view (`+ 0.0`: not "-0.0").
        let (a, b) = (
            (lo / step).ceil() * step + 0.0,
            (hi / step).floor() * step + 0.0,
        );
        tick_text_px(&seconds_axis_text(mark(a))).max(tick_text_px(&seconds_axis_text(mark(b))))
    };
    // From marks 16 px apart up: no tick text is narrower.
    let mut label = one_two_five_at_least(per_px * 16.0);
    for _ in 0..40 {
        if label / per_px >= widest(label) {
            break;
        }
        // The next 1, 2 or 5 times a power of ten.
        label = one_two_five_at_least(label * 1.5);
    }
    let fine = label / 10.0;
    let mut marks = Vec::new();
    // A count beyond a screen's pixels (or none: bounds far from zero, a step underflowed) is no axis to mark.
    let count = (hi / fine).floor() - (lo / fine).ceil();
    if !(fine > 0.0 && count.is_finite() && (0.0..=10_000.0).contains(&count)) {
        return marks;
    }
    let (first, last) = ((lo / fine).ceil() as i64, (hi / fine).floor() as i64);
    // A step 12 px apart: egui_plot draws its line (from 8 px) but labels it only from 20.
    let unlabelled = 12.0 * per_px;
    for i in first..=last {
        let value = i as f64 * fine;
        let on_label = ((value / label) - (value / label).round()).abs() < 1e-6;
        // Half the label's width from the right end of the axis, or it is cut there, or runs into the next
        // plot's; at the left end it runs under the value axis's column, which is empty below the plot.
        let half = tick_text_px(&seconds_axis_text(egui_plot::GridMark {
            value,
            step_size: label,
        })) / 2.0
            * per_px;
        let room = hi - value >= half;
        marks.push(egui_plot::GridMark {
            value,
            step_size: match (on_label, room) {
                (true, true) => label,
                (true, false) => unlabelled,
                (false, _) => fine,
            },
        });
    }
    marks
}

/// The 1, 2 or 5 times a power of ten just below `step`, itself one of them: 2 below 5, 1 below 2, 5 below 10.
#[cfg(test)]
fn one_two_five_below(step: f64) -> f64 {
    if leading_digit(step) == 5.0 {
        step / 2.5
    } else {
        step / 2.0
    }
}

/// Grid lines of the min-gap plot at round gaps: 0 and ±`scale` (1 µm, or less for smaller gaps), ±10 `scale`, …
/// ±1 km, every decade or, over a tall range, every second or third, so the labels do not crowd.
fn gap_grid_marks(input: egui_plot::GridInput, scale: f64) -> Vec<egui_plot::GridMark> {
    let (lo, hi) = input.bounds;
    let every = match hi - lo {
        span if span > 9.0 => 3,
        span if span > 5.0 => 2,
        _ => 1,
    };
    let mut marks = Vec::new();
    if (lo..=hi).contains(&0.0) {
        marks.push(egui_plot::GridMark {
            value: 0.0,
            step_size: every as f64,
        });
    }
    // Sparser grids start further from zero, so the first labels do not sit on the zero line's.
    let first = scale.log10().round() as i32 - 1 + every as i32;
    let decades = |mantissas: &[f64], from: i32, every: usize| {
        let mut values = Vec::new();
        for decade in (from..=3).step_by(every) {
            for &mantissa in mantissas {
                for sign in [1.0, -1.0] {
                    let value = signed_log_gap(sign * mantissa * 10f64.powi(decade), scale);
                    if (lo..=hi).contains(&value) {
                        values.push(value);
                    }
                }
            }
        }
        values
    };
    marks.extend(
        decades(&[1.0], first, every)
            .into_iter()
            .map(|value| egui_plot::GridMark {
                value,
                step_size: every as f64,
            }),
    );
    // A range within a decade or two (a settled pile's gaps, 0.3 to 0.6 µm) holds one decade line or none, and so
    // no label to read the curve by: 2 and 5 of each decade join it, then every digit. Each is labelled as far
    // apart as it stands from its neighbours, so egui_plot fades the labels that would crowd.
    let zero_line = usize::from(marks.first().is_some_and(|m| m.value == 0.0));
    for mantissas in [&[2.0, 5.0][..], &[2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]] {
        if marks.len() - zero_line >= 2 {
            break;
        }
        let mut values: Vec<f64> = marks.iter().map(|m| m.value).collect();
        let finer = decades(mantissas, scale.log10().round() as i32 - 1, 1);
        values.extend(&finer);
        values.sort_by(f64::total_cmp);
        values.dedup();
        let apart = |value: f64| {
            let i = values.partition_point(|v| *v < value);
            let before = i.checked_sub(1).map(|j| value - values[j]);
            let after = values.get(i + 1).map(|v| v - value);
            before
                .into_iter()
                .chain(after)
                .fold(f64::INFINITY, f64::min)
        };
        for value in finer {
            if !marks.iter().any(|m| m.value == value) {
                marks.push(egui_plot::GridMark {
                    value,
                    step_size: apart(value).min(1.0),
                });
            }
        }
    }
    marks
}

/// Whether the landscape's 1D throw fits `scene`: the first lane's first ball starts in front of (left of) that
/// lane's first wall, level with it. In a pit or on a slope the figure would show a throw nobody made.
fn landscape_applies(scene: &crate::scene::Scene) -> bool {
    let Some(lane) = scene.lanes.first() else {
        return false;
    };
    let (Some(wall), Some(ball)) = (lane.walls.first(), lane.balls.first()) else {
        return false;
    };
    let (lo, hi) = wall.to_wall().aabb();
    let p = ball.position;
    p.x < lo.x && (lo.y..=hi.y).contains(&p.y)
}

/// E(x) along the throw line of the first lane's first ball, penalty and IPC, with the movable x~.
/// The landscape's x̃ for the wall from `face` to `back`: kept while the wall stays, and 33 mm in front of the face
/// when another wall (another scene) is shown, the seed's 0.47 m for its wall at 0.503 m. It used to carry over
/// from the last scene, clamped into this one's range (0.500 after the gauntlet, back on the wall throw).
fn follow_landscape_wall(ui_state: &mut UiState, face: f64, back: f64, radius: f64) {
    if ui_state.landscape_wall != Some((face, back)) {
        ui_state.landscape_wall = Some((face, back));
        // 33 mm before the ball (of the first ball's radius) meets the face. The radius is not part of the key:
        // a ball rained into the lane would otherwise throw away a typed x̃.
        ui_state.landscape_x_tilde = face - radius - 0.033;
    }
}

fn landscape_panel(
    ui: &mut egui::Ui,
    ui_state: &mut UiState,
    lanes: &Query<(Entity, &Lane, &mut LaneSettings, &LaneDiagnostics)>,
    sorted: &[Entity],
    log: &mut SimLog,
) {
    ui.strong("Energy landscape E(x) of one step");
    let worlds: Vec<&LaneWorld> = sorted
        .iter()
        .filter_map(|e| lanes.get(*e).ok())
        .map(|l| &l.1.world)
        .collect();
    let Some(first) = worlds.first() else { return };
    let Some(wall) = first.walls.first() else {
        ui.small("this scene has no wall");
        return;
    };
    let (lo, hi) = wall.aabb();
    let face = lo.x;
    let line_y = wall.center.y;
    let models = LandscapeModels::of(&worlds);
    let h = first.settings.h;
    let mass = first.balls.first().map(|b| b.mass).unwrap_or(1.0);
    // The first ball's radius: the gauntlet's 5 mm balls reach the wall 5 mm before their centres do (the figure
    // used a point ball, and read a gap of 33 mm where the ball's surface was 28 mm from the wall).
    let radius = first.balls.first().map(|b| b.radius).unwrap_or(0.0);
    let range = (face - radius - 0.1, hi.x + 0.06);
    follow_landscape_wall(ui_state, face, hi.x, radius);
    ui_state.landscape_x_tilde = ui_state.landscape_x_tilde.clamp(range.0, range.1);
    // A typed x̃ outside the drawn range is refused with a word, as every other number field's is.
    let refused = Refusals::default();
    let applied = add_checked_slider(
        ui,
        &mut ui_state.landscape_x_tilde,
        ("x~ [m]", range.0..=range.1, range.0..=range.1),
        false,
        &refused,
    );
    report_run_controls(refused.take(), applied, log);
    let x_start = face - radius - 0.03;
    let input = LandscapeInput {
        walls: std::slice::from_ref(wall),
        mass,
        radius,
        h,
        line_y,
        x_start,
        x_tilde: ui_state.landscape_x_tilde,
        x_range: range,
        // One sample per point of the plot's width: more would only add triangles to draw.
        samples: (ui.available_width() as usize).clamp(100, 600),
        newton: NewtonSettings {
            tolerance: 1e-10,
            max_iterations: 59,
            ccd_factor: models.ccd_factor,
        },
    };
    let penalty = landscape(
        &input,
        crate::physics::potential::ContactModel::Penalty {
            stiffness: models.penalty_k,
        },
    );
    let barrier = landscape(
        &input,
        crate::physics::potential::ContactModel::Barrier {
            dhat: models.dhat,
            kappa: models.kappa,
        },
    );
    let fmt = |m: Option<f64>| m.map(|x| format!("{x:.4} m")).unwrap_or_else(|| "—".into());
    let gap = barrier.minimiser.map(|x| face - radius - x);
    ui.small(format!(
        "Newton starts at x_t = {x_start:.3} m, a fixed point 30 mm before the ball meets the wall's face (not \
         the ball's position){} · penalty argmin {} · IPC argmin {} (gap {})",
        if radius > 0.0 {
            format!(", for the first ball's radius {}", crate::sim::length_text(radius))
        } else {
            String::new()
        },
        fmt(penalty.minimiser),
        fmt(barrier.minimiser),
        match gap {
            Some(g) if g >= 0.0 => crate::sim::length_text(g),
            Some(g) => format!("{} inside", crate::sim::length_text(-g)),
            None => "—".into(),
        }
    ));
    // The seed's own invitation, while x̃ is still in front of the wall (its figure also starts at 0.470 m, where
    // both minimisers coincide and nothing is yet to be seen).
    if ui_state.landscape_x_tilde + radius < face {
        ui.small(
            egui::RichText::new(format!(
                "Drag x~ past the wall's face at {face:.3} m: penalty's minimum jumps behind the wall, IPC's \
                 stays in front of it."
            ))
            .color(egui::Color32::from_rgb(170, 110, 255)),
        );
    }
    let cap = penalty.points().map(|p| p[1]).fold(0.0, f64::max).max(1e-9);
    let clip =
        |pts: &[[f64; 2]]| -> Vec<[f64; 2]> { pts.iter().map(|p| [p[0], p[1].min(cap)]).collect() };
    let ipc_color = method_color32(ContactMethod::Ipc);
    let penalty_color = method_color32(ContactMethod::Penalty);
    let (ipc_name, penalty_name) = (models.ipc_name(), models.penalty_name());
    let grey = egui::Color32::from_gray(150);
    let x_tilde = ui_state.landscape_x_tilde;
    Plot::new("landscape")
        .height(170.0)
        // Ticks at 1, 2 or 5 with the digits their step needs: egui_plot's own wrote energies like
        // 0.010000000000000002, too long to draw, so most of the energy axis went unlabelled.
        .grid_spacing(GRID_LEAST_PX..=300.0)
        .x_grid_spacer(egui_plot::uniform_grid_spacer(labelled_steps(
            X_LABEL_LEAST_PX,
            0.0,
        )))
        .x_axis_formatter(|mark, _| axis_number_text(mark))
        .y_grid_spacer(egui_plot::uniform_grid_spacer(labelled_steps(
            Y_LABEL_LEAST_PX,
            0.0,
        )))
        .y_axis_formatter(|mark, _| axis_number_text(mark))
        // Two entries (a curve and its minimiser share a name); small, and in the corner the curves leave empty.
        .legend(
            Legend::default()
                .text_style(egui::TextStyle::Small)
                .position(legend_corner(
                    penalty.points().next().map(|p| p[1]),
                    penalty.points().last().map(|p| p[1]),
                    cap,
                )),
        )
        .allow_scroll(false)
        .show(ui, |plot| {
            // The wall, unnamed so it adds no legend entry; its label sits in it.
            plot.span(
                egui_plot::Span::new("", face..=hi.x)
                    .fill(grey.gamma_multiply(0.2))
                    .border_color(grey),
            );
            // IPC's E is +∞ where the ball would be inside the wall: no curve is drawn there, and it says so.
            for &(a, b) in &barrier.infinite {
                plot.text(
                    egui_plot::Text::new(
                        "",
                        egui_plot::PlotPoint::new(0.5 * (a + b), cap),
                        egui::RichText::new("IPC: E = ∞").small().color(ipc_color),
                    )
                    .anchor(egui::Align2::CENTER_TOP),
                );
            }
            // IPC under penalty, wider: away from the wall the two energies are equal, and each must show.
            // Each piece is its own line, so none joins the samples either side of E = ∞.
            for piece in &barrier.pieces {
                plot.line(
                    Line::new(ipc_name.clone(), PlotPoints::from(clip(piece)))
                        .color(ipc_color)
                        .width(4.0),
                );
            }
            for piece in &penalty.pieces {
                plot.line(
                    Line::new(penalty_name.clone(), PlotPoints::from(clip(piece)))
                        .color(penalty_color)
                        .width(1.5),
                );
            }
            plot.vline(VLine::new("", x_tilde).color(egui::Color32::from_rgb(170, 110, 255)));
            // Below the top where "IPC: E = ∞" is written there (x̃ dragged into or near the wall), which it
            // overprinted ("IPC: E x~=").
            let near_infinite = barrier.infinite.iter().any(|&(a, b)| {
                let margin = 0.2 * (range.1 - range.0);
                (a - margin..=b + margin).contains(&x_tilde)
            });
            let x_tilde_label_y = if near_infinite { 0.8 * cap } else { cap };
            plot.text(
                egui_plot::Text::new(
                    "",
                    egui_plot::PlotPoint::new(x_tilde, x_tilde_label_y),
                    egui::RichText::new(" x~").color(egui::Color32::from_rgb(170, 110, 255)),
                )
                .anchor(egui::Align2::LEFT_TOP),
            );
            plot.vline(
                VLine::new("", x_start)
                    .color(grey)
                    .style(egui_plot::LineStyle::dotted_dense()),
            );
            plot.text(
                egui_plot::Text::new(
                    "",
                    egui_plot::PlotPoint::new(x_start, 0.0),
                    egui::RichText::new(" x_t").small().color(grey),
                )
                .anchor(egui::Align2::LEFT_BOTTOM),
            );
            for (curve, name, color, radius) in [
                (&barrier, &ipc_name, ipc_color, 7.0),
                (&penalty, &penalty_name, penalty_color, 4.5),
            ] {
                if let Some(x) = curve.minimiser {
                    let y = curve
                        .points()
                        .min_by(|a, b| (a[0] - x).abs().total_cmp(&(b[0] - x).abs()))
                        .map(|p| p[1].min(cap))
                        .unwrap_or(0.0);
                    plot.points(
                        Points::new(name.clone(), vec![[x, y]])
                            .radius(radius)
                            .color(color),
                    );
                }
            }
        });
    ui.small("dots: each model's minimiser (where Newton from x_t ends); grey band: the wall.");
}

#[cfg(test)]
mod tests {

    /// Clicks `field`'s widget, types `typed` one key per frame, then presses Enter: the value after each key and
    /// after Enter.
    fn type_into(field: impl Fn(&mut f64) -> egui::DragValue<'_>, typed: &str) -> (Vec<f64>, f64) {
        crate::app::test_events::type_into_widget(
            0.0,
            |ui, v| ui.add(field(v)).rect.center(),
            typed,
        )
    }

    /// The tunnelling warning is for a travel past half the wall, not one at it up to rounding.
    #[test]
    fn penalty_is_warned_of_past_half_the_wall_and_not_at_it() {
        assert!(!can_tunnel(1.0000000000000009 * 0.01, 0.02));
        assert!(!can_tunnel(0.01, 0.02));
        assert!(can_tunnel(0.010001, 0.02));
        assert!(can_tunnel(0.05, 0.02));
    }

    /// The wall's spring stops a ball at v·√(m/k), and penalty is warned of past half the wall: the seed's table
    /// (1 kg, 20 mm wall) stops 1 m/s at k = 1e4 (10 mm, at the half) and 5 m/s at k = 1e6 with h small enough
    /// (5 mm), and sends 2 m/s through at k = 1e4 (20 mm) at any h.
    #[test]
    fn a_penalty_wall_too_soft_to_stop_the_ball_inside_it_is_warned_of_whatever_h() {
        let depth = |v, k| penalty_stopping_depth(v, 1.0, k);
        assert_eq!(depth(1.0, 1e4), 0.01);
        assert!(!can_tunnel(depth(1.0, 1e4), 0.02));
        assert!(can_tunnel(depth(2.0, 1e4), 0.02));
        assert!(!can_tunnel(depth(5.0, 1e6), 0.02));
        assert!(can_tunnel(depth(50.0, 1e6), 0.02));
        assert_eq!(
            penalty_stopping_depth(2.0, 4.0, 1e4),
            0.04,
            "a heavier ball goes deeper"
        );
        // A ball of radius r passes the wall's middle at an overlap of r + ½ wall: the ball pit's 50 mm, 0.5 kg
        // balls at 10 m/s stop 70.7 mm in, short of 100 mm, against its 100 mm walls at k = 1e4.
        let (depth, reach) =
            nearest_pass([(0.5, 0.05)].into_iter(), 10.0, 1e4, 0.1).expect("a ball");
        assert!((depth - 0.0707).abs() < 1e-4 && reach == 0.1);
        assert!(!can_tunnel(depth, 2.0 * reach));
        // Of two balls, the one nearest to passing: the light big one is safe, the heavy point one is not.
        let balls = [(0.1, 0.05), (4.0, 0.0)];
        let (depth, reach) = nearest_pass(balls.into_iter(), 1.0, 1e4, 0.02).expect("balls");
        assert_eq!((depth, reach), (0.02, 0.01));
        assert!(can_tunnel(depth, 2.0 * reach));
        assert_eq!(nearest_pass([].into_iter(), 1.0, 1e4, 0.02), None);
    }

    /// A setting field shows a value in a few characters: 10¹² pushed the lane panel past the window's edge as
    /// "1000000000000", and a d̂ of 10⁻⁹ m read "0.00000"; and h = 1/60 s does not take seventeen digits.
    #[test]
    fn setting_fields_show_far_values_in_scientific_notation() {
        for (value, text) in [
            (1e12, "1e12"),
            (1e-9, "1e-9"),
            (2.5e6, "2.5e6"),
            (-3e-7, "-3e-7"),
        ] {
            assert_eq!(field_text(value, 0..=6, false), text);
            assert_eq!(text.parse::<f64>(), Ok(value));
        }
        assert_eq!(field_text(10_000.0, 0..=6, false), "10000");
        assert_eq!(field_text(0.0, 0..=6, false), "0");
        assert_eq!(field_text(0.01, 4..=5, false), "0.0100");
        assert_eq!(field_text(59.0, 0..=0, true), "59");
        // Digits the field's decimals would drop are kept; a drag's last-bit noise is not.
        assert_eq!(field_text(1.23456e-3, 0..=5, false), "1.23456e-3");
        assert_eq!(field_text(0.1 + 0.2, 3..=3, false), "0.300");
        // h = 1/60 s: four significant digits in the field's decimals, not seventeen.
        assert_eq!(field_text(1.0 / 60.0, 0..=5, false), "0.01667");
        assert_eq!(field_text(1e-9 / 3.0, 0..=6, false), "3.33333e-10");
        assert_eq!(field_text(2e12 / 3.0, 0..=6, false), "6.66667e11");
    }

    /// A refusal floats over the canvas's bottom left, above everything, until "dismiss" is clicked; with no
    /// error nothing is drawn.
    #[test]
    fn the_error_note_floats_at_the_canvas_s_bottom_left_until_dismissed() {
        let ctx = egui::Context::default();
        let canvas = egui::Rect::from_min_max(egui::pos2(300.0, 0.0), egui::pos2(1100.0, 700.0));
        let mut log = SimLog::default();
        let pass = |log: &mut SimLog, events: Vec<egui::Event>| {
            let input = crate::app::test_events::input(events, egui::vec2(1600.0, 900.0));
            drawn_texts(
                &ctx.run_ui(input, |ui| error_note(ui.ctx(), canvas, log))
                    .shapes,
            )
        };
        assert!(pass(&mut log, vec![]).is_empty());
        log.error("lanes[0].balls[0].position.y: must be a finite number, got inf");
        // A new area is measured unseen in its first pass.
        pass(&mut log, vec![]);
        let texts = pass(&mut log, vec![]);
        let (note, at) = texts
            .iter()
            .find(|(text, _)| text.starts_with("⚠ lanes[0]"))
            .unwrap_or_else(|| panic!("no note in {texts:?}"));
        assert!(note.ends_with("got inf"), "{note}");
        assert!(canvas.contains_rect(*at), "{at:?} outside {canvas:?}");
        assert!(
            at.left() < canvas.left() + 30.0 && at.bottom() > canvas.bottom() - 80.0,
            "{at:?}"
        );
        let (_, dismiss) = texts
            .iter()
            .find(|(text, _)| text == "dismiss")
            .unwrap_or_else(|| panic!("no dismiss in {texts:?}"));
        assert_eq!(
            ctx.layer_id_at(dismiss.center()).map(|layer| layer.order),
            Some(egui::Order::Foreground),
            "above the panels"
        );
        let button = |pressed| crate::app::test_events::button(dismiss.center(), pressed);
        pass(
            &mut log,
            vec![egui::Event::PointerMoved(dismiss.center()), button(true)],
        );
        pass(&mut log, vec![button(false)]);
        assert_eq!(log.error, None);
        assert!(pass(&mut log, vec![]).is_empty());
    }

    /// A refusal that follows a click into a side panel's field stands at that panel's edge of the canvas, level
    /// with the field (one below the canvas too, over the plots), stays there while the pointer moves on, and
    /// follows the field when the panel moves it; one raised long after the last touch, or after a touch inside the
    /// canvas, goes to the canvas's bottom left.
    #[test]
    fn a_refusal_stands_beside_the_field_it_answers() {
        let ctx = egui::Context::default();
        let canvas = egui::Rect::from_min_max(egui::pos2(300.0, 0.0), egui::pos2(1100.0, 700.0));
        let left_field =
            egui::Rect::from_min_size(egui::pos2(40.0, 420.0), egui::vec2(120.0, 20.0));
        let right_field =
            egui::Rect::from_min_size(egui::pos2(1200.0, 150.0), egui::vec2(120.0, 20.0));
        // Beside the plots, below the canvas.
        let low_field =
            egui::Rect::from_min_size(egui::pos2(1200.0, 800.0), egui::vec2(120.0, 20.0));
        let fields = std::cell::Cell::new([left_field, right_field, low_field]);
        let mut log = SimLog::default();
        let mut texts = [String::new(), String::new(), String::new()];
        let pass = |log: &mut SimLog, texts: &mut [String; 3], events: Vec<egui::Event>| {
            let input = crate::app::test_events::input(events, egui::vec2(1600.0, 900.0));
            let output = ctx.run_ui(input, |ui| {
                for (field, text) in fields.get().into_iter().zip(texts.iter_mut()) {
                    ui.put(field, egui::TextEdit::singleline(text));
                }
                error_note(ui.ctx(), canvas, log)
            });
            drawn_texts(&output.shapes)
                .into_iter()
                .find(|(text, _)| text.starts_with('⚠'))
                .map(|(_, at)| at)
        };
        let click = |at: egui::Pos2| {
            vec![
                egui::Event::PointerMoved(at),
                crate::app::test_events::button(at, true),
                crate::app::test_events::button(at, false),
            ]
        };
        let column = egui::Rect::from_x_y_ranges(canvas.x_range(), 0.0..=900.0);
        for (field, on_the_left) in [(left_field, true), (right_field, false), (low_field, false)] {
            log.clear_error();
            pass(&mut log, &mut texts, click(field.center()));
            pass(&mut log, &mut texts, vec![]);
            log.error(format!("refused from the field at {}", field.center().y));
            pass(&mut log, &mut texts, vec![]);
            let note = pass(&mut log, &mut texts, vec![]).expect("a note");
            assert!(column.contains_rect(note), "{note:?} outside {column:?}");
            assert!(
                (note.center().y - field.center().y).abs() < 30.0,
                "{note:?} level with {field:?}"
            );
            if on_the_left {
                assert!(note.left() < canvas.left() + 40.0, "{note:?}");
            } else {
                assert!(note.right() > canvas.right() - 40.0, "{note:?}");
            }
            // The pointer moving on, even pressed over the canvas, leaves the shown note where it is.
            let moved = pass(&mut log, &mut texts, click(canvas.center())).expect("a note");
            assert_eq!(moved, note);
        }
        // The focus moving from the left field to the right one (here by egui's Tab; in the window, which keeps Tab
        // for hiding the panels, by a click) ends the left field's edit, where a typed value is read and refused:
        // the note is the left field's, though the right one has the focus now.
        log.clear_error();
        pass(&mut log, &mut texts, click(left_field.center()));
        pass(
            &mut log,
            &mut texts,
            vec![crate::app::test_events::key(egui::Key::Tab)],
        );
        pass(&mut log, &mut texts, vec![]);
        let focused = ctx.memory(|m| m.focused());
        assert!(
            focused
                .and_then(|id| ctx.read_response(id))
                .is_some_and(|r| r.rect == right_field),
            "Tab moved the focus to the right field"
        );
        log.error("refused as Tab ended the edit");
        pass(&mut log, &mut texts, vec![]);
        let note = pass(&mut log, &mut texts, vec![]).expect("a note");
        assert!(
            note.left() < canvas.left() + 40.0
                && (note.center().y - left_field.center().y).abs() < 30.0,
            "{note:?} beside {left_field:?}"
        );
        // A lane above folds: the field moves up 200 points, and the note with it.
        log.clear_error();
        pass(&mut log, &mut texts, click(right_field.center()));
        log.error("refused from the right field");
        pass(&mut log, &mut texts, vec![]);
        let before = pass(&mut log, &mut texts, vec![]).expect("a note");
        fields.set([
            left_field,
            right_field.translate(egui::vec2(0.0, 200.0)),
            low_field,
        ]);
        pass(&mut log, &mut texts, vec![]);
        let after = pass(&mut log, &mut texts, vec![]).expect("a note");
        assert!(
            (after.center().y - before.center().y - 200.0).abs() < 1.0,
            "{before:?} → {after:?}"
        );
        fields.set([left_field, right_field, low_field]);
        // The last touch was inside the canvas: a new error goes to the bottom left. (The first click there ends
        // the right field's edit, which a refusal raised then would answer.)
        log.clear_error();
        pass(&mut log, &mut texts, click(canvas.center()));
        pass(&mut log, &mut texts, click(canvas.center()));
        log.error("a lane faulted");
        pass(&mut log, &mut texts, vec![]);
        let note = pass(&mut log, &mut texts, vec![]).expect("a note");
        assert!(
            note.left() < canvas.left() + 30.0 && note.bottom() > canvas.bottom() - 80.0,
            "{note:?}"
        );
        // A field touched long before the error (3 s of frames at egui's 1/60 s each) is not what it answers.
        log.clear_error();
        pass(&mut log, &mut texts, click(right_field.center()));
        pass(
            &mut log,
            &mut texts,
            vec![egui::Event::Key {
                key: egui::Key::Escape,
                physical_key: None,
                pressed: true,
                repeat: false,
                modifiers: egui::Modifiers::NONE,
            }],
        );
        for _ in 0..180 {
            pass(&mut log, &mut texts, vec![]);
        }
        log.error("later");
        pass(&mut log, &mut texts, vec![]);
        let note = pass(&mut log, &mut texts, vec![]).expect("a note");
        assert!(note.left() < canvas.left() + 30.0, "{note:?}");
    }

    /// One frame of a 400-point-tall panel whose section, `label`, lies 1 000 points down, scrolled to `top` if given
    /// (as the user's wheel would), with `scroll` given the section's place: where the section was drawn.
    fn section_pass(
        ctx: &egui::Context,
        top: Option<f32>,
        label: &str,
        scroll: impl Fn(&egui::Ui, egui::Rect),
    ) -> egui::Rect {
        let input = crate::app::test_events::input(vec![], egui::vec2(300.0, 400.0));
        let mut shown = egui::Rect::NOTHING;
        let _ = ctx.run_ui(input, |ui| {
            let mut area = egui::ScrollArea::vertical();
            if let Some(top) = top {
                area = area.vertical_scroll_offset(top);
            }
            area.show(ui, |ui| {
                ui.add_space(1000.0);
                let section = ui.scope(|ui| ui.label(label)).response.rect;
                scroll(ui, section);
                shown = section;
            });
        });
        shown
    }

    /// The landscape, switched on, is scrolled into view once: scrolled away, the panel stays where the user puts
    /// it; a pass without the request leaves it below the panel's bottom.
    #[test]
    fn the_landscape_switched_on_is_scrolled_into_view_once() {
        let ctx = egui::Context::default();
        // A frame of `section_pass`, the landscape switched on just before it if `asked`.
        let pass = |asked: bool, top: Option<f32>| {
            if asked {
                ask_to_show_the_landscape(&ctx);
            }
            section_pass(&ctx, top, "Energy landscape", show_the_landscape_when_asked)
        };
        let visible = |section: egui::Rect| section.min.y >= 0.0 && section.max.y <= 400.0;
        for _ in 0..3 {
            assert!(!visible(pass(false, None)), "not asked: below the bottom");
        }
        // The scroll area takes the new offset in the frame after the request, and draws with it in the next.
        pass(true, None);
        pass(false, None);
        assert!(visible(pass(false, None)), "asked: scrolled to");
        pass(false, Some(0.0));
        for _ in 0..3 {
            let section = pass(false, None);
            assert!(
                !visible(section),
                "left where the user scrolled: {section:?}"
            );
        }
    }

    /// A body selected on the canvas scrolls the left panel to its section, once: scrolled away, the panel stays
    /// until another body is selected.
    #[test]
    fn a_newly_selected_body_scrolls_its_section_into_view() {
        let ctx = egui::Context::default();
        let mut world = World::new();
        let (a, b) = (world.spawn_empty().id(), world.spawn_empty().id());
        // A frame of `section_pass` with `selected` the selection.
        let pass_scrolled = |selected: Option<Entity>, top: Option<f32>| {
            section_pass(&ctx, top, "Selected body", |ui, section| {
                show_a_new_selection(ui, section, selected)
            })
        };
        let pass = |selected: Option<Entity>| pass_scrolled(selected, None);
        let visible = |section: egui::Rect| section.min.y >= 0.0 && section.max.y <= 400.0;
        assert!(!visible(pass(None)), "below the panel's bottom");
        // The scroll area takes the new offset in the frame after the request, and draws with it in the next.
        pass(Some(a));
        pass(Some(a));
        let section = pass(Some(a));
        assert!(visible(section), "scrolled to: {section:?}");
        // Scrolled back to the top by the user, with `a` still selected: the panel stays there.
        pass_scrolled(Some(a), Some(0.0));
        for _ in 0..3 {
            pass(Some(a));
        }
        let section = pass(Some(a));
        assert!(
            !visible(section),
            "left where the user scrolled: {section:?}"
        );
        pass(Some(b));
        pass(Some(b));
        let section = pass(Some(b));
        assert!(
            visible(section),
            "another body: scrolled to again: {section:?}"
        );
    }

    /// Every text the pass drew, with where it was drawn.
    fn drawn_texts(shapes: &[egui::epaint::ClippedShape]) -> Vec<(String, egui::Rect)> {
        fn walk(shape: &egui::Shape, out: &mut Vec<(String, egui::Rect)>) {
            match shape {
                egui::Shape::Text(text) => out.push((
                    text.galley.text().to_string(),
                    text.galley.rect.translate(text.pos.to_vec2()),
                )),
                egui::Shape::Vec(shapes) => shapes.iter().for_each(|s| walk(s, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        shapes.iter().for_each(|c| walk(&c.shape, &mut out));
        out
    }

    /// Lane 0's name in `app`.
    fn scene_lane_name(app: &App) -> String {
        app.world()
            .resource::<ActiveScene>()
            .current
            .lanes
            .first()
            .map(|lane| lane.name.clone())
            .unwrap_or_default()
    }

    /// The lane panel as the window draws it, over the sim, typing as a user does: text the panel refuses
    /// (μ = −1) stays the shown error (`SimLog::error`, which the error banner draws) while another setting of
    /// the lane is edited and applied (k), and goes once an edit of μ applies.
    #[test]
    fn a_refusal_in_the_lane_panel_stays_until_an_applied_edit_of_its_own_setting() {
        let mut app = App::new();
        app.add_plugins(MinimalPlugins)
            .add_plugins(crate::sim::SimPlugin);
        app.insert_resource(bevy::time::TimeUpdateStrategy::FixedTimesteps(1));
        app.insert_resource(
            ActiveScene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
                .expect("the shipped scene loads"),
        );
        app.update();
        app.update();
        let ctx = egui::Context::default();
        // Whether the panel takes edits (not while a demo replays).
        let editable = std::cell::Cell::new(true);
        // One pass of lane 0's panel with `events`, then one update of the app: the texts the pass drew.
        let frame = |app: &mut App, events: Vec<egui::Event>| {
            let world = app.world_mut();
            let mut log = world.remove_resource::<SimLog>().expect("the sim's log");
            let mut query = world.query::<(&Lane, &mut LaneSettings, &LaneDiagnostics)>();
            let mut texts = Vec::new();
            let mut events = Some(events);
            for (lane, mut settings, diagnostics) in query.iter_mut(world) {
                if lane.index != 0 {
                    continue;
                }
                let input = crate::app::test_events::input(
                    events.take().unwrap_or_default(),
                    egui::vec2(420.0, 900.0),
                );
                let out = ctx.run_ui(input, |ui| {
                    lane_panel(
                        ui,
                        lane,
                        PanelHead {
                            color: egui::Color32::WHITE,
                            title: &lane.world.name,
                            editable: editable.get(),
                        },
                        &mut settings,
                        diagnostics,
                        0.0,
                        &mut log,
                    );
                });
                texts = drawn_texts(&out.shapes);
            }
            world.insert_resource(log);
            app.update();
            texts
        };
        use crate::app::test_events::key;
        // Clicks into the field right of `label` (found in the last pass's texts), clears it and types `typed`.
        let type_into =
            |app: &mut App, texts: &[(String, egui::Rect)], label: &str, typed: &str| {
                let (_, at) = texts
                    .iter()
                    .find(|(text, _)| text == label)
                    .unwrap_or_else(|| panic!("no {label:?} in {texts:?}"));
                let (shown, field) = texts
                    .iter()
                    .filter(|(_, r)| {
                        (r.center().y - at.center().y).abs() < 4.0 && r.left() > at.right()
                    })
                    .min_by(|a, b| a.1.left().total_cmp(&b.1.left()))
                    .unwrap_or_else(|| panic!("no field right of {label:?}"));
                let button = |pressed| crate::app::test_events::button(field.center(), pressed);
                frame(
                    app,
                    vec![egui::Event::PointerMoved(field.center()), button(true)],
                );
                frame(app, vec![button(false)]);
                frame(app, vec![key(egui::Key::End)]);
                frame(
                    app,
                    vec![key(egui::Key::Backspace); shown.chars().count() + 2],
                );
                frame(app, vec![egui::Event::Text(typed.to_string())]);
                frame(app, vec![key(egui::Key::Enter)]);
                frame(app, vec![])
            };
        let error = |app: &App| app.world().resource::<SimLog>().error.clone();
        let settings = |app: &mut App| {
            let mut query = app.world_mut().query::<&Lane>();
            let lane = query
                .iter(app.world())
                .find(|l| l.index == 0)
                .expect("lane 0");
            (lane.world.settings.friction, lane.world.settings.stiffness)
        };
        let texts = frame(&mut app, vec![]);
        let (mu, k) = settings(&mut app);
        let texts = type_into(&mut app, &texts, LaneSetting::Friction.label(), "-1");
        let refused = error(&app).expect("μ = -1 is refused with a word");
        assert!(
            refused.contains("friction μ") && refused.contains("\"-1\""),
            "{refused}"
        );
        assert_eq!(settings(&mut app), (mu, k));
        // Another setting of the lane, edited and applied: the refusal about μ stays.
        let texts = type_into(&mut app, &texts, LaneSetting::Stiffness.label(), "20000");
        assert_eq!(settings(&mut app), (mu, 2e4), "k applied");
        assert_eq!(error(&app).as_deref(), Some(refused.as_str()));
        // μ edited and applied: it goes.
        let texts = type_into(&mut app, &texts, LaneSetting::Friction.label(), "0.3");
        assert_eq!(settings(&mut app), (0.3, 2e4), "μ applied");
        assert_eq!(error(&app), None);
        // A number the field takes but the lane cannot run: refused in the same words as a typed refusal.
        let h = |app: &mut App| {
            let mut query = app.world_mut().query::<&Lane>();
            query
                .iter(app.world())
                .find(|l| l.index == 0)
                .map(|l| l.world.settings.h)
        };
        let before = h(&mut app);
        let texts = type_into(&mut app, &texts, LaneSetting::H.label(), "0");
        assert_eq!(h(&mut app), before, "h = 0 applied");
        let refused_h = error(&app).expect("h = 0 is refused with a word");
        let lane_name = format!("lane '{}': ", displayable(&scene_lane_name(&app)));
        assert!(
            refused_h.starts_with(&format!("{lane_name}h [s]: must be at least 1e-6 s"))
                && refused_h.ends_with("; kept 0.01 s"),
            "{refused_h}"
        );
        assert!(
            refused.starts_with(&format!("{lane_name}friction μ: ")) && refused.contains("; kept "),
            "the two refusals in one shape: {refused} / {refused_h}"
        );
        let texts = type_into(&mut app, &texts, LaneSetting::H.label(), "0.005");
        assert_eq!(h(&mut app), Some(0.005), "h applied");
        assert_eq!(error(&app), None);
        // While a demo replays the fields take no edit, and say so: one typed there was silently dropped.
        editable.set(false);
        type_into(&mut app, &texts, LaneSetting::Stiffness.label(), "30000");
        assert_eq!(
            settings(&mut app),
            (0.3, 2e4),
            "a replay's lane took an edit"
        );
        let said = error(&app).expect("a word for the dropped edit");
        assert!(said.contains("stop the replay"), "{said}");
    }

    #[test]
    fn lanes_of_one_method_have_colours_of_their_own() {
        use ContactMethod::{Ipc, Penalty};
        let lanes = |methods: &[ContactMethod]| {
            let lanes: Vec<Lane> = methods
                .iter()
                .enumerate()
                .map(|(i, &method)| {
                    let settings = crate::physics::world::ContactSettings {
                        method,
                        ..Default::default()
                    };
                    let world = LaneWorld::new(format!("lane {i}"), settings, vec![], vec![]);
                    Lane::new(i, world, DVec2::ZERO, Default::default())
                })
                .collect();
            let entity = |i: usize| Entity::from_raw_u32(i as u32 + 1).expect("an index");
            let colors = LaneColors::new(lanes.iter().map(|l| (entity(l.index), l)), None);
            colors.0.iter().map(|(_, c, _)| *c).collect::<Vec<_>>()
        };
        let distinct = |colors: &[egui::Color32]| {
            colors
                .iter()
                .enumerate()
                .all(|(i, a)| colors[i + 1..].iter().all(|b| a != b))
        };
        // The slope: two IPC lanes and two penalty lanes.
        let slope = lanes(&[Ipc, Ipc, Penalty, Penalty]);
        assert!(distinct(&slope), "{slope:?}");
        // A method's first lane keeps the method's colour, the balls' colour on the canvas.
        assert_eq!(slope[0], method_color32(Ipc));
        assert_eq!(slope[2], method_color32(Penalty));
        // The wall throw with its penalty lane switched to IPC.
        assert!(distinct(&lanes(&[Ipc, Ipc])));
        assert!(distinct(&lanes(&[Penalty, Penalty, Penalty, Penalty])));
    }

    /// The canvas draws each lane in the colour its panel and plots use (both come from `lane_color`, given the
    /// lanes in any order), and lanes of one method differ: in the slope (two IPC lanes, two penalty lanes) the
    /// second IPC lane's balls were drawn in the first's green.
    #[test]
    fn the_canvas_draws_each_lane_in_its_panel_s_colour() {
        let scene = crate::scene::Scene::load(std::path::Path::new("assets/scenes/slope.ron"))
            .expect("the shipped scene loads");
        let lanes: Vec<Lane> = scene
            .build()
            .into_iter()
            .enumerate()
            .map(|(index, world)| Lane::new(index, world, DVec2::ZERO, Default::default()))
            .collect();
        let entity = |i: usize| Entity::from_raw_u32(i as u32 + 1).expect("an index");
        // Either takes the lanes in any order (the panel's query has none).
        let panel = LaneColors::new(lanes.iter().map(|l| (entity(l.index), l)), None);
        let canvas: Vec<egui::Color32> = lanes
            .iter()
            .map(|lane| {
                let [r, g, b, _] = crate::app::lane_color(lane, lanes.iter().rev())
                    .to_srgba()
                    .to_u8_array();
                egui::Color32::from_rgb(r, g, b)
            })
            .collect();
        for (i, lane) in lanes.iter().enumerate() {
            assert_eq!(canvas[i], panel.of(entity(lane.index)), "lane {i}");
            let methods_first = lanes
                .iter()
                .position(|l| l.world.settings.method == lane.world.settings.method);
            if methods_first == Some(i) {
                assert_eq!(
                    canvas[i],
                    method_color32(lane.world.settings.method),
                    "lane {i}"
                );
            }
            for j in 0..i {
                assert_ne!(canvas[i], canvas[j], "lanes {j} and {i}");
            }
        }
    }

    /// The panels name an edited lane by what it runs: the wall throw's "penalty k=1e4" at k = 10⁶ showed its
    /// result under the k it no longer had ("penalty k=1e4 — stopped at 69.3 µm depth", the k = 10⁶ result).
    #[test]
    fn the_panels_name_an_edited_lane_with_what_changed() {
        let scene = crate::scene::Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
            .expect("the shipped scene loads");
        let mut lanes: Vec<Lane> = scene
            .build()
            .into_iter()
            .enumerate()
            .map(|(index, world)| Lane::new(index, world, DVec2::ZERO, Default::default()))
            .collect();
        let entity = |i: usize| Entity::from_raw_u32(i as u32 + 1).expect("an index");
        let titles = |lanes: &[Lane]| {
            let looks = LaneColors::new(lanes.iter().map(|l| (entity(l.index), l)), Some(&scene));
            lanes
                .iter()
                .map(|l| looks.title(entity(l.index)).to_string())
                .collect::<Vec<_>>()
        };
        let names: Vec<String> = lanes.iter().map(|l| l.world.name.clone()).collect();
        assert_eq!(titles(&lanes), names, "unedited lanes keep their names");
        let penalty = lanes
            .iter()
            .position(|l| l.world.settings.method == ContactMethod::Penalty)
            .expect("a penalty lane");
        let ipc = lanes
            .iter()
            .position(|l| l.world.settings.method == ContactMethod::Ipc)
            .expect("an IPC lane");
        lanes[penalty].world.settings.stiffness = 1e6;
        lanes[ipc].world.settings.dhat = Some(2e-3);
        lanes[ipc].world.settings.friction = 0.3;
        let edited = titles(&lanes);
        assert_eq!(
            edited[penalty],
            format!("{} (edited: k = 1e6 N/m)", names[penalty])
        );
        assert_eq!(
            edited[ipc],
            format!(
                "{} (edited: {}, μ = 0.3)",
                names[ipc],
                displayable("d\u{302} = 0.002 m")
            )
        );
        // Without the scene to compare with, the names alone.
        let looks = LaneColors::new(lanes.iter().map(|l| (entity(l.index), l)), None);
        assert_eq!(looks.title(entity(penalty)), names[penalty]);
    }

    #[test]
    fn the_selected_ball_shows_its_nearest_wall_and_ball() {
        use crate::physics::geometry::{Ball, Wall};
        use crate::physics::world::{ContactSettings, LaneWorld};
        let wall = |x: f64, y: f64, hx: f64, hy: f64| Wall {
            center: DVec2::new(x, y),
            half_extents: DVec2::new(hx, hy),
            angle: 0.0,
        };
        let ball = |x: f64, y: f64| Ball {
            position: DVec2::new(x, y),
            velocity: DVec2::ZERO,
            radius: 0.05,
            mass: 1.0,
        };
        // A floor (wall 0, top at y = 0), a far side wall (wall 1); a pile: ball 2 rests 5 µm over ball 1,
        // 88.57 mm above the floor.
        let world = LaneWorld::new(
            "pit",
            ContactSettings::default(),
            vec![wall(0.0, -0.5, 5.0, 0.5), wall(3.0, 1.0, 0.5, 2.0)],
            vec![
                ball(-1.0, 0.05),
                ball(0.0, 0.13857 - 0.10 - 5e-6),
                ball(0.0, 0.13857),
            ],
        );
        let (near_wall, near_ball) = nearest_gaps(&world, 2, world.balls[2].position, 0.05);
        let (k, to_wall) = near_wall.expect("a wall");
        assert_eq!(k, 0);
        assert!((to_wall - 0.08857).abs() < 1e-12, "{to_wall}");
        let (j, to_ball) = near_ball.expect("a ball");
        assert_eq!(j, 1, "the ball below, not itself or the far one");
        assert!((to_ball - 5e-6).abs() < 1e-12, "{to_ball}");
        assert_eq!(gap_text(to_ball), "5.000 µm");
        assert_eq!(gap_text(to_wall), "88.57 mm");
        assert_eq!(gap_text(-2e-6), "-2.000 µm");
        // A ball alone in a lane without walls has neither.
        let alone = LaneWorld::new(
            "alone",
            ContactSettings::default(),
            vec![],
            vec![ball(0.0, 0.0)],
        );
        assert_eq!(nearest_gaps(&alone, 0, DVec2::ZERO, 0.05), (None, None));
    }

    #[test]
    fn a_dhat_beyond_the_smallest_ball_s_radius_is_warned_of() {
        assert_eq!(
            dhat_line(1e-3, Some(0.04)),
            PreflightLine::Applies("dhat = 1.00 mm (the contact tolerance)".into())
        );
        // Point balls have no size to compare with.
        assert_eq!(
            dhat_line(1.0, None),
            PreflightLine::Applies("dhat = 1.000 m (the contact tolerance)".into())
        );
        assert_eq!(
            dhat_line(1.0, Some(0.04)),
            PreflightLine::Warning(
                "⚠ dhat = 1.000 m exceeds the smallest ball's radius (40.00 mm): balls push each other and the \
                 walls away from farther than their size"
                    .into()
            )
        );
    }

    #[test]
    fn a_penalty_lane_shows_dhat_and_the_ccd_factor_as_ipc_only() {
        use crate::physics::world::{ContactSettings, LaneWorld};
        let lane = |method| {
            LaneWorld::new(
                "lane",
                ContactSettings {
                    method,
                    dhat: Some(1e-3),
                    ..ContactSettings::default()
                },
                vec![],
                vec![],
            )
        };
        let [dhat, newton] = contact_preflight(&lane(ContactMethod::Penalty), 0);
        assert_eq!(
            dhat,
            PreflightLine::IpcOnly(
                "dhat = 1.00 mm, CCD s = 0.90: IPC only, unused by penalty".into()
            )
        );
        assert_eq!(
            newton,
            PreflightLine::Applies("Newton last 0, max 0, mean 0.00, spikes 0".into())
        );
        let [dhat, newton] = contact_preflight(&lane(ContactMethod::Ipc), 3);
        assert_eq!(
            dhat,
            PreflightLine::Applies("dhat = 1.00 mm (the contact tolerance)".into())
        );
        assert_eq!(
            newton,
            PreflightLine::Warning(
                "CCD s = 0.90; Newton last 0, max 0, mean 0.00, spikes 3".into()
            )
        );
    }

    #[test]
    fn a_typed_setting_takes_effect_on_enter_not_on_each_key() {
        // The harness types: a plain field follows the keys (its text starts as "0", so the keys append).
        let (keys, _) = type_into(|v| egui::DragValue::new(v), "5");
        assert!(
            keys.iter().any(|&v| v != 0.0),
            "the harness did not type: {keys:?}"
        );
        // A setting field holds its value until Enter, then takes the whole number.
        let refused = Refusals::default();
        let (keys, entered) = type_into(|v| setting_field(v, "k", any::<f64>(), &refused), "5");
        assert!(keys.iter().all(|&v| v == 0.0), "{keys:?}");
        assert_eq!(entered, 5.0);
        assert_eq!(refused.take(), None);
    }

    /// A refused run control stays on the error line until a change of a run control applies; an error about
    /// something else, raised after it, is not taken off by that change.
    #[test]
    fn a_refused_run_control_is_withdrawn_when_a_change_applies() {
        let refused = || {
            refusal_of_slider(
                "fixed rate [Hz]",
                crate::demo::FIXED_RATES_HZ,
                100.0,
                "5000",
            )
            .1
        };
        let mut log = SimLog::default();
        report_run_controls(refused(), false, &mut log);
        let said = log.error.clone().expect("5000 Hz is refused");
        assert!(said.contains("is outside 1 to 1000"), "{said}");
        // A frame without a change keeps it; so does the same text read again.
        report_run_controls(None, false, &mut log);
        report_run_controls(refused(), false, &mut log);
        assert_eq!(log.error.as_deref(), Some(said.as_str()));
        assert_eq!(log.raised, 1);
        // A change that applies answers it.
        report_run_controls(None, true, &mut log);
        assert_eq!(log.error, None);
        // An unrelated error stays through a change of the run controls.
        log.error("lane 'ipc': something else");
        report_run_controls(None, true, &mut log);
        assert_eq!(log.error.as_deref(), Some("lane 'ipc': something else"));
    }

    /// A refusal names its field by label, and the lane panel finds the setting it is about by that label: each
    /// number field's label leads back to its own setting and no other, so an edit of that setting withdraws it.
    #[test]
    fn each_number_fields_label_leads_back_to_its_setting_alone() {
        for setting in NUMBER_FIELDS {
            assert_eq!(
                settings_labelled(setting.label()),
                [setting],
                "{}",
                setting.label()
            );
        }
        assert_eq!(settings_labelled("no such field"), []);
        // Refused through the field as the grid draws it: the refusal carries the label the lookup expects.
        let refused = Refusals::default();
        let (_, _) = type_into(
            |v| setting_field(v, LaneSetting::Friction.label(), 0.0..=10.0, &refused),
            "-1",
        );
        let refusal = refused.take().expect("a μ of -1 is refused");
        assert_eq!(settings_labelled(refusal.setting), [LaneSetting::Friction]);
    }

    #[test]
    fn bad_typed_settings_keep_the_old_value_and_say_what_was_typed() {
        let typed_into =
            |setting: &'static str, allowed: std::ops::RangeInclusive<f64>, typed: &str| {
                let refused = Refusals::default();
                let (_, entered) = type_into(
                    |v| setting_field(v, setting, allowed.clone(), &refused),
                    typed,
                );
                (entered, refused.take())
            };
        for (setting, allowed, typed, problem) in [
            ("k [N/m]", any::<f64>(), "abc", "is not a number"),
            ("k [N/m]", any::<f64>(), "a-5", "is not a number"),
            // egui read "nan" as NaN and clamped it to +∞, and the sim then refused "inf".
            ("k [N/m]", any::<f64>(), "nan", "is not a finite number"),
            ("k [N/m]", any::<f64>(), "inf", "is not a finite number"),
            // egui clamped a typed μ = −1 to 0 without a word.
            ("friction μ", 0.0..=10.0, "-1", "is outside 0 to 10"),
        ] {
            let (entered, refusal) = typed_into(setting, allowed, typed);
            assert_eq!(entered, 0.0, "{typed}: the old value is kept");
            let refusal = refusal.unwrap_or_else(|| panic!("{typed} was refused without a word"));
            let message = refusal.message("penalty k=1e4");
            assert_eq!(
                message,
                format!("lane 'penalty k=1e4': {setting}: \"{typed}\" {problem}; kept 0"),
            );
        }
        // A number inside the field's range goes on to the sim (which checks the scene limits and says so).
        assert_eq!(typed_into("k [N/m]", any::<f64>(), "-5"), (-5.0, None));
        assert_eq!(typed_into("friction μ", 0.0..=10.0, " 0.3 "), (0.3, None));
        // Whole-number settings take whole numbers only.
        assert_eq!(parse_setting("12", &any::<u32>(), true), Ok(12.0));
        assert_eq!(
            parse_setting("2.5", &any::<u32>(), true),
            Err("is not a whole number".into())
        );
        assert!(parse_setting("-5", &any::<u32>(), true).is_err());
        // −0 is taken as 0, not shown as "-0.00".
        for typed in ["-0", "−0", "-0.0"] {
            let zero = parse_setting(typed, &(0.0..=10.0), false).expect("zero");
            assert!(zero == 0.0 && zero.is_sign_positive(), "{typed}");
        }
    }

    /// After a throw, the scene's description (which quotes the file's speed) is followed by the throw's.
    #[test]
    fn a_throw_is_named_under_the_description_that_quotes_the_file_s_speed() {
        let loaded =
            crate::scene::Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
                .expect("a built-in scene loads");
        assert_eq!(thrown_since_loaded(&loaded, &loaded), None);
        let thrown = crate::demo::thrown_scene(&loaded, 1.0, (None, None, None), None, "t")
            .expect("a valid throw");
        assert_eq!(
            thrown_since_loaded(&loaded, &thrown).as_deref(),
            Some("(as loaded; thrown since at 1 m/s)")
        );
        let same = crate::demo::thrown_scene(&loaded, 5.0, (None, None, None), None, "t")
            .expect("a valid throw");
        assert_eq!(
            thrown_since_loaded(&loaded, &same),
            None,
            "the file's own speed"
        );
    }

    /// x̃ is the user's while the wall stays, and each wall's own when the scene changes.
    #[test]
    fn the_landscape_s_x_tilde_starts_at_each_wall_s_own_place() {
        let mut ui_state = UiState::default();
        follow_landscape_wall(&mut ui_state, 0.503, 0.523, 0.0);
        assert!((ui_state.landscape_x_tilde - 0.47).abs() < 1e-12);
        ui_state.landscape_x_tilde = 0.49;
        follow_landscape_wall(&mut ui_state, 0.503, 0.523, 0.0);
        assert_eq!(
            ui_state.landscape_x_tilde, 0.49,
            "kept while the wall stays"
        );
        follow_landscape_wall(&mut ui_state, 0.6, 0.602, 0.0);
        assert!((ui_state.landscape_x_tilde - 0.567).abs() < 1e-12);
        follow_landscape_wall(&mut ui_state, 0.503, 0.523, 0.0);
        assert!(
            (ui_state.landscape_x_tilde - 0.47).abs() < 1e-12,
            "the wall throw's own again"
        );
        // A ball of 5 mm starts 33 mm before it meets the face; another first ball on the same wall (a rained
        // one) keeps the user's x̃.
        follow_landscape_wall(&mut ui_state, 0.6, 0.62, 0.005);
        assert!((ui_state.landscape_x_tilde - 0.562).abs() < 1e-12);
        ui_state.landscape_x_tilde = 0.55;
        follow_landscape_wall(&mut ui_state, 0.6, 0.62, 0.04);
        assert_eq!(ui_state.landscape_x_tilde, 0.55, "kept for another radius");
    }

    /// Types into a run-control slider's value field (right of its rail), starting from `start`: the value after
    /// Enter and the refusal's message.
    fn typed_into_slider(
        setting: &'static str,
        range: std::ops::RangeInclusive<f64>,
        start: f64,
        typed: &str,
    ) -> (f64, Option<String>) {
        let (entered, refusal) = refusal_of_slider(setting, range, start, typed);
        (entered, refusal.map(|r| r.text()))
    }

    /// Types `typed` into a run slider for `setting` that holds `start`: the value it then holds, and what it
    /// refused.
    fn refusal_of_slider(
        setting: &'static str,
        range: std::ops::RangeInclusive<f64>,
        start: f64,
        typed: &str,
    ) -> (f64, Option<RefusedText>) {
        let refused = Refusals::default();
        let (_, entered) = crate::app::test_events::type_into_widget(
            start,
            |ui, v| {
                let rect = ui.add(run_slider(v, setting, range.clone(), &refused)).rect;
                crate::app::test_events::slider_value_point(ui, rect)
            },
            typed,
        );
        (entered, refused.take())
    }

    /// A slider's own text, entered untouched, keeps the value it stands for: "333.33" set a clock of 333.3333 Hz
    /// to 333.33 Hz, and an x̃ at its range's end, 0.4950000000000001, was refused as "0.495". Other text is read as
    /// typed.
    #[test]
    fn a_slider_s_own_text_entered_keeps_its_value() {
        let third = 1000.0 / 3.0;
        assert_eq!(
            typed_into_slider("fixed rate [Hz]", 1.0..=1000.0, third, "333.33"),
            (third, None)
        );
        assert_eq!(
            typed_into_slider("fixed rate [Hz]", 1.0..=1000.0, third, "333.3"),
            (333.3, None)
        );
        let low = 0.4950000000000001;
        let typed_x = |typed: &str| {
            let refused = Refusals::default();
            let (_, entered) = crate::app::test_events::type_into_widget(
                low,
                |ui, v| {
                    let slider = checked_slider(v, "x~ [m]", low..=0.661, low..=0.661, &refused);
                    let rect = ui.add(slider).rect;
                    crate::app::test_events::slider_value_point(ui, rect)
                },
                typed,
            );
            (entered, refused.take().map(|r| r.text()))
        };
        assert_eq!(typed_x("0.495"), (low, None));
        assert_eq!(typed_x("0.5"), (0.5, None));
        let (kept, refusal) = typed_x("0.4949");
        assert_eq!(kept, low);
        assert!(refusal.is_some_and(|r| r.contains("outside")));
        // A lane setting's field too: h = 1/60 s shows "0.01667".
        let sixtieth = 1.0 / 60.0;
        let typed_h = |typed: &str| {
            let refused = Refusals::default();
            let (_, entered) = crate::app::test_events::type_into_widget(
                sixtieth,
                |ui, v| {
                    ui.add(setting_field(v, "h [s]", 1e-6..=10.0, &refused))
                        .rect
                        .center()
                },
                typed,
            );
            entered
        };
        let ctx = egui::Context::default();
        let input = crate::app::test_events::input(vec![], egui::vec2(400.0, 100.0));
        let output = ctx.run_ui(input, |ui| {
            let refused = Refusals::default();
            ui.add(setting_field(
                &mut sixtieth.clone(),
                "h [s]",
                1e-6..=10.0,
                &refused,
            ));
        });
        let shown = drawn_texts(&output.shapes)
            .into_iter()
            .map(|(text, _)| text)
            .find(|text| text.parse::<f64>().is_ok())
            .expect("the field draws its number");
        assert_ne!(shown.parse::<f64>(), Ok(sixtieth), "{shown} is rounded");
        assert_eq!(typed_h(&shown), sixtieth, "{shown}");
        assert_eq!(typed_h("0.0167"), 0.0167);
    }

    /// A slider's number reads the same on a screen at 100 %, 125 %, 150 % and 200 %, over each slider's range: egui
    /// picks a slider's decimals from one physical pixel, and at 150 % and 200 % the time scale read "1.0" where it
    /// reads "1.00" at 100 %.
    #[test]
    fn a_slider_shows_the_same_number_on_every_screen() {
        // The window's sliders' kinds of range: time scale, fixed rate, log10 k, radius, v0.
        let sliders = [
            (0.01_f64, 4.0_f64, true),
            (1.0, 1000.0, true),
            (2.0, 9.0, false),
            (0.0, 100.0, false),
            (0.5, 60.0, true),
        ];
        let numbers_at = |pixels_per_point: f32| {
            let ctx = egui::Context::default();
            let mut numbers = Vec::new();
            for (lo, hi, logarithmic) in sliders {
                for i in 0..=40 {
                    let t = f64::from(i) / 40.0;
                    let mut value = if logarithmic {
                        lo * (hi / lo).powf(t)
                    } else {
                        lo + (hi - lo) * t
                    };
                    let refused = Refusals::default();
                    let mut drawn = Vec::new();
                    // The first pass takes the scale factor; the second draws at it.
                    for _ in 0..2 {
                        let mut input =
                            crate::app::test_events::input(vec![], egui::vec2(1600.0, 900.0));
                        input
                            .viewports
                            .entry(egui::ViewportId::ROOT)
                            .or_default()
                            .native_pixels_per_point = Some(pixels_per_point);
                        let output = ctx.run_ui(input, |ui| {
                            let slider =
                                checked_slider(&mut value, "setting", lo..=hi, lo..=hi, &refused);
                            ui.add(slider.logarithmic(logarithmic));
                        });
                        assert_eq!(output.pixels_per_point, pixels_per_point);
                        drawn = drawn_texts(&output.shapes);
                    }
                    let number = drawn
                        .into_iter()
                        .map(|(text, _)| text)
                        .find(|text| text.parse::<f64>().is_ok())
                        .expect("the slider draws its number");
                    numbers.push(number);
                }
            }
            numbers
        };
        let at_100 = numbers_at(1.0);
        assert!(at_100.contains(&"1.00".to_string()), "{at_100:?}");
        assert!(at_100.contains(&"0.0100".to_string()), "{at_100:?}");
        assert!(at_100.contains(&"100".to_string()), "{at_100:?}");
        for (value, text) in [
            (1234.5678, "1234.6"),
            (123456.7, "123457"),
            (0.012345678, "0.012346"),
        ] {
            assert_eq!(slider_text(value), text);
        }
        for pixels_per_point in [1.25, 1.5, 2.0] {
            assert_eq!(
                numbers_at(pixels_per_point),
                at_100,
                "at {pixels_per_point}"
            );
        }
    }

    /// The wall throw's and the spawner's sliders: egui turned a typed v0 of −5 m/s into 0.5 and 10⁹ into 60
    /// without a word. A typed value within what a lane takes is kept as typed, beyond the drag range too.
    #[test]
    fn a_typed_slider_value_is_refused_with_a_word_or_kept_as_typed() {
        let typed_v0 = |typed: &str| {
            let refused = Refusals::default();
            let (_, entered) = crate::app::test_events::type_into_widget(
                5.0,
                |ui, v| {
                    let slider = checked_slider(v, "v0 [m/s]", 0.5..=60.0, 1e-3..=1e6, &refused);
                    let rect = ui.add(slider.logarithmic(true)).rect;
                    crate::app::test_events::slider_value_point(ui, rect)
                },
                typed,
            );
            (entered, refused.take().map(|r| r.text()))
        };
        assert_eq!(
            typed_v0("-5"),
            (
                5.0,
                Some("v0 [m/s]: \"-5\" is outside 0.001 to 1e6; kept 5".into())
            )
        );
        assert_eq!(
            typed_v0("1e9"),
            (
                5.0,
                Some("v0 [m/s]: \"1e9\" is outside 0.001 to 1e6; kept 5".into())
            )
        );
        assert_eq!(
            typed_v0("100"),
            (100.0, None),
            "beyond the drag range, as typed"
        );
        assert_eq!(typed_v0("20"), (20.0, None));
    }

    #[test]
    fn a_typed_run_control_outside_its_slider_is_refused_with_a_word_not_clamped() {
        for (setting, range, start, typed, problem) in [
            (
                "time scale",
                0.01..=4.0,
                1.0,
                "0.001",
                "is outside 0.01 to 4",
            ),
            ("time scale", 0.01..=4.0, 0.5, "10", "is outside 0.01 to 4"),
            // egui clamped a typed 5000 Hz to 1000 Hz without a word.
            (
                "fixed rate [Hz]",
                crate::demo::FIXED_RATES_HZ,
                100.0,
                "5000",
                "is outside 1 to 1000",
            ),
            (
                "fixed rate [Hz]",
                crate::demo::FIXED_RATES_HZ,
                100.0,
                "0.5",
                "is outside 1 to 1000",
            ),
            (
                "fixed rate [Hz]",
                crate::demo::FIXED_RATES_HZ,
                100.0,
                "abc",
                "is not a number",
            ),
        ] {
            let (entered, refusal) = typed_into_slider(setting, range, start, typed);
            assert_eq!(entered, start, "{setting} {typed}: the old value is kept");
            assert_eq!(
                refusal,
                Some(format!("{setting}: \"{typed}\" {problem}; kept {start}")),
                "{setting} {typed}"
            );
        }
        // A value inside the range is taken, on Enter.
        assert_eq!(
            typed_into_slider("fixed rate [Hz]", crate::demo::FIXED_RATES_HZ, 100.0, "250"),
            (250.0, None)
        );
        assert_eq!(
            typed_into_slider("time scale", 0.01..=4.0, 1.0, "0.25"),
            (0.25, None)
        );
    }

    /// The scene menu shows the names the scenes give themselves, as its button does, not their files' stems
    /// (`ball_pit_2000`); a file that does not load is listed by its stem. A file is read when it joins and again
    /// only when it changes on disk: a mended file shows its scene's name within a second.
    #[test]
    fn the_scene_menu_lists_scenes_by_name_and_reads_a_file_again_only_when_it_changes() {
        let scratch = |what: &str| {
            std::env::temp_dir().join(format!("cs-menu-{what}-{}.ron", std::process::id()))
        };
        let scene = |name: &str| {
            format!(
                r#"Scene(name: "{name}", lanes: [LaneSpec(name: "a", contact: (method: Ipc, h: 0.01),
                    walls: [WallSpec(center: (0.0, -0.5), half_extents: (2.0, 0.5))],
                    balls: [BallSpec(position: (0.0, 0.2), radius: 0.1, mass: 1.0)])])"#
            )
        };
        let (broken, mine, later) = (scratch("broken"), scratch("mine"), scratch("later"));
        std::fs::write(&broken, "Scene(name: ").expect("a scratch file");
        std::fs::write(&mine, scene("My scene")).expect("a scratch file");
        std::fs::write(&later, scene("Added later")).expect("a scratch file");
        let mut catalogue = SceneCatalogue {
            paths: crate::sim::BUILT_IN_SCENES
                .iter()
                .map(std::path::PathBuf::from)
                .chain([broken.clone(), mine.clone()])
                .collect(),
        };
        let start = std::time::Instant::now();
        let at = |ms: u64| start + std::time::Duration::from_millis(ms);
        let mut menu = SceneMenuNames::default();
        menu.follow(&catalogue, at(0));
        let shipped: Vec<String> = crate::sim::BUILT_IN_SCENES
            .iter()
            .map(|p| {
                crate::scene::Scene::load(std::path::Path::new(p))
                    .expect("a shipped scene loads")
                    .name
            })
            .collect();
        assert!(shipped.contains(&"Wall throw".to_string()), "{shipped:?}");
        assert!(!shipped.iter().any(|n| n == "ball_pit_2000"), "{shipped:?}");
        let stem = broken.file_stem().expect("a stem").to_string_lossy();
        let mut expected = shipped.clone();
        expected.extend([stem.to_string(), "My scene".to_string()]);
        assert_eq!(menu.labels, expected);
        assert_eq!(menu.paths, catalogue.paths);
        let files = catalogue.paths.len();
        assert_eq!(menu.reads, files);
        // Frames in between read nothing, and nor does a look at files that did not change.
        for ms in [16, 500, 999, 1000, 2500] {
            menu.follow(&catalogue, at(ms));
        }
        assert_eq!(menu.reads, files);
        // The broken file mended and another renamed: each is read again at the next look, the others not.
        std::fs::write(&broken, scene("Mended")).expect("a scratch file");
        std::fs::write(&mine, scene("Renamed")).expect("a scratch file");
        menu.follow(&catalogue, at(3000));
        assert_eq!(menu.reads, files, "not before a second has passed");
        menu.follow(&catalogue, at(3500));
        assert_eq!(menu.reads, files + 2);
        let n = expected.len();
        expected[n - 2] = "Mended".into();
        expected[n - 1] = "Renamed".into();
        assert_eq!(menu.labels, expected);
        // An entry added to the catalogue is read when it joins, at once.
        catalogue.paths.push(later.clone());
        menu.follow(&catalogue, at(3600));
        expected.push("Added later".to_string());
        assert_eq!(menu.labels, expected);
        assert_eq!(menu.reads, files + 3);
        // Two files of one name are told apart by their files.
        std::fs::write(&later, scene("Mended")).expect("a scratch file");
        menu.follow(&catalogue, at(5000));
        let (a, b) = (&menu.labels[n - 2], &menu.labels[n]);
        assert!(
            a.starts_with("Mended (") && a.contains("cs-menu-broken"),
            "{a}"
        );
        assert!(
            b.starts_with("Mended (") && b.contains("cs-menu-later"),
            "{b}"
        );
        for file in [broken, mine, later] {
            let _ = std::fs::remove_file(file);
        }
    }

    #[test]
    fn same_named_scenes_in_same_named_files_are_told_apart_by_their_paths() {
        let paths: Vec<std::path::PathBuf> =
            ["a/pit.ron", "b/pit.ron", "c/slope.ron", "d/other.ron"]
                .map(Into::into)
                .into();
        let names = ["Pit", "Pit", "Pit", "Other"].map(String::from);
        let labels = menu_labels(&paths, &names);
        assert_eq!(
            labels,
            [
                format!("Pit ({})", paths[0].display()),
                format!("Pit ({})", paths[1].display()),
                "Pit (slope.ron)".to_string(),
                "Other".to_string()
            ]
        );
    }

    use super::*;

    #[test]
    fn a_flat_energy_is_drawn_flat_on_a_readable_axis() {
        // Rounding around 12.5 J: the plot spans at least a thousandth of it.
        let flat = [12.5, 12.5 + 2e-15, 12.5 - 1e-15];
        let (lo, hi) = least_visible_span(flat.into_iter()).expect("values");
        assert!(
            (hi - lo - 12.5e-3).abs() < 1e-12 && (lo + hi - 25.0).abs() < 1e-12,
            "{lo} {hi}"
        );
        // A real change keeps its own range; zero energy still gets a microjoule; nothing finite, nothing.
        assert_eq!(least_visible_span([1.0, 3.0].into_iter()), Some((1.0, 3.0)));
        assert_eq!(least_visible_span([0.0].into_iter()), Some((-5e-7, 5e-7)));
        assert_eq!(least_visible_span([f64::NAN].into_iter()), None);
    }

    /// Rain's balls fit every lane and each other: it once refused its own balls for overlapping each other. In a
    /// box with no room left it drops fewer and counts the rest.
    #[test]
    fn rain_places_balls_that_every_lane_accepts_and_counts_those_without_room() {
        let scene = crate::scene::Scene::load(std::path::Path::new("assets/scenes/ball_pit.ron"))
            .expect("the shipped scene loads");
        let worlds = scene.build();
        let views: Vec<&LaneWorld> = worlds.iter().collect();
        let bounds = crate::sim::lane_bounds(&worlds[0]);
        let mut seed = 0x2545_f491_4f6c_dd1d;
        for radius in [0.0, 0.01, 0.03] {
            let (balls, missing) = rain(&views, bounds, radius, 0.2, &mut seed);
            assert_eq!((balls.len(), missing), (RAIN_BALLS, 0), "radius {radius}");
            let mut lanes = worlds.clone();
            for ball in &balls {
                for lane in &mut lanes {
                    lane.add_ball(crate::physics::geometry::Ball {
                        position: ball.position,
                        velocity: ball.velocity,
                        radius: ball.radius,
                        mass: ball.mass,
                    })
                    .unwrap_or_else(|e| panic!("radius {radius}: {e}"));
                }
            }
        }
        // The slider's largest balls (100 mm) in the pit's 1 m box: about five fit side by side in the band.
        let (balls, missing) = rain(&views, bounds, 0.1, 0.2, &mut seed);
        assert!(
            missing > 0 && balls.len() + missing == RAIN_BALLS,
            "{} placed",
            balls.len()
        );
    }

    /// Three presses of Rain on the rod drop (the spawner's 10 mm, 1 kg balls) drop 30 balls that land on the slab
    /// and on each other; they stay on the slab as the pile settles, instead of sliding off its ends and falling
    /// for ever (its floor was frictionless).
    #[test]
    fn rain_on_the_rod_drop_stays_on_its_slab() {
        let scene = crate::scene::Scene::load(std::path::Path::new("assets/scenes/rod_drop.ron"))
            .expect("the shipped scene loads");
        let mut worlds = scene.build();
        let bounds = crate::sim::lane_bounds(&worlds[0]);
        let mut seed = 0x2545_f491_4f6c_dd1d;
        for _ in 0..3 {
            let views: Vec<&LaneWorld> = worlds.iter().collect();
            let (balls, missing) = rain(&views, bounds, 0.01, 1.0, &mut seed);
            assert_eq!(missing, 0);
            for ball in balls {
                worlds[0]
                    .add_ball(crate::physics::geometry::Ball {
                        position: ball.position,
                        velocity: ball.velocity,
                        radius: ball.radius,
                        mass: ball.mass,
                    })
                    .expect("rain is accepted");
            }
            for _ in 0..100 {
                assert!(worlds[0].step().is_some(), "{:?}", worlds[0].fault);
            }
        }
        for _ in 0..900 {
            assert!(worlds[0].step().is_some(), "{:?}", worlds[0].fault);
        }
        assert_eq!(worlds[0].balls.len(), 3 * RAIN_BALLS);
        assert!(worlds[0].time > 11.9, "{}", worlds[0].time);
        let slab_top = 0.0;
        let slab_end = 1.6;
        for ball in &worlds[0].balls {
            assert!(
                ball.position.y > slab_top && ball.position.x.abs() < slab_end,
                "a ball off the slab after 12 s: {:?}",
                ball.position
            );
        }
    }

    #[test]
    fn a_plot_too_narrow_for_its_title_takes_the_short_one_and_a_wide_one_the_whole() {
        let ctx = egui::Context::default();
        let mut verdicts = Vec::new();
        for width in [120.0f32, 700.0] {
            let input = crate::app::test_events::input(Vec::new(), egui::vec2(1024.0, 700.0));
            let _ = ctx.run_ui(input, |ui| {
                ui.vertical(|ui| {
                    ui.set_max_width(width);
                    verdicts.push(
                        SHORT_PLOT_TITLES
                            .iter()
                            .map(|&(whole, short)| {
                                (
                                    fits_one_small_line(ui, whole),
                                    fits_one_small_line(ui, short),
                                )
                            })
                            .collect::<Vec<_>>(),
                    );
                });
            });
        }
        // 120 points (a plot beside both panels at 1 024 × 700 is about 150): every short title fits, and the
        // min gap's and the energy's whole ones do not; 700 points: every whole title fits.
        assert!(verdicts[0].iter().all(|&(_, short)| short), "{verdicts:?}");
        assert!(!verdicts[0][0].0 && !verdicts[0][2].0, "{verdicts:?}");
        assert!(verdicts[1].iter().all(|&(whole, _)| whole), "{verdicts:?}");
    }

    /// The limited panels, laid out as `sandbox_ui` lays them (text and a separator in each side panel; in the plots
    /// panel a legend line and three titled plots of [`plot_height`]), for one frame of a window of `size` with
    /// `events`. Returns the left panel's width, the right panel's width and the plots panel's height.
    fn panel_sizes(ctx: &egui::Context, (w, h): (f32, f32), events: Vec<egui::Event>) -> [f32; 3] {
        let input = crate::app::test_events::input(events, egui::vec2(w, h));
        let mut sizes = [0.0; 3];
        let _ = ctx.run_ui(input, |ui| {
            let limits = PanelLimits::for_window(ui.ctx().viewport_rect().size());
            // A separator takes the panel's width, as the side panels' do.
            let side = |ui: &mut egui::Ui| {
                ui.label("a line of settings long enough to wrap in a narrow panel");
                ui.separator();
            };
            let left = LimitedPanel::Sandbox
                .panel(ui.ctx(), limits)
                .show_inside(ui, side);
            let right = LimitedPanel::Lanes
                .panel(ui.ctx(), limits)
                .show_inside(ui, side);
            let plots = LimitedPanel::Plots
                .panel(ui.ctx(), limits)
                .show_inside(ui, |ui| {
                    ui.label("━ lane a   ━ lane b");
                    let below_legend = ui.available_height();
                    ui.horizontal(|ui| {
                        for title in ["a", "b", "c"] {
                            ui.vertical(|ui| {
                                ui.set_width(100.0);
                                let title_top = ui.cursor().min.y;
                                ui.small(title);
                                Plot::new(title)
                                    .height(plot_height(ui, below_legend, title_top))
                                    .show(ui, |_| {});
                            });
                        }
                    });
                });
            sizes = [
                left.response.rect.width(),
                right.response.rect.width(),
                plots.response.rect.height(),
            ];
        });
        sizes
    }

    /// [`panel_sizes`] through windows of `sizes`, three frames at each.
    fn panel_sizes_through(ctx: &egui::Context, sizes: &[(f32, f32)]) -> Vec<[f32; 3]> {
        sizes
            .iter()
            .flat_map(|&size| [(); 3].map(|_| panel_sizes(ctx, size, vec![])))
            .collect()
    }

    /// The plots panel's height after each frame of [`panel_sizes_through`].
    fn plots_panel_heights(sizes: &[(f32, f32)]) -> Vec<f32> {
        panel_sizes_through(&egui::Context::default(), sizes)
            .iter()
            .map(|s| s[2])
            .collect()
    }

    /// Drags the pointer from `from` to `to` in a window of `size`, a frame at each step, and lets go.
    fn drag(ctx: &egui::Context, size: (f32, f32), from: (f32, f32), to: (f32, f32)) {
        let (from, to) = (egui::Pos2::from(from), egui::Pos2::from(to));
        use crate::app::test_events::button;
        for events in [
            vec![egui::Event::PointerMoved(from)],
            vec![button(from, true)],
            vec![egui::Event::PointerMoved(from.lerp(to, 0.5))],
            vec![egui::Event::PointerMoved(to)],
            vec![button(to, false)],
            vec![egui::Event::PointerGone],
        ] {
            panel_sizes(ctx, size, events);
        }
    }

    /// Each panel's size within its limits in a window of `window`, and equal to `chosen` (left, right, plots) as
    /// far as they allow.
    fn assert_shown_at(sizes: [f32; 3], chosen: [f32; 3], window: (f32, f32), context: &str) {
        let limits = PanelLimits::for_window(window.into());
        for ((shown, chosen), range) in
            sizes
                .into_iter()
                .zip(chosen)
                .zip([limits.side, limits.side, limits.bottom])
        {
            assert!(
                shown <= range.max + 0.5 && shown >= range.min - 0.5,
                "{context}: {sizes:?} outside {limits:?}"
            );
            assert!(
                (shown - chosen.clamp(range.min, range.max)).abs() < 1.0,
                "{context}: {sizes:?}, chosen {chosen:?}"
            );
        }
    }

    #[test]
    fn the_plots_panel_keeps_its_size_and_stays_within_its_limit_through_a_small_window() {
        let heights = plots_panel_heights(&[
            (1600.0, 900.0),
            (800.0, 450.0),
            (1280.0, 720.0),
            (1600.0, 900.0),
        ]);
        let at_start = heights[2];
        assert!((195.0..=205.0).contains(&at_start), "{heights:?}");
        // Steady within a window size: no growth from frame to frame.
        for frames in heights.chunks(3) {
            assert!(
                frames.windows(2).all(|w| (w[1] - w[0]).abs() < 0.5),
                "{heights:?}"
            );
        }
        // At 800 × 450 at most 40 % of the height, where the plots once took nearly all of the middle column;
        // grown back, no more than their size at the start.
        assert!(
            heights[3..6].iter().all(|&h| h <= 0.4 * 450.0 + 0.5),
            "{heights:?}"
        );
        assert!(
            heights[6..]
                .iter()
                .all(|&h| (170.0..=at_start + 0.5).contains(&h)),
            "{heights:?}"
        );
    }

    /// A small window clamps the panels; grown again it gives them back the sizes they had (egui kept them at
    /// the clamped sizes: the plots at 180 px in 1600 × 900 where they had 200).
    #[test]
    fn the_panels_come_back_to_their_sizes_when_the_window_grows_again() {
        let (large, small) = ((1600.0, 900.0), (800.0, 450.0));
        let sizes = panel_sizes_through(&egui::Context::default(), &[large, small, large]);
        let at_start = sizes[2];
        assert_shown_at(at_start, [330.0, 400.0, 200.0], large, "at start");
        for &shown in &sizes[3..6] {
            assert_shown_at(shown, at_start, small, "small");
        }
        // The limits bite at 800 × 450: 240 px a side, 180 px for the plots.
        assert_eq!(sizes[5].map(f32::round), [240.0, 240.0, 180.0]);
        for &shown in &sizes[6..] {
            assert_eq!(shown, at_start, "grown again: {sizes:?}");
        }
    }

    /// A drag of a panel's edge sets the size it comes back to, larger or smaller, in a large window or a small
    /// one.
    #[test]
    fn a_dragged_size_is_kept_through_a_small_window() {
        let ctx = egui::Context::default();
        let (large, small) = ((1600.0, 900.0), (800.0, 450.0));
        panel_sizes_through(&ctx, &[large]);
        // The plots' top edge from 200 px up to 250, the left panel's edge from 330 px in to 280.
        drag(&ctx, large, (800.0, 700.0), (800.0, 650.0));
        drag(&ctx, large, (330.0, 300.0), (280.0, 300.0));
        let chosen = [280.0, 400.0, 250.0];
        let sizes = panel_sizes_through(&ctx, &[large, small, large]);
        for (i, &shown) in sizes.iter().enumerate() {
            let size = if (3..6).contains(&i) { small } else { large };
            assert_shown_at(shown, chosen, size, &format!("frame {i}"));
        }
        // In the small window the right panel's edge from 240 px in to 210: that is its size from now on.
        let right_edge = small.0 - 240.0;
        drag(&ctx, small, (right_edge, 100.0), (right_edge + 30.0, 100.0));
        let sizes = panel_sizes_through(&ctx, &[small, large]);
        assert_shown_at(sizes[5], [280.0, 210.0, 250.0], large, "grown");
        // A click on the left panel's edge in the small window, clamped at 240, moves nothing: the panel keeps
        // its 280 for when there is room again.
        let left_edge = small.0 * 0.3;
        panel_sizes_through(&ctx, &[small]);
        drag(&ctx, small, (left_edge, 100.0), (left_edge, 100.0));
        let sizes = panel_sizes_through(&ctx, &[small, large]);
        assert_shown_at(sizes[5], [280.0, 210.0, 250.0], large, "after a click");
    }

    /// Through windows of many sizes a panel dragged as large as its limit allows (and one left at its default)
    /// never exceeds the window's maximum and comes back to its size when there is room.
    #[test]
    fn a_panel_is_shown_at_its_chosen_size_or_its_window_maximum_at_every_size() {
        let ctx = egui::Context::default();
        let large = (1600.0, 900.0);
        panel_sizes_through(&ctx, &[large]);
        // Both edges far past their limits: the plots up to 360 px (40 % of 900), the left panel out to 480 (30 % of
        // 1600).
        drag(&ctx, large, (800.0, 700.0), (800.0, 100.0));
        drag(&ctx, large, (330.0, 300.0), (900.0, 300.0));
        let chosen = [480.0, 400.0, 360.0];
        let windows = [
            large,
            (640.0, 360.0),
            (1920.0, 1080.0),
            (1000.0, 1000.0),
            (3840.0, 600.0),
            (700.0, 2000.0),
            large,
        ];
        let sizes = panel_sizes_through(&ctx, &windows);
        for (i, &shown) in sizes.iter().enumerate() {
            let window = windows[i / 3];
            assert_shown_at(shown, chosen, window, &format!("{window:?}"));
        }
    }

    #[test]
    fn the_side_panels_leave_the_canvas_at_least_forty_percent_of_the_width() {
        for width in [640.0, 800.0, 1600.0, 3840.0] {
            let limits = PanelLimits::for_window(egui::vec2(width, 900.0));
            assert!(
                width - 2.0 * limits.side.max >= 0.4 * width - 1e-3,
                "{width}"
            );
            assert!(limits.side.min <= limits.side.max);
        }
    }

    use crate::physics::DVec2;

    /// In a panel too narrow for the whole status line, the frame rate is still drawn whole, inside the panel, on
    /// the line's one row; the run's text is what is cut.
    #[test]
    fn the_frame_rate_stays_in_sight_in_a_narrow_panel() {
        let status = "step 80 / 80 · 100 steps/s (1.00× real time)".to_string();
        let ctx = egui::Context::default();
        let mut widths = Vec::new();
        for width in [180.0, 240.0, 600.0] {
            let mut row = egui::Rect::NOTHING;
            let mut output = None;
            for _ in 0..2 {
                let input = crate::app::test_events::input(Vec::new(), egui::vec2(1600.0, 900.0));
                output = Some(ctx.run_ui(input, |ui| {
                    let rect =
                        egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(width, 900.0));
                    ui.scope_builder(egui::UiBuilder::new().max_rect(rect), |ui| {
                        row = status_row(
                            ui,
                            status.clone(),
                            Some(frame_rate_text(59.6, false)),
                            "explained",
                        )
                        .rect;
                    });
                }));
            }
            let output = output.expect("two frames ran");
            let texts: Vec<(String, egui::Rect)> = output
                .shapes
                .iter()
                .filter_map(|clipped| match &clipped.shape {
                    egui::Shape::Text(text) => Some((
                        text.galley.text().to_string(),
                        text.galley.rect.translate(text.pos.to_vec2()),
                    )),
                    _ => None,
                })
                .collect();
            let fps = texts
                .iter()
                .find(|(text, _)| text == "· 60 fps")
                .unwrap_or_else(|| panic!("no frame rate at {width}: {texts:?}"));
            assert!(
                fps.1.min.x >= 0.0 && fps.1.max.x <= width + 0.5,
                "{fps:?} outside a panel {width} wide"
            );
            let run = texts
                .iter()
                .find(|(text, _)| text.starts_with("step 80"))
                .unwrap_or_else(|| panic!("no run text at {width}: {texts:?}"));
            assert!(
                run.1.max.x <= fps.1.min.x + 0.5,
                "{run:?} runs into {fps:?}"
            );
            assert!(row.height() < 24.0, "one row at {width}: {row:?}");
            for (text, rect) in [run, fps] {
                assert!(
                    rect.max.y < 24.0,
                    "{text:?} at {rect:?}, below the row's top"
                );
            }
            widths.push(run.1.width());
        }
        assert!(
            widths[0] < widths[1] && widths[1] < widths[2],
            "the run's text is what gives way: {widths:?}"
        );
        // The explanation shows with the pointer resting on the frame rate, on the run's text, or between them.
        for x in [235.0, 60.0, 150.0] {
            let ctx = egui::Context::default();
            let mut explained = false;
            for frame in 0..40 {
                // Moved there once, then resting: a tooltip waits for the pointer to stay still.
                let moved = if frame == 0 {
                    vec![egui::Event::PointerMoved(egui::pos2(x, 9.0))]
                } else {
                    Vec::new()
                };
                let input = egui::RawInput {
                    time: Some(f64::from(frame) * 0.05),
                    ..crate::app::test_events::input(moved, egui::vec2(1600.0, 900.0))
                };
                let output = ctx.run_ui(input, |ui| {
                    let rect =
                        egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(250.0, 900.0));
                    ui.scope_builder(egui::UiBuilder::new().max_rect(rect), |ui| {
                        status_row(
                            ui,
                            "step 80 / 80".into(),
                            Some(frame_rate_text(4.8, true)),
                            "explained",
                        );
                    });
                });
                explained |= drawn_texts(&output.shapes)
                    .iter()
                    .any(|(text, _)| text == "explained");
            }
            assert!(explained, "no explanation with the pointer at x = {x}");
        }
    }

    #[test]
    fn the_status_says_finished_at_the_last_step_instead_of_a_rate_of_zero() {
        let info = |h, left| RunInfo {
            smallest_h: Some(h),
            ticks_left: left,
            replay_ticks: None,
        };
        let mut control = SimControl {
            steps_taken: 40,
            ..default()
        };
        assert_eq!(
            status_line(&control, Some(100.0), info(0.01, Some(40))),
            "step 40 / 80 · 100 steps/s (1.00× real time)"
        );
        // The real-time factor is the lanes' own h, not the fixed rate: 24 steps/s of h = 10 ms is 0.24×.
        assert_eq!(
            status_line(&control, Some(24.0), info(0.01, Some(40))),
            "step 40 / 80 · 24 steps/s (0.24× real time)"
        );
        // Lanes of 5 and 10 ms keep time together: a tick is the smaller step.
        assert_eq!(
            status_line(&control, Some(50.0), info(0.005, Some(120))),
            "step 40 / 160 · 50 steps/s (0.25× real time)"
        );
        control.steps_taken = 80;
        assert_eq!(
            status_line(&control, Some(0.0), info(0.01, Some(0))),
            "step 80 / 80 · finished (R runs it again)"
        );
        control.paused = true;
        assert_eq!(
            status_line(&control, Some(0.0), info(0.01, None)),
            "step 80"
        );
        let replaying = RunInfo {
            smallest_h: Some(0.01),
            ticks_left: None,
            replay_ticks: Some((120, 300)),
        };
        assert_eq!(
            status_line(&control, Some(0.0), replaying),
            "replay tick 120 / 300"
        );
    }

    /// The gap axis is linear within its scale of zero: 1 µm, or the decade below a smaller gap, so that IPC's
    /// 53.8 nm stop (d̂ = 0.05 mm) stands well above the zero line and reads back as itself.
    #[test]
    fn a_gap_below_a_micrometre_is_drawn_clear_of_the_zero_line() {
        assert_eq!(gap_scale([].into_iter()), 1e-6);
        assert_eq!(gap_scale([24e-6, -5e-3, 0.0].into_iter()), 1e-6);
        assert_eq!(gap_scale([24e-6, 53.8e-9].into_iter()), 1e-8);
        assert_eq!(
            gap_scale([-2e-7].into_iter()),
            1e-7,
            "an overlap counts too"
        );
        assert_eq!(gap_scale([1e-15, f64::NAN].into_iter()), 1e-12);
        let fixed = signed_log_gap(53.8e-9, 1e-6);
        let scaled = signed_log_gap(53.8e-9, 1e-8);
        assert!(fixed < 0.03 && scaled > 0.8, "{fixed} {scaled}");
        assert_eq!(gap_axis_text(scaled, 1e-8), "53.8 nm");
        assert_eq!(gap_axis_text(signed_log_gap(1e-8, 1e-8), 1e-8), "10 nm");
    }

    #[test]
    fn the_gap_plot_reads_micrometres_and_metres_on_one_axis() {
        // The grid's decades, without decimals.
        let decades = [
            (1e-9, "1 nm"),
            (1e-7, "100 nm"),
            (1e-6, "1 µm"),
            (1e-5, "10 µm"),
            (1e-4, "100 µm"),
            (1e-3, "1 mm"),
            (-1e-2, "-10 mm"),
            (1e-1, "100 mm"),
            (1.0, "1 m"),
            (1e3, "1000 m"),
        ];
        for (gap, text) in decades {
            assert_eq!(
                gap_axis_text(signed_log_gap(gap, 1e-6), 1e-6),
                text,
                "{gap}"
            );
        }
        assert_eq!(gap_axis_text(signed_log_gap(0.0, 1e-6), 1e-6), "0");
        // A digit of a decade, as the finer grid's lines: without decimals.
        assert_eq!(gap_axis_text(signed_log_gap(3e-3, 1e-6), 1e-6), "3 mm");
        assert_eq!(gap_axis_text(signed_log_gap(-2e-7, 1e-6), 1e-6), "-200 nm");
        for gap in [24e-6, -11.46e-3, 3.5e-3, 40.5] {
            let back = gap_axis_text(signed_log_gap(gap, 1e-6), 1e-6);
            let sign = if gap < 0.0 { "-" } else { "" };
            assert_eq!(
                back,
                format!("{sign}{}", crate::sim::length_text(gap.abs()))
            );
        }
        // Ordered like the gaps, and compact: 40 m is under 8 units, 1 µm is 0.3.
        assert!(signed_log_gap(40.0, 1e-6) < 8.0);
        assert!((signed_log_gap(1e-6, 1e-6) - 2f64.log10()).abs() < 1e-12);
        assert!(signed_log_gap(-1e-3, 1e-6) < 0.0 && signed_log_gap(1e-9, 1e-6) > 0.0);
    }

    /// A settled pile's gaps lie within a decade (0.39 to 0.6 µm in the 2 000-ball pit after a heavy drop): the
    /// decade lines alone gave the axis one label or none. 2 and 5 of each decade, then every digit, join them.
    #[test]
    fn a_gap_plot_within_a_decade_has_labels_to_read_it_by() {
        let marks = |lo: f64, hi: f64| {
            let input = egui_plot::GridInput {
                bounds: (signed_log_gap(lo, 1e-6), signed_log_gap(hi, 1e-6)),
                base_step_size: 0.01,
            };
            let mut texts: Vec<String> = gap_grid_marks(input, 1e-6)
                .into_iter()
                .map(|m| gap_axis_text(m.value, 1e-6))
                .collect();
            texts.sort();
            texts
        };
        assert_eq!(
            marks(0.3e-6, 0.7e-6),
            ["300 nm", "400 nm", "500 nm", "600 nm", "700 nm"]
        );
        assert_eq!(marks(0.9e-6, 6e-6), ["1 µm", "2 µm", "5 µm"]);
        // A tall range keeps its decades alone.
        assert_eq!(marks(0.5e-6, 2e-3), ["1 mm", "1 µm", "10 µm", "100 µm"]);
    }

    /// A gap that holds still (a settled pile's 388.8 nm), or all but still, is shown on a decade of the axis with
    /// labels round it; a range taller than a decade is kept.
    #[test]
    fn a_gap_that_holds_still_is_shown_with_labels_round_it() {
        let scale = gap_scale([388.8e-9].into_iter());
        let texts = |gaps: &[f64]| {
            let values = gaps.iter().map(|&g| signed_log_gap(g, scale));
            let bounds = least_gap_span(values).expect("a span");
            let marks = gap_grid_marks(
                egui_plot::GridInput {
                    bounds,
                    base_step_size: 0.01,
                },
                scale,
            );
            let mut texts: Vec<String> = marks
                .into_iter()
                .map(|m| gap_axis_text(m.value, scale))
                .collect();
            texts.sort();
            (bounds, texts)
        };
        let (bounds, still) = texts(&[388.8e-9; 3]);
        assert!((bounds.1 - bounds.0 - 1.0).abs() < 1e-12, "{bounds:?}");
        assert_eq!(still, ["1 µm", "100 nm"]);
        let (_, all_but) = texts(&[388.8e-9, 388.9e-9, 391e-9]);
        assert_eq!(all_but, still);
        let tall = [0.5e-6, 2e-3].map(|g| signed_log_gap(g, scale));
        let kept = least_gap_span(tall.into_iter()).expect("a span");
        assert!((kept.0 - tall[0]).abs() < 1e-12 && (kept.1 - tall[1]).abs() < 1e-12);
        assert_eq!(least_gap_span([f64::NAN].into_iter()), None);
    }

    /// The min-gap plot of a settled pile, drawn: a gap that held still for 35 s (2 000 steps at 60 Hz) is labelled
    /// on the axis. egui_plot made the range of no height 35 decades tall, and faded out its sparse labels.
    #[test]
    fn a_settled_pile_s_gap_plot_is_drawn_with_labels() {
        let ctx = egui::Context::default();
        let gap = 388.8e-9;
        let scale = gap_scale([gap].into_iter());
        let mut labels = Vec::new();
        for _ in 0..3 {
            let input = crate::app::test_events::input(vec![], egui::vec2(400.0, 200.0));
            let output = ctx.run_ui(input, |ui| {
                let points: Vec<[f64; 2]> = (0..2000)
                    .map(|i| [f64::from(i) / 60.0, signed_log_gap(gap, scale)])
                    .collect();
                let values = points.iter().map(|p| p[1]);
                gap_axis(Plot::new("gaps"), values, scale)
                    .height(150.0)
                    .set_margin_fraction(egui::Vec2::new(0.05, 0.12))
                    .show(ui, |plot| {
                        plot.line(Line::new("gap", PlotPoints::new(points)))
                    });
            });
            labels = drawn_texts(&output.shapes)
                .into_iter()
                .map(|(text, _)| text)
                .filter(|text| text.ends_with(" nm") || text.ends_with(" µm"))
                .collect();
        }
        labels.sort();
        assert_eq!(labels, ["1 µm", "100 nm"]);
    }

    /// The status row says when the window idles, so that its few frames a second read as chosen.
    #[test]
    fn an_idle_window_s_frame_rate_says_it_idles() {
        assert_eq!(frame_rate_text(59.6, false), "· 60 fps");
        assert_eq!(frame_rate_text(4.8, true), "· idle");
    }

    #[test]
    fn the_landscape_is_drawn_only_where_its_throw_fits_the_scene() {
        let applies = |path: &str| {
            let scene = crate::scene::Scene::load(std::path::Path::new(path))
                .expect("a shipped scene loads");
            landscape_applies(&scene)
        };
        assert!(applies("assets/scenes/wall_throw.ron"));
        assert!(applies("assets/scenes/gauntlet.ron"));
        for other in [
            "assets/scenes/ball_pit.ron",
            "assets/scenes/ball_pit_2000.ron",
            "assets/scenes/rod_drop.ron",
            "assets/scenes/slope.ron",
        ] {
            assert!(!applies(other), "{other}");
        }
    }

    /// A lane changes for other reasons than a step (here: marked changed by hand, as a spawn or an edit does):
    /// its last step's impacts are listed once however often it changes.
    #[test]
    fn each_steps_rod_impacts_are_listed_once() {
        let scene = crate::scene::Scene::load(std::path::Path::new("assets/scenes/rod_drop.ron"))
            .expect("the shipped scene loads");
        let mut world = scene.build().into_iter().next().expect("one lane");
        // Step to the first step with two impacts or more: the old check only skipped a repeat of the newest
        // line.
        let impacts = |w: &LaneWorld| {
            w.last
                .as_ref()
                .map_or(0, |l| l.rods.iter().map(|r| r.impacts.len()).sum::<usize>())
        };
        for _ in 0..20_000 {
            world.step();
            if impacts(&world) >= 2 {
                break;
            }
        }
        let found = impacts(&world);
        assert!(found >= 2, "no step of the rod drop has two impacts");
        let mut app = App::new();
        app.init_resource::<RodImpactLog>()
            .add_systems(Update, record_rod_impacts);
        let lane = app
            .world_mut()
            .spawn(Lane::new(0, world, DVec2::ZERO, (DVec2::ZERO, DVec2::ZERO)))
            .id();
        app.update();
        for _ in 0..3 {
            if let Some(mut lane) = app.world_mut().get_mut::<Lane>(lane) {
                lane.set_changed();
            }
            app.update();
        }
        assert_eq!(app.world().resource::<RodImpactLog>().0.len(), found);
    }

    #[test]
    fn a_restart_clears_the_rod_impacts_of_the_run_before() {
        let mut app = App::new();
        app.insert_resource(RodImpactLog(vec!["step 432 rod 0 left end: …".into()]))
            .add_systems(Update, record_rod_impacts);
        app.update();
        assert_eq!(
            app.world().resource::<RodImpactLog>().0.len(),
            1,
            "no new lane yet"
        );
        let scene = crate::scene::Scene::load(std::path::Path::new("assets/scenes/rod_drop.ron"))
            .expect("the shipped scene loads");
        let world = scene.build().into_iter().next().expect("one lane");
        app.world_mut()
            .spawn(Lane::new(0, world, DVec2::ZERO, (DVec2::ZERO, DVec2::ZERO)));
        app.update();
        assert!(app.world().resource::<RodImpactLog>().0.is_empty());
    }

    #[test]
    fn time_ticks_have_the_decimals_of_their_step() {
        let mark = |value, step_size| egui_plot::GridMark { value, step_size };
        assert_eq!(seconds_axis_text(mark(0.1 + 0.2, 0.1)), "0.3 s");
        assert_eq!(seconds_axis_text(mark(2.0, 1.0)), "2 s");
        assert_eq!(seconds_axis_text(mark(20.0, 10.0)), "20 s");
        assert_eq!(seconds_axis_text(mark(0.05, 0.01)), "0.05 s");
        assert_eq!(axis_number_text(mark(2.5, 0.5)), "2.5");
        assert_eq!(axis_number_text(mark(4.0, 2.0)), "4");
        assert_eq!(axis_number_text(mark(5e-7, 5e-7)), "5.0e-7");
        assert_eq!(axis_number_text(mark(-1e-6, 5e-7)), "-1.0e-6");
        assert_eq!(axis_number_text(mark(0.0, 5e-7)), "0");
        assert_eq!(axis_number_text(mark(2e6, 1e6)), "2.0e6");
        assert_eq!(axis_number_text(mark(2.5e6, 5e5)), "2.5e6");
        // Ticks round a flat energy of 1 J stay apart.
        assert_eq!(axis_number_text(mark(1.0005, 5e-4)), "1.0005");
        assert_eq!(axis_number_text(mark(12.5000002, 2e-7)), "1.25000002e1");
        assert_eq!(axis_number_text(mark(1.0, 0.0)), "1");
    }

    /// The plots share the span of all lanes' histories, whichever lane has samples.
    #[test]
    fn the_plots_share_the_time_of_every_lane_s_history() {
        use crate::sim::DiagnosticSample;
        use std::collections::VecDeque;
        let history = |times: &[f64]| -> VecDeque<DiagnosticSample> {
            times
                .iter()
                .map(|&time| DiagnosticSample {
                    step: 0,
                    time,
                    min_gap: None,
                    max_penetration: 0.0,
                    newton_iterations: 0,
                    energy: 0.0,
                    rod_impacts: 0,
                })
                .collect()
        };
        let (a, b, empty) = (
            history(&[2.0, 3.0, 9.5]),
            history(&[0.5, 4.0]),
            history(&[]),
        );
        assert_eq!(
            shared_time_span([&a, &empty, &b].into_iter()),
            Some((0.5, 9.5))
        );
        assert_eq!(shared_time_span([&empty].into_iter()), None);
        assert_eq!(shared_time_span([&a].into_iter()), Some((2.0, 9.5)));
        // A full history (a finer lane's, which dropped its oldest samples) starts the span at its first sample:
        // every lane is drawn over the same time.
        let full: Vec<f64> = (0..crate::sim::HISTORY_LEN)
            .map(|i| 10.0 + i as f64 * 0.005)
            .collect();
        let full = history(&full);
        let coarse = history(&[0.0, 10.0, 19.0]);
        let (t0, t1) = shared_time_span([&coarse, &full].into_iter()).expect("a span");
        assert_eq!(t0, 10.0);
        assert!((t1 - 19.995).abs() < 1e-9, "{t1}");
    }

    /// The landscape draws each method with the first lane's settings that runs it, and where none does, the
    /// seed's, saying so in its legend.
    #[test]
    fn the_landscape_says_when_a_method_is_the_seed_s_and_no_lane_s() {
        let scene = crate::scene::Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
            .expect("the shipped scene loads");
        let mut worlds = scene.build();
        worlds[0].settings.stiffness = 2.5e5;
        worlds[1].settings.kappa = 3e4;
        let models = LandscapeModels::of(&worlds.iter().collect::<Vec<_>>());
        assert_eq!(models.penalty_k, 2.5e5);
        assert_eq!(models.kappa, 3e4);
        assert_eq!(models.dhat, worlds[1].dhat());
        assert_eq!(models.penalty_name(), "penalty k = 250000");
        assert!(
            !models.ipc_name().contains("no lane"),
            "{}",
            models.ipc_name()
        );
        for world in &mut worlds {
            world.settings.method = ContactMethod::Ipc;
        }
        let models = LandscapeModels::of(&worlds.iter().collect::<Vec<_>>());
        assert_eq!(models.penalty_k, 1e4);
        assert_eq!(
            models.penalty_name(),
            "penalty k = 10000 (the seed's; no lane runs it)"
        );
        assert_eq!(
            models.kappa, worlds[0].settings.kappa,
            "the first IPC lane's, now lane 0"
        );
        for world in &mut worlds {
            world.settings.method = ContactMethod::Penalty;
        }
        let models = LandscapeModels::of(&worlds.iter().collect::<Vec<_>>());
        assert_eq!(
            (models.dhat, models.kappa, models.ccd_factor),
            (1e-3, 1e4, 0.9)
        );
        assert_eq!(
            models.ipc_name(),
            "IPC dhat = 1.00 mm (the seed's; no lane runs it)"
        );
        assert_eq!(models.penalty_k, 2.5e5);
    }

    /// The throw's k slider moves only with a penalty lane to act on, its d̂ slider only with an IPC lane: a click
    /// at the left end of each rail, with the wall throw's lanes as shipped and then all switched to one method.
    #[test]
    fn the_k_and_dhat_sliders_are_greyed_without_a_lane_of_their_method() {
        use crate::app::test_events::{button, input};
        let scene = crate::scene::Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
            .expect("the shipped scene loads");
        let shipped = scene.build();
        let all = |method: ContactMethod| {
            let mut worlds = shipped.clone();
            for world in &mut worlds {
                world.settings.method = method;
            }
            worlds
        };
        // (log10 k, d̂ in mm) after a click at the left end of each slider's rail.
        let clicked = |worlds: &[LaneWorld]| {
            let ctx = egui::Context::default();
            let mut state = UiState::default();
            let before = (state.throw_log10_k, state.throw_dhat_mm);
            let worlds: Vec<&LaneWorld> = worlds.iter().collect();
            let refused = Refusals::default();
            let rects = std::cell::Cell::new([egui::Rect::NOTHING; 2]);
            let frame = |events: Vec<egui::Event>, state: &mut UiState| {
                let _ = ctx.run_ui(input(events, egui::vec2(400.0, 300.0)), |ui| {
                    rects.set(method_sliders(ui, state, &worlds, &refused).1);
                });
            };
            frame(vec![], &mut state);
            for rect in rects.get() {
                let at = egui::pos2(rect.left() + 1.0, rect.center().y);
                frame(
                    vec![egui::Event::PointerMoved(at), button(at, true)],
                    &mut state,
                );
                frame(vec![button(at, false)], &mut state);
            }
            let after = (state.throw_log10_k, state.throw_dhat_mm);
            (before, after)
        };
        let (before, after) = clicked(&shipped);
        assert!(
            after.0 < before.0 && after.1 < before.1,
            "{before:?} {after:?}"
        );
        let (before, after) = clicked(&all(ContactMethod::Ipc));
        assert!(
            after.0 == before.0 && after.1 < before.1,
            "{before:?} {after:?}"
        );
        let (before, after) = clicked(&all(ContactMethod::Penalty));
        assert!(
            after.0 < before.0 && after.1 == before.1,
            "{before:?} {after:?}"
        );
    }

    /// The time axes' labels: the finest step whose widest label fits between two marks, none within half a
    /// label of the right end.
    #[test]
    fn time_labels_have_room_for_their_text_and_stay_inside_the_plot() {
        // (bounds in s, pixels across) → the labelled times.
        let labelled = |(lo, hi): (f64, f64), px: f64| {
            let per_px = (hi - lo) / px;
            time_marks(egui_plot::GridInput {
                bounds: (lo, hi),
                base_step_size: per_px * f64::from(GRID_LEAST_PX),
            })
            .into_iter()
            .filter(|m| m.step_size / per_px >= 22.0)
            .map(seconds_axis_text)
            .collect::<Vec<_>>()
        };
        // A narrow min-gap plot: 0.8 s over 65 px (was "0 s" alone).
        assert_eq!(labelled((-0.04, 0.84), 65.0), ["0.0 s", "0.5 s"]);
        // The slope at 960 × 600: 4.5 s over 68 px ("4 s", 10 px from the end, would be cut).
        assert_eq!(labelled((-0.2, 4.7), 68.0), ["0 s", "2 s"]);
        assert_eq!(labelled((-0.2, 5.2), 74.0), ["0 s", "2 s", "4 s"]);
        // "0.02 s0.01 s": 0.03 s over 100 px now labels every 0.02 s, not 0.01.
        assert_eq!(labelled((-0.0015, 0.0315), 100.0), ["0.00 s", "0.02 s"]);
        // "10 s20 s": two-digit labels need more room than one-digit ones.
        let wide = labelled((-1.0, 21.0), 60.0);
        assert!(
            !wide.contains(&"10 s".to_string()) || !wide.contains(&"20 s".to_string()),
            "{wide:?}"
        );
        // A label too near the right end (half of "0.8 s" is 15 px) is left out; its line stays.
        let near_end = labelled((0.0, 0.81), 200.0);
        assert!(!near_end.contains(&"0.8 s".to_string()), "{near_end:?}");
        // Whatever the scale, neighbouring labels do not touch, and the lines include every label.
        for (lo, hi, px) in [
            (0.0, 1.0, 40.0),
            (-0.5, 17.3, 300.0),
            (0.0, 3600.0, 500.0),
            (2.0, 2.001, 90.0),
        ] {
            let per_px = (hi - lo) / px;
            let marks = time_marks(egui_plot::GridInput {
                bounds: (lo, hi),
                base_step_size: per_px * f64::from(GRID_LEAST_PX),
            });
            let labels: Vec<_> = marks
                .iter()
                .filter(|m| m.step_size / per_px >= 22.0)
                .collect();
            for pair in labels.windows(2) {
                let apart = (pair[1].value - pair[0].value) / per_px;
                let room = (tick_text_px(&seconds_axis_text(*pair[0]))
                    + tick_text_px(&seconds_axis_text(*pair[1])))
                    / 2.0;
                assert!(
                    apart >= room - 1e-9,
                    "{lo}..{hi} over {px}: {apart} < {room}"
                );
            }
            assert!(marks.iter().all(|m| m.value >= lo && m.value <= hi));
        }
        assert!(
            time_marks(egui_plot::GridInput {
                bounds: (0.0, 0.0),
                base_step_size: 0.0
            })
            .is_empty()
        );
    }

    #[test]
    fn grid_steps_are_one_two_or_five_times_a_power_of_ten() {
        // The steps for an axis of `px_per_unit` over `bounds`, labelled from `label_px` apart, of whole `least`.
        let steps_over = |bounds: (f64, f64), px_per_unit: f64, label_px: f64, least: f64| {
            labelled_steps(label_px, least)(egui_plot::GridInput {
                bounds,
                base_step_size: f64::from(GRID_LEAST_PX) / px_per_unit,
            })
        };
        let steps =
            |px_per_unit: f64, label_px: f64| steps_over((0.0, 10.0), px_per_unit, label_px, 0.0);
        assert_eq!(steps(80.0, 36.0), [0.05, 0.5, 1.0]);
        assert_eq!(steps(20.0, 36.0), [0.2, 2.0, 10.0]);
        assert_eq!(steps(36.0, 36.0), [0.1, 1.0, 5.0]);
        assert_eq!(steps(1e-3, 20.0), [2e3, 2e4, 1e5]);
        // Counts: whole steps however much room there is.
        assert_eq!(steps_over((4.0, 5.0), 100.0, 20.0, 1.0), [1.0, 1.0, 5.0]);
        for px_per_unit in [
            1e-7, 3e-3, 0.4, 0.45, 1.0, 1.7, 2.2, 3.3, 7.0, 42.0, 3e5, 8e11,
        ] {
            for label_px in [20.0, 36.0, 60.0] {
                let [fine, middle, coarse] = steps(px_per_unit, label_px);
                let context = format!("{px_per_unit} px per unit, labels {label_px} px apart");
                // The labelled step is 1, 2 or 5 times a power of ten.
                let mantissa = middle / 10f64.powf(middle.log10().floor());
                assert!(
                    [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-9),
                    "{context}: {middle}"
                );
                // The finest with `label_px` of room.
                assert!(middle * px_per_unit >= label_px * (1.0 - 1e-9), "{context}");
                assert!(
                    one_two_five_below(middle) * px_per_unit < label_px,
                    "{context}"
                );
                assert!(fine * px_per_unit < label_px / 2.0, "{context}");
                // Each level's labels lie on the next finer level's lines.
                for (coarser, finer) in [(middle, fine), (coarse, middle)] {
                    let times = coarser / finer;
                    assert!(
                        (times - times.round()).abs() < 1e-9 && times >= 2.0,
                        "{context}: {:?}",
                        [fine, middle, coarse]
                    );
                }
            }
        }
        // Degenerate input still gives steps.
        assert!(
            steps(f64::INFINITY, 36.0)
                .iter()
                .all(|s| s.is_finite() && *s > 0.0)
        );
        assert!(steps(0.0, 36.0).iter().all(|s| s.is_finite() && *s > 0.0));
    }

    /// A lane's settings sit two a row where they fit, one a row in a panel too narrow for that (whose
    /// right-hand settings were cut off), and two a row again once the panel is wide again. Both lanes: a lane's
    /// automatic d̂ figure (the wall throw's penalty lane has one), beside its box, ran past a narrow panel's edge;
    /// there it is the box's hover text.
    #[test]
    fn lane_settings_go_one_a_row_in_a_narrow_panel_and_none_is_cut_off() {
        let scene = crate::scene::Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
            .expect("the shipped scene loads");
        let worlds = scene.build();
        assert!(
            worlds.iter().any(|w| w.settings.dhat.is_none()),
            "an automatic d̂"
        );
        for world in &worlds {
            settings_fit(world);
        }
    }

    fn settings_fit(world: &LaneWorld) {
        let ctx = egui::Context::default();
        // The grid's width and height after three frames in a panel `width` wide.
        let figure = format!("{:.2e}", world.dhat());
        // Whether the automatic d̂ figure was drawn beside its box in the last frame.
        let drawn = std::cell::Cell::new(false);
        let show = |width: f32| {
            let mut shown = (0.0, 0.0);
            for _ in 0..3 {
                let input = crate::app::test_events::input(Vec::new(), egui::vec2(1600.0, 900.0));
                let output = ctx.run_ui(input, |ui| {
                    let mut edit = world.settings.clone();
                    let rect =
                        egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(width, 900.0));
                    ui.scope_builder(egui::UiBuilder::new().max_rect(rect), |ui| {
                        let grid = settings_grid(ui, 0, world, &mut edit, &Refusals::default());
                        shown = (grid.rect.width(), grid.rect.height());
                    });
                });
                drawn.set(output.shapes.iter().any(|clipped| {
                    matches!(&clipped.shape, egui::Shape::Text(text) if text.galley.text() == figure)
                }));
            }
            shown
        };
        // The figure of an automatic d̂ (a d̂ set is its own field).
        let automatic = world.settings.dhat.is_none();
        let (wide_w, wide_h) = show(400.0);
        assert_eq!(
            drawn.get(),
            automatic,
            "{figure} beside the box at 400 points"
        );
        let (narrow_w, narrow_h) = show(240.0);
        assert!(!drawn.get(), "{figure} only on hover at 240 points");
        let (again_w, again_h) = show(400.0);
        // Against the panel's width: the room left after the grid would have grown to take it in.
        assert!(wide_w <= 400.0, "two a row fit 400 points: {wide_w}");
        assert!(narrow_w <= 240.0, "cut off at 240 points: {narrow_w}");
        assert!(
            narrow_h > 1.8 * wide_h,
            "one a row: {narrow_h} against {wide_h}"
        );
        assert_eq!((again_w, again_h), (wide_w, wide_h));
    }

    /// The pre-flight warns where a loosened tolerance freezes visible motion, and not at the seed's settings
    /// or the pit's; the speed it names is the one a lane actually loses.
    #[test]
    fn a_loose_newton_tolerance_is_named_with_the_speed_it_freezes() {
        assert_eq!(resolution_warning(1e-10, 0.01), None);
        assert_eq!(resolution_warning(1e-6, 1.0 / 60.0), None);
        let warning = resolution_warning(1e-3, 0.01).expect("warns");
        assert!(warning.contains("0.100 m/s"), "{warning}");
        // The frozen speed is real: a free ball slower than tol / h keeps its place and loses its speed.
        use crate::physics::geometry::Ball;
        use crate::physics::world::{ContactSettings, LaneWorld};
        let settings = ContactSettings {
            h: 0.01,
            gravity: crate::physics::DVec2::ZERO,
            newton_tolerance: 1e-3,
            ..ContactSettings::default()
        };
        let ball = |v| Ball {
            position: crate::physics::DVec2::ZERO,
            velocity: crate::physics::DVec2::new(v, 0.0),
            radius: 0.01,
            mass: 1.0,
        };
        let mut lane = LaneWorld::new("free", settings, vec![], vec![ball(0.09), ball(0.11)]);
        lane.balls[1].position.y = 1.0;
        lane.step().expect("steps");
        assert_eq!(lane.balls[0].velocity.x, 0.0);
        assert!((lane.balls[1].velocity.x - 0.11).abs() < 1e-9);
    }

    /// The throw sliders show what the lanes run: an edit of a lane's d̂ or k (or h) moves them, while a slider
    /// moved by hand keeps its value until the lanes change again (a Throw took the slider's 1 mm back).
    /// Both ends of a rod hitting at once share one resolution and one ΔK: each line says so (a reader adding
    /// the lines counted the loss twice); a lone end's line does not.
    #[test]
    fn a_rod_s_two_simultaneous_impacts_say_their_energy_change_is_one() {
        use crate::physics::rod_flight::{RodEnd, RodImpact};
        let impact = |time: f64, end: RodEnd, x: f64| RodImpact {
            time,
            end,
            contact_point: DVec2::new(x, 0.0),
            center: DVec2::ZERO,
            impulse: DVec2::new(0.0, 0.5),
            normal_velocity_before: -1.0,
            normal_velocity_after: 0.5,
            restitution_used: 0.5,
            kinetic_energy_change: -0.7231,
        };
        let both = [
            impact(0.25, RodEnd::Minus, -0.5),
            impact(0.25, RodEnd::Plus, 0.5),
        ];
        assert_eq!(
            rod_impact_line(69, 2, &both[0], &both),
            "step 69 rod 2 left end: c⁻ -1.000 → c⁺ +0.500 m/s, j = (0.000, 0.500) N·s, ΔK -0.7231 J (both ends \
             together)"
        );
        assert!(rod_impact_line(69, 2, &both[1], &both).ends_with("(both ends together)"));
        let apart = [
            impact(0.25, RodEnd::Minus, -0.5),
            impact(0.5, RodEnd::Plus, 0.5),
        ];
        assert!(rod_impact_line(69, 2, &apart[0], &apart).ends_with("ΔK -0.7231 J"));
    }

    #[test]
    fn the_landscape_legend_sits_in_the_corner_the_bowl_leaves_empty() {
        use egui_plot::Corner;
        // The wall throw's default x̃: the bowl's left end is low, its right end the plot's top.
        assert_eq!(
            legend_corner(Some(0.0022), Some(0.0063), 0.0063),
            Corner::LeftTop
        );
        assert_eq!(
            legend_corner(Some(0.0063), Some(0.001), 0.0063),
            Corner::RightTop
        );
        // x̃ in the middle: both ends high, the bottom corners are empty.
        assert_eq!(
            legend_corner(Some(0.0060), Some(0.0063), 0.0063),
            Corner::LeftBottom
        );
        assert_eq!(legend_corner(None, None, 1.0), Corner::LeftTop);
    }

    #[test]
    fn a_lane_s_clock_has_a_line_of_its_own_short_enough_for_the_left_panel() {
        assert_eq!(
            lane_clock_line(80, Some(80), 0.8),
            "   step 80/80 · t = 0.800 s"
        );
        assert_eq!(lane_clock_line(7, None, 0.07), "   step 7 · t = 0.070 s");
        // The longest a scene's limit allows (10⁷ steps) still fits the 300 px panel's ~45 characters.
        let longest = lane_clock_line(10_000_000, Some(10_000_000), 99_999.999);
        assert!(longest.chars().count() <= 45, "{longest}");
    }

    #[test]
    fn lanes_that_differ_in_a_throw_setting_are_named_beside_its_slider() {
        let lane = |method: ContactMethod, h: f64, k: f64, dhat: f64| {
            let settings = crate::physics::world::ContactSettings {
                method,
                h,
                stiffness: k,
                dhat: Some(dhat),
                ..crate::physics::world::ContactSettings::default()
            };
            LaneWorld::new("lane", settings, vec![], vec![])
        };
        let pen_a = lane(ContactMethod::Penalty, 0.01, 1e4, 1e-3);
        let pen_b = lane(ContactMethod::Penalty, 0.01, 1e6, 2e-3);
        let ipc = lane(ContactMethod::Ipc, 0.01, 1e6, 1e-3);
        // Only the penalty lanes' k counts for k, only the IPC lanes' d̂ for d̂.
        assert_eq!(
            lanes_differ_note(&[&pen_a, &pen_b, &ipc]).as_deref(),
            Some(
                "Lanes run k 1e4 N/m / 1e6 N/m. A slider shows the first; Throw keeps each lane's own unless \
                 it is moved."
            )
        );
        assert_eq!(lanes_differ_note(&[&pen_a, &ipc]), None);
        let ipc_fine = lane(ContactMethod::Ipc, 0.005, 1e6, 0.5e-3);
        let note = lanes_differ_note(&[&pen_a, &ipc, &ipc_fine]).expect("a note");
        assert!(
            note.starts_with("Lanes run h 10 ms / 5 ms; d\u{302} 1 mm / 0.5 mm."),
            "{note}"
        );
    }

    #[test]
    fn the_throw_sliders_follow_the_lanes_settings_and_keep_a_hand_set_value() {
        let scene = crate::scene::Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
            .expect("the shipped scene loads");
        let mut worlds = scene.build();
        let mut ui_state = UiState::default();
        fn refs(worlds: &[LaneWorld]) -> Vec<&LaneWorld> {
            worlds.iter().collect()
        }
        follow_lane_settings(&mut ui_state, &refs(&worlds));
        assert_eq!(
            (
                ui_state.throw_h,
                ui_state.throw_log10_k,
                ui_state.throw_dhat_mm
            ),
            (0.01, 4.0, 1.0)
        );
        worlds[1].settings.dhat = Some(0.01);
        worlds[0].settings.stiffness = 1e6;
        follow_lane_settings(&mut ui_state, &refs(&worlds));
        assert_eq!(
            (ui_state.throw_log10_k, ui_state.throw_dhat_mm),
            (6.0, 10.0)
        );
        ui_state.throw_dhat_mm = 2.0;
        follow_lane_settings(&mut ui_state, &refs(&worlds));
        assert_eq!(ui_state.throw_dhat_mm, 2.0, "a slider set by hand stays");
        // A Throw sends the slider moved by hand, and not the others: h follows lane 0 only, and sent it would
        // have replaced lane 1's own h.
        worlds[1].settings.h = 0.002;
        follow_lane_settings(&mut ui_state, &refs(&worlds));
        let throw = throw_from_sliders(&ui_state);
        assert_eq!((throw.h, throw.stiffness), (None, None));
        assert_eq!(throw.dhat, Some(2.0 * 1e-3));
        ui_state.throw_h = 0.005;
        ui_state.throw_log10_k = 5.0;
        let throw = throw_from_sliders(&ui_state);
        assert_eq!((throw.h, throw.stiffness), (Some(0.005), Some(1e5)));
        // v0 follows the scene: a throw at 1 m/s, then the file picked again at its 5 m/s.
        follow_scene_speed(&mut ui_state, &scene);
        assert_eq!(ui_state.throw_v0, 5.0);
        let thrown =
            crate::demo::thrown_scene(&scene, 1.0, (None, None, None), None, "t").expect("throws");
        follow_scene_speed(&mut ui_state, &thrown);
        assert_eq!(ui_state.throw_v0, 1.0);
        ui_state.throw_v0 = 3.0;
        follow_scene_speed(&mut ui_state, &thrown);
        assert_eq!(ui_state.throw_v0, 3.0, "a slider set by hand stays");
        follow_scene_speed(&mut ui_state, &scene);
        assert_eq!(ui_state.throw_v0, 5.0);
    }
}
