//! Mouse and keyboard. Everything a user does becomes a sim message (the same path the tests use) or a change
//! of [`SimControl`] / the camera.
//!
//! - Left press–drag–release: throw a ball from the press point with velocity from the drag
//!   ([`DragState::throw_velocity`]: 5 m/s for 100 px, 100 m/s for 600 px); a click without drag selects the
//!   body under the cursor, or drops a ball at rest.
//! - Right drag: pan. Right click (no drag) in a scene with rods: drop a rod. Wheel: zoom about the cursor.
//! - P pause, O single step, R restart, `[` `]` previous/next scene, Tab hide the UI, F fit the view to the lanes
//!   and the balls that flew on along their bands ([`CameraView::fit_everything`]). While a demo replays, P, O
//!   and R play/pause, step and rewind the replay, and `[` `]` do nothing.

use bevy::input::mouse::{AccumulatedMouseScroll, MouseScrollUnit};
use bevy::prelude::*;
use bevy_egui::egui;
use bevy_egui::input::{egui_wants_any_keyboard_input, egui_wants_any_pointer_input};

use super::UiState;
use super::demo_panel::ReplayEdits;
use super::lane_bands::LaneBands;
use super::render::{CameraView, MainCamera, camera_scale, canvas_size, fit_scale, scene_bounds};
use crate::physics::DVec2;
use crate::sim::{
    Ball, BodyState, CycleScene, Lane, LaneMember, Replay, RestartScene, Rod, SimControl, SimLog,
    SimSet, SpawnBall, SpawnRod, UNITS_PER_METRE,
};

/// Bodies a click can select: their transform, lane and kind.
type PickableBodies<'w, 's> = Query<
    'w,
    's,
    (
        Entity,
        &'static Transform,
        &'static LaneMember,
        Option<&'static Ball>,
        Option<&'static Rod>,
    ),
    (With<BodyState>, Without<MainCamera>),
>;

/// Throw speed per logical pixel of drag up to [`DRAG_LINEAR_PX`] [m/s]: a 100 px drag throws at 5 m/s.
pub const DRAG_SPEED_PER_PIXEL: f64 = 0.05;
/// Drags up to this long [logical px] throw at [`DRAG_SPEED_PER_PIXEL`] (10 m/s at its end); longer ones gain speed
/// faster, so that [`MAX_THROW_SPEED`] is reached at [`DRAG_MAX_SPEED_PX`]. At 0.05 m/s a pixel, 100 m/s needed a
/// 2 000 px drag, more than a 1 600 × 900 window's canvas holds.
pub const DRAG_LINEAR_PX: f64 = 200.0;
/// The drag's length that throws at [`MAX_THROW_SPEED`] [logical px].
pub const DRAG_MAX_SPEED_PX: f64 = 600.0;
/// Fastest throw [m/s].
pub const MAX_THROW_SPEED: f64 = 100.0;
/// A press that moves less than this is a click [logical px].
const CLICK_SLOP_PX: f32 = 4.0;

pub struct InputPlugin;

impl Plugin for InputPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<DragState>()
            .add_systems(
                PreUpdate,
                tab_is_not_for_egui
                    .after(bevy_egui::EguiPreUpdateSet::ProcessInput)
                    .before(bevy_egui::EguiPreUpdateSet::BeginPass),
            )
            .add_systems(
                Update,
                (
                    keyboard_controls.run_if(not(egui_wants_any_keyboard_input)),
                    note_floating_areas,
                    (mouse_buttons, zoom_with_wheel)
                        .after(note_floating_areas)
                        .run_if(not(egui_wants_any_pointer_input)),
                    draw_throw_preview,
                )
                    .before(SimSet::ApplyMessages),
            )
            .add_systems(bevy_egui::EguiPrimaryContextPass, throw_speed_label);
    }
}

/// An ongoing left (throw) or right (pan / rod) drag, in window logical pixels.
#[derive(Resource, Default, Debug, Clone)]
pub struct DragState {
    pub throw_from: Option<Vec2>,
    pub pan_from: Option<Vec2>,
    pub pan_moved: bool,
    pub cursor: Option<Vec2>,
}

impl DragState {
    /// Velocity of the throw being dragged from `from` to `to` (logical px, y down) [m/s], along the drag: its speed
    /// is [`DRAG_SPEED_PER_PIXEL`] times the drag's length up to [`DRAG_LINEAR_PX`], then grows by a parabola that
    /// continues the line's value and slope and reaches [`MAX_THROW_SPEED`] at [`DRAG_MAX_SPEED_PX`], and stays
    /// there.
    pub fn throw_velocity(from: Vec2, to: Vec2) -> DVec2 {
        let d = DVec2::new((to.x - from.x) as f64, -(to.y - from.y) as f64);
        let length = d.length();
        if length == 0.0 {
            return DVec2::ZERO;
        }
        let beyond = (length - DRAG_LINEAR_PX).max(0.0);
        let span = DRAG_MAX_SPEED_PX - DRAG_LINEAR_PX;
        let at_span = DRAG_SPEED_PER_PIXEL * DRAG_MAX_SPEED_PX;
        let curvature = (MAX_THROW_SPEED - at_span) / (span * span);
        let speed = DRAG_SPEED_PER_PIXEL * length + curvature * beyond * beyond;
        d / length * speed.min(MAX_THROW_SPEED)
    }
}

/// Tab hides and shows the UI, so egui does not see it: otherwise it would also move its keyboard focus to the
/// first button, and the keys (P, O, R, [, ], F) would go to that button until Escape.
fn tab_is_not_for_egui(mut inputs: Query<&mut bevy_egui::EguiInput>) {
    for mut input in &mut inputs {
        input.events.retain(|event| {
            !matches!(
                event,
                egui::Event::Key {
                    key: egui::Key::Tab,
                    ..
                }
            )
        });
    }
}

fn keyboard_controls(
    keys: Res<ButtonInput<KeyCode>>,
    mut control: ResMut<SimControl>,
    mut ui: ResMut<UiState>,
    mut view: ResMut<CameraView>,
    mut restart: MessageWriter<RestartScene>,
    mut cycle: MessageWriter<CycleScene>,
    replay: Option<ResMut<Replay>>,
) {
    // While a demo replays, P, O and R play, step and rewind it, as the Demo section's buttons do.
    if let Some(mut replay) = replay {
        let edits = if keys.just_pressed(KeyCode::KeyP) {
            Some(ReplayEdits::toggle_play(&replay))
        } else if keys.just_pressed(KeyCode::KeyO) {
            Some(ReplayEdits::step(&replay))
        } else if keys.just_pressed(KeyCode::KeyR) {
            Some(ReplayEdits::rewind())
        } else {
            None
        };
        if let Some(edits) = edits {
            edits.apply(&mut replay);
        }
    } else {
        if keys.just_pressed(KeyCode::KeyP) {
            control.toggle_pause();
        }
        if keys.just_pressed(KeyCode::KeyO) {
            control.single_step();
        }
        if keys.just_pressed(KeyCode::KeyR) {
            restart.write(RestartScene);
        }
        // Another scene waits until the replay stops, as in the (disabled) scene picker.
        if keys.just_pressed(KeyCode::BracketRight) {
            cycle.write(CycleScene(1));
            view.auto_fit = true;
        }
        if keys.just_pressed(KeyCode::BracketLeft) {
            cycle.write(CycleScene(-1));
            view.auto_fit = true;
        }
    }
    if keys.just_pressed(KeyCode::Tab) {
        ui.show_ui = !ui.show_ui;
    }
    if keys.just_pressed(KeyCode::KeyF) {
        view.fit_everything();
    }
}

/// Window logical position → scene render units.
fn to_world(camera: &Camera, transform: &GlobalTransform, cursor: Vec2) -> Option<Vec2> {
    camera.viewport_to_world_2d(transform, cursor).ok()
}

/// The lane whose drawn bounds (grown by 10 %) hold `world` (render units), with the lane-local point [m].
pub fn lane_at(lanes: &Query<(Entity, &Lane)>, world: Vec2) -> Option<(Entity, DVec2)> {
    let p = world.as_dvec2() / UNITS_PER_METRE as f64;
    let mut best: Option<(Entity, DVec2, f64)> = None;
    for (entity, lane) in lanes {
        let local = p - lane.offset;
        let (lo, hi) = lane.bounds;
        let grow = (hi - lo) * 0.1;
        let outside = (lo - grow - local)
            .max(local - hi - grow)
            .max(DVec2::ZERO)
            .length();
        if best.as_ref().is_none_or(|b| outside < b.2) {
            best = Some((entity, local, outside));
        }
    }
    best.map(|(e, l, _)| (e, l))
}

#[allow(clippy::too_many_arguments)]
fn mouse_buttons(
    buttons: Res<ButtonInput<MouseButton>>,
    windows: Query<&Window>,
    camera: Query<(&Camera, &GlobalTransform, &Projection), With<MainCamera>>,
    mut camera_transform: Query<&mut Transform, With<MainCamera>>,
    lanes: Query<(Entity, &Lane)>,
    bodies: PickableBodies,
    mut drag: ResMut<DragState>,
    mut ui: ResMut<UiState>,
    mut view: ResMut<CameraView>,
    mut spawn: MessageWriter<SpawnBall>,
    mut spawn_rod: MessageWriter<SpawnRod>,
    replay: Option<Res<Replay>>,
    bands: Option<Res<LaneBands>>,
    mut log: Option<ResMut<SimLog>>,
) {
    // A replay owns the lanes: a click still selects a body, but nothing is spawned or thrown.
    let replaying = replay.is_some();
    let Ok(window) = windows.single() else { return };
    let Ok((camera, camera_global, projection)) = camera.single() else {
        return;
    };
    let cursor = window.cursor_position();
    drag.cursor = cursor;
    let px = camera_scale(projection);
    // A press over a panel belongs to the panel (egui reads it a frame later, so its own run condition is too
    // late to keep the press from reaching the scene hidden beneath).
    let pressed_on_scene = cursor.filter(|&c| on_canvas(&ui, c));

    if buttons.just_pressed(MouseButton::Left) {
        drag.throw_from = pressed_on_scene;
    }
    if buttons.just_released(MouseButton::Left)
        && let (Some(from), Some(to)) = (drag.throw_from.take(), cursor)
        && let Some(world_from) = to_world(camera, camera_global, from)
        && let Some((_, local)) = lane_at(&lanes, world_from)
    {
        if from.distance(to) < CLICK_SLOP_PX {
            // Click: select what is under the cursor, else drop a ball at rest. Only the part of a body drawn
            // inside its own lane's band can be clicked: beyond it, the body is hidden (`lane_bands`).
            let hit = bodies
                .iter()
                .filter(|(_, _, member, _, _)| {
                    bands
                        .as_ref()
                        .is_none_or(|bands| bands.of(member.0).contains(world_from))
                })
                .filter_map(|(e, t, _, ball, rod)| {
                    let reach = match (ball, rod) {
                        (Some(b), _) => (b.radius as f32 * UNITS_PER_METRE).max(8.0 * px),
                        (_, Some(r)) => r.length as f32 * UNITS_PER_METRE / 2.0,
                        _ => 8.0 * px,
                    };
                    let d = t.translation.truncate().distance(world_from);
                    (d <= reach).then_some((e, d))
                })
                .min_by(|a, b| a.1.total_cmp(&b.1));
            match hit {
                Some((entity, _)) => ui.selected = Some(entity),
                None if replaying => {}
                None => {
                    spawn.write(SpawnBall {
                        position: local,
                        velocity: DVec2::ZERO,
                        radius: ui.spawn_radius,
                        mass: ui.spawn_mass,
                    });
                }
            }
        } else if !replaying {
            spawn.write(SpawnBall {
                position: local,
                velocity: DragState::throw_velocity(from, to),
                radius: ui.spawn_radius,
                mass: ui.spawn_mass,
            });
        }
    }

    if buttons.just_pressed(MouseButton::Right) {
        drag.pan_from = pressed_on_scene;
        drag.pan_moved = false;
    }
    if buttons.pressed(MouseButton::Right)
        && let (Some(from), Some(to)) = (drag.pan_from, cursor)
        && (drag.pan_moved || from.distance(to) >= CLICK_SLOP_PX)
        && let Ok(mut transform) = camera_transform.single_mut()
    {
        let delta = to - from;
        transform.translation.x -= delta.x * px;
        transform.translation.y += delta.y * px;
        drag.pan_from = Some(to);
        drag.pan_moved = true;
        view.stop_fitting();
    }
    if buttons.just_released(MouseButton::Right) {
        let moved = drag.pan_moved;
        let from = drag.pan_from.take();
        let has_rods = lanes.iter().any(|(_, l)| !l.world.rods.is_empty());
        if !moved
            && !has_rods
            && !replaying
            && from.is_some()
            && let Some(log) = log.as_mut()
        {
            log.info(
                "a right click drops a rod only in a scene with rods (rod drop); right-drag pans",
            );
        }
        if !moved
            && has_rods
            && !replaying
            && let Some(from) = from
            && let Some(world) = to_world(camera, camera_global, from)
            && let Some((_, local)) = lane_at(&lanes, world)
        {
            ui.rain_seed = ui
                .rain_seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let angle = (ui.rain_seed >> 11) as f64 / (1u64 << 53) as f64 * std::f64::consts::PI;
            spawn_rod.write(SpawnRod {
                center: local,
                angle,
                length: 0.4,
                mass: 1.0,
                restitution: 0.5,
                velocity: DVec2::ZERO,
                omega: 1.0,
            });
        }
    }
}

/// Whether the pointer at `cursor` (window logical pixels) is over the scene: the canvas while the panels show,
/// the whole window while Tab hides them. Before the panels have measured the canvas, nowhere.
fn on_canvas(ui: &UiState, cursor: Vec2) -> bool {
    if !ui.show_ui {
        return true;
    }
    let inside = |(lo, hi): (Vec2, Vec2)| {
        (lo.x..hi.x).contains(&cursor.x) && (lo.y..hi.y).contains(&cursor.y)
    };
    ui.canvas.is_some_and(inside) && !ui.floating.iter().copied().any(inside)
}

/// The rectangles of egui's windows and pop-ups as laid out in its last pass (logical pixels). Panels are not
/// among them: the canvas already leaves them out.
pub fn floating_rects(ctx: &egui::Context) -> Vec<(Vec2, Vec2)> {
    let zoom = ctx.zoom_factor();
    ctx.memory(|memory| {
        memory
            .layer_ids()
            .filter(|layer| {
                layer.order != egui::Order::Background && memory.areas().is_visible(layer)
            })
            .filter_map(|layer| memory.area_rect(layer.id))
            .map(|r| {
                (
                    Vec2::new(r.min.x, r.min.y) * zoom,
                    Vec2::new(r.max.x, r.max.y) * zoom,
                )
            })
            .collect()
    })
}

/// Copies [`floating_rects`] into [`UiState`] before the mouse is read. egui knows a press is over its window
/// only once its next pass has run, after this frame's input reached the scene, so a click that arrived with the
/// pointer over the World Inspector dropped a ball under it as well.
fn note_floating_areas(
    mut contexts: Query<&mut bevy_egui::EguiContext, With<bevy_egui::PrimaryEguiContext>>,
    mut ui: ResMut<UiState>,
) {
    let floating = match contexts.single_mut() {
        Ok(mut context) => floating_rects(context.get_mut()),
        Err(_) => Vec::new(),
    };
    if ui.floating != floating {
        ui.floating = floating;
    }
}

/// How far the wheel zooms out beyond the view that fits the lanes: the lanes then span a twentieth of the canvas.
/// Without a limit, 30 notches out left nothing on the canvas but a stray ball's marker.
const MAX_ZOOM_OUT: f32 = 20.0;

/// The camera scale after a wheel's `factor` from `old`, at most `widest` when zooming out: a view already wider
/// (the lanes shrank since it was set) may zoom in, and does not jump.
fn wheel_scale(old: f32, factor: f32, widest: f32) -> f32 {
    (old * factor).clamp(1e-4, widest.max(old))
}

/// Zooms about the cursor; a wheel turned over a panel scrolls the panel and leaves the scene alone. Zooming out
/// stops at [`MAX_ZOOM_OUT`] times the lanes' fit.
fn zoom_with_wheel(
    scroll: Res<AccumulatedMouseScroll>,
    windows: Query<&Window>,
    ui: Res<UiState>,
    lanes: Query<&Lane>,
    mut camera: Query<
        (&Camera, &GlobalTransform, &mut Transform, &mut Projection),
        With<MainCamera>,
    >,
    mut view: ResMut<CameraView>,
) {
    if scroll.delta.y == 0.0 {
        return;
    }
    let Some(cursor) = windows
        .single()
        .ok()
        .and_then(|w| w.cursor_position())
        .filter(|&c| on_canvas(&ui, c))
    else {
        return;
    };
    let Ok((camera, global, mut transform, mut projection)) = camera.single_mut() else {
        return;
    };
    let lines = match scroll.unit {
        MouseScrollUnit::Line => scroll.delta.y,
        MouseScrollUnit::Pixel => scroll.delta.y / 40.0,
    };
    let factor = 0.85f32.powf(lines);
    let anchor = camera.viewport_to_world_2d(global, cursor).ok();
    let widest = windows
        .single()
        .ok()
        .zip(scene_bounds(&lanes))
        .map(|(window, (lo, hi))| {
            let window_size = Vec2::new(window.width(), window.height());
            MAX_ZOOM_OUT * fit_scale(hi - lo, canvas_size(&ui, window_size))
        })
        .unwrap_or(1e3)
        .min(1e3);
    if let Projection::Orthographic(o) = &mut *projection {
        let old = o.scale;
        let scale = wheel_scale(old, factor, widest);
        let factor = scale / old;
        o.scale = scale;
        // Keep the point under the cursor fixed, by the zoom actually taken.
        if let Some(anchor) = anchor {
            let t = transform.translation.truncate();
            let next = anchor + (t - anchor) * factor;
            transform.translation = next.extend(transform.translation.z);
        }
        view.stop_fitting();
    }
}

/// The arrow from the press point to the cursor while a throw is dragged, with the speed beside it.
fn draw_throw_preview(
    drag: Res<DragState>,
    camera: Query<(&Camera, &GlobalTransform), With<MainCamera>>,
    replay: Option<Res<Replay>>,
    mut gizmos: Gizmos,
) {
    let (Some(from), Some(to)) = (drag.throw_from, drag.cursor) else {
        return;
    };
    if replay.is_some() {
        return;
    }
    if from.distance(to) < CLICK_SLOP_PX {
        return;
    }
    let Ok((camera, global)) = camera.single() else {
        return;
    };
    if let (Some(a), Some(b)) = (to_world(camera, global, from), to_world(camera, global, to)) {
        gizmos.arrow_2d(a, b, Color::srgb(1.0, 1.0, 0.5));
    }
}

/// The speed a dragged throw would leave at, beside the cursor: "4.85 m/s", and the cap where the drag passes it.
pub fn throw_speed_text(velocity: DVec2) -> String {
    let speed = velocity.length();
    if speed >= MAX_THROW_SPEED * (1.0 - 1e-12) {
        format!("{speed:.0} m/s (the fastest throw)")
    } else {
        format!("{speed:.2} m/s")
    }
}

/// egui, while a throw is dragged: its speed beside the cursor, so a chosen speed can be aimed for.
fn throw_speed_label(
    drag: Res<DragState>,
    replay: Option<Res<Replay>>,
    ui_state: Option<Res<super::UiState>>,
    mut contexts: bevy_egui::EguiContexts,
) -> Result {
    let (Some(from), Some(to)) = (drag.throw_from, drag.cursor) else {
        return Ok(());
    };
    if replay.is_some() || from.distance(to) < CLICK_SLOP_PX {
        return Ok(());
    }
    let ctx = contexts.ctx_mut()?;
    // The cursor is in window points; egui's are larger by its zoom (Ctrl +).
    let zoom = ctx.zoom_factor();
    let mut area = egui::Area::new(egui::Id::new("throw speed"))
        .order(egui::Order::Tooltip)
        .interactable(false)
        .constrain(true)
        .fixed_pos(egui::pos2(to.x / zoom + 16.0, to.y / zoom - 24.0));
    // Kept on the canvas: a long drag whose cursor leaves it drew the label over the panel's fields.
    if let Some((min, max)) = ui_state.and_then(|u| u.canvas) {
        area = area.constrain_to(egui::Rect::from_min_max(
            egui::pos2(min.x / zoom, min.y / zoom),
            egui::pos2(max.x / zoom, max.y / zoom),
        ));
    }
    area.show(ctx, |ui| {
        egui::Frame::popup(ui.style()).show(ui, |ui| {
            // One line whatever the room (near the canvas's edge egui wrapped "11.18 m/s" into three), in the
            // arrow's yellow.
            ui.add(
                egui::Label::new(
                    egui::RichText::new(throw_speed_text(DragState::throw_velocity(from, to)))
                        .strong()
                        .color(egui::Color32::from_rgb(255, 255, 128)),
                )
                .wrap_mode(egui::TextWrapMode::Extend),
            );
        });
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy::window::WindowResolution;

    /// A 100 px drag reads 5 m/s; one past the cap says so.
    #[test]
    fn a_dragged_throw_reads_its_speed() {
        let v = DragState::throw_velocity(Vec2::ZERO, Vec2::new(60.0, -80.0));
        assert_eq!(throw_speed_text(v), "5.00 m/s");
        assert!((v - DVec2::new(3.0, 4.0)).length() < 1e-12, "{v}");
        let fast = DragState::throw_velocity(Vec2::ZERO, Vec2::new(5000.0, 0.0));
        assert_eq!(throw_speed_text(fast), "100 m/s (the fastest throw)");
    }

    /// 0.05 m/s a pixel up to 200 px, then faster, without a jump or a kink, to 100 m/s at 600 px, which a
    /// 1 600 × 900 window's canvas holds; never slower for a longer drag, and always along the drag.
    #[test]
    fn the_fastest_throw_is_a_drag_the_canvas_holds() {
        let speed = |px: f32| {
            DragState::throw_velocity(Vec2::new(10.0, 10.0), Vec2::new(10.0 + px, 10.0)).x
        };
        assert_eq!(speed(0.0), 0.0);
        assert!((speed(200.0) - 10.0).abs() < 1e-9);
        assert!((speed(600.0) - MAX_THROW_SPEED).abs() < 1e-9);
        assert_eq!(speed(900.0), MAX_THROW_SPEED);
        // The slope at 200 px, on either side, is 0.05 m/s a pixel.
        let slope = |a: f32, b: f32| (speed(b) - speed(a)) / f64::from(b - a);
        assert!((slope(199.0, 200.0) - 0.05).abs() < 1e-9);
        assert!((slope(200.0, 200.5) - 0.05).abs() < 1e-3);
        let mut last = 0.0;
        for px in 1..700 {
            let v = speed(px as f32);
            assert!(
                v > last || v == MAX_THROW_SPEED,
                "{px} px: {v} after {last}"
            );
            last = v;
        }
        let diagonal = DragState::throw_velocity(Vec2::ZERO, Vec2::new(360.0, 480.0));
        assert!((diagonal.length() - MAX_THROW_SPEED).abs() < 1e-9);
        assert!(
            (diagonal.x / diagonal.y + 0.75).abs() < 1e-12,
            "along the drag, y up: {diagonal}"
        );
    }

    /// Zooming out stops at the widest view; zooming in is free down to 1e-4, and a view already wider than the
    /// limit zooms in without a jump and does not widen.
    #[test]
    fn the_wheel_zooms_out_no_further_than_the_widest_view() {
        let out = 1.0 / 0.85;
        let mut scale = 1.0;
        for _ in 0..60 {
            scale = wheel_scale(scale, out, 20.0);
        }
        assert_eq!(scale, 20.0);
        assert!((wheel_scale(20.0, 0.85, 20.0) - 17.0).abs() < 1e-5);
        assert_eq!(wheel_scale(50.0, out, 20.0), 50.0);
        assert!((wheel_scale(50.0, 0.85, 20.0) - 42.5).abs() < 1e-4);
        assert_eq!(wheel_scale(1.1e-4, 0.5, 20.0), 1e-4);
    }

    #[test]
    fn tab_never_reaches_egui_and_other_keys_do() {
        use crate::app::test_events::key;
        let mut app = App::new();
        let input = bevy_egui::EguiInput(egui::RawInput {
            events: vec![key(egui::Key::Tab), key(egui::Key::P), key(egui::Key::Tab)],
            ..default()
        });
        let context = app.world_mut().spawn(input).id();
        app.add_systems(Update, tab_is_not_for_egui);
        app.update();
        let left = &app
            .world()
            .get::<bevy_egui::EguiInput>(context)
            .expect("the input stays")
            .events;
        assert_eq!(left, &vec![key(egui::Key::P)]);
    }

    /// `mouse_buttons` and `zoom_with_wheel` over a 1600 × 900 window whose panels leave the canvas
    /// (300, 0)–(1200, 750), with the cursor at `cursor`.
    fn app_with_cursor(cursor: Vec2, show_ui: bool) -> App {
        let mut app = App::new();
        app.insert_resource(UiState {
            canvas: Some((Vec2::new(300.0, 0.0), Vec2::new(1200.0, 750.0))),
            show_ui,
            ..default()
        })
        .init_resource::<ButtonInput<MouseButton>>()
        .init_resource::<AccumulatedMouseScroll>()
        .init_resource::<CameraView>()
        .init_resource::<DragState>()
        .add_message::<SpawnBall>()
        .add_message::<SpawnRod>()
        .add_systems(Update, (mouse_buttons, zoom_with_wheel));
        let mut window = Window {
            resolution: WindowResolution::new(1600, 900),
            ..default()
        };
        window.set_cursor_position(Some(cursor));
        app.world_mut().spawn(window);
        // What the renderer would compute for a 1600 × 900 window, so that cursor positions map to the scene.
        let mut camera = Camera::default();
        camera.computed.target_info = Some(bevy::camera::RenderTargetInfo {
            physical_size: UVec2::new(1600, 900),
            scale_factor: 1.0,
        });
        let mut projection = OrthographicProjection::default_2d();
        bevy::camera::CameraProjection::update(&mut projection, 1600.0, 900.0);
        camera.computed.clip_from_view =
            bevy::camera::CameraProjection::get_clip_from_view(&projection);
        app.world_mut().spawn((
            MainCamera,
            camera,
            GlobalTransform::default(),
            Transform::default(),
            Projection::Orthographic(OrthographicProjection::default_2d()),
        ));
        app
    }

    /// Presses both buttons and turns the wheel by one line in one frame; returns where a throw and a pan would
    /// start, and the camera's scale after the wheel.
    fn press_and_scroll(app: &mut App) -> (Option<Vec2>, Option<Vec2>, f32) {
        {
            let mut buttons = app.world_mut().resource_mut::<ButtonInput<MouseButton>>();
            buttons.press(MouseButton::Left);
            buttons.press(MouseButton::Right);
        }
        app.world_mut()
            .resource_mut::<AccumulatedMouseScroll>()
            .delta = Vec2::new(0.0, 1.0);
        app.update();
        let drag = app.world().resource::<DragState>().clone();
        let scale = app
            .world_mut()
            .query_filtered::<&Projection, With<MainCamera>>()
            .single(app.world())
            .map(|p| match p {
                Projection::Orthographic(o) => o.scale,
                _ => f32::NAN,
            })
            .expect("one main camera");
        (drag.throw_from, drag.pan_from, scale)
    }

    /// Turned out far over the wall throw, the wheel stops at 20 times the scale that fits its lanes into the
    /// 900 × 750 canvas, and turned further the view stays put.
    #[test]
    fn the_wheel_stops_zooming_out_at_twenty_times_the_lanes_fit() {
        use bevy::ecs::system::RunSystemOnce;
        let mut app = app_with_cursor(Vec2::new(700.0, 400.0), true);
        for lane in crate::app::lane_bands::laid_out_lanes("assets/scenes/wall_throw.ron") {
            app.world_mut().spawn(lane);
        }
        let (lo, hi) = app
            .world_mut()
            .run_system_once(|lanes: Query<&Lane>| scene_bounds(&lanes))
            .expect("runs")
            .expect("lanes");
        let widest = MAX_ZOOM_OUT * fit_scale(hi - lo, Vec2::new(900.0, 750.0));
        let view = |app: &mut App| {
            app.world_mut()
                .query_filtered::<(&Projection, &Transform), With<MainCamera>>()
                .single(app.world())
                .map(|(p, t)| match p {
                    Projection::Orthographic(o) => (o.scale, t.translation),
                    _ => (f32::NAN, t.translation),
                })
                .expect("one main camera")
        };
        let mut turns = 0;
        while view(&mut app).0 < widest {
            app.world_mut()
                .resource_mut::<AccumulatedMouseScroll>()
                .delta = Vec2::new(0.0, -1.0);
            app.update();
            turns += 1;
            assert!(turns < 200, "still zooming out at {}", view(&mut app).0);
        }
        let at_limit = view(&mut app);
        assert!(
            (at_limit.0 - widest).abs() <= 1e-4 * widest,
            "{at_limit:?} against {widest}"
        );
        app.update();
        assert_eq!(view(&mut app), at_limit);
    }

    #[test]
    fn a_press_or_a_wheel_over_a_panel_does_not_reach_the_scene() {
        for over_a_panel in [
            Vec2::new(100.0, 400.0),  // left panel
            Vec2::new(1400.0, 300.0), // right panel
            Vec2::new(700.0, 800.0),  // the plots at the bottom
        ] {
            let mut app = app_with_cursor(over_a_panel, true);
            assert_eq!(
                press_and_scroll(&mut app),
                (None, None, 1.0),
                "cursor at {over_a_panel}"
            );
            assert!(app.world().resource::<CameraView>().auto_fit);
        }
    }

    #[test]
    fn a_press_or_a_wheel_on_the_canvas_or_anywhere_with_the_ui_hidden_does() {
        for (cursor, show_ui) in [
            (Vec2::new(700.0, 400.0), true),
            (Vec2::new(100.0, 400.0), false),
        ] {
            let mut app = app_with_cursor(cursor, show_ui);
            let (throw_from, pan_from, scale) = press_and_scroll(&mut app);
            assert_eq!((throw_from, pan_from), (Some(cursor), Some(cursor)));
            assert!(
                (scale - 0.85).abs() < 1e-6,
                "one line zooms in by 0.85: {scale}"
            );
            assert!(!app.world().resource::<CameraView>().auto_fit);
        }
    }

    /// A press over an egui window that lies over the canvas (the World Inspector) belongs to the window, and
    /// the window's rectangle comes from egui's last pass, which lists windows and pop-ups but not panels.
    #[test]
    fn a_press_over_a_window_on_the_canvas_does_not_reach_the_scene() {
        let ctx = egui::Context::default();
        let input = || egui::RawInput {
            screen_rect: Some(egui::Rect::from_min_size(
                egui::Pos2::ZERO,
                egui::vec2(1600.0, 900.0),
            )),
            ..Default::default()
        };
        for _ in 0..2 {
            let _ = ctx.run_ui(input(), |ui| {
                egui::Panel::left("left").show_inside(ui, |ui| ui.label("panel"));
                egui::Window::new("World Inspector")
                    .fixed_pos(egui::pos2(400.0, 100.0))
                    .show(ui.ctx(), |ui| ui.label("inside"));
            });
        }
        let floating = floating_rects(&ctx);
        assert_eq!(floating.len(), 1, "{floating:?}");
        let (lo, hi) = floating[0];
        assert!(
            lo.x <= 400.0 && lo.y <= 100.0 && hi.x > 450.0 && hi.y > 120.0,
            "{floating:?}"
        );

        let over_window = Vec2::new(450.0, 120.0);
        let mut app = app_with_cursor(over_window, true);
        app.world_mut().resource_mut::<UiState>().floating = floating;
        let (throw_from, pan_from, scale) = press_and_scroll(&mut app);
        assert_eq!((throw_from, pan_from), (None, None));
        assert_eq!(scale, 1.0, "the wheel zoomed the scene under the window");
    }

    /// Clicks and drags on the empty canvas drop and throw balls, except while a demo replays: the replay owns the
    /// lanes, so nothing is sent (the sim would only refuse it with an error).
    #[test]
    fn clicks_and_drags_spawn_nothing_while_a_demo_replays() {
        let spawned = |replaying: bool| {
            let from = Vec2::new(700.0, 400.0);
            let mut app = app_with_cursor(from, true);
            let scene =
                crate::scene::Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
                    .expect("the shipped scene loads");
            let world = scene.build().into_iter().next().expect("a lane");
            app.world_mut().spawn(Lane::new(
                0,
                world,
                DVec2::ZERO,
                (DVec2::new(-1.0, -1.0), DVec2::new(1.0, 1.0)),
            ));
            if replaying {
                let demo = crate::demo::Demo::load(std::path::Path::new(crate::demo::SHIPPED_DEMO))
                    .expect("the shipped demo loads");
                let player = crate::demo::Player::new(demo, "wall_throw");
                app.insert_resource(Replay::without_check(player));
            }
            let mut sent = 0;
            // A click, then a drag of 200 px.
            for to in [from, from + Vec2::new(200.0, -50.0)] {
                let set_cursor = |app: &mut App, at: Vec2| {
                    let mut windows = app.world_mut().query::<&mut Window>();
                    for mut window in windows.iter_mut(app.world_mut()) {
                        window.set_cursor_position(Some(at));
                    }
                };
                set_cursor(&mut app, from);
                app.world_mut()
                    .resource_mut::<ButtonInput<MouseButton>>()
                    .press(MouseButton::Left);
                app.update();
                set_cursor(&mut app, to);
                let mut buttons = app.world_mut().resource_mut::<ButtonInput<MouseButton>>();
                buttons.clear();
                buttons.release(MouseButton::Left);
                app.update();
                app.world_mut()
                    .resource_mut::<ButtonInput<MouseButton>>()
                    .clear();
                sent += app
                    .world_mut()
                    .resource_mut::<Messages<SpawnBall>>()
                    .drain()
                    .count();
            }
            sent
        };
        assert_eq!(
            spawned(false),
            2,
            "a click drops a ball and a drag throws one"
        );
        assert_eq!(spawned(true), 0, "a replay's lanes got a spawn");
    }

    /// A click at `cursor` (press and release in place) in `app`.
    fn click(app: &mut App, button: MouseButton) {
        app.world_mut()
            .resource_mut::<ButtonInput<MouseButton>>()
            .press(button);
        app.update();
        let mut buttons = app.world_mut().resource_mut::<ButtonInput<MouseButton>>();
        buttons.clear();
        buttons.release(button);
        app.update();
        app.world_mut()
            .resource_mut::<ButtonInput<MouseButton>>()
            .clear();
    }

    /// A ball drawn beyond its lane's band is hidden there (`lane_bands`), so a click on the spot it would occupy
    /// does not select it: the click drops a ball instead. Inside its band the same click selects it.
    #[test]
    fn a_click_selects_a_ball_only_where_its_lane_draws_it() {
        // The cursor (700, 400) of a 1 600 × 900 window is the scene point (−100, 50) render units.
        let cursor = Vec2::new(700.0, 400.0);
        let outcome = |band_top: f32| {
            let mut app = app_with_cursor(cursor, true);
            let lane = app
                .world_mut()
                .spawn(Lane::new(
                    0,
                    crate::physics::world::LaneWorld::new(
                        "empty",
                        Default::default(),
                        vec![],
                        vec![],
                    ),
                    DVec2::ZERO,
                    (DVec2::new(-1.0, -1.0), DVec2::new(1.0, 1.0)),
                ))
                .id();
            let ball = app
                .world_mut()
                .spawn((
                    Transform::from_xyz(-100.0, 50.0, 0.0),
                    LaneMember(lane),
                    Ball {
                        index: 0,
                        radius: 0.05,
                        mass: 1.0,
                    },
                    BodyState::default(),
                ))
                .id();
            let band = Rect {
                min: Vec2::NEG_INFINITY,
                max: Vec2::new(f32::INFINITY, band_top),
            };
            app.insert_resource(LaneBands(vec![(lane, band)]));
            click(&mut app, MouseButton::Left);
            let spawned = app
                .world_mut()
                .resource_mut::<Messages<SpawnBall>>()
                .drain()
                .count();
            let selected = app.world().resource::<UiState>().selected;
            (selected == Some(ball), spawned)
        };
        assert_eq!(outcome(100.0), (true, 0), "inside its band");
        assert_eq!(outcome(0.0), (false, 1), "beyond its band");
    }

    /// A right click (no drag) drops a rod where the scene has rods; elsewhere it says so rather than doing
    /// nothing.
    #[test]
    fn a_right_click_without_rods_says_what_it_would_do() {
        let mut app = app_with_cursor(Vec2::new(700.0, 400.0), true);
        app.init_resource::<SimLog>();
        app.world_mut().spawn(Lane::new(
            0,
            crate::physics::world::LaneWorld::new("empty", Default::default(), vec![], vec![]),
            DVec2::ZERO,
            (DVec2::new(-1.0, -1.0), DVec2::new(1.0, 1.0)),
        ));
        click(&mut app, MouseButton::Right);
        let info = app.world().resource::<SimLog>().info.clone();
        assert!(
            info.as_deref().is_some_and(|i| i.contains("rod")),
            "{info:?}"
        );
        assert_eq!(
            app.world_mut()
                .resource_mut::<Messages<SpawnRod>>()
                .drain()
                .count(),
            0
        );
    }

    /// P, O and R play, step and rewind a replaying demo; the run control they drive otherwise is untouched.
    #[test]
    fn while_a_demo_replays_p_o_and_r_drive_the_replay() {
        let demo = crate::demo::Demo::load(std::path::Path::new(crate::demo::SHIPPED_DEMO))
            .expect("the shipped demo loads");
        let ticks = demo.ticks;
        let mut player = crate::demo::Player::new(demo, "wall_throw");
        player.start().expect("starts");
        let mut app = App::new();
        app.add_message::<RestartScene>()
            .add_message::<CycleScene>()
            .init_resource::<ButtonInput<KeyCode>>()
            .init_resource::<SimControl>()
            .init_resource::<UiState>()
            .init_resource::<CameraView>()
            .insert_resource(Replay::without_check(player))
            .add_systems(Update, keyboard_controls);
        let press = |app: &mut App, key| {
            let mut keys = app.world_mut().resource_mut::<ButtonInput<KeyCode>>();
            keys.reset_all();
            keys.press(key);
            app.update();
        };
        press(&mut app, KeyCode::KeyP);
        assert!(app.world().resource::<Replay>().playing);
        press(&mut app, KeyCode::KeyP);
        assert!(!app.world().resource::<Replay>().playing);
        press(&mut app, KeyCode::KeyO);
        assert_eq!(app.world().resource::<Replay>().seek, Some(1));
        app.world_mut().resource_mut::<Replay>().seek = None;
        press(&mut app, KeyCode::KeyR);
        assert_eq!(app.world().resource::<Replay>().seek, Some(0));
        let control = app.world().resource::<SimControl>();
        assert!(!control.paused, "P paused the run control under the replay");
        assert_eq!(control.pending_steps, 0, "O stepped the run control");
        let restarts = app.world().resource::<Messages<RestartScene>>();
        assert!(
            restarts.is_empty(),
            "R restarted the scene under the replay"
        );
        // Play from the last tick starts over.
        let mut replay = app.world_mut().resource_mut::<Replay>();
        replay.player.seek(ticks).expect("seeks to the end");
        let edits = ReplayEdits::toggle_play(&replay);
        edits.apply(&mut replay);
        assert!(replay.playing);
        assert_eq!(replay.seek, Some(0));
    }

    /// F frames the lanes and every ball that flew on along its own lane's band (the penalty ball 4 m on past
    /// the wall), but not a ball beyond the reach (10⁶ m on) nor one beyond its band (marked on the band's edge);
    /// the fit of new lanes (a restart, a scene loaded) frames the lanes alone again.
    #[test]
    fn f_frames_every_ball_that_flew_on_along_its_band_within_the_reach() {
        let mut app = App::new();
        app.insert_resource(UiState {
            show_ui: false,
            ..default()
        })
        .init_resource::<ButtonInput<KeyCode>>()
        .init_resource::<SimControl>()
        .init_resource::<CameraView>()
        .init_resource::<LaneBands>()
        .add_message::<RestartScene>()
        .add_message::<CycleScene>()
        .add_systems(
            Update,
            (
                keyboard_controls,
                super::super::lane_bands::update_lane_bands,
                super::super::render::fit_camera,
            )
                .chain(),
        );
        app.world_mut().spawn(Window {
            resolution: WindowResolution::new(1600, 900),
            ..default()
        });
        app.world_mut().spawn((
            MainCamera,
            Camera::default(),
            Transform::default(),
            Projection::Orthographic(OrthographicProjection::default_2d()),
        ));
        let spawn_lanes = |app: &mut App| -> Vec<(Entity, DVec2)> {
            super::super::lane_bands::laid_out_lanes("assets/scenes/wall_throw.ron")
                .into_iter()
                .map(|lane| {
                    let offset = lane.offset;
                    (app.world_mut().spawn(lane).id(), offset)
                })
                .collect()
        };
        let lanes = spawn_lanes(&mut app);
        let u = UNITS_PER_METRE;
        let spawn_ball = |app: &mut App, (lane, offset): (Entity, DVec2), at: DVec2| {
            let p = ((at + offset) * f64::from(u)).as_vec2();
            app.world_mut().spawn((
                Ball {
                    index: 0,
                    radius: 0.0,
                    mass: 1.0,
                },
                Transform::from_translation(p.extend(1.0)),
                LaneMember(lane),
            ));
            p
        };
        // The penalty ball, through the wall and 4 m on; the IPC ball at rest before its wall; an IPC ball 10⁶ m
        // on; and one of the IPC lane's balls risen 1 m into the penalty lane's band, 3 m behind.
        let penalty = spawn_ball(&mut app, lanes[0], DVec2::new(4.0, 0.0));
        let ipc = spawn_ball(&mut app, lanes[1], DVec2::new(0.5, 0.0));
        let far = spawn_ball(&mut app, lanes[1], DVec2::new(1e6, 0.0));
        let risen = spawn_ball(&mut app, lanes[1], DVec2::new(-3.0, 1.0));
        let seen = |app: &mut App| -> Rect {
            let (transform, projection) = app
                .world_mut()
                .query_filtered::<(&Transform, &Projection), With<MainCamera>>()
                .single(app.world())
                .expect("one main camera");
            let half = Vec2::new(800.0, 450.0) * camera_scale(projection);
            Rect::from_center_half_size(transform.translation.truncate(), half)
        };
        let press_f = |app: &mut App| {
            let mut keys = app.world_mut().resource_mut::<ButtonInput<KeyCode>>();
            keys.reset_all();
            keys.press(KeyCode::KeyF);
            app.update();
            app.world_mut()
                .resource_mut::<ButtonInput<KeyCode>>()
                .reset_all();
        };

        // The scene's own fit: the lanes.
        app.update();
        let lanes_only = seen(&mut app);
        assert!(lanes_only.contains(ipc) && !lanes_only.contains(penalty));

        press_f(&mut app);
        let everything = seen(&mut app);
        assert!(everything.contains(penalty), "{everything:?}");
        assert!(everything.contains(ipc), "{everything:?}");
        let area = super::super::lane_bands::laid_out_lanes("assets/scenes/wall_throw.ron")
            .iter()
            .map(super::super::lane_bands::lane_area)
            .fold(Rect::EMPTY, |all, a| all.union(a));
        assert!(
            everything.contains(area.min) && everything.contains(area.max),
            "{everything:?} lost the lanes' {area:?}"
        );
        assert!(!everything.contains(far), "{everything:?}");
        assert!(!everything.contains(risen), "{everything:?}");
        // No wider than the penalty ball needs: the lanes keep a useful share of the view.
        assert!(everything.width() < 6.0 * u, "{everything:?}");
        // It keeps that framing until new lanes come, and does not follow a ball that flies on (it would zoom out
        // steadily, then snap back once the ball passed the reach); F again takes the balls where they are.
        app.update();
        assert_eq!(seen(&mut app), everything);
        let moved: Vec<Entity> = app
            .world_mut()
            .query_filtered::<Entity, With<Ball>>()
            .iter(app.world())
            .collect();
        let further = penalty + Vec2::new(2.0 * u, 0.0);
        app.world_mut()
            .entity_mut(moved[0])
            .insert(Transform::from_translation(further.extend(1.0)));
        app.update();
        assert_eq!(seen(&mut app), everything);
        press_f(&mut app);
        assert!(seen(&mut app).contains(further), "{:?}", seen(&mut app));

        // A restart: new lanes, their balls back at the start, framed as the scene frames them.
        let old: Vec<Entity> = app
            .world_mut()
            .query_filtered::<Entity, Or<(With<Lane>, With<Ball>)>>()
            .iter(app.world())
            .collect();
        for entity in old {
            app.world_mut().despawn(entity);
        }
        let lanes = spawn_lanes(&mut app);
        spawn_ball(&mut app, lanes[0], DVec2::new(4.0, 0.0));
        app.update();
        assert!(!app.world().resource::<CameraView>().with_balls);
        assert_eq!(seen(&mut app), lanes_only);
    }
}
