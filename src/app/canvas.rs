//! The scene is drawn only inside the canvas the panels leave free.
//!
//! The main camera's viewport is the canvas, so the scene (walls, balls, gizmos) is clipped to it and never shows
//! under a panel. egui draws through a second camera that covers the whole window and renders no scene entity.
//! The panels then need no fill of their own: the clear colour shows under them. On a software renderer (Mesa's
//! llvmpipe when there is no GPU) every shaded pixel is CPU time, and the panels' fill was about a fifth of a
//! frame.

use bevy::camera::visibility::RenderLayers;
use bevy::camera::{CameraOutputMode, Viewport};
use bevy::ecs::schedule::{ScheduleBuildSettings, ScheduleLabel};
use bevy::prelude::*;
use bevy::render::RenderApp;
use bevy::render::camera::CameraRenderGraph;
use bevy::render::render_resource::BlendState;
use bevy_egui::{EguiGlobalSettings, PrimaryEguiContext};

use super::UiState;
use super::render::{MainCamera, camera_scale};

/// A render layer no scene entity is on: the UI camera draws egui and nothing else.
const UI_ONLY_LAYER: usize = 31;

pub struct CanvasPlugin;

/// The UI camera's render schedule: egui over what the scene camera drew, then the copy to the window. It has no
/// main pass of its own: an empty one still clears a full-window depth buffer and costs about a tenth of a frame
/// under llvmpipe.
#[derive(ScheduleLabel, Debug, Clone, PartialEq, Eq, Hash, Default)]
struct UiOnly;

impl Plugin for CanvasPlugin {
    fn build(&self, app: &mut App) {
        if let Some(render_app) = app.get_sub_app_mut(RenderApp) {
            let mut schedule = Schedule::new(UiOnly);
            schedule.set_build_settings(ScheduleBuildSettings {
                auto_insert_apply_deferred: false,
                ..default()
            });
            render_app.add_schedule(schedule).add_systems(
                UiOnly,
                (
                    bevy_egui::render::prepare_egui_pass,
                    bevy_egui::render::egui_pass,
                    bevy::core_pipeline::upscaling::upscaling,
                )
                    .chain(),
            );
        }
        app.add_systems(PreStartup, egui_on_its_own_camera)
            .add_systems(PostStartup, spawn_ui_camera)
            .add_systems(
                PostUpdate,
                // After the UI pass, which measures the canvas (`sandbox_ui`), so the viewport is this frame's.
                (clip_scene_to_canvas, ui_camera_only_while_shown)
                    .after(bevy_egui::EguiPostUpdateSet::EndPass)
                    .before(bevy::camera::CameraUpdateSystems),
            );
    }
}

fn egui_on_its_own_camera(mut settings: ResMut<EguiGlobalSettings>) {
    settings.auto_create_primary_context = false;
}

/// The UI camera: it renders after the scene camera, keeps what that drew (no clear) and writes the whole
/// window. The scene camera leaves its image to it, so the window is written once.
fn spawn_ui_camera(mut commands: Commands, mut scene: Query<&mut Camera, With<MainCamera>>) {
    for mut camera in &mut scene {
        camera.output_mode = CameraOutputMode::Skip;
    }
    commands.spawn((
        Camera2d,
        Camera {
            order: 1,
            clear_color: ClearColorConfig::None,
            output_mode: CameraOutputMode::Write {
                blend_state: Some(BlendState::REPLACE),
                clear_color: ClearColorConfig::None,
            },
            ..default()
        },
        CameraRenderGraph::new(UiOnly),
        UiCamera,
        RenderLayers::layer(UI_ONLY_LAYER),
        PrimaryEguiContext,
    ));
}

/// Marks the camera egui draws through.
#[derive(Component)]
struct UiCamera;

/// While the UI is hidden (Tab) the UI camera is switched off and the scene camera writes the window itself, so
/// the hidden UI costs nothing (the lane labels are scene text, see `labels`).
fn ui_camera_only_while_shown(
    ui: Res<UiState>,
    mut ui_camera: Query<&mut Camera, (With<UiCamera>, Without<MainCamera>)>,
    mut scene: Query<&mut Camera, With<MainCamera>>,
) {
    let (Ok(mut ui_camera), Ok(mut scene)) = (ui_camera.single_mut(), scene.single_mut()) else {
        return;
    };
    if ui_camera.is_active == ui.show_ui {
        return;
    }
    ui_camera.is_active = ui.show_ui;
    scene.output_mode = if ui.show_ui {
        CameraOutputMode::Skip
    } else {
        CameraOutputMode::default()
    };
}

/// Sets the main camera's viewport to the canvas (in physical pixels), or clears it while the UI is hidden. The
/// view stays put on screen as the canvas moves or resizes (a panel dragged, the UI hidden): the camera moves with
/// the canvas's centre.
fn clip_scene_to_canvas(
    ui: Res<UiState>,
    windows: Query<&Window>,
    mut cameras: Query<(&mut Camera, &mut Transform, &Projection), With<MainCamera>>,
) {
    let (Ok(window), Ok((mut camera, mut transform, projection))) =
        (windows.single(), cameras.single_mut())
    else {
        return;
    };
    let scale = window.scale_factor();
    let window_size = UVec2::new(window.physical_width(), window.physical_height());
    let wanted = match ui.canvas {
        Some((lo, hi)) if ui.show_ui => physical_rect(lo, hi, scale, window_size),
        _ => None,
    };
    let current = camera
        .viewport
        .as_ref()
        .map(|v| (v.physical_position, v.physical_size));
    if current == wanted {
        return;
    }
    let (old_position, old_size) = current.unwrap_or((UVec2::ZERO, window_size));
    let (new_position, new_size) = wanted.unwrap_or((UVec2::ZERO, window_size));
    let centre = |position: UVec2, size: UVec2| (position.as_vec2() + size.as_vec2() / 2.0) / scale;
    let moved = centre(new_position, new_size) - centre(old_position, old_size);
    let px = camera_scale(projection);
    transform.translation.x += moved.x * px;
    transform.translation.y -= moved.y * px;
    camera.viewport = wanted.map(|(physical_position, physical_size)| Viewport {
        physical_position,
        physical_size,
        ..default()
    });
}

/// The canvas `lo..hi` (logical pixels) in physical pixels, inside the window. A canvas the panels squeeze to
/// nothing is one pixel at its corner, so the scene shows under the panels in one pixel at most (the scene
/// camera's clear still covers the window); `None` only for a window of no size.
fn physical_rect(lo: Vec2, hi: Vec2, scale: f32, window: UVec2) -> Option<(UVec2, UVec2)> {
    if window.x == 0 || window.y == 0 {
        return None;
    }
    let lo = (lo * scale).round().max(Vec2::ZERO).as_uvec2().min(window);
    let hi = (hi * scale).round().max(Vec2::ZERO).as_uvec2().min(window);
    if hi.x > lo.x && hi.y > lo.y {
        Some((lo, hi - lo))
    } else {
        Some((lo.min(window - UVec2::ONE), UVec2::ONE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy::window::WindowResolution;

    /// One update of `clip_scene_to_canvas` over a 1600 × 900 window and a camera at the origin, 0.5 units per
    /// pixel.
    fn app_with(canvas: Option<(Vec2, Vec2)>, show_ui: bool) -> App {
        let mut app = App::new();
        app.insert_resource(UiState {
            canvas,
            show_ui,
            ..default()
        });
        app.world_mut().spawn(Window {
            resolution: WindowResolution::new(1600, 900),
            ..default()
        });
        app.world_mut().spawn((
            MainCamera,
            Camera::default(),
            Transform::default(),
            Projection::Orthographic(OrthographicProjection {
                scale: 0.5,
                ..OrthographicProjection::default_2d()
            }),
        ));
        app.add_systems(Update, clip_scene_to_canvas);
        app
    }

    fn camera(app: &mut App) -> (Option<(UVec2, UVec2)>, Vec3) {
        let (camera, transform) = app
            .world_mut()
            .query_filtered::<(&Camera, &Transform), With<MainCamera>>()
            .single(app.world())
            .expect("one main camera");
        (
            camera
                .viewport
                .as_ref()
                .map(|v| (v.physical_position, v.physical_size)),
            transform.translation,
        )
    }

    #[test]
    fn the_scene_is_clipped_to_the_canvas_and_stays_put_on_screen() {
        // Panels: 300 px on the left, 400 on the right, 150 at the bottom.
        let mut app = app_with(
            Some((Vec2::new(300.0, 0.0), Vec2::new(1200.0, 750.0))),
            true,
        );
        app.update();
        let (viewport, at) = camera(&mut app);
        assert_eq!(viewport, Some((UVec2::new(300, 0), UVec2::new(900, 750))));
        // The canvas's centre (750, 375) is 50 px left of and 75 px above the window's (800, 450); the camera
        // moves with it (0.5 units per pixel, y up), so what was drawn under each pixel still is.
        assert_eq!(at, Vec3::new(-25.0, 37.5, 0.0));

        // The left panel dragged 100 px wider: the canvas's centre moves 50 px right, and the camera with it.
        app.world_mut().resource_mut::<UiState>().canvas =
            Some((Vec2::new(400.0, 0.0), Vec2::new(1200.0, 750.0)));
        app.update();
        let (viewport, at) = camera(&mut app);
        assert_eq!(viewport, Some((UVec2::new(400, 0), UVec2::new(800, 750))));
        assert_eq!(at, Vec3::new(0.0, 37.5, 0.0));

        // Hiding the UI gives the scene the whole window back, and the view does not jump.
        app.world_mut().resource_mut::<UiState>().show_ui = false;
        app.update();
        let (viewport, at) = camera(&mut app);
        assert_eq!(viewport, None);
        assert_eq!(at, Vec3::ZERO);

        // Nothing changes while the canvas does not.
        app.update();
        assert_eq!(camera(&mut app), (None, Vec3::ZERO));
    }

    #[test]
    fn hiding_the_ui_switches_its_camera_off_and_the_scene_camera_writes_the_window() {
        let mut app = App::new();
        app.insert_resource(UiState {
            show_ui: false,
            ..default()
        });
        let scene = app
            .world_mut()
            .spawn((
                MainCamera,
                Camera {
                    output_mode: CameraOutputMode::Skip,
                    ..default()
                },
            ))
            .id();
        let ui_camera = app.world_mut().spawn((UiCamera, Camera::default())).id();
        app.add_systems(Update, ui_camera_only_while_shown);
        let state = |app: &App| {
            let scene = app.world().get::<Camera>(scene).expect("scene camera");
            let ui = app.world().get::<Camera>(ui_camera).expect("UI camera");
            (
                matches!(scene.output_mode, CameraOutputMode::Skip),
                ui.is_active,
            )
        };
        // Spawned as the UI camera leaves them; the UI starts hidden here.
        app.update();
        assert_eq!(state(&app), (false, false));
        app.world_mut().resource_mut::<UiState>().show_ui = true;
        app.update();
        assert_eq!(state(&app), (true, true));
        app.world_mut().resource_mut::<UiState>().show_ui = false;
        app.update();
        assert_eq!(state(&app), (false, false));
    }

    #[test]
    fn a_canvas_squeezed_to_nothing_keeps_one_pixel_and_one_beyond_the_window_is_clamped() {
        let window = UVec2::new(1600, 900);
        assert_eq!(
            physical_rect(Vec2::new(-10.0, 5.0), Vec2::new(2000.0, 950.0), 1.0, window),
            Some((UVec2::new(0, 5), UVec2::new(1600, 895)))
        );
        assert_eq!(
            physical_rect(Vec2::new(700.0, 0.0), Vec2::new(700.0, 900.0), 1.0, window),
            Some((UVec2::new(700, 0), UVec2::ONE))
        );
        assert_eq!(
            physical_rect(
                Vec2::new(1700.0, 950.0),
                Vec2::new(1800.0, 990.0),
                1.0,
                window
            ),
            Some((UVec2::new(1599, 899), UVec2::ONE))
        );
        assert_eq!(
            physical_rect(Vec2::ZERO, Vec2::new(10.0, 10.0), 1.0, UVec2::new(0, 900)),
            None
        );
        // On a 2× display a logical canvas covers twice the pixels.
        assert_eq!(
            physical_rect(
                Vec2::new(100.0, 0.0),
                Vec2::new(500.0, 400.0),
                2.0,
                UVec2::new(3200, 1800)
            ),
            Some((UVec2::new(200, 0), UVec2::new(800, 800)))
        );
    }
}
