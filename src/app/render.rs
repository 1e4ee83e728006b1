//! Drawing: walls as rectangles and balls (all in one mesh, [`ball_mesh`]), rods, velocity and
//! impulse arrows and contact markers as gizmos, and a camera that frames every lane (auto-fit until the user
//! zooms or pans; after F, also the balls that flew on beyond the lanes: [`CameraView::fit_everything`]). Each
//! lane's bodies are drawn inside its band only ([`lane_bands`]); a ball beyond it is marked on the band's edge.

use bevy::prelude::*;
use bevy::render::renderer::RenderAdapterInfo;

use super::labels::{HiddenTitles, LabelScale, LabelSystems, ShownTitles, shown_title_box};
use super::lane_bands::{
    self, LaneBands, StrayBalls, clear_of, clip_segment, edge_towards, lane_area,
};
use super::{UiState, WALL_RGB, ball_mesh, lane_color};
use crate::physics::DVec2;
use crate::physics::rod_flight::RodEnd;
use crate::sim::{Ball, BodyState, Lane, LaneMember, Rod, SimSet, UNITS_PER_METRE, Wall};

/// On-screen radius of a point ball (the seed's, radius 0), in logical pixels.
const POINT_BALL_RADIUS_PX: f32 = 6.0;
/// Smallest on-screen radius of any other ball, in logical pixels: a ball of 50 mm in a 20 m pile is drawn at its
/// true size of a few pixels, so the pile's packing shows, and a 1 mm ball still shows as a dot.
const MIN_BALL_RADIUS_PX: f32 = 2.0;
/// Smallest on-screen width of a wall, in logical pixels, so a 1 mm wall stays visible at any zoom.
const MIN_WALL_WIDTH_PX: f32 = 2.0;
/// Impulse arrows: pixels per N s, and the longest arrow [px].
pub const IMPULSE_PX_PER_NS: f32 = 150.0;
pub const IMPULSE_MAX_PX: f32 = 120.0;

/// Width of a rod on screen [logical px]: a thin rod lying on the floor would vanish into the floor's edge as a
/// hairline.
const ROD_WIDTH_PX: f32 = 6.0;

/// A rod's body on the canvas.
pub const ROD_COLOR: Color = Color::srgb(0.35, 0.6, 1.0);

/// Gizmos drawn [`ROD_WIDTH_PX`] wide: the rods themselves.
#[derive(Default, Reflect, GizmoConfigGroup)]
pub struct RodGizmos;

/// The marker of a ball beyond its lane's band: an arrow this long [px] pointing at the band's edge, its tip
/// this far inside [px].
const STRAY_ARROW_PX: f32 = 14.0;
const STRAY_ARROW_INSET_PX: f32 = 2.0;

/// The `(tail, tip)` of the marker arrow pointing at `edge` along `direction`, at `px` world units per pixel.
pub(crate) fn stray_arrow(edge: Vec2, direction: Vec2, px: f32) -> (Vec2, Vec2) {
    let tip = edge - direction * STRAY_ARROW_INSET_PX * px;
    (tip - direction * STRAY_ARROW_PX * px, tip)
}

/// The faint line where one lane's band ends and the next begins.
const BAND_EDGE_COLOR: Color = Color::srgba(0.6, 0.62, 0.7, 0.25);
/// How far that line stops short of a lane's title [logical px].
const TITLE_CLEARANCE_PX: f32 = 4.0;

/// Impulse arrows stay on screen this long after an impact [s of simulated time].
const IMPULSE_ARROW_SECONDS: f32 = 0.6;

/// The radius a ball of `radius` metres is drawn with, in world units, at `px` world units per logical pixel.
pub fn drawn_radius(radius: f64, px: f32) -> f32 {
    if radius > 0.0 {
        (radius as f32 * UNITS_PER_METRE).max(MIN_BALL_RADIUS_PX * px)
    } else {
        POINT_BALL_RADIUS_PX * px
    }
}

pub struct RenderPlugin;

impl Plugin for RenderPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<CameraView>()
            .init_resource::<RecentImpulses>()
            .init_resource::<LaneBands>()
            .init_resource::<StrayBalls>()
            .add_plugins(ball_mesh::BallMeshPlugin)
            .insert_gizmo_config(
                RodGizmos,
                GizmoConfig {
                    line: GizmoLineConfig {
                        width: ROD_WIDTH_PX,
                        ..default()
                    },
                    ..default()
                },
            )
            .add_systems(Startup, (spawn_camera, create_shapes))
            .add_systems(PreUpdate, gizmo_widths_follow_the_scale_factor)
            .add_systems(
                Update,
                (
                    attach_meshes,
                    collect_impulses,
                    (
                        // The bands first: F's fit frames the balls inside their own lanes' bands.
                        lane_bands::update_lane_bands,
                        fit_camera,
                        keep_sizes_visible,
                        ball_mesh::draw_balls,
                        draw_gizmos,
                    )
                        .chain(),
                )
                    .after(SimSet::Interpolate),
            )
            .add_systems(Update, antialiasing_for_the_adapter)
            .add_systems(PostUpdate, draw_band_edges.after(LabelSystems));
    }
}

/// Bevy draws a gizmo line `width` *physical* pixels wide, so on a screen of scale factor 2 the rods, arrows and
/// rings came out half as thick as the 1 600 × 900 window shows them: the widths (set in logical pixels, as at
/// scale 1) follow the primary window's scale factor, scaled by its change whenever it changes, so a width
/// edited in the inspector stays as edited. Without a window (an export renders offscreen at scale 1) they stay
/// as set.
fn gizmo_widths_follow_the_scale_factor(
    windows: Query<&Window, With<bevy::window::PrimaryWindow>>,
    mut store: ResMut<GizmoConfigStore>,
    mut applied: Local<Option<f32>>,
) {
    let Ok(window) = windows.single() else {
        return;
    };
    let (old, new) = (applied.unwrap_or(1.0), window.scale_factor());
    if new == old {
        return;
    }
    let rescale = |width: &mut f32| *width = *width / old * new;
    rescale(&mut store.config_mut::<DefaultGizmoConfigGroup>().0.line.width);
    rescale(&mut store.config_mut::<RodGizmos>().0.line.width);
    *applied = Some(new);
}

/// Whether the camera keeps fitting the lanes (until the user zooms or pans), and whether that fit also frames
/// the balls.
#[derive(Resource, Debug, Clone)]
pub struct CameraView {
    pub auto_fit: bool,
    /// The fit also frames every ball inside its own lane's band, up to [`FIT_BALL_REACH`] beyond the lanes
    /// ([`balls_within_reach`]): what F and the Fit button ask for. New lanes (a scene loaded, a restart) clear
    /// it, so their fit frames the lanes alone, as it always has: a fit that followed an escaping ball while the
    /// lanes run would shrink the walls the run is about, and move an export's framing.
    pub with_balls: bool,
    /// Where the balls were when F was pressed (render units): the fit keeps framing that, with the lanes, and
    /// does not follow a ball that flies on (it would zoom out steadily and snap back once the ball passed the
    /// reach). F again takes the balls where they are then.
    pub balls_seen: Option<Rect>,
}

impl Default for CameraView {
    fn default() -> Self {
        CameraView {
            auto_fit: true,
            with_balls: false,
            balls_seen: None,
        }
    }
}

impl CameraView {
    /// F and the Fit button: keep fitting the lanes and every ball that flew on along its own lane's band.
    pub fn fit_everything(&mut self) {
        self.auto_fit = true;
        self.with_balls = true;
        self.balls_seen = None;
    }

    /// A pan or a zoom: the user places the camera from now on.
    pub fn stop_fitting(&mut self) {
        self.auto_fit = false;
        self.with_balls = false;
        self.balls_seen = None;
    }
}

/// How far beyond the lanes F frames a ball, in multiples of the lanes' larger side. The wall throw's penalty
/// ball, 4 m on at the end of its run past lanes 1.1 m tall, is within it; at the limit the lanes still take
/// about a twentieth of the view, enough to see and click. A ball further on (10⁶ m after a blow-up) would
/// shrink them to nothing: it is left out, and its marker on the view's edge tells where it is.
pub const FIT_BALL_REACH: f32 = 10.0;

/// Room left around the balls that F frames beyond the lanes, as a fraction of the framed area's larger side, so
/// a ball (a point ball is drawn 6 px wide) and its velocity arrow are not cut by the canvas's edge.
const FIT_BALL_MARGIN: f32 = 0.05;

/// The main 2D camera.
#[derive(Component)]
pub struct MainCamera;

#[derive(Resource)]
struct Shapes {
    square: Handle<Mesh>,
    wall: Handle<ColorMaterial>,
}

/// A rod impact seen recently.
#[derive(Clone, Copy, Debug, PartialEq)]
struct RecentImpulse {
    /// Scene position [m].
    point: DVec2,
    /// Impulse [N s].
    impulse: DVec2,
    /// The lane and its simulated time at the impact [s].
    lane: usize,
    at: f64,
    /// Simulated time since the impact [s].
    age: f32,
}

/// Rod impacts seen recently, aged by their lane's simulated time: a paused lane keeps its arrows, and an export
/// draws the same arrows on the same tick however fast it renders.
#[derive(Resource, Default)]
struct RecentImpulses(Vec<RecentImpulse>);

fn spawn_camera(mut commands: Commands) {
    commands.spawn((Camera2d, MainCamera));
}

/// On a software renderer (Mesa's llvmpipe when there is no GPU) every fragment is shaded on the CPU, and 4×
/// MSAA multiplies the work that bounds the frame rate: under Xvfb the 2 000-ball pit took 197 ms per frame
/// with it and 91 ms without. So MSAA is turned off there, once the adapter is known; a GPU keeps it.
fn antialiasing_for_the_adapter(
    mut commands: Commands,
    adapter: Option<Res<RenderAdapterInfo>>,
    cameras: Query<Entity, With<Camera>>,
    mut done: Local<bool>,
) {
    if *done {
        return;
    }
    let Some(adapter) = adapter else {
        return;
    };
    if cameras.is_empty() {
        return;
    }
    *done = true;
    // wgpu's `DeviceType` is not re-exported by Bevy; its `Debug` name is stable.
    if format!("{:?}", adapter.device_type) == "Cpu" {
        info!(
            "software renderer ({}): antialiasing off to keep the frame rate",
            adapter.name
        );
        for camera in &cameras {
            commands.entity(camera).insert(Msaa::Off);
        }
    }
}

fn create_shapes(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<ColorMaterial>>,
) {
    commands.insert_resource(Shapes {
        square: meshes.add(Rectangle::new(1.0, 1.0)),
        wall: materials.add(Color::srgb_u8(WALL_RGB[0], WALL_RGB[1], WALL_RGB[2])),
    });
}

/// Gives new wall entities their mesh and colour (the sim layer knows nothing of drawing). The balls are drawn
/// together, by [`ball_mesh::draw_balls`].
fn attach_meshes(
    mut commands: Commands,
    shapes: Option<Res<Shapes>>,
    walls: Query<Entity, Added<Wall>>,
) {
    let Some(shapes) = shapes else { return };
    for entity in &walls {
        commands.entity(entity).insert((
            Mesh2d(shapes.square.clone()),
            MeshMaterial2d(shapes.wall.clone()),
        ));
    }
}

/// World units per logical pixel of the main camera.
pub fn camera_scale(projection: &Projection) -> f32 {
    match projection {
        Projection::Orthographic(o) => o.scale,
        _ => 1.0,
    }
}

/// Scene bounds over every lane, in render units (lane offsets applied), grown so a ball flying on is still seen.
pub fn scene_bounds(lanes: &Query<&Lane>) -> Option<(Vec2, Vec2)> {
    let mut lo = DVec2::splat(f64::INFINITY);
    let mut hi = DVec2::splat(f64::NEG_INFINITY);
    for lane in lanes {
        lo = lo.min(lane.bounds.0 + lane.offset);
        hi = hi.max(lane.bounds.1 + lane.offset);
    }
    if !(lo.is_finite() && hi.is_finite()) {
        return None;
    }
    let size = hi - lo;
    let margin = DVec2::new(0.3 * size.x, 0.08 * size.y).max(DVec2::splat(0.02));
    let lo = (lo - margin).as_vec2() * UNITS_PER_METRE;
    let hi = (hi + margin).as_vec2() * UNITS_PER_METRE;
    Some((lo, hi))
}

/// The box round the balls (centre and radius, render units) that lie within [`FIT_BALL_REACH`] times the larger
/// side of the lanes' `area` beyond it; `None` when there are none. A point ball's box has no width, and is kept.
/// The caller passes only the balls inside their own lanes' bands: a ball beyond its band is drawn as a marker
/// on that band's edge, which the lanes' fit already shows.
pub fn balls_within_reach(
    area: Rect,
    balls: impl IntoIterator<Item = (Vec2, f32)>,
) -> Option<Rect> {
    let reach = area.inflate(FIT_BALL_REACH * area.size().max_element());
    balls
        .into_iter()
        .filter(|&(centre, radius)| reach.contains(centre) && radius.is_finite())
        .map(|(centre, radius)| Rect::from_center_half_size(centre, Vec2::splat(radius.max(0.0))))
        .reduce(|all, b| all.union(b))
}

/// `lanes_fit` grown to take in `balls`, with a margin of [`FIT_BALL_MARGIN`] round them.
fn frame_lanes_and(lanes_fit: (Vec2, Vec2), balls: Rect) -> (Vec2, Vec2) {
    let lanes = Rect::from_corners(lanes_fit.0, lanes_fit.1);
    let pad = FIT_BALL_MARGIN * lanes.union(balls).size().max_element();
    let framed = lanes.union(balls.inflate(pad));
    (framed.min, framed.max)
}

/// The size of the canvas the scene is drawn in [logical px]: the area the panels leave, or the window with the
/// UI hidden; never under 50 px a side.
pub(super) fn canvas_size(ui: &UiState, window_size: Vec2) -> Vec2 {
    match ui.canvas {
        Some((c0, c1)) if ui.show_ui => c1 - c0,
        _ => window_size,
    }
    .max(Vec2::splat(50.0))
}

/// The camera scale (world units per pixel) at which a box of `size` just fits a canvas of `canvas`.
pub(super) fn fit_scale(size: Vec2, canvas: Vec2) -> f32 {
    (size.x / canvas.x).max(size.y / canvas.y).max(1e-3)
}

/// While auto-fit is on, the camera frames all lanes (and, after F, the balls that flew on: [`balls_within_reach`])
/// inside the canvas left free by the panels; the camera's viewport is that canvas (see `canvas`), so the framed
/// area's centre goes to the camera's. Without a window (the offscreen exporter) the camera's image target is the
/// canvas.
#[allow(clippy::too_many_arguments)] // a Bevy system: each parameter is one query or resource
pub(super) fn fit_camera(
    mut view: ResMut<CameraView>,
    ui: Res<UiState>,
    lanes: Query<&Lane>,
    new_lanes: Query<(), Added<Lane>>,
    balls: Query<(&Ball, &Transform, &LaneMember), Without<MainCamera>>,
    bands: Res<LaneBands>,
    windows: Query<&Window>,
    mut camera: Query<(&mut Transform, &mut Projection, &Camera), With<MainCamera>>,
) {
    if view.with_balls && !new_lanes.is_empty() {
        view.with_balls = false;
        view.balls_seen = None;
    }
    if !view.auto_fit {
        return;
    }
    let (Some(lanes_fit), Ok((mut transform, mut projection, camera))) =
        (scene_bounds(&lanes), camera.single_mut())
    else {
        return;
    };
    let (lo, hi) = if view.with_balls {
        if view.balls_seen.is_none() {
            let area = lanes
                .iter()
                .map(lane_area)
                .fold(Rect::EMPTY, |all, a| all.union(a));
            let in_band = balls.iter().filter_map(|(ball, transform, member)| {
                let centre = transform.translation.truncate();
                bands
                    .of(member.0)
                    .contains(centre)
                    .then_some((centre, ball.radius.max(0.0) as f32 * UNITS_PER_METRE))
            });
            // No ball within reach: an inverted box, which frames nothing beyond the lanes.
            view.balls_seen = Some(balls_within_reach(area, in_band).unwrap_or(Rect::EMPTY));
        }
        match view.balls_seen {
            // Not `Rect::is_empty`: a point ball's box has no width, and counts.
            Some(seen) if seen.min.x <= seen.max.x && seen.min.y <= seen.max.y => {
                frame_lanes_and(lanes_fit, seen)
            }
            _ => lanes_fit,
        }
    } else {
        lanes_fit
    };
    let window_size = match windows.single() {
        Ok(window) => Vec2::new(window.width(), window.height()),
        Err(_) => match camera.logical_viewport_size() {
            Some(size) => size,
            None => return,
        },
    };
    let scale = fit_scale(hi - lo, canvas_size(&ui, window_size));
    transform.translation = ((lo + hi) / 2.0).extend(transform.translation.z);
    if let Projection::Orthographic(o) = &mut *projection {
        o.scale = scale;
    }
}

/// Sets wall sizes from their geometry, never thinner than a few pixels (balls get theirs from [`drawn_radius`]
/// as [`ball_mesh::draw_balls`] builds their mesh).
fn keep_sizes_visible(
    camera: Query<&Projection, With<MainCamera>>,
    mut walls: Query<(&Wall, &mut Transform)>,
) {
    let Ok(projection) = camera.single() else {
        return;
    };
    let px = camera_scale(projection);
    for (wall, mut transform) in &mut walls {
        let size = (wall.half_extents * 2.0).as_vec2() * UNITS_PER_METRE;
        transform.scale = size.max(Vec2::splat(MIN_WALL_WIDTH_PX * px)).extend(1.0);
        transform.translation.z = 0.0;
    }
}

fn collect_impulses(
    all_lanes: Query<&Lane>,
    changed: Query<&Lane, Changed<Lane>>,
    mut recent: ResMut<RecentImpulses>,
) {
    for lane in &changed {
        let Some(last) = &lane.world.last else {
            continue;
        };
        for report in &last.rods {
            for impact in &report.impacts {
                let seen = RecentImpulse {
                    point: impact.contact_point + lane.offset,
                    impulse: impact.impulse,
                    lane: lane.index,
                    at: lane.world.time,
                    age: 0.0,
                };
                if !recent
                    .0
                    .iter()
                    .any(|r| r.lane == seen.lane && r.at == seen.at && r.point == seen.point)
                {
                    recent.0.push(seen);
                }
            }
        }
    }
    // A lane that restarted or was replaced has gone back in time: its old arrows go with it.
    recent.0.retain_mut(|r| {
        let Some(now) = all_lanes
            .iter()
            .find(|l| l.index == r.lane)
            .map(|l| l.world.time)
        else {
            return false;
        };
        r.age = (now - r.at) as f32;
        (0.0..IMPULSE_ARROW_SECONDS).contains(&r.age)
    });
}

/// The lines between the lanes' bands ([`LaneBands::boundaries`]), broken where a lane's title is drawn (its box
/// as [`shown_title_box`] gives it, at `px` world units per pixel and the labels' `label_scale`, `shown` from
/// [`ShownTitles`]) with [`TITLE_CLEARANCE_PX`] to spare, leaving out pieces shorter than
/// [`MIN_BAND_EDGE_PIECE_PX`]; the lanes whose index is in `hidden` have no title drawn ([`HiddenTitles`]). The
/// line between lanes one above the other runs half the gap above the lower lane's top, where that lane's title is
/// drawn whenever half the gap is between 4 and 23 px on screen: it struck the title through.
pub fn band_edge_lines(
    lanes: &[&Lane],
    bands: &LaneBands,
    px: f32,
    label_scale: f32,
    hidden: &[usize],
    shown: &[(usize, usize)],
) -> Vec<(Vec2, Vec2)> {
    let areas: Vec<Rect> = lanes.iter().map(|lane| lane_area(lane)).collect();
    let titles: Vec<Rect> = lanes
        .iter()
        .filter(|lane| !hidden.contains(&lane.index))
        .map(|lane| shown_title_box(lane, shown, px, label_scale).inflate(TITLE_CLEARANCE_PX * px))
        .collect();
    bands
        .boundaries(&areas)
        .into_iter()
        .flat_map(|(a, b)| {
            clear_of(a, b, &titles).into_iter().filter(move |&piece| {
                piece == (a, b) || piece.0.distance(piece.1) >= MIN_BAND_EDGE_PIECE_PX * px
            })
        })
        .collect()
}

/// A piece of a line between lanes left shorter than this by the titles that break it is not drawn: on its own
/// beside a title it read as a stray dash, not as a boundary.
const MIN_BAND_EDGE_PIECE_PX: f32 = 40.0;

/// The lines between the lanes' bands ([`band_edge_lines`]), drawn once the labels are laid out
/// ([`LabelSystems`]) so that they keep clear of the titles of this frame: a title grown this frame (an edit's
/// ", edited", a new scene) was struck through for a frame, which an export may show.
fn draw_band_edges(
    mut gizmos: Gizmos,
    camera: Query<&Projection, With<MainCamera>>,
    lanes: Query<&Lane>,
    bands: Res<LaneBands>,
    label_scale: Option<Res<LabelScale>>,
    hidden_titles: Option<Res<HiddenTitles>>,
    shown_titles: Option<Res<ShownTitles>>,
) {
    let Ok(projection) = camera.single() else {
        return;
    };
    let px = camera_scale(projection);
    let all: Vec<&Lane> = lanes.iter().collect();
    let label_scale = label_scale.map_or(1.0, |s| s.0);
    let hidden = hidden_titles.as_ref().map_or(&[][..], |h| h.0.as_slice());
    let shown = shown_titles.as_ref().map_or(&[][..], |s| s.0.as_slice());
    for (a, b) in band_edge_lines(&all, &bands, px, label_scale, hidden, shown) {
        gizmos.line_2d(a, b, BAND_EDGE_COLOR);
    }
}

/// What the selection ring needs of the selected body.
type SelectedBody<'a> = (
    &'a Transform,
    Option<&'a Ball>,
    Option<&'a Rod>,
    Option<&'a LaneMember>,
);

/// Rods, velocity arrows, impulse arrows, contact markers, the rod floor and the selection ring.
#[allow(clippy::too_many_arguments)] // a Bevy system: each parameter is one query or resource
fn draw_gizmos(
    mut gizmos: Gizmos,
    mut rod_gizmos: Gizmos<RodGizmos>,
    camera: Query<&Projection, With<MainCamera>>,
    lanes: Query<&Lane>,
    rods: Query<(&Rod, &BodyState, &Transform, &LaneMember)>,
    balls: Query<(&Ball, &BodyState, &Transform, &LaneMember)>,
    selected: Query<SelectedBody>,
    recent: Res<RecentImpulses>,
    ui: Res<UiState>,
    bands: Res<LaneBands>,
    strays: Res<StrayBalls>,
) {
    let Ok(projection) = camera.single() else {
        return;
    };
    let px = camera_scale(projection);
    let u = UNITS_PER_METRE;
    let arrow_color = Color::srgb(0.95, 0.85, 0.3);
    for lane in &lanes {
        if !lane.world.rods.is_empty() {
            let y = (lane.world.rod_floor_y + lane.offset.y) as f32 * u;
            let x0 = (lane.bounds.0.x + lane.offset.x) as f32 * u;
            let x1 = (lane.bounds.1.x + lane.offset.x) as f32 * u;
            gizmos.line_2d(
                Vec2::new(x0, y),
                Vec2::new(x1, y),
                Color::srgb(0.8, 0.8, 0.85),
            );
        }
    }
    let all: Vec<&Lane> = lanes.iter().collect();
    for stray in &strays.0 {
        let (tail, tip) = stray_arrow(stray.edge, stray.direction, px);
        gizmos
            .arrow_2d(tail, tip, stray.color)
            .with_tip_length(6.0 * px);
    }
    // The rods' gizmo group draws every frame, with nothing to see when there is no rod: a group's first lines
    // drew nothing (its pipeline is prepared when first used), so an exported frame lost the body of a rod
    // dropped at its tick.
    rod_gizmos.line_2d(Vec2::ZERO, Vec2::ZERO, Color::NONE);
    // Each lane's colour once, by its index: a lane may hold many rods.
    let mut colors = vec![Color::WHITE; all.iter().map(|l| l.index + 1).max().unwrap_or(0)];
    for lane in &all {
        colors[lane.index] = lane_color(lane, all.iter().copied());
    }
    for (rod, state, transform, member) in &rods {
        let centre = transform.translation.truncate();
        let angle = transform.rotation.to_euler(EulerRot::XYZ).2;
        let half = Vec2::new(angle.cos(), angle.sin()) * (rod.length as f32 * u / 2.0);
        let color = lanes
            .get(member.0)
            .ok()
            .and_then(|l| colors.get(l.index).copied())
            .unwrap_or(Color::WHITE);
        // A rod is cut at its lane's band, as the balls are; beyond it, only its centre's marker shows.
        let band = bands.of(member.0);
        if let Some((a, b)) = clip_segment(centre - half, centre + half, band) {
            rod_gizmos.line_2d(a, b, ROD_COLOR);
        }
        if !band.contains(centre) {
            let (edge, direction) = edge_towards(centre, band);
            let (tail, tip) = stray_arrow(edge, direction, px);
            gizmos.arrow_2d(tail, tip, color).with_tip_length(6.0 * px);
            continue;
        }
        gizmos.circle_2d(Isometry2d::from_translation(centre), 3.0 * px, color);
        // Velocity arrow: 0.1 s of travel.
        let v = state.velocity.as_vec2() * 0.1 * u;
        if v.length() > 2.0 * px {
            gizmos.arrow_2d(centre, centre + v, arrow_color);
        }
        // End markers: touching ends get a contact marker.
        if let Ok(lane) = lanes.get(member.0)
            && let Some(r) = lane.world.rods.get(rod.index)
        {
            for end in RodEnd::BOTH {
                let p = r.end_position(end);
                if p.y - lane.world.rod_floor_y < 1e-6 {
                    let q = (p + lane.offset).as_vec2() * u;
                    gizmos.circle_2d(
                        Isometry2d::from_translation(q),
                        5.0 * px,
                        Color::srgb(1.0, 0.4, 0.9),
                    );
                }
            }
        }
    }
    for &RecentImpulse {
        point,
        impulse,
        age,
        ..
    } in &recent.0
    {
        let p = point.as_vec2() * u;
        // 1 N s draws as 150 px, up to 120 px: a rod's first landing (a few N s) would reach off the canvas.
        let j = (impulse.as_vec2() * IMPULSE_PX_PER_NS * px).clamp_length_max(IMPULSE_MAX_PX * px);
        let fade = 1.0 - age / IMPULSE_ARROW_SECONDS;
        gizmos.arrow_2d(p, p + j, Color::srgba(1.0, 0.35, 0.9, fade));
    }
    for (ball, state, transform, member) in &balls {
        let centre = transform.translation.truncate();
        let v = state.velocity.as_vec2() * 0.02 * u;
        if v.length() > 3.0 * px && ball.radius >= 0.0 && bands.of(member.0).contains(centre) {
            gizmos.arrow_2d(centre, centre + v, arrow_color.with_alpha(0.6));
        }
    }
    if let Some(entity) = ui.selected
        && let Ok((transform, ball, rod, member)) = selected.get(entity)
    {
        let centre = transform.translation.truncate();
        let band = member.map_or(lane_bands::EVERYWHERE, |m| bands.of(m.0));
        let (at, r) = if band.contains(centre) {
            let r = match (ball, rod) {
                (Some(b), _) => drawn_radius(b.radius, px) + 4.0 * px,
                (_, Some(r)) => r.length as f32 * u / 2.0 + 4.0 * px,
                _ => 10.0 * px,
            };
            (centre, r)
        } else {
            // Beyond its lane's band the body is drawn as its marker: the ring goes round that.
            let (edge, direction) = edge_towards(centre, band);
            let marker = edge - direction * (STRAY_ARROW_INSET_PX + STRAY_ARROW_PX / 2.0) * px;
            (marker, STRAY_ARROW_PX * px)
        };
        gizmos.circle_2d(Isometry2d::from_translation(at), r, Color::WHITE);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use bevy::time::TimeUpdateStrategy;

    use super::*;
    use crate::sim::{ActiveScene, SimControl, SimPlugin};

    /// Gizmo widths are physical pixels: on a screen of scale factor 2 they are doubled, so a rod is as thick
    /// beside the balls as in a 1 600 × 900 window; with no window (an export) they stay as set.
    #[test]
    fn gizmo_lines_keep_their_logical_width_at_every_scale_factor() {
        use bevy::window::{PrimaryWindow, WindowResolution};
        let mut app = App::new();
        let mut store = GizmoConfigStore::default();
        store.insert(GizmoConfig::default(), DefaultGizmoConfigGroup);
        let rods = GizmoLineConfig {
            width: ROD_WIDTH_PX,
            ..default()
        };
        store.insert(
            GizmoConfig {
                line: rods,
                ..default()
            },
            RodGizmos,
        );
        app.insert_resource(store);
        app.add_systems(Update, gizmo_widths_follow_the_scale_factor);
        let widths = |app: &App| {
            let store = app.world().resource::<GizmoConfigStore>();
            (
                store.config::<DefaultGizmoConfigGroup>().0.line.width,
                store.config::<RodGizmos>().0.line.width,
            )
        };
        app.update();
        // Bevy's default width for every gizmo but the rods.
        assert_eq!(widths(&app), (2.0, ROD_WIDTH_PX), "no window: as set");
        let window = app
            .world_mut()
            .spawn((
                Window {
                    resolution: WindowResolution::new(1600, 900).with_scale_factor_override(2.0),
                    ..default()
                },
                PrimaryWindow,
            ))
            .id();
        // One frame at scale factor `scale`.
        let at_scale = |app: &mut App, scale: f32| {
            app.world_mut()
                .get_mut::<Window>(window)
                .expect("the window")
                .resolution
                .set_scale_factor_override(Some(scale));
            app.update();
        };
        at_scale(&mut app, 2.0);
        assert_eq!(widths(&app), (4.0, 12.0));
        at_scale(&mut app, 1.5);
        assert_eq!(widths(&app), (3.0, 9.0));
        at_scale(&mut app, 1.0);
        assert_eq!(widths(&app), (2.0, ROD_WIDTH_PX));
        // A width edited in the inspector stays as edited, and follows the next change of scale.
        app.world_mut()
            .resource_mut::<GizmoConfigStore>()
            .config_mut::<DefaultGizmoConfigGroup>()
            .0
            .line
            .width = 5.0;
        app.update();
        assert_eq!(widths(&app), (5.0, ROD_WIDTH_PX));
        at_scale(&mut app, 2.0);
        assert_eq!(widths(&app), (10.0, 2.0 * ROD_WIDTH_PX));
    }

    /// A point ball's box has no width; it still counts as a ball within reach (`Rect::is_empty` would call it
    /// empty), alone in a lane as in the wall throw's lanes.
    #[test]
    fn a_point_ball_alone_is_framed() {
        let area = Rect::from_corners(Vec2::new(-100.0, -50.0), Vec2::new(100.0, 50.0));
        let lanes_fit = (Vec2::new(-120.0, -60.0), Vec2::new(120.0, 60.0));
        let seen =
            balls_within_reach(area, [(Vec2::new(400.0, 0.0), 0.0)]).expect("a ball within reach");
        assert_eq!(seen.width(), 0.0);
        let (lo, hi) = frame_lanes_and(lanes_fit, seen);
        assert!(hi.x > 400.0 && lo.x <= -120.0, "{lo} {hi}");
        assert_eq!(balls_within_reach(area, [(Vec2::new(1e9, 0.0), 0.0)]), None);
        assert_eq!(balls_within_reach(area, [(Vec2::NAN, 1.0)]), None);
        assert_eq!(balls_within_reach(area, std::iter::empty()), None);
    }

    /// The rod drop under the sim alone, one fixed step per update, with the impulse collector.
    fn rod_drop() -> App {
        let mut app = App::new();
        app.add_plugins(MinimalPlugins).add_plugins(SimPlugin);
        app.insert_resource(TimeUpdateStrategy::FixedTimesteps(1));
        app.insert_resource(
            ActiveScene::load(Path::new("assets/scenes/rod_drop.ron")).expect("shipped scene"),
        );
        app.init_resource::<RecentImpulses>();
        app.add_systems(Update, collect_impulses.after(SimSet::Interpolate));
        app
    }

    #[test]
    fn impulse_arrows_age_with_the_lane_and_stand_still_while_it_is_paused() {
        let mut app = rod_drop();
        // Step until the first impact shows an arrow.
        for _ in 0..400 {
            app.update();
            if !app.world().resource::<RecentImpulses>().0.is_empty() {
                break;
            }
        }
        let first = app.world().resource::<RecentImpulses>().0.clone();
        assert!(!first.is_empty(), "no rod impact in 400 steps");
        assert!(first.iter().all(|r| r.age == 0.0), "{first:?}");
        app.world_mut().resource_mut::<SimControl>().toggle_pause();
        for _ in 0..5 {
            app.update();
        }
        // Paused: however much real time passes, the arrows keep their age (and are drawn the same).
        let paused = app.world().resource::<RecentImpulses>().0.clone();
        let ages = |v: &[RecentImpulse]| v.iter().map(|r| (r.at, r.age)).collect::<Vec<_>>();
        let still: Vec<_> = ages(&paused)
            .into_iter()
            .filter(|(at, _)| first.iter().any(|r| r.at == *at))
            .collect();
        assert!(!still.is_empty());
        assert!(still.iter().all(|(_, age)| *age <= 0.02), "{still:?}");
        app.world_mut().resource_mut::<SimControl>().toggle_pause();
        // Running: three steps of h = 10 ms age them by 30 ms of simulated time.
        for _ in 0..3 {
            app.update();
        }
        let later = app.world().resource::<RecentImpulses>().0.clone();
        for r in later.iter().filter(|r| first.iter().any(|f| f.at == r.at)) {
            let expected = still
                .iter()
                .find(|(at, _)| *at == r.at)
                .map(|(_, a)| a + 0.03);
            let expected = expected.expect("the same impact");
            assert!((r.age - expected).abs() < 1e-6, "{r:?} against {expected}");
        }
    }

    /// The wall throw's lanes as laid out, their areas and their bands.
    fn wall_throw_bands() -> (Vec<Lane>, Vec<Rect>, LaneBands) {
        let lanes = lane_bands::laid_out_lanes("assets/scenes/wall_throw.ron");
        let areas: Vec<Rect> = lanes.iter().map(lane_area).collect();
        let entities = [Entity::from_raw_u32(1), Entity::from_raw_u32(2)];
        let bands = LaneBands(
            entities
                .into_iter()
                .flatten()
                .zip(lane_bands::lane_bands(&areas))
                .collect(),
        );
        (lanes, areas, bands)
    }

    /// The line between the wall throw's lanes (penalty above, IPC below) runs half their gap, 39 mm, above the
    /// IPC lane's top, through its title at the scales a window shows them at: it is broken around the title at
    /// every zoom, and still runs across the rest of the lanes.
    #[test]
    fn the_line_between_stacked_lanes_keeps_clear_of_the_titles() {
        let (lanes, areas, bands) = wall_throw_bands();
        let all: Vec<&Lane> = lanes.iter().collect();
        let whole = bands.boundaries(&areas);
        assert_eq!(whole.len(), 1, "{whole:?}");
        let mut struck = 0;
        for label_scale in [1.0, 0.625] {
            for px in [
                0.05, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0, 12.0, 50.0,
            ] {
                let titles: Vec<Rect> = all
                    .iter()
                    .map(|lane| super::super::labels::title_box(lane, px, label_scale))
                    .collect();
                let crosses = |(a, b): (Vec2, Vec2)| {
                    titles
                        .iter()
                        .any(|&title| clip_segment(a, b, title).is_some())
                };
                struck += usize::from(crosses(whole[0]));
                let lines = band_edge_lines(&all, &bands, px, label_scale, &[], &[]);
                // With every title left out (zoomed far out, crowded), nothing breaks the line.
                let indices: Vec<usize> = all.iter().map(|lane| lane.index).collect();
                assert_eq!(
                    band_edge_lines(&all, &bands, px, label_scale, &indices, &[]),
                    whole
                );
                for &line in &lines {
                    assert!(
                        !crosses(line),
                        "{line:?} crosses a title at {px} units/px, labels × {label_scale}"
                    );
                }
                // What is left of the line: all of it but the title's width and the clearance, and the pieces
                // beside it too short to read as a line.
                let left: f32 = lines.iter().map(|(a, b)| a.distance(*b)).sum();
                let title = titles.iter().map(Rect::width).fold(0.0, f32::max);
                let (a, b) = whole[0];
                let dropped = 2.0 * MIN_BAND_EDGE_PIECE_PX * px;
                assert!(
                    left >= a.distance(b) - title - 2.0 * TITLE_CLEARANCE_PX * px - dropped - 1e-3,
                    "{lines:?} at {px}"
                );
                for &(p, q) in lines.iter().filter(|&&line| line != whole[0]) {
                    assert!(
                        p.distance(q) >= MIN_BAND_EDGE_PIECE_PX * px,
                        "a dash {p:?}–{q:?} beside the title at {px} units/px"
                    );
                }
            }
        }
        assert!(struck > 0, "the whole line never crossed a title");
    }

    /// With the titles as drawn (not edited: no room kept for ", edited"), the line between the wall throw's lanes
    /// runs on beside the IPC title wherever 40 px are left there: at the fitted view the box kept for ", edited"
    /// left only a dash, which was dropped, so no line was drawn at all.
    #[test]
    fn the_line_between_stacked_lanes_runs_beside_the_title_as_drawn() {
        let (lanes, areas, bands) = wall_throw_bands();
        let all: Vec<&Lane> = lanes.iter().collect();
        let (start, end) = bands.boundaries(&areas)[0];
        let shown: Vec<(usize, usize)> = all
            .iter()
            .map(|lane| {
                let title = format!(
                    "{} [{}]",
                    lane.world.name,
                    lane.world.settings.method.label()
                );
                (lane.index, title.chars().count())
            })
            .collect();
        let mut beside = 0;
        for px in [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0] {
            // The title the line runs through, as drawn, with its clearance.
            let Some(title) = all
                .iter()
                .zip(&shown)
                .map(|(lane, &(_, chars))| {
                    super::super::labels::drawn_title_box(lane, chars, px, 1.0)
                        .inflate(TITLE_CLEARANCE_PX * px)
                })
                .find(|title| clip_segment(start, end, *title).is_some())
            else {
                continue;
            };
            let lines = band_edge_lines(&all, &bands, px, 1.0, &[], &shown);
            // What is drawn right of the title.
            let right: f32 = lines
                .iter()
                .map(|(a, b)| (b.x.max(a.x) - a.x.min(b.x).max(title.max.x)).max(0.0))
                .sum();
            let room = end.x - title.max.x;
            if room >= MIN_BAND_EDGE_PIECE_PX * px {
                assert!(
                    (right - room).abs() < 1e-2 * px,
                    "{right} of {room} at {px} units/px"
                );
                beside += 1;
            } else {
                assert_eq!(right, 0.0, "a dash at {px} units/px");
            }
        }
        assert!(beside > 0, "never any room beside the title");
    }
}
