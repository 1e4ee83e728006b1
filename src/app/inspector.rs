//! The World Inspector window (the "inspector" box): bevy-inspector-egui's view of every entity and resource.
//!
//! Its own `WorldInspectorPlugin` opens the window at egui's default place, the window's top-left corner, over
//! the left panel's scene picker and run controls. This is the same window, opened inside the canvas.

use bevy::prelude::*;
use bevy_egui::{EguiContext, EguiPrimaryContextPass, PrimaryEguiContext, egui};
use bevy_inspector_egui::DefaultInspectorConfigPlugin;

use super::UiState;

pub struct InspectorPlugin;

impl Plugin for InspectorPlugin {
    fn build(&self, app: &mut App) {
        if !app.is_plugin_added::<DefaultInspectorConfigPlugin>() {
            app.add_plugins(DefaultInspectorConfigPlugin);
        }
        app.add_systems(
            EguiPrimaryContextPass,
            world_inspector.run_if(|ui: Res<UiState>| ui.show_ui && ui.show_inspector),
        );
    }
}

/// Where the window first opens: a little inside the canvas's top-left corner (logical pixels).
fn first_position(canvas: Option<(Vec2, Vec2)>) -> egui::Pos2 {
    let corner = canvas.map_or(Vec2::new(340.0, 0.0), |(lo, _)| lo);
    egui::pos2(corner.x + 16.0, corner.y + 56.0)
}

fn world_inspector(world: &mut World) {
    let Ok(context) = world
        .query_filtered::<&mut EguiContext, With<PrimaryEguiContext>>()
        .single(world)
    else {
        return;
    };
    let mut context = context.clone();
    let at = first_position(world.resource::<UiState>().canvas);
    egui::Window::new("World Inspector")
        .default_pos(at)
        .default_size([360.0, 480.0])
        .show(context.get_mut(), |ui| {
            ui.small(
                "A view of the ECS. Bodies and walls mirror their lane's physics: an edit here is undone at the \
                 next frame. Change a lane with its panel on the right (demos record those).",
            );
            egui::ScrollArea::both().show(ui, |ui| {
                bevy_inspector_egui::bevy_inspector::ui_for_world(world, ui);
                ui.allocate_space(ui.available_size());
            });
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_opens_inside_the_canvas() {
        let canvas = Some((Vec2::new(330.0, 0.0), Vec2::new(1200.0, 700.0)));
        let at = first_position(canvas);
        assert!(
            at.x > 330.0 && at.x < 1200.0 && at.y > 0.0 && at.y < 700.0,
            "{at:?}"
        );
        // Before the panels have measured the canvas: right of where the left panel starts.
        assert!(first_position(None).x > 300.0);
    }
}
