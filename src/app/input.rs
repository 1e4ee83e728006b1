//! Mouse and keyboard. Everything a user does becomes a sim message (the same path the tests use) or a change
//! of [`SimControl`] / the camera.
//!
//! - Left press–drag–release: throw a ball from the press point with velocity from the drag
//!   ([`DRAG_SPEED_PER_PIXEL`]); a click without drag selects the body under the cursor, or drops a ball at rest.
//! - Right drag: pan. Right click (no drag) in a scene with rods: drop a rod. Wheel: zoom about the cursor.
//! - P pause, O single step, R restart, `[` `]` previous/next scene, Tab hide the UI, F fit the view.

use bevy::input::mouse::{AccumulatedMouseScroll, MouseScrollUnit};
use bevy::prelude::*;
use bevy_egui::input::{egui_wants_any_keyboard_input, egui_wants_any_pointer_input};

use super::UiState;
use super::render::{CameraView, MainCamera, camera_scale};
use crate::physics::DVec2;
use crate::sim::{
    Ball, BodyState, CycleScene, Lane, LaneMember, RestartScene, Rod, SimControl, SimSet,
    SpawnBall, SpawnRod, UNITS_PER_METRE,
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

/// Throw speed per logical pixel of drag [m/s]: a 100 px drag throws at 5 m/s.
pub const DRAG_SPEED_PER_PIXEL: f64 = 0.05;
/// Fastest throw [m/s].
pub const MAX_THROW_SPEED: f64 = 100.0;
/// A press that moves less than this is a click [logical px].
const CLICK_SLOP_PX: f32 = 4.0;

pub struct InputPlugin;

impl Plugin for InputPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<DragState>().add_systems(
            Update,
            (
                keyboard_controls.run_if(not(egui_wants_any_keyboard_input)),
                (mouse_buttons, zoom_with_wheel).run_if(not(egui_wants_any_pointer_input)),
                draw_throw_preview,
            )
                .before(SimSet::ApplyMessages),
        );
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
    /// Velocity of the throw being dragged from `from` to `to` (logical px, y down) [m/s].
    pub fn throw_velocity(from: Vec2, to: Vec2) -> DVec2 {
        let d = DVec2::new((to.x - from.x) as f64, -(to.y - from.y) as f64) * DRAG_SPEED_PER_PIXEL;
        if d.length() > MAX_THROW_SPEED {
            d.normalize() * MAX_THROW_SPEED
        } else {
            d
        }
    }
}

fn keyboard_controls(
    keys: Res<ButtonInput<KeyCode>>,
    mut control: ResMut<SimControl>,
    mut ui: ResMut<UiState>,
    mut view: ResMut<CameraView>,
    mut restart: MessageWriter<RestartScene>,
    mut cycle: MessageWriter<CycleScene>,
) {
    if keys.just_pressed(KeyCode::KeyP) {
        control.toggle_pause();
    }
    if keys.just_pressed(KeyCode::KeyO) {
        control.single_step();
    }
    if keys.just_pressed(KeyCode::KeyR) {
        restart.write(RestartScene);
    }
    if keys.just_pressed(KeyCode::BracketRight) {
        cycle.write(CycleScene(1));
        view.auto_fit = true;
    }
    if keys.just_pressed(KeyCode::BracketLeft) {
        cycle.write(CycleScene(-1));
        view.auto_fit = true;
    }
    if keys.just_pressed(KeyCode::Tab) {
        ui.show_ui = !ui.show_ui;
    }
    if keys.just_pressed(KeyCode::KeyF) {
        view.auto_fit = true;
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
) {
    let Ok(window) = windows.single() else { return };
    let Ok((camera, camera_global, projection)) = camera.single() else {
        return;
    };
    let cursor = window.cursor_position();
    drag.cursor = cursor;
    let px = camera_scale(projection);

    if buttons.just_pressed(MouseButton::Left) {
        drag.throw_from = cursor;
    }
    if buttons.just_released(MouseButton::Left)
        && let (Some(from), Some(to)) = (drag.throw_from.take(), cursor)
        && let Some(world_from) = to_world(camera, camera_global, from)
        && let Some((_, local)) = lane_at(&lanes, world_from)
    {
        if from.distance(to) < CLICK_SLOP_PX {
            // Click: select what is under the cursor, else drop a ball at rest.
            let hit = bodies
                .iter()
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
                None => {
                    spawn.write(SpawnBall {
                        position: local,
                        velocity: DVec2::ZERO,
                        radius: ui.spawn_radius,
                        mass: ui.spawn_mass,
                    });
                }
            }
        } else {
            spawn.write(SpawnBall {
                position: local,
                velocity: DragState::throw_velocity(from, to),
                radius: ui.spawn_radius,
                mass: ui.spawn_mass,
            });
        }
    }

    if buttons.just_pressed(MouseButton::Right) {
        drag.pan_from = cursor;
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
        view.auto_fit = false;
    }
    if buttons.just_released(MouseButton::Right) {
        let moved = drag.pan_moved;
        let from = drag.pan_from.take();
        let has_rods = lanes.iter().any(|(_, l)| !l.world.rods.is_empty());
        if !moved
            && has_rods
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

fn zoom_with_wheel(
    scroll: Res<AccumulatedMouseScroll>,
    windows: Query<&Window>,
    mut camera: Query<
        (&Camera, &GlobalTransform, &mut Transform, &mut Projection),
        With<MainCamera>,
    >,
    mut view: ResMut<CameraView>,
) {
    if scroll.delta.y == 0.0 {
        return;
    }
    let Ok((camera, global, mut transform, mut projection)) = camera.single_mut() else {
        return;
    };
    let lines = match scroll.unit {
        MouseScrollUnit::Line => scroll.delta.y,
        MouseScrollUnit::Pixel => scroll.delta.y / 40.0,
    };
    let factor = 0.85f32.powf(lines);
    let anchor = windows
        .single()
        .ok()
        .and_then(|w| w.cursor_position())
        .and_then(|c| camera.viewport_to_world_2d(global, c).ok());
    if let Projection::Orthographic(o) = &mut *projection {
        o.scale = (o.scale * factor).clamp(1e-4, 1e3);
        // Keep the point under the cursor fixed.
        if let Some(anchor) = anchor {
            let t = transform.translation.truncate();
            let next = anchor + (t - anchor) * factor;
            transform.translation = next.extend(transform.translation.z);
        }
        view.auto_fit = false;
    }
}

/// The arrow from the press point to the cursor while a throw is dragged, with the speed beside it.
fn draw_throw_preview(
    drag: Res<DragState>,
    camera: Query<(&Camera, &GlobalTransform), With<MainCamera>>,
    mut gizmos: Gizmos,
) {
    let (Some(from), Some(to)) = (drag.throw_from, drag.cursor) else {
        return;
    };
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
