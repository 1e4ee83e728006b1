//! Each lane's name and contact method above its top-left corner, and the fault that paused it below, drawn in
//! the scene by the main camera; and beside the marker of each ball beyond its lane's band (see `lane_bands`),
//! that ball's position.
//!
//! They are scene text rather than egui so that they stay when the UI is hidden (Tab) without keeping the UI
//! camera running: under a software renderer its full-window pass is about a tenth of a frame.

use bevy::prelude::*;
use bevy::sprite::Anchor;

use super::lane_bands::{EVERYWHERE, LaneBands, StrayBalls};
use super::lane_color;
use super::render::{MainCamera, camera_scale, stray_arrow};
use crate::physics::DVec2;
use crate::physics::world::ContactMethod;
use crate::scene::Scene;
use crate::sim::{ActiveScene, Lane, Replay, UNITS_PER_METRE};

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
        app.init_resource::<LabelScale>()
            .init_resource::<HiddenTitles>()
            .init_resource::<ShownTitles>()
            .add_systems(
                PostUpdate,
                // The text is laid out in the frame it changes; the strays keep clear of the titles shown.
                (label_lanes, label_strays)
                    .chain()
                    .in_set(LabelSystems)
                    .before(bevy::transform::TransformSystems::Propagate)
                    .before(bevy::sprite::update_text2d_layout),
            );
    }
}

/// The systems that lay out the lanes' titles and the stray balls' labels (in `PostUpdate`): what keeps clear of
/// the titles as drawn ([`ShownTitles`]) runs after them.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct LabelSystems;

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

/// The lanes (by index) whose titles are left out because they would lie over an earlier lane's title or another
/// lane's wall ([`crowded_titles`]), as [`label_lanes`] last drew them: the line between lanes and the stray balls'
/// labels need not keep clear of them.
#[derive(Resource, Debug, Clone, Default, PartialEq)]
pub struct HiddenTitles(pub Vec<usize>);

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

/// The scene the lanes' names describe: a replay's own, else the file, as loaded. Not the scene a Throw made of
/// it: a throw's k or d̂ leaves the name quoting the file's ("penalty k=1e4" at k = 10⁶), and the lane's title
/// must say what changed then too.
pub(crate) fn named_scene<'a>(
    replay: Option<&'a crate::sim::Replay>,
    active: Option<&'a crate::sim::ActiveScene>,
) -> Option<&'a Scene> {
    replay
        .map(|r| &r.player.session.loaded)
        .or(active.map(|a| &a.loaded))
}

/// What a lane's title adds when its settings differ from its scene's (`scene`), for its name often quotes a
/// setting ("penalty k=1e4") that an edit has changed: ", now k = 1e6 N/m" (the settings changed, as they read
/// now; the method is named before it anyway), ", edited" when only the method changed. With the panels hidden
/// (a projector) the titles are all that names the lanes, and "edited" alone did not say to what.
fn edit_suffix(lane: &Lane, scene: Option<&Scene>) -> Option<String> {
    let spec = scene.and_then(|scene| scene.lanes.get(lane.index))?;
    let changed = crate::sim::LaneSetting::changed(&spec.contact, &lane.world.settings);
    if changed.is_empty() {
        return None;
    }
    let values: Vec<String> = changed
        .into_iter()
        .filter(|setting| *setting != crate::sim::LaneSetting::Method)
        .map(|setting| super::fonts::scene_font_text(&setting.value_text(&lane.world.settings)))
        .collect();
    Some(if values.is_empty() {
        ", edited".into()
    } else {
        format!(", now {}", values.join(", "))
    })
}

/// The text a line shows for a lane, if any; `edited` as [`edit_suffix`] gives it.
fn line_text(lane: &Lane, line: LabelLine, edited: Option<&str>) -> Option<String> {
    match line {
        LabelLine::Title => Some(format!(
            "{} [{}{}]",
            lane.world.name,
            method_tag(lane),
            edited.unwrap_or("")
        )),
        LabelLine::Fault => lane
            .world
            .fault
            .as_ref()
            .map(|fault| format!("paused: {fault}")),
    }
}

/// The contact method a lane's title names: "ipc", or "balls: ipc" in a lane of rods alone, whose rods meet the
/// floor through the impulse law whatever the method (the rod drop read "[ipc]", as if its rods ran IPC).
fn method_tag(lane: &Lane) -> String {
    let method = lane.world.settings.method.label();
    if rods_alone(lane) {
        format!("balls: {method}")
    } else {
        method.to_string()
    }
}

/// Whether a lane holds rods and no ball.
fn rods_alone(lane: &Lane) -> bool {
    lane.world.balls.is_empty() && !lane.world.rods.is_empty()
}

/// The room a lane's title has to its right [m]: up to the left edge of the nearest lane beside it whose extent
/// (with its own title above it, `title_m` tall) the title's line reaches, from its lane's top to a title's
/// height above. `None`: nothing beside it (lanes one above the other).
fn title_room<'a>(
    lane: &Lane,
    others: impl IntoIterator<Item = &'a Lane>,
    title_m: f64,
) -> Option<f64> {
    let left = lane.bounds.0.x + lane.offset.x;
    let row = lane.bounds.1.y + lane.offset.y;
    others
        .into_iter()
        .filter_map(|other| {
            let other_left = other.bounds.0.x + other.offset.x;
            let bottom = other.bounds.0.y + other.offset.y;
            let top = other.bounds.1.y + other.offset.y + title_m;
            (other_left > left && row <= top && row + title_m >= bottom)
                .then_some(other_left - left)
        })
        .reduce(f64::min)
}

/// A title's room (`beside`, as [`title_room`] gives it) that also stops at the canvas's right edge (`view_right`,
/// metres): cut there by the viewport, a title ended mid-letter with no "...".
fn room_in_view(beside: Option<f64>, view_right: Option<f64>, lane: &Lane) -> Option<f64> {
    let left = lane.bounds.0.x + lane.offset.x;
    let to_edge = view_right.map(|right| (right - left).max(0.0));
    match (beside, to_edge) {
        (Some(beside), Some(to_edge)) => Some(beside.min(to_edge)),
        (beside, to_edge) => beside.or(to_edge),
    }
}

/// `text` cut to at most `chars` characters, its end replaced by "..." when cut (the labels' font has no "…";
/// it drew a box). Where not even one letter and the dots fit, nothing: zoomed out on the ball pit, the penalty
/// title cut to "p" read as the start of the IPC title beside it ("p ipc dhat=1mm [ipc]").
pub(crate) fn elided(text: String, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text;
    }
    match chars.checked_sub(3) {
        Some(kept) if kept > 0 => text.chars().take(kept).chain("...".chars()).collect(),
        _ => String::new(),
    }
}

/// How a line of a lane is drawn, if it shows: its text, colour (a title in the lane's `title` colour) and place,
/// at `px` world units per pixel and the labels' `scale`. A title is cut short ("...") where it would run into the
/// lane beside it (`room`, see [`title_room`]), so that in a narrow view the titles of lanes side by side do not
/// run over each other.
fn line_look(
    lane: &Lane,
    line: LabelLine,
    px: f32,
    scale: f32,
    context: &TitleContext,
) -> Option<(String, Color, Transform)> {
    let TitleContext {
        edited,
        room,
        title,
        crowded,
    } = context;
    let (edited, room, title) = (edited.as_deref(), *room, *title);
    let text = match line {
        LabelLine::Title if *crowded => return None,
        LabelLine::Title => title_text(lane, px, scale, room, edited),
        LabelLine::Fault => line_text(lane, line, edited)?,
    };
    let (rgb, gap) = match line {
        LabelLine::Title => (title, TITLE_GAP_PX),
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

/// A lane's title as drawn: cut short where it would run into the lane beside it (`room`, see [`title_room`]).
fn title_text(lane: &Lane, px: f32, scale: f32, room: Option<f64>, edited: Option<&str>) -> String {
    let text = line_text(lane, LabelLine::Title, edited).unwrap_or_default();
    match room {
        Some(room) => elided(text, title_fits(room, px, scale)),
        None => text,
    }
}

/// The length in characters of [`title_text`], counted without making it.
fn title_chars(lane: &Lane, px: f32, scale: f32, room: Option<f64>, edited: Option<&str>) -> usize {
    let whole = lane.world.name.chars().count()
        + " [".len()
        + method_tag(lane).chars().count()
        + edited.map_or(0, |suffix| suffix.chars().count())
        + "]".len();
    match room {
        // As `elided` cuts it: whole, to `fits` with its dots, or to nothing.
        Some(room) => {
            let fits = title_fits(room, px, scale);
            if whole <= fits {
                whole
            } else if fits > 3 {
                fits
            } else {
                0
            }
        }
        None => whole,
    }
}

/// How many characters of a title fit in `room` metres to its right.
fn title_fits(room: f64, px: f32, scale: f32) -> usize {
    let room_px = room as f32 * UNITS_PER_METRE / px - TITLE_GAP_PX * scale;
    (room_px / (CHAR_WIDTH * TITLE_PX * scale)).floor().max(0.0) as usize
}

/// Which lanes' titles are left out because they would cover another's: `boxes` holds each title's rectangle as
/// drawn, in the lanes' order. Taken in that order, a title that overlaps one already shown is left out, so a
/// view zoomed far out shows the first lane's title, not a pile of them over one another. (A title over another
/// lane's wall stays: in a small window the slope scene's lower titles graze the slope above at the default
/// zoom, and three lanes of four would lose their names.)
fn crowded_titles(boxes: &[Rect]) -> Vec<bool> {
    let mut shown: Vec<Rect> = Vec::new();
    boxes
        .iter()
        .map(|b| {
            let crowded = shown.iter().any(|s| !s.intersect(*b).is_empty());
            if !crowded {
                shown.push(*b);
            }
            crowded
        })
        .collect()
}

/// The rectangle of a title of `chars` characters drawn above `lane`'s top-left corner (render units).
pub(crate) fn drawn_title_box(lane: &Lane, chars: usize, px: f32, scale: f32) -> Rect {
    let s = scale * px;
    let corner =
        (DVec2::new(lane.bounds.0.x, lane.bounds.1.y) + lane.offset).as_vec2() * UNITS_PER_METRE;
    let bottom = corner.y + TITLE_GAP_PX * s;
    Rect::new(
        corner.x,
        bottom,
        corner.x + chars as f32 * CHAR_WIDTH * TITLE_PX * s,
        bottom + LINE_HEIGHT * TITLE_PX * s,
    )
}

/// What a lane's line is made from: everything [`line_look`] reads. While it stays the same, so does the line,
/// which is then neither formatted nor touched again; a running lane changes every tick, its labels seldom.
#[derive(Component, Debug, Clone, PartialEq)]
pub struct LabelInputs {
    name: String,
    method: ContactMethod,
    rods_alone: bool,
    fault: Option<String>,
    bounds: (DVec2, DVec2),
    offset: DVec2,
    px: f32,
    scale: f32,
    context: TitleContext,
}

/// What a lane's labels depend on beyond the lane and the camera: whether it is edited, its title's room and
/// colour, and whether the title is left out for another's or for another lane's wall ([`crowded_titles`]).
#[derive(Debug, Clone, PartialEq)]
struct TitleContext {
    /// [`edit_suffix`].
    edited: Option<String>,
    room: Option<f64>,
    title: Color,
    crowded: bool,
}

impl LabelInputs {
    fn of(lane: &Lane, px: f32, scale: f32, context: &TitleContext) -> Self {
        LabelInputs {
            name: lane.world.name.clone(),
            method: lane.world.settings.method,
            rods_alone: rods_alone(lane),
            fault: lane.world.fault.clone(),
            bounds: lane.bounds,
            offset: lane.offset,
            px,
            scale,
            context: context.clone(),
        }
    }

    /// Whether these are the inputs [`LabelInputs::of`] would make, compared in place (no copy of the strings).
    fn are(&self, lane: &Lane, px: f32, scale: f32, context: &TitleContext) -> bool {
        self.name == lane.world.name
            && self.method == lane.world.settings.method
            && self.rods_alone == rods_alone(lane)
            && self.fault == lane.world.fault
            && self.bounds == lane.bounds
            && self.offset == lane.offset
            && self.px == px
            && self.scale == scale
            && self.context == *context
    }
}

/// Height of a line of text as Bevy lays it out, as a multiple of its font size (`LineHeight`'s default).
const LINE_HEIGHT: f32 = 1.2;

/// The rectangle a lane's title may take (render units) at `px` world units per pixel and the labels' `scale`:
/// from its place above the lane's top-left corner (as [`line_look`] puts it), one line tall, and as wide as the
/// whole title with ", edited" (an edit that names its values, ", now k = 1e6 N/m", is longer: the titles as
/// drawn, [`shown_title_box`], are what the layout reads once a frame has laid them out).
pub fn title_box(lane: &Lane, px: f32, scale: f32) -> Rect {
    let chars = lane.world.name.chars().count()
        + " [".len()
        + method_tag(lane).chars().count()
        + ", edited]".len();
    drawn_title_box(lane, chars, px, scale)
}

/// The rectangle a lane's title takes as [`label_lanes`] last drew it (`shown`, [`ShownTitles`]), or
/// [`title_box`] for a lane not drawn yet. The room kept for ", edited" beside a title that is not edited left the
/// line between stacked lanes only a short piece beyond it, which was dropped as a dash: no line at all beside the
/// wall throw's IPC title at the fitted view.
pub fn shown_title_box(lane: &Lane, shown: &[(usize, usize)], px: f32, scale: f32) -> Rect {
    match shown.iter().find(|&&(index, _)| index == lane.index) {
        Some(&(_, chars)) => drawn_title_box(lane, chars, px, scale),
        None => title_box(lane, px, scale),
    }
}

/// Each lane's title as [`label_lanes`] last laid it out: `(lane index, characters drawn)`.
#[derive(Resource, Debug, Clone, Default, PartialEq)]
pub struct ShownTitles(pub Vec<(usize, usize)>);

/// Spawns the two lines of a new lane, despawns those of a lane that is gone, and keeps each line's text, colour
/// and place; the text keeps its size on screen (its scale is the camera's units per pixel). A line is rebuilt
/// only when its [`LabelInputs`] change (a zoom, an edit, a fault), not each frame of a running lane.
///
/// A new lane's lines are drawn in the frame the lane first is: an export shows a rebuilt scene (a restart, a
/// throw) from its first frame, which may be the only frame of that tick.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn label_lanes(
    mut commands: Commands,
    lanes: Query<(Entity, &Lane)>,
    new_lanes: Query<(Entity, &Lane), Added<Lane>>,
    camera: Query<
        (&Projection, Option<&Camera>, Option<&Transform>),
        (With<MainCamera>, Without<LaneLabel>),
    >,
    scale: Res<LabelScale>,
    active: Option<Res<ActiveScene>>,
    replay: Option<Res<Replay>>,
    mut hidden: ResMut<HiddenTitles>,
    shown: Option<ResMut<ShownTitles>>,
    mut labels: Query<(
        Entity,
        &LaneLabel,
        &mut LabelInputs,
        &mut Text2d,
        &mut TextColor,
        &mut Transform,
        &mut Visibility,
    )>,
) {
    let (px, canvas) = camera_view(camera.single().ok());
    // The canvas's right edge [m].
    let view_right = canvas.map(|canvas| f64::from(canvas.max.x / UNITS_PER_METRE));
    let title_m = f64::from(TITLE_PX * scale.0 * px / UNITS_PER_METRE);
    let room = |lane: &Lane| {
        let beside = title_room(lane, lanes.iter().map(|(_, other)| other), title_m);
        room_in_view(beside, view_right, lane)
    };
    let scene = named_scene(replay.as_deref(), active.as_deref());
    let title = |lane: &Lane| lane_color(lane, lanes.iter().map(|(_, other)| other));
    // Each lane's context, in the lanes' order, with the titles that would cover an earlier one or another lane's
    // wall left out.
    let mut contexts: Vec<(Entity, usize, TitleContext, Rect, usize)> = lanes
        .iter()
        .map(|(entity, lane)| {
            // A room that does not cut the title is none: the view's edge moves with every pan, and a context
            // that changed with it laid every title out again each frame.
            let edited = edit_suffix(lane, scene);
            let whole = title_chars(lane, px, scale.0, None, edited.as_deref());
            let room = room(lane).filter(|&room| title_fits(room, px, scale.0) < whole);
            let chars = title_chars(lane, px, scale.0, room, edited.as_deref());
            let context = TitleContext {
                edited,
                room,
                title: title(lane),
                crowded: false,
            };
            (
                entity,
                lane.index,
                context,
                drawn_title_box(lane, chars, px, scale.0),
                chars,
            )
        })
        .collect();
    contexts.sort_by_key(|&(entity, index, ..)| (index, entity));
    if let Some(mut shown) = shown {
        shown.set_if_neq(ShownTitles(contexts.iter().map(|c| (c.1, c.4)).collect()));
    }
    let boxes: Vec<Rect> = contexts.iter().map(|c| c.3).collect();
    let crowded = crowded_titles(&boxes);
    for (context, crowded) in contexts.iter_mut().zip(crowded) {
        context.2.crowded = crowded;
    }
    let now_hidden = HiddenTitles(
        contexts
            .iter()
            .filter(|c| c.2.crowded)
            .map(|c| c.1)
            .collect(),
    );
    hidden.set_if_neq(now_hidden);
    let contexts: std::collections::HashMap<Entity, TitleContext> =
        contexts.into_iter().map(|c| (c.0, c.2)).collect();
    // Every lane has its context: the lanes queried are the same.
    let context_of = |entity: Entity| contexts.get(&entity);
    for (lane_entity, lane) in &new_lanes {
        let Some(context) = context_of(lane_entity) else {
            continue;
        };
        for (line, anchor, font_px) in [
            (LabelLine::Title, Anchor::BOTTOM_LEFT, TITLE_PX),
            (LabelLine::Fault, Anchor::TOP_LEFT, FAULT_PX),
        ] {
            let (text, rgb, place, visibility) = match line_look(lane, line, px, scale.0, context) {
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
                LabelInputs::of(lane, px, scale.0, context),
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
    for (entity, label, mut inputs, mut text, mut color, mut transform, mut visibility) in
        &mut labels
    {
        let Ok((_, lane)) = lanes.get(label.lane) else {
            commands.entity(entity).despawn();
            continue;
        };
        let Some(context) = context_of(label.lane) else {
            continue;
        };
        if inputs.are(lane, px, scale.0, context) {
            continue;
        }
        *inputs = LabelInputs::of(lane, px, scale.0, context);
        let Some((wanted, rgb, place)) = line_look(lane, label.line, px, scale.0, context) else {
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

/// Height of a stray ball's position text [logical px].
const STRAY_PX: f32 = 12.0;
/// Stray balls labelled with their position, per lane; the rest are counted on the first label. One: the
/// labels of balls that left near each other would overlap.
const STRAY_LABELS_PER_LANE: usize = 1;
/// Width of a character of the labels' monospace font, as a fraction of its size, to keep text apart before it
/// is laid out.
const CHAR_WIDTH: f32 = 0.6;

/// Least distance between a stray ball's label and its band's or the canvas's edge [logical px].
const STRAY_MARGIN_PX: f32 = 2.0;

/// Opacity of the backdrop behind a stray ball's label.
const STRAY_BACKDROP_ALPHA: f32 = 0.8;

/// The backdrop behind a stray ball's label: the canvas's colour, mostly opaque. The label runs along the band's
/// edge and may cross a wall or a ball there; the backdrop keeps it legible and them faintly seen. (Gizmos, such as
/// the line between lanes and the markers' arrows, are drawn over it.)
fn stray_backdrop() -> Color {
    let [r, g, b] = super::BACKGROUND_RGB;
    Color::srgb_u8(r, g, b).with_alpha(STRAY_BACKDROP_ALPHA)
}

/// A text entity that shows the position of a ball beyond its lane's band (see `lane_bands`), beside its marker.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrayLabel;

/// The text a stray ball is labelled with: its lane-local position, and how many more of its lane's balls are
/// beyond the band unlabelled, past the same edge (`this_side`) and past the others (`elsewhere`): a count of
/// every edge beside the right edge's arrows read as that many balls gone through the wall.
fn stray_text(position: DVec2, this_side: usize, elsewhere: usize) -> String {
    // A coordinate that rounds to zero reads "0.000", not "-0.000".
    let shown = |v: f64| match format!("{v:.3}") {
        zero if zero == "-0.000" => "0.000".to_string(),
        text => text,
    };
    let mut text = format!("({}, {}) m", shown(position.x), shown(position.y));
    if this_side > 0 {
        text.push_str(&format!(", +{this_side} more this side"));
    }
    if elsewhere > 0 {
        text.push_str(&format!(", +{elsewhere} past other edges"));
    }
    text
}

/// The edge of its band a stray ball is beyond, as its label is placed ([`stray_place`]): left or right where
/// its direction is more across than up or down, else top or bottom.
fn edge_of(direction: Vec2) -> (bool, bool) {
    let across = direction.x.abs() > direction.y.abs();
    let positive = if across {
        direction.x > 0.0
    } else {
        direction.y > 0.0
    };
    (across, positive)
}

/// Where a stray ball's label goes, beside its marker and inside its lane's band: `edge` and `direction` as in
/// [`StrayBall`](super::lane_bands::StrayBall), at `px` world units per pixel and the labels' `scale`. A label
/// that would cover the lane's `title` (its box, world units) goes just inside the lane's top edge instead,
/// below the title; `text_chars` is the label's length.
fn stray_place(
    edge: Vec2,
    direction: Vec2,
    title: Option<Rect>,
    text_chars: usize,
    px: f32,
    scale: f32,
) -> (Vec2, Anchor) {
    let s = scale * px;
    if let Some(title) = title
        && direction.y > 0.0
        && direction.y >= direction.x.abs()
    {
        let at = edge - direction * 10.0 * s + Vec2::new(10.0 * s, 0.0);
        let half_height = 0.5 * STRAY_PX * s;
        let width = text_chars as f32 * CHAR_WIDTH * STRAY_PX * s;
        let label = Rect::new(at.x, at.y - half_height, at.x + width, at.y + half_height);
        if !label.intersect(title).is_empty() {
            // The title sits TITLE_GAP_PX above the lane's top edge.
            let lane_top = title.min.y - TITLE_GAP_PX * s;
            return (Vec2::new(at.x, lane_top - 10.0 * s), Anchor::CENTER_LEFT);
        }
    }
    if direction.x.abs() > direction.y.abs() {
        // Beyond the left or right edge: above the marker, on the band's side of the edge.
        let anchor = if direction.x > 0.0 {
            Anchor::BOTTOM_RIGHT
        } else {
            Anchor::BOTTOM_LEFT
        };
        (edge - direction * 4.0 * s + Vec2::new(0.0, 6.0 * s), anchor)
    } else {
        // Beyond the top or bottom edge: right of the marker, just inside the edge.
        (
            edge - direction * 10.0 * s + Vec2::new(10.0 * s, 0.0),
            Anchor::CENTER_LEFT,
        )
    }
}

/// `at` (a label's place under `anchor`, its size `size`) moved the least that puts the label inside `room`: a
/// label beside a marker near a band's corner crossed into the next lane, or past the canvas's edge, where it was
/// cut. A label wider (or taller) than the room keeps its left (or top) edge inside it.
fn kept_inside(at: Vec2, anchor: Anchor, size: Vec2, room: Rect) -> Vec2 {
    let min = label_rect(at, anchor, size).min;
    let shift_x = if size.x > room.width() {
        room.min.x - min.x
    } else {
        (room.min.x - min.x).max(0.0) + (room.max.x - (min.x + size.x)).min(0.0)
    };
    let shift_y = if size.y > room.height() {
        room.max.y - (min.y + size.y)
    } else {
        (room.min.y - min.y).max(0.0) + (room.max.y - (min.y + size.y)).min(0.0)
    };
    let shift = Vec2::new(shift_x, shift_y);
    if shift.is_finite() { at + shift } else { at }
}

/// The main camera's world units per pixel (1 without a camera) and the canvas it shows (render units), where it
/// draws into a known viewport.
fn camera_view(
    camera: Option<(&Projection, Option<&Camera>, Option<&Transform>)>,
) -> (f32, Option<Rect>) {
    let Some((projection, view, at)) = camera else {
        return (1.0, None);
    };
    let px = camera_scale(projection);
    let canvas = view
        .and_then(Camera::logical_viewport_size)
        .zip(at)
        .map(|(size, at)| Rect::from_center_size(at.translation.truncate(), size * px));
    (px, canvas)
}

/// The rectangle a stray ball's arrow takes as `draw_gizmos` draws it (render units), with a few pixels to spare.
fn stray_arrow_box(edge: Vec2, direction: Vec2, px: f32) -> Rect {
    let (tail, tip) = stray_arrow(edge, direction, px);
    Rect::from_corners(tip, tail).inflate(4.0 * px)
}

/// The rectangle a label of `size` takes at `at` under `anchor`.
fn label_rect(at: Vec2, anchor: Anchor, size: Vec2) -> Rect {
    let min = at - (anchor.as_vec() + Vec2::splat(0.5)) * size;
    Rect::from_corners(min, min + size)
}

/// Where a stray ball's label goes once its `room` (its band within the canvas) is known: placed by
/// [`stray_place`] at `at` under `anchor`, then moved inside the room ([`kept_inside`]). A label pushed onto its
/// own arrow (a marker in a corner of the canvas) goes to the other side of the marker instead, or, where that
/// lies on the arrow too (a slanting one), just clear of the arrow. With no room (the band out of sight) the label
/// stays where it was placed.
fn stray_label_place(
    edge: Vec2,
    direction: Vec2,
    (at, anchor): (Vec2, Anchor),
    size: Vec2,
    room: Option<Rect>,
    px: f32,
) -> (Vec2, Anchor) {
    let Some(room) = room.filter(|room| !room.is_empty()) else {
        return (at, anchor);
    };
    let kept = kept_inside(at, anchor, size, room);
    let arrow = stray_arrow_box(edge, direction, px);
    if label_rect(kept, anchor, size).intersect(arrow).is_empty() {
        return (kept, anchor);
    }
    // Mirrored across the marker's line: below it beside a left or right edge, left of it beside a top or bottom one.
    let flip = if direction.x.abs() > direction.y.abs() {
        Vec2::new(1.0, -1.0)
    } else {
        Vec2::new(-1.0, 1.0)
    };
    let other = Anchor(anchor.as_vec() * flip);
    let mirrored = kept_inside(edge + (at - edge) * flip, other, size, room);
    if label_rect(mirrored, other, size)
        .intersect(arrow)
        .is_empty()
    {
        return (mirrored, other);
    }
    // Both lie on it (a slanting arrow in a corner of the canvas): the label moved just clear of the arrow's box,
    // the shortest way that stays in the room.
    let rect = label_rect(kept, anchor, size);
    let moves = [
        Vec2::new(arrow.min.x - rect.max.x, 0.0),
        Vec2::new(arrow.max.x - rect.min.x, 0.0),
        Vec2::new(0.0, arrow.min.y - rect.max.y),
        Vec2::new(0.0, arrow.max.y - rect.min.y),
    ];
    moves
        .into_iter()
        .map(|shift| kept_inside(kept + shift, anchor, size, room))
        .filter(|&moved| label_rect(moved, anchor, size).intersect(arrow).is_empty())
        .min_by(|a, b| a.distance(kept).total_cmp(&b.distance(kept)))
        .map_or((kept, anchor), |moved| (moved, anchor))
}

/// Labels from a label placed at `at` under `anchor` (its size `size`) may be stacked, at a whole label's
/// height at a time, up to [`STACKED_LABELS`] above or below, the nearer first.
const STACKED_LABELS: i32 = 4;

/// `at` moved off the labels already `placed` (their rectangles): by whole heights of the label up or down, the
/// least that clears them and `keep_off` (the markers' arrows, the lane's title) and stays in `room` (where there
/// is one). Unmoved when it lies on no placed label, or when no such place is within [`STACKED_LABELS`] heights: a
/// label then covers another, as before, rather than leave its marker far behind.
fn clear_of_placed(
    at: Vec2,
    anchor: Anchor,
    size: Vec2,
    room: Option<Rect>,
    placed: &[Rect],
    keep_off: &[Rect],
) -> Vec2 {
    let off = |at: Vec2, rects: &[Rect]| {
        let rect = label_rect(at, anchor, size);
        rects.iter().all(|p| p.intersect(rect).is_empty())
    };
    if off(at, placed) {
        return at;
    }
    let inside = |at: Vec2| {
        let rect = label_rect(at, anchor, size);
        room.is_none_or(|room| room.is_empty() || rect.union(room) == room)
    };
    (1..=STACKED_LABELS)
        .flat_map(|k| [-k, k])
        .map(|k| at + Vec2::new(0.0, k as f32 * size.y))
        .find(|&moved| off(moved, placed) && off(moved, keep_off) && inside(moved))
        .unwrap_or(at)
}

/// Labels the balls beyond their lanes' bands with their positions (at most [`STRAY_LABELS_PER_LANE`] a lane),
/// reusing one text entity per label shown and hiding the rest.
#[allow(clippy::type_complexity, clippy::too_many_arguments)] // a Bevy system: each parameter is one query or resource
fn label_strays(
    mut commands: Commands,
    strays: Option<Res<StrayBalls>>,
    lanes: Query<&Lane>,
    camera: Query<
        (&Projection, Option<&Camera>, Option<&Transform>),
        (With<MainCamera>, Without<StrayLabel>),
    >,
    scale: Res<LabelScale>,
    hidden: Option<Res<HiddenTitles>>,
    shown_titles: Option<Res<ShownTitles>>,
    bands: Option<Res<LaneBands>>,
    mut labels: Query<
        (
            &mut Text2d,
            &mut TextColor,
            &mut Transform,
            &mut Anchor,
            &mut Visibility,
        ),
        With<StrayLabel>,
    >,
    mut wanted: Local<Vec<(String, Color, Transform, Anchor)>>,
) {
    let (px, view) = camera_view(camera.single().ok());
    wanted.clear();
    let mut placed: Vec<Rect> = Vec::new();
    let mut arrows: Vec<Rect> = Vec::new();
    if let Some(strays) = strays {
        let mut seen: Vec<(Entity, usize)> = Vec::new();
        for (k, stray) in strays.0.iter().enumerate() {
            let shown = match seen.iter_mut().find(|(lane, _)| *lane == stray.lane) {
                Some((_, shown)) => shown,
                None => {
                    seen.push((stray.lane, 0));
                    &mut seen.last_mut().expect("just pushed").1
                }
            };
            if *shown == STRAY_LABELS_PER_LANE {
                continue;
            }
            // The lane's others, counted on its first label: past this label's edge or past another.
            let (this_side, elsewhere) = if *shown == 0 {
                strays.0[k + 1..]
                    .iter()
                    .filter(|s| s.lane == stray.lane)
                    .skip(STRAY_LABELS_PER_LANE - 1)
                    .fold((0, 0), |(same, other), s| {
                        if edge_of(s.direction) == edge_of(stray.direction) {
                            (same + 1, other)
                        } else {
                            (same, other + 1)
                        }
                    })
            } else {
                (0, 0)
            };
            *shown += 1;
            let text = stray_text(stray.position, this_side, elsewhere);
            // The title as last drawn: the rectangle the stray label keeps clear of, the same the line between
            // stacked lanes keeps clear of; none where the title is left out.
            let title = lanes
                .get(stray.lane)
                .ok()
                .filter(|lane| !hidden.as_ref().is_some_and(|h| h.0.contains(&lane.index)))
                .map(|lane| {
                    let drawn = shown_titles.as_ref().map_or(&[][..], |s| s.0.as_slice());
                    shown_title_box(lane, drawn, px, scale.0)
                });
            // Inside its lane's band and the canvas, a couple of pixels clear of their edges; none for a marker out
            // of sight, whose label stayed beside it (a label pulled into the canvas stood there with no arrow).
            let band = bands.as_ref().map_or(EVERYWHERE, |b| b.of(stray.lane));
            let marker_seen = view.is_none_or(|view| view.inflate(px).contains(stray.edge));
            let room = marker_seen.then(|| {
                view.map_or(band, |view| band.intersect(view))
                    .inflate(-STRAY_MARGIN_PX * px)
            });
            let s = scale.0 * px;
            // Cut ("...") to the room's width: wider, it ran out of its band over the next lane's label (the
            // gauntlet's lanes side by side at 1 024 × 700).
            let text = match room.filter(|room| !room.is_empty()) {
                Some(room) => elided(
                    text,
                    (room.width() / (CHAR_WIDTH * STRAY_PX * s)).floor() as usize,
                ),
                None => text,
            };
            let (at, anchor) = stray_place(
                stray.edge,
                stray.direction,
                title,
                text.chars().count(),
                px,
                scale.0,
            );
            // One line as Bevy lays it out (and as its backdrop covers it): `LINE_HEIGHT` times the font size.
            let size = Vec2::new(
                text.chars().count() as f32 * CHAR_WIDTH * STRAY_PX * s,
                LINE_HEIGHT * STRAY_PX * s,
            );
            let (at, anchor) =
                stray_label_place(stray.edge, stray.direction, (at, anchor), size, room, px);
            // Two markers close together (balls leaving side by side) put their labels on each other. A label
            // moved off another keeps off the arrows and the title too.
            arrows.push(stray_arrow_box(stray.edge, stray.direction, px));
            let keep_off: Vec<Rect> = arrows.iter().copied().chain(title).collect();
            let at = clear_of_placed(at, anchor, size, room, &placed, &keep_off);
            placed.push(label_rect(at, anchor, size));
            let place =
                Transform::from_translation(at.extend(LABEL_Z)).with_scale(Vec3::new(px, px, 1.0));
            wanted.push((text, stray.color, place, anchor));
        }
    }
    let mut wanted_iter = wanted.drain(..);
    for (mut text, mut color, mut transform, mut anchor, mut visibility) in &mut labels {
        let Some((want_text, want_color, want_place, want_anchor)) = wanted_iter.next() else {
            visibility.set_if_neq(Visibility::Hidden);
            continue;
        };
        visibility.set_if_neq(Visibility::Inherited);
        if text.0 != want_text {
            text.0 = want_text;
        }
        color.set_if_neq(TextColor(want_color));
        transform.set_if_neq(want_place);
        anchor.set_if_neq(want_anchor);
    }
    for (text, color, place, anchor) in wanted_iter {
        commands.spawn((
            StrayLabel,
            Text2d::new(text),
            TextFont {
                font_size: FontSize::Px(STRAY_PX * scale.0),
                ..default()
            },
            TextColor(color),
            bevy::text::TextBackgroundColor(stray_backdrop()),
            place,
            anchor,
            Visibility::Inherited,
        ));
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
        Lane::new(
            index,
            world,
            offset,
            (DVec2::new(-1.0, 0.0), DVec2::new(2.0, 1.5)),
        )
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

    /// `label_lanes` with labels of `label_scale` under a main camera of `camera_scale` world units per pixel.
    fn labelling_app(label_scale: LabelScale, camera_scale: f32) -> App {
        let mut app = App::new();
        app.insert_resource(label_scale)
            .init_resource::<HiddenTitles>()
            .add_systems(Update, label_lanes);
        app.world_mut().spawn((
            MainCamera,
            Projection::Orthographic(OrthographicProjection {
                scale: camera_scale,
                ..OrthographicProjection::default_2d()
            }),
        ));
        app
    }

    #[test]
    fn each_lane_is_titled_at_its_corner_its_fault_shown_while_it_lasts_and_its_labels_go_with_it()
    {
        let mut app = labelling_app(LabelScale::default(), 0.5);
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
        // The box the band's edge line keeps clear of starts where the title is drawn (anchored at its bottom
        // left), and holds it and its ", edited".
        let lane_ref = app.world().get::<Lane>(lane).expect("the lane");
        let held = title_box(lane_ref, 0.5, 1.0);
        assert_eq!(held.min, at.translation.truncate());
        // To a few ulps of the corner's y, 500 render units.
        assert!(
            (held.height() - 1.2 * TITLE_PX * 0.5).abs() < 1e-3,
            "{held:?}"
        );
        let chars = "ipc dhat=1mm [ipc, edited]".len() as f32;
        assert!((held.width() - chars * CHAR_WIDTH * TITLE_PX * 0.5).abs() < 1e-3);

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

    /// Lanes side by side in a narrow view: each title is cut short ("...") before the next lane's corner, and a
    /// title with room, or above a lane with none beside it, is whole.
    /// A title that would run past the canvas's right edge ends in "..." inside it, as one that would run into the
    /// lane beside it does; the nearer of the two limits holds.
    #[test]
    fn titles_stop_short_of_the_canvas_s_right_edge() {
        let lane = lane_from("assets/scenes/wall_throw.ron", 0, DVec2::ZERO);
        let left = lane.bounds.0.x;
        let near = |room: Option<f64>, expected: f64| {
            room.is_some_and(|room| (room - expected).abs() < 1e-12)
        };
        assert_eq!(room_in_view(None, None, &lane), None);
        assert_eq!(room_in_view(Some(0.3), None, &lane), Some(0.3));
        assert!(near(room_in_view(None, Some(left + 0.2), &lane), 0.2));
        assert_eq!(room_in_view(Some(0.1), Some(left + 0.2), &lane), Some(0.1));
        assert!(near(room_in_view(Some(0.3), Some(left + 0.2), &lane), 0.2));
        assert_eq!(room_in_view(None, Some(left - 1.0), &lane), Some(0.0));
        // 1 mm per pixel: 0.2 m is 200 px, room for 19 characters of 9.6 px after the gap.
        let room = room_in_view(None, Some(left + 0.2), &lane);
        let whole = title_text(&lane, 1.0, 1.0, None, None);
        let cut = title_text(&lane, 1.0, 1.0, room, None);
        assert!(whole.chars().count() > 19, "{whole}");
        assert_eq!(
            cut.chars().count(),
            title_fits(room.unwrap_or(0.0), 1.0, 1.0),
            "{cut}"
        );
        assert!(
            cut.ends_with("...") && whole.starts_with(cut.trim_end_matches('.')),
            "{cut}"
        );
        assert_eq!(
            title_text(
                &lane,
                1.0,
                1.0,
                room_in_view(None, Some(left + 5.0), &lane),
                None
            ),
            whole
        );
    }

    #[test]
    fn titles_of_lanes_side_by_side_stop_short_of_the_next_lane() {
        // 20 mm per pixel: the pit's 1.2 m wide lanes are 60 px apart, room for 5 characters of 9.6 px.
        let mut app = labelling_app(LabelScale::default(), 20.0);
        let left = lane_from("assets/scenes/ball_pit.ron", 0, DVec2::ZERO);
        let width = left.bounds.1.x - left.bounds.0.x;
        let right = lane_from("assets/scenes/ball_pit.ron", 1, DVec2::new(width, 0.0));
        let (left, right) = (
            app.world_mut().spawn(left).id(),
            app.world_mut().spawn(right).id(),
        );
        app.update();
        let title = |app: &mut App, lane| labels_of(app, lane)[0].1.clone();
        let cut = title(&mut app, left);
        assert!(cut.ends_with("..."), "{cut}");
        let fits = ((width as f32 * UNITS_PER_METRE / 20.0 - TITLE_GAP_PX)
            / (CHAR_WIDTH * TITLE_PX))
            .floor() as usize;
        assert_eq!(cut.chars().count(), fits, "{cut}");
        assert_eq!(title(&mut app, right), "ipc dhat=1mm [ipc]");
        // Zoomed in, the left title fits whole.
        app.world_mut()
            .query::<&mut Projection>()
            .iter_mut(app.world_mut())
            .for_each(|mut p| {
                if let Projection::Orthographic(o) = p.as_mut() {
                    o.scale = 1.0;
                }
            });
        app.update();
        assert_eq!(title(&mut app, left), "penalty k=1e4 [penalty]");
    }

    /// Lanes one above the other, laid out as the window does, zoomed out until the lower lane's title would lie
    /// over the upper one's: only the first lane's shows; zoomed back in, both do.
    #[test]
    fn titles_that_would_pile_up_zoomed_out_leave_the_first_lane_s() {
        let mut app = labelling_app(LabelScale::default(), 1.0);
        // The wall throw's lanes as the window lays them out, lane 1 spawned first: the order that counts is the
        // lanes', not the entities'.
        let worlds = Scene::load(Path::new("assets/scenes/wall_throw.ron"))
            .expect("a built-in scene loads")
            .build();
        let bounds: Vec<_> = worlds.iter().map(crate::sim::lane_bounds).collect();
        let offsets = crate::sim::lane_offsets(&bounds);
        let mut lanes: Vec<Lane> = worlds
            .into_iter()
            .enumerate()
            .map(|(k, world)| Lane::new(k, world, offsets[k], bounds[k]))
            .collect();
        let lower = app.world_mut().spawn(lanes.remove(1)).id();
        let upper = app.world_mut().spawn(lanes.remove(0)).id();
        // The zoom (render units per pixel) at which the lower lane's title, a line of 19.2 px 4 px above its
        // corner, reaches the upper lane's title, 4 px above the upper corner.
        let meets_title = {
            let lane = |e| app.world().get::<Lane>(e).expect("a lane");
            let corner = |l: &Lane| (l.bounds.1.y + l.offset.y) as f32 * UNITS_PER_METRE;
            (corner(lane(upper)) - corner(lane(lower))) / (LINE_HEIGHT * TITLE_PX)
        };
        let shown = |app: &mut App, lane| {
            let (line, text, visibility, _) = labels_of(app, lane)[0].clone();
            assert_eq!(line, LabelLine::Title);
            (visibility == Visibility::Inherited).then_some(text)
        };
        let zoom = |app: &mut App, scale: f32| {
            app.world_mut()
                .query::<&mut Projection>()
                .iter_mut(app.world_mut())
                .for_each(|mut p| {
                    if let Projection::Orthographic(o) = p.as_mut() {
                        o.scale = scale;
                    }
                });
            app.update();
        };
        app.update();
        assert_eq!(
            shown(&mut app, upper).as_deref(),
            Some("penalty k=1e4 [penalty]")
        );
        assert_eq!(
            shown(&mut app, lower).as_deref(),
            Some("ipc dhat=1mm [ipc]")
        );
        // Zoomed out until it would lie over the upper lane's title, and further: left out.
        for zoomed_out in [1.05 * meets_title, 10.0 * meets_title] {
            zoom(&mut app, zoomed_out);
            assert_eq!(
                shown(&mut app, upper).as_deref(),
                Some("penalty k=1e4 [penalty]")
            );
            assert_eq!(shown(&mut app, lower), None, "at {zoomed_out}");
            // What the line between the lanes and the stray labels keep clear of.
            assert_eq!(app.world().resource::<HiddenTitles>().0, [1]);
        }
        // Just short of it: both again.
        zoom(&mut app, 0.95 * meets_title);
        assert_eq!(
            shown(&mut app, lower).as_deref(),
            Some("ipc dhat=1mm [ipc]")
        );
        assert!(app.world().resource::<HiddenTitles>().0.is_empty());
        // The titles' lengths the crowding is judged by are those drawn, whole, cut or edited.
        let lane = lane_from("assets/scenes/wall_throw.ron", 0, DVec2::ZERO);
        for room in [
            None,
            Some(0.0),
            Some(0.05),
            Some(0.2),
            Some(1.0),
            Some(100.0),
        ] {
            for edited in [None, Some(", edited"), Some(", now k = 1e6 N/m")] {
                for px in [0.5, 2.0, 20.0] {
                    assert_eq!(
                        title_chars(&lane, px, 1.0, room, edited),
                        title_text(&lane, px, 1.0, room, edited).chars().count(),
                        "{room:?} {edited:?} {px}"
                    );
                }
            }
        }
        assert_eq!(
            crowded_titles(&[
                Rect::new(0.0, 0.0, 10.0, 2.0),
                Rect::new(5.0, 1.0, 15.0, 3.0),
                Rect::new(12.0, 0.0, 20.0, 0.5),
                Rect::new(11.0, 2.5, 13.0, 4.0),
            ],),
            [false, true, false, false],
            "a title left out does not crowd the ones after it"
        );
    }

    /// A title is cut by the lane to its right whose extent, with that lane's title, its line reaches: a lane
    /// whose bottom is within a title's height above the row cuts it, one whose title ends below the row does not.
    #[test]
    fn a_title_is_cut_by_the_lane_beside_it_that_its_line_reaches() {
        let title_m = 0.2;
        let lane = lane_from("assets/scenes/wall_throw.ron", 0, DVec2::ZERO);
        // lane_from's bounds run from (-1, 0) to (2, 1.5): the title's row is at 1.5 m.
        let beside = |dy: f64| lane_from("assets/scenes/wall_throw.ron", 1, DVec2::new(4.0, dy));
        let room = |other: Lane| title_room(&lane, [&other], title_m);
        // Its bottom 0.1 m above the row, within the title's 0.2 m.
        assert_eq!(room(beside(1.6)), Some(4.0));
        // Its bottom above the title's line.
        assert_eq!(room(beside(1.75)), None);
        // Level with it, and with only its own title reaching the row.
        assert_eq!(room(beside(0.0)), Some(4.0));
        assert_eq!(room(beside(-0.15)), Some(4.0));
        // Its title ends 0.1 m below the row.
        assert_eq!(room(beside(-0.3)), None);
        // A lane to the left never cuts it.
        let left = lane_from("assets/scenes/wall_throw.ron", 1, DVec2::new(-4.0, 0.0));
        assert_eq!(title_room(&lane, [&left], title_m), None);
    }

    /// A lane whose settings an edit has changed says so in its title, whose name may quote the old value, and
    /// what they are now (with the panels hidden the titles are all that names the lanes); a method switched
    /// alone shows in the method it names.
    /// A labelling app whose active scene is `path`, with its first lane, after one update.
    fn scene_lane_app(path: &str) -> (App, Entity) {
        let mut app = labelling_app(LabelScale::default(), 1.0);
        app.insert_resource(ActiveScene::load(std::path::Path::new(path)).expect("loads"));
        let lane = lane_from(path, 0, DVec2::ZERO);
        let lane = app.world_mut().spawn(lane).id();
        app.update();
        (app, lane)
    }

    #[test]
    fn a_lane_edited_away_from_its_scene_says_edited_in_its_title() {
        let (mut app, lane) = scene_lane_app("assets/scenes/wall_throw.ron");
        assert_eq!(labels_of(&mut app, lane)[0].1, "penalty k=1e4 [penalty]");
        app.world_mut()
            .get_mut::<Lane>(lane)
            .expect("the lane")
            .world
            .settings
            .stiffness = 1e6;
        app.update();
        assert_eq!(
            labels_of(&mut app, lane)[0].1,
            "penalty k=1e4 [penalty, now k = 1e6 N/m]"
        );
        fn lane_settings(
            app: &mut App,
            lane: Entity,
        ) -> Mut<'_, crate::physics::world::ContactSettings> {
            app.world_mut()
                .get_mut::<Lane>(lane)
                .expect("the lane")
                .map_unchanged(|lane| &mut lane.world.settings)
        }
        lane_settings(&mut app, lane).stiffness = 2e4;
        lane_settings(&mut app, lane).h = 0.005;
        app.update();
        assert_eq!(
            labels_of(&mut app, lane)[0].1,
            "penalty k=1e4 [penalty, now k = 20000 N/m, h = 0.005 s]",
            "a second edit is drawn too"
        );
        lane_settings(&mut app, lane).stiffness = 1e4;
        lane_settings(&mut app, lane).h = 0.01;
        lane_settings(&mut app, lane).method = ContactMethod::Ipc;
        app.update();
        assert_eq!(
            labels_of(&mut app, lane)[0].1,
            "penalty k=1e4 [ipc, edited]"
        );
        lane_settings(&mut app, lane).method = ContactMethod::Penalty;
        lane_settings(&mut app, lane).stiffness = 1e6;
        app.update();
        // A throw with k = 10⁶ makes it the scene's value, but the name still quotes the file's.
        let thrown = {
            let active = app.world().resource::<ActiveScene>();
            crate::demo::thrown_scene(&active.current, 1.0, (None, Some(1e6), None), None, "throw")
                .expect("a valid throw")
        };
        app.world_mut().resource_mut::<ActiveScene>().current = thrown;
        app.update();
        assert_eq!(
            labels_of(&mut app, lane)[0].1,
            "penalty k=1e4 [penalty, now k = 1e6 N/m]"
        );
    }

    /// Every setting an edited title may name is written in the scene font's characters (printable ASCII):
    /// κ, μ, ε and "m/s²" drew as boxes.
    #[test]
    fn an_edited_title_writes_every_setting_in_the_scene_font_s_characters() {
        use crate::sim::LaneSetting;
        let settings = crate::physics::world::ContactSettings::default();
        for setting in LaneSetting::ALL {
            let text = super::super::fonts::scene_font_text(&setting.value_text(&settings));
            assert!(
                text.chars()
                    .all(|c| c.is_ascii() && !c.is_ascii_control() && c != '?'),
                "{setting:?}: {text}"
            );
        }
    }

    /// A lane of rods alone names the method its dropped balls would use, not its rods' ("[ipc]" read as if the
    /// rods ran IPC); once a ball is in it, the method alone.
    #[test]
    fn a_lane_of_rods_alone_names_the_method_of_its_balls() {
        let (mut app, lane) = scene_lane_app("assets/scenes/rod_drop.ron");
        assert_eq!(
            labels_of(&mut app, lane)[0].1,
            "rods: exact impulse law [balls: ipc]"
        );
        let ball = crate::physics::geometry::Ball {
            position: DVec2::new(0.0, 3.0),
            velocity: DVec2::ZERO,
            radius: 0.05,
            mass: 1.0,
        };
        app.world_mut()
            .get_mut::<Lane>(lane)
            .expect("the lane")
            .world
            .balls
            .push(ball);
        app.update();
        assert_eq!(
            labels_of(&mut app, lane)[0].1,
            "rods: exact impulse law [ipc]"
        );
    }

    /// A running lane changes every tick, but its labels' inputs do not: its lines are not rebuilt (their
    /// [`LabelInputs`], written with each rebuild, and their text stay untouched); a zoom or a fault rebuilds
    /// them, and they show what they showed when rebuilt each frame.
    #[test]
    fn a_lane_s_lines_are_rebuilt_only_when_what_they_show_changes() {
        let mut app = labelling_app(LabelScale::default(), 0.5);
        let lane = lane_from("assets/scenes/wall_throw.ron", 0, DVec2::ZERO);
        let lane = app.world_mut().spawn(lane).id();
        app.update();
        let before = labels_of(&mut app, lane);
        // What one more frame changed, per line (title first).
        let touched = |app: &mut App| -> Vec<(bool, bool, bool)> {
            let since = app.world().read_change_tick();
            app.update();
            let now = app.world().read_change_tick();
            let mut seen: Vec<_> = app
                .world_mut()
                .query::<(&LaneLabel, Ref<LabelInputs>, Ref<Text2d>, Ref<Transform>)>()
                .iter(app.world())
                .map(|(label, inputs, text, place)| {
                    let changed =
                        |tick: bevy::ecs::change_detection::Tick| tick.is_newer_than(since, now);
                    (
                        label.line,
                        (
                            changed(inputs.last_changed()),
                            changed(text.last_changed()),
                            changed(place.last_changed()),
                        ),
                    )
                })
                .collect();
            seen.sort_by_key(|(line, _)| *line == LabelLine::Fault);
            seen.into_iter().map(|(_, changed)| changed).collect()
        };
        let run = |app: &mut App| {
            let mut lane = app.world_mut().get_mut::<Lane>(lane).expect("the lane");
            lane.world.time += 0.01;
        };
        // Spawned: changed once. Then frames of a running lane touch nothing.
        app.update();
        for _ in 0..3 {
            run(&mut app);
            assert_eq!(touched(&mut app), vec![(false, false, false); 2]);
        }
        assert_eq!(labels_of(&mut app, lane), before);

        // A zoom moves and rebuilds both lines (the text stays: it is the same).
        app.world_mut()
            .query::<&mut Projection>()
            .iter_mut(app.world_mut())
            .for_each(|mut p| {
                if let Projection::Orthographic(o) = p.as_mut() {
                    o.scale = 2.0;
                }
            });
        // The fault line is hidden: it has no place to move to.
        assert_eq!(
            touched(&mut app),
            vec![(true, false, true), (true, false, false)]
        );
        assert_eq!(touched(&mut app), vec![(false, false, false); 2]);

        // A fault rebuilds the lines, and its line shows it.
        app.world_mut()
            .get_mut::<Lane>(lane)
            .expect("the lane")
            .world
            .fault = Some("the Newton solve did not converge".into());
        assert_eq!(
            touched(&mut app),
            vec![(true, false, false), (true, true, true)]
        );
        assert_eq!(
            labels_of(&mut app, lane)[1].1,
            "paused: the Newton solve did not converge"
        );
    }

    #[test]
    fn a_cut_title_ends_in_three_dots_when_there_is_room_for_them() {
        assert_eq!(elided("penalty k=1e4".into(), 13), "penalty k=1e4");
        assert_eq!(elided("penalty k=1e4".into(), 7), "pena...");
        assert_eq!(elided("penalty k=1e4".into(), 4), "p...");
        assert_eq!(elided("penalty k=1e4".into(), 3), "");
        assert_eq!(elided("penalty k=1e4".into(), 1), "");
        assert_eq!(elided("ipc".into(), 3), "ipc");
        assert_eq!(elided("penalty k=1e4".into(), 0), "");
    }

    #[test]
    fn a_label_scale_scales_the_text_and_its_gap_to_the_corner() {
        let mut app = labelling_app(LabelScale(0.625), 2.0);
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

    /// The wall throw's penalty lane at 2 units per pixel with one ball past its band's right edge at (2000, 700),
    /// in `band` when given, after one update of the labels.
    fn one_stray_app(band: Option<Rect>) -> App {
        use super::super::lane_bands::{StrayBall, StrayBalls};
        let mut app = labelling_app(LabelScale::default(), 2.0);
        app.add_systems(Update, label_strays.after(label_lanes));
        let lane = lane_from("assets/scenes/wall_throw.ron", 0, DVec2::ZERO);
        let lane = app.world_mut().spawn(lane).id();
        if let Some(band) = band {
            app.insert_resource(LaneBands(vec![(lane, band)]));
        }
        app.insert_resource(StrayBalls(vec![StrayBall {
            lane,
            edge: Vec2::new(2000.0, 700.0),
            direction: Vec2::X,
            position: DVec2::new(2.5, 0.7),
            color: Color::WHITE,
        }]));
        app.update();
        app
    }

    #[test]
    fn a_stray_ball_s_label_has_the_canvas_s_backdrop() {
        let mut app = one_stray_app(None);
        let mut found = app
            .world_mut()
            .query_filtered::<(&Text2d, &bevy::text::TextBackgroundColor), With<StrayLabel>>();
        let found: Vec<_> = found
            .iter(app.world())
            .map(|(text, backdrop)| (text.0.clone(), backdrop.0))
            .collect();
        assert_eq!(found, [("(2.500, 0.700) m".to_string(), stray_backdrop())]);
        let [r, g, b] = super::super::BACKGROUND_RGB;
        assert_eq!(
            stray_backdrop(),
            Color::srgba_u8(r, g, b, 204),
            "the canvas's colour, 80 % opaque"
        );
    }

    #[test]
    fn a_stray_ball_is_labelled_with_its_position_inside_its_band_and_clear_of_the_lane_title() {
        assert_eq!(stray_text(DVec2::new(0.3, 0.62), 0, 0), "(0.300, 0.620) m");
        assert_eq!(
            stray_text(DVec2::new(-4e-4, -0.0), 0, 0),
            "(0.000, 0.000) m"
        );
        assert_eq!(
            stray_text(DVec2::new(-6e-4, 2.0), 0, 0),
            "(-0.001, 2.000) m"
        );
        assert_eq!(
            stray_text(DVec2::new(-1.0, 2.5), 2, 0),
            "(-1.000, 2.500) m, +2 more this side"
        );
        assert_eq!(
            stray_text(DVec2::new(36.486, 0.45), 4, 3),
            "(36.486, 0.450) m, +4 more this side, +3 past other edges"
        );
        // At 2 units per pixel, a ball above its band's top edge at y = 100: the label is right of the marker,
        // 10 px below the edge, inside the band.
        let (at, anchor) = stray_place(Vec2::new(500.0, 100.0), Vec2::Y, None, 15, 2.0, 1.0);
        assert_eq!((at, anchor), (Vec2::new(520.0, 80.0), Anchor::CENTER_LEFT));
        // Below the band's bottom edge: 10 px above it.
        let (at, _) = stray_place(Vec2::new(500.0, -100.0), Vec2::NEG_Y, None, 15, 2.0, 1.0);
        assert_eq!(at, Vec2::new(520.0, -80.0));
        // Beyond the right edge: above the marker, ending at the edge's band side.
        let (at, anchor) = stray_place(Vec2::new(300.0, 0.0), Vec2::X, None, 15, 2.0, 1.0);
        assert_eq!((at, anchor), (Vec2::new(292.0, 12.0), Anchor::BOTTOM_RIGHT));
        // A lane title 20 px below the edge (the lane's top 4 px under it) is in the way: the label goes 10 px
        // inside the lane's top instead; a title further along the edge is not.
        let title = Rect::new(400.0, 48.0, 700.0, 80.0);
        let (at, _) = stray_place(Vec2::new(500.0, 100.0), Vec2::Y, Some(title), 15, 2.0, 1.0);
        assert_eq!(at, Vec2::new(520.0, 40.0 - 20.0));
        let far = Rect::new(2000.0, 48.0, 2300.0, 80.0);
        let (at, _) = stray_place(Vec2::new(500.0, 100.0), Vec2::Y, Some(far), 15, 2.0, 1.0);
        assert_eq!(at, Vec2::new(520.0, 80.0));
    }

    /// Three labels placed on one another (markers side by side past a lane's right edge) are stacked a label's
    /// height apart, below first, inside the room and off the arrows; one with no free place within reach stays
    /// where it was.
    #[test]
    fn labels_of_markers_side_by_side_do_not_cover_one_another() {
        let size = Vec2::new(100.0, 10.0);
        let room = Some(Rect::new(0.0, 0.0, 400.0, 200.0));
        let at = Vec2::new(300.0, 100.0);
        let mut placed = Vec::new();
        for _ in 0..3 {
            let moved = clear_of_placed(at, Anchor::BOTTOM_RIGHT, size, room, &placed, &[]);
            placed.push(label_rect(moved, Anchor::BOTTOM_RIGHT, size));
        }
        let ys: Vec<f32> = placed.iter().map(|r| r.min.y).collect();
        assert_eq!(ys, [100.0, 90.0, 110.0]);
        // An arrow just below the first label: the second goes above it instead, past the arrow's row.
        let arrow = Rect::new(280.0, 92.0, 300.0, 99.0);
        let first = [label_rect(at, Anchor::BOTTOM_RIGHT, size)];
        let moved = clear_of_placed(at, Anchor::BOTTOM_RIGHT, size, room, &first, &[arrow]);
        assert_eq!(moved, Vec2::new(300.0, 110.0));
        for (i, a) in placed.iter().enumerate() {
            for b in &placed[i + 1..] {
                assert!(a.intersect(*b).is_empty(), "{a:?} on {b:?}");
            }
        }
        // A room one label high, already taken: the label stays.
        let low = Some(Rect::new(0.0, 100.0, 400.0, 110.0));
        let taken = [label_rect(at, Anchor::BOTTOM_RIGHT, size)];
        assert_eq!(
            clear_of_placed(at, Anchor::BOTTOM_RIGHT, size, low, &taken, &[]),
            at
        );
    }

    /// A label 100 × 10 units moved into a room: not at all when inside, the least way otherwise, its left or top
    /// edge kept when it does not fit, and not at all in an unbounded room.
    #[test]
    fn a_label_is_moved_the_least_that_keeps_it_inside_its_room() {
        let room = Rect::new(0.0, 0.0, 400.0, 200.0);
        let size = Vec2::new(100.0, 10.0);
        let inside = Vec2::new(200.0, 100.0);
        assert_eq!(kept_inside(inside, Anchor::CENTER_LEFT, size, room), inside);
        // Ending above the room's top right corner (anchored at its bottom right): down and left into it.
        let at = kept_inside(Vec2::new(450.0, 195.0), Anchor::BOTTOM_RIGHT, size, room);
        assert_eq!(at, Vec2::new(400.0, 190.0));
        // Starting left of the room: right.
        let at = kept_inside(Vec2::new(-30.0, 50.0), Anchor::CENTER_LEFT, size, room);
        assert_eq!(at, Vec2::new(0.0, 50.0));
        // Wider than a room 60 units wide: its left edge at the room's.
        let narrow = Rect::new(0.0, 0.0, 60.0, 200.0);
        let at = kept_inside(Vec2::new(90.0, 50.0), Anchor::BOTTOM_RIGHT, size, narrow);
        assert_eq!(at, Vec2::new(100.0, 50.0));
        // Taller than a room 4 units high: its top at the room's.
        let low = Rect::new(0.0, 0.0, 400.0, 4.0);
        let at = kept_inside(Vec2::new(10.0, 0.0), Anchor::CENTER_LEFT, size, low);
        assert_eq!(at, Vec2::new(10.0, -1.0));
        let anywhere = kept_inside(Vec2::new(-1e9, 1e9), Anchor::CENTER_LEFT, size, EVERYWHERE);
        assert_eq!(anywhere, Vec2::new(-1e9, 1e9));
    }

    /// A marker at the top right corner of its room: the label above it, pushed down into the room, would lie on
    /// the arrow, so it goes below the marker; beside a top edge it goes left of the marker when the right is full;
    /// in a corner with a slanting arrow, just clear of the arrow. Without a room (the band out of sight) it stays
    /// where it was placed.
    #[test]
    fn a_stray_ball_s_label_keeps_off_its_own_arrow() {
        let px = 2.0;
        let room = Rect::new(0.0, 0.0, 2000.0, 700.0);
        let size = Vec2::new(200.0, 24.0);
        // Past the right edge at its top, and past the top edge at its right end (right of the marker there is no
        // room, left of it there is).
        let slanting = Vec2::new(1.0, -1.0).normalize();
        for (edge, direction) in [
            (Vec2::new(2000.0, 696.0), Vec2::X),
            (Vec2::new(1990.0, 700.0), Vec2::Y),
            // Into the bottom right corner, slanting: the label beside the marker and its mirror image both lay
            // on the arrow.
            (Vec2::new(2000.0, 0.0), slanting),
        ] {
            let placed = stray_place(edge, direction, None, 15, px, 1.0);
            let (at, anchor) = stray_label_place(edge, direction, placed, size, Some(room), px);
            let label = label_rect(at, anchor, size);
            let arrow = stray_arrow_box(edge, direction, px);
            assert!(label.intersect(arrow).is_empty(), "{label:?} on {arrow:?}");
            assert_eq!(label.union(room), room, "{label:?} outside the room");
            if direction == Vec2::X {
                assert!(label.max.y < edge.y, "below the marker: {label:?}");
            }
            let unmoved = stray_label_place(edge, direction, placed, size, None, px);
            assert_eq!(unmoved, placed);
        }
    }

    /// The one stray label of `app` (2 world units a pixel): its text and the rectangle it is laid out in.
    fn the_stray_label(app: &mut App) -> (String, Rect) {
        let mut found = app
            .world_mut()
            .query_filtered::<(&Text2d, &Transform, &Anchor), With<StrayLabel>>();
        let (text, place, anchor) = found.single(app.world()).expect("one label");
        let size = Vec2::new(
            text.0.chars().count() as f32 * CHAR_WIDTH * STRAY_PX * 2.0,
            LINE_HEIGHT * STRAY_PX * 2.0,
        );
        let min = place.translation.truncate() - (anchor.as_vec() + Vec2::splat(0.5)) * size;
        (text.0.clone(), Rect::from_corners(min, min + size))
    }

    /// A band narrower than the label: the label is cut with "..." to the band's width and stays inside it.
    #[test]
    fn a_stray_ball_s_label_wider_than_its_band_is_cut_to_it() {
        let band = Rect::new(1850.0, 0.0, 2000.0, 1400.0);
        let mut app = one_stray_app(Some(band));
        let (text, label) = the_stray_label(&mut app);
        assert!(
            text.ends_with("...") && "(2.500, 0.700) m".starts_with(text.trim_end_matches('.')),
            "{text}"
        );
        let room = band.inflate(-STRAY_MARGIN_PX * 2.0);
        assert_eq!(label.union(room), room, "{label:?} outside {room:?}");
    }

    /// A ball gone past its band's right edge just below the band's top: the label above its marker would cross
    /// into the band above; it is kept inside its own band, clear of its edge.
    #[test]
    fn a_stray_ball_s_label_stays_inside_its_band() {
        let band = Rect::new(-1000.0, 0.0, 2000.0, 710.0);
        let mut app = one_stray_app(Some(band));
        let (_, label) = the_stray_label(&mut app);
        let size = label.size();
        let room = band.inflate(-STRAY_MARGIN_PX * 2.0);
        assert_eq!(label.union(room), room, "{label:?} outside {room:?}");
        // Without the band it would have ended 12 px above the marker, past the band's top.
        let (unkept, _) = stray_place(Vec2::new(2000.0, 700.0), Vec2::X, None, 15, 2.0, 1.0);
        assert!(unkept.y + size.y > band.max.y);
    }
}
