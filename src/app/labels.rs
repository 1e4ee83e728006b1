//! Each lane's name and contact method above its top-left corner, and the fault that paused it below, drawn in
//! the scene by the main camera.
//!
//! They are scene text rather than egui so that they stay when the UI is hidden (Tab) without keeping the UI
//! camera running: under a software renderer its full-window pass is about a tenth of a frame.

use bevy::prelude::*;
use bevy::sprite::Anchor;

use super::method_color;
use super::render::{MainCamera, camera_scale};
use crate::physics::DVec2;
use crate::sim::{Lane, UNITS_PER_METRE};

/// Height of the title text [logical px].
pub const TITLE_PX: f32 = 16.0;
/// Height of the fault text [logical px].
const FAULT_PX: f32 = 14.0;
/// Gap between the lane's corner and the title above it [logical px].
const TITLE_GAP_PX: f32 = 4.0;
/// Gap between the lane's corner and the fault line below it [logical px].
const FAULT_GAP_PX: f32 = 14.0;
/// Above walls, balls and rods.
const LABEL_Z: f32 = 50.0;
/// Colour of the fault line.
const FAULT_RGB: [u8; 3] = [255, 90, 80];

pub struct LabelsPlugin;

impl Plugin for LabelsPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<LabelScale>().add_systems(
            PostUpdate,
            // The text is laid out in the frame it changes.
            label_lanes
                .before(bevy::transform::TransformSystems::Propagate)
                .before(bevy::sprite::update_text2d_layout),
        );
    }
}

/// How large the labels are drawn, as a multiple of their sizes in the window (the exporter scales them with its
/// frame, as it does its overlay, so that small clips are not covered in text). Read when a lane's labels are
/// spawned.
#[derive(Resource, Debug, Clone, Copy, PartialEq)]
pub struct LabelScale(pub f32);

impl Default for LabelScale {
    fn default() -> Self {
        LabelScale(1.0)
    }
}

/// Which line of which lane a text entity shows.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneLabel {
    pub lane: Entity,
    pub line: LabelLine,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelLine {
    /// `name [method]` above the corner, in the method's colour.
    Title,
    /// `paused: fault` below the corner, hidden while the lane runs.
    Fault,
}

/// The text a line shows for a lane, if any.
fn line_text(lane: &Lane, line: LabelLine) -> Option<String> {
    match line {
        LabelLine::Title => Some(format!(
            "{} [{}]",
            lane.world.name,
            lane.world.settings.method.label()
        )),
        LabelLine::Fault => lane
            .world
            .fault
            .as_ref()
            .map(|fault| format!("paused: {fault}")),
    }
}

/// How a line of a lane is drawn, if it shows: its text, colour and place, at `px` world units per pixel and the
/// labels' `scale`.
fn line_look(
    lane: &Lane,
    line: LabelLine,
    px: f32,
    scale: f32,
) -> Option<(String, Color, Transform)> {
    let text = line_text(lane, line)?;
    let (rgb, gap) = match line {
        LabelLine::Title => (method_color(lane.world.settings.method), TITLE_GAP_PX),
        LabelLine::Fault => (
            Color::srgb_u8(FAULT_RGB[0], FAULT_RGB[1], FAULT_RGB[2]),
            -FAULT_GAP_PX,
        ),
    };
    let corner =
        (DVec2::new(lane.bounds.0.x, lane.bounds.1.y) + lane.offset).as_vec2() * UNITS_PER_METRE;
    let place = Transform::from_xyz(corner.x, corner.y + gap * scale * px, LABEL_Z)
        .with_scale(Vec3::new(px, px, 1.0));
    Some((text, rgb, place))
}

/// Spawns the two lines of a new lane, despawns those of a lane that is gone, and keeps each line's text, colour
/// and place; the text keeps its size on screen (its scale is the camera's units per pixel).
///
/// A new lane's lines are drawn in the frame the lane first is: an export shows a rebuilt scene (a restart, a
/// throw) from its first frame, which may be the only frame of that tick.
#[allow(clippy::type_complexity)]
fn label_lanes(
    mut commands: Commands,
    lanes: Query<(Entity, &Lane)>,
    new_lanes: Query<(Entity, &Lane), Added<Lane>>,
    camera: Query<&Projection, With<MainCamera>>,
    scale: Res<LabelScale>,
    mut labels: Query<(
        Entity,
        &LaneLabel,
        &mut Text2d,
        &mut TextColor,
        &mut Transform,
        &mut Visibility,
    )>,
) {
    let px = camera.single().map(camera_scale).unwrap_or(1.0);
    for (lane_entity, lane) in &new_lanes {
        for (line, anchor, font_px) in [
            (LabelLine::Title, Anchor::BOTTOM_LEFT, TITLE_PX),
            (LabelLine::Fault, Anchor::TOP_LEFT, FAULT_PX),
        ] {
            let (text, rgb, place, visibility) = match line_look(lane, line, px, scale.0) {
                Some((text, rgb, place)) => (text, rgb, place, Visibility::Inherited),
                None => (
                    String::new(),
                    Color::WHITE,
                    Transform::default(),
                    Visibility::Hidden,
                ),
            };
            commands.spawn((
                LaneLabel {
                    lane: lane_entity,
                    line,
                },
                Text2d::new(text),
                TextFont {
                    font_size: FontSize::Px(font_px * scale.0),
                    ..default()
                },
                TextColor(rgb),
                place,
                anchor,
                visibility,
            ));
        }
    }
    for (entity, label, mut text, mut color, mut transform, mut visibility) in &mut labels {
        let Ok((_, lane)) = lanes.get(label.lane) else {
            commands.entity(entity).despawn();
            continue;
        };
        let Some((wanted, rgb, place)) = line_look(lane, label.line, px, scale.0) else {
            visibility.set_if_neq(Visibility::Hidden);
            continue;
        };
        visibility.set_if_neq(Visibility::Inherited);
        if text.0 != wanted {
            text.0 = wanted;
        }
        color.set_if_neq(TextColor(rgb));
        transform.set_if_neq(place);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::Scene;
    use std::path::Path;

    fn lane_from(path: &str, index: usize, offset: DVec2) -> Lane {
        let scene = Scene::load(Path::new(path)).expect("a built-in scene loads");
        let world = scene.build().remove(index);
        Lane {
            index,
            world,
            offset,
            bounds: (DVec2::new(-1.0, 0.0), DVec2::new(2.0, 1.5)),
            ball_entities: Vec::new(),
            rod_entities: Vec::new(),
            wall_entities: Vec::new(),
        }
    }

    fn labels_of(app: &mut App, lane: Entity) -> Vec<(LabelLine, String, Visibility, Transform)> {
        let mut found: Vec<_> = app
            .world_mut()
            .query::<(&LaneLabel, &Text2d, &Visibility, &Transform)>()
            .iter(app.world())
            .filter(|(label, ..)| label.lane == lane)
            .map(|(label, text, visibility, transform)| {
                (label.line, text.0.clone(), *visibility, *transform)
            })
            .collect();
        found.sort_by_key(|(line, ..)| *line == LabelLine::Fault);
        found
    }

    #[test]
    fn each_lane_is_titled_at_its_corner_its_fault_shown_while_it_lasts_and_its_labels_go_with_it()
    {
        let mut app = App::new();
        app.init_resource::<LabelScale>()
            .add_systems(Update, label_lanes);
        app.world_mut().spawn((
            MainCamera,
            Projection::Orthographic(OrthographicProjection {
                scale: 0.5,
                ..OrthographicProjection::default_2d()
            }),
        ));
        let lane = lane_from("assets/scenes/wall_throw.ron", 1, DVec2::new(3.0, -2.0));
        let title = "ipc dhat=1mm [ipc]";
        let lane = app.world_mut().spawn(lane).id();
        // Shown from the lane's first frame (an export may show no other frame of a rebuilt scene).
        app.update();

        let shown = labels_of(&mut app, lane);
        assert_eq!(shown.len(), 2, "{shown:?}");
        let (line, text, visibility, at) = &shown[0];
        assert_eq!((*line, text.as_str()), (LabelLine::Title, title));
        assert_eq!(*visibility, Visibility::Inherited);
        // The corner (-1 + 3, 1.5 - 2) m, 4 px above at 0.5 units per pixel, drawn at 1 px per pixel.
        let corner = Vec2::new(2.0, -0.5) * UNITS_PER_METRE;
        assert_eq!(at.translation, Vec3::new(corner.x, corner.y + 2.0, LABEL_Z));
        assert_eq!(at.scale, Vec3::new(0.5, 0.5, 1.0));
        let (line, _, visibility, _) = &shown[1];
        assert_eq!((*line, *visibility), (LabelLine::Fault, Visibility::Hidden));

        // A fault shows below the corner.
        app.world_mut()
            .get_mut::<Lane>(lane)
            .expect("the lane")
            .world
            .fault = Some("the Newton solve did not converge".into());
        app.update();
        let (_, text, visibility, at) = &labels_of(&mut app, lane)[1];
        assert_eq!(text, "paused: the Newton solve did not converge");
        assert_eq!(*visibility, Visibility::Inherited);
        assert_eq!(at.translation.y, corner.y - 7.0);

        // Cleared (the lane resumed), it hides again.
        app.world_mut()
            .get_mut::<Lane>(lane)
            .expect("the lane")
            .world
            .fault = None;
        app.update();
        assert_eq!(labels_of(&mut app, lane)[1].2, Visibility::Hidden);

        // A lane that is gone takes its labels with it.
        app.world_mut().despawn(lane);
        app.update();
        assert!(labels_of(&mut app, lane).is_empty());
        let left = app
            .world_mut()
            .query::<&LaneLabel>()
            .iter(app.world())
            .count();
        assert_eq!(left, 0);
    }

    #[test]
    fn a_label_scale_scales_the_text_and_its_gap_to_the_corner() {
        let mut app = App::new();
        app.insert_resource(LabelScale(0.625))
            .add_systems(Update, label_lanes);
        app.world_mut().spawn((
            MainCamera,
            Projection::Orthographic(OrthographicProjection {
                scale: 2.0,
                ..OrthographicProjection::default_2d()
            }),
        ));
        let lane = lane_from("assets/scenes/wall_throw.ron", 0, DVec2::ZERO);
        let lane = app.world_mut().spawn(lane).id();
        app.update();
        let mut fonts: Vec<(LabelLine, FontSize, f32)> = app
            .world_mut()
            .query::<(&LaneLabel, &TextFont, &Transform)>()
            .iter(app.world())
            .filter(|(label, ..)| label.lane == lane)
            .map(|(label, font, at)| (label.line, font.font_size, at.translation.y))
            .collect();
        fonts.sort_by_key(|(line, ..)| *line == LabelLine::Fault);
        // 16 px and 14 px at 0.625 are 10 px and 8.75 px; the title sits 4 · 0.625 px above the corner, at 2
        // units per pixel.
        let corner_y = 1.5 * UNITS_PER_METRE;
        assert_eq!(fonts[0].0, LabelLine::Title);
        assert_eq!(fonts[0].1, FontSize::Px(10.0));
        assert_eq!(fonts[0].2, corner_y + 5.0);
        assert_eq!(fonts[1].1, FontSize::Px(8.75));
    }
}
