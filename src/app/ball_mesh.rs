//! Every ball of every lane drawn as one mesh, rebuilt each frame from the balls' interpolated transforms.
//!
//! Each ball is a quad. Its fragment shader (`ball.wgsl`) cuts out the disc, shades it darker towards the rim (so
//! touching balls in a pile stay apart on screen) and fades the pixel across its rim, a smooth edge without
//! multisampling. A software renderer (Mesa's llvmpipe, the only one on a machine without a GPU) pays on the CPU
//! for every triangle it sets up: the 2 000-ball pit drew with the UI hidden at 27–30 fps with a 12-gon per ball
//! (a fan of 10 triangles), as one mesh entity per ball or all in one mesh alike, and at 51 fps with no balls at
//! all. Two triangles per ball cost a fifth of the 12-gon's set-up, and the disc is exact at every size.
//!
//! Each lane's balls are clipped to its band ([`lane_bands`]): a quad that crosses the band's edge is cut there
//! (its uv cut with it, so the disc is cut, not squeezed), and a ball entirely beyond is left to a marker.

use bevy::asset::{RenderAssetUsages, embedded_asset, embedded_path};
use bevy::camera::visibility::NoFrustumCulling;
use bevy::mesh::{Indices, PrimitiveTopology};
use bevy::prelude::*;
use bevy::render::render_resource::AsBindGroup;
use bevy::shader::ShaderRef;
use bevy::sprite_render::{AlphaMode2d, Material2d, Material2dPlugin};

use super::lane_bands::{self, LaneBands, StrayBall, StrayBalls, edge_towards};
use super::lane_color;
use super::render::{MainCamera, camera_scale, drawn_radius};
use crate::physics::DVec2;
use crate::sim::{Ball, Lane, LaneMember, UNITS_PER_METRE};

/// Depth of the balls above the walls (the walls sit at 0).
const BALL_Z: f32 = 2.0;

/// Draws the balls; added by the render plugin.
pub struct BallMeshPlugin;

impl Plugin for BallMeshPlugin {
    fn build(&self, app: &mut App) {
        embedded_asset!(app, "ball.wgsl");
        app.add_plugins(Material2dPlugin::<BallMaterial>::default())
            .add_systems(Startup, spawn_ball_batch);
    }
}

/// The discs' material: everything it needs comes from the vertices.
#[derive(Asset, TypePath, AsBindGroup, Debug, Clone, Default)]
pub struct BallMaterial {}

impl Material2d for BallMaterial {
    fn fragment_shader() -> ShaderRef {
        ShaderRef::Path(
            bevy::asset::AssetPath::from_path_buf(embedded_path!("ball.wgsl"))
                .with_source("embedded"),
        )
    }

    fn alpha_mode(&self) -> AlphaMode2d {
        // The edge pixel is partly covered.
        AlphaMode2d::Blend
    }
}

/// The entity that carries the balls' mesh.
#[derive(Component)]
pub struct BallBatch;

/// The corners of a quad, counter-clockwise, as multiples of its half side.
const CORNERS: [[f32; 2]; 4] = [[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]];
/// The shader fades a disc's edge over one pixel centred on its rim, so each quad reaches this many pixels beyond.
const EDGE_MARGIN_PX: f32 = 0.5;

/// Quads around discs, in the layout a [`Mesh`] takes.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Discs {
    pub positions: Vec<[f32; 3]>,
    pub uvs: Vec<[f32; 2]>,
    pub colors: Vec<[f32; 4]>,
    pub indices: Vec<u32>,
}

impl Discs {
    pub fn clear(&mut self) {
        self.positions.clear();
        self.uvs.clear();
        self.colors.clear();
        self.indices.clear();
    }

    /// Adds the disc of `radius` around `centre` as a quad of half side `radius + margin`, its uv in units of
    /// the radius (so the rim is at |uv| = 1 and the corners at ±(1 + margin / radius)), `color` at every
    /// corner, and two triangles, counter-clockwise.
    pub fn push(&mut self, centre: Vec2, radius: f32, margin: f32, color: [f32; 4]) {
        let first = self.positions.len() as u32;
        let half = radius + margin;
        let uv_half = half / radius.max(f32::MIN_POSITIVE);
        for corner in CORNERS {
            let p = centre + half * Vec2::from(corner);
            self.positions.push([p.x, p.y, 0.0]);
            self.uvs.push((uv_half * Vec2::from(corner)).into());
            self.colors.push(color);
        }
        self.indices
            .extend_from_slice(&[first, first + 1, first + 2, first, first + 2, first + 3]);
    }

    /// Adds the disc as [`Discs::push`] does, cut to `clip`: the quad is cut to the rectangle it shares with
    /// `clip` and its uv with it (uv stays the offset from `centre` in radii), so the shader draws the part of the
    /// disc inside `clip`. Returns false, adding nothing, when the quad lies wholly outside `clip`.
    pub fn push_clipped(
        &mut self,
        centre: Vec2,
        radius: f32,
        margin: f32,
        color: [f32; 4],
        clip: Rect,
    ) -> bool {
        let half = Vec2::splat(radius + margin);
        let (lo, hi) = (centre - half, centre + half);
        if clip.min.cmple(lo).all() && hi.cmple(clip.max).all() {
            // Every ball of a lane that stays in its band: the same quad as ever.
            self.push(centre, radius, margin, color);
            return true;
        }
        let (lo, hi) = (lo.max(clip.min), hi.min(clip.max));
        if !(lo.x < hi.x && lo.y < hi.y) {
            return false;
        }
        let first = self.positions.len() as u32;
        let per_radius = 1.0 / radius.max(f32::MIN_POSITIVE);
        for [x, y] in CORNERS {
            let p = Vec2::new(
                if x < 0.0 { lo.x } else { hi.x },
                if y < 0.0 { lo.y } else { hi.y },
            );
            self.positions.push([p.x, p.y, 0.0]);
            self.uvs.push(((p - centre) * per_radius).into());
            self.colors.push(color);
        }
        self.indices
            .extend_from_slice(&[first, first + 1, first + 2, first, first + 2, first + 3]);
        true
    }

    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// Moves the quads into `mesh` (no copy: 10 000 balls are 1.7 MB a frame).
    pub fn move_into(&mut self, mesh: &mut Mesh) {
        mesh.insert_attribute(
            Mesh::ATTRIBUTE_POSITION,
            std::mem::take(&mut self.positions),
        );
        mesh.insert_attribute(Mesh::ATTRIBUTE_UV_0, std::mem::take(&mut self.uvs));
        mesh.insert_attribute(Mesh::ATTRIBUTE_COLOR, std::mem::take(&mut self.colors));
        mesh.insert_indices(Indices::U32(std::mem::take(&mut self.indices)));
    }

    /// Takes back the buffers [`Discs::move_into`] gave `mesh`, emptied, so the next frame reuses their memory.
    pub fn take_back(&mut self, mesh: &mut Mesh) {
        use bevy::mesh::VertexAttributeValues as Values;
        if let Some(Values::Float32x3(v)) = mesh.remove_attribute(Mesh::ATTRIBUTE_POSITION) {
            self.positions = v;
        }
        if let Some(Values::Float32x2(v)) = mesh.remove_attribute(Mesh::ATTRIBUTE_UV_0) {
            self.uvs = v;
        }
        if let Some(Values::Float32x4(v)) = mesh.remove_attribute(Mesh::ATTRIBUTE_COLOR) {
            self.colors = v;
        }
        if let Some(Indices::U32(v)) = mesh.remove_indices() {
            self.indices = v;
        }
        self.clear();
    }
}

/// Spawns the balls' entity without a mesh: [`draw_balls`] gives it one with the first balls there are to draw.
fn spawn_ball_batch(mut commands: Commands, mut materials: ResMut<Assets<BallMaterial>>) {
    commands.spawn((
        BallBatch,
        MeshMaterial2d(materials.add(BallMaterial::default())),
        Transform::from_xyz(0.0, 0.0, BALL_Z),
        // The mesh changes every frame; culling it would first recompute its bounds over every vertex.
        NoFrustumCulling,
        Visibility::Hidden,
    ));
}

/// What [`draw_balls`] needs of a lane to draw its balls.
#[derive(Debug, Clone)]
pub struct LaneLook {
    lane: Entity,
    color: Color,
    /// `color` as the mesh's vertices hold it (linear RGBA).
    vertex_color: [f32; 4],
    band: Rect,
    /// The area the lane was laid out in ([`lane_bands::lane_area`]).
    area: Rect,
    offset: DVec2,
    /// The lane's axis-aligned walls in render units, for [`clear_of_walls`].
    walls: Vec<Rect>,
}

/// The lane's walls that are axis-aligned (a quarter turn swaps the extents), in render units; a tilted wall (the
/// slope's ramp) is left out, and a ball's disc is not cut at it.
fn axis_aligned_walls(lane: &Lane) -> Vec<Rect> {
    lane.world
        .walls
        .iter()
        .filter_map(|wall| {
            let (sin, cos) = wall.angle.sin_cos();
            let half = if sin.abs() < 1e-9 {
                wall.half_extents
            } else if cos.abs() < 1e-9 {
                DVec2::new(wall.half_extents.y, wall.half_extents.x)
            } else {
                return None;
            };
            let centre = (wall.center + lane.offset) * f64::from(UNITS_PER_METRE);
            let half = half * f64::from(UNITS_PER_METRE);
            Some(Rect::from_center_half_size(
                centre.as_vec2(),
                half.as_vec2(),
            ))
        })
        .collect()
}

/// `clip` cut so that a ball drawn larger than it is (`drawn` against its true `radius`, render units: the seed's
/// point ball is drawn 6 px wide, a 5 cm ball far out at least 2 px) shows nothing inside a wall its body is clear
/// of. Otherwise the IPC ball that stopped 24 µm short of its wall was drawn a third into it, and read as a
/// penetration. A body that does reach into a wall (a penalty ball) is drawn whole, over the wall, as it is.
/// A wall cuts at the face the centre lies beside; a centre beyond a corner is not cut there.
pub fn clear_of_walls(centre: Vec2, radius: f32, drawn: f32, walls: &[Rect], clip: Rect) -> Rect {
    let mut clip = clip;
    if drawn <= radius {
        return clip;
    }
    for wall in walls {
        let outside = Vec2::new(
            (wall.min.x - centre.x).max(centre.x - wall.max.x),
            (wall.min.y - centre.y).max(centre.y - wall.max.y),
        );
        let nearest = centre.clamp(wall.min, wall.max);
        let body_clear = centre.distance(nearest) > radius;
        let drawn_reaches = outside.x < drawn && outside.y < drawn;
        if !body_clear || !drawn_reaches {
            continue;
        }
        // Beside a face (the centre within the wall's span along it), cut at that face; beyond a corner, a cut
        // would take open air beside the wall's end, so the ball is drawn whole.
        if outside.y <= 0.0 {
            if centre.x < wall.min.x {
                clip.max.x = clip.max.x.min(wall.min.x);
            } else {
                clip.min.x = clip.min.x.max(wall.max.x);
            }
        } else if outside.x <= 0.0 {
            if centre.y < wall.min.y {
                clip.max.y = clip.max.y.min(wall.min.y);
            } else {
                clip.min.y = clip.min.y.max(wall.max.y);
            }
        }
    }
    clip
}

/// Rebuilds the balls' mesh: each ball's centre is its (interpolated) translation, its radius the render
/// plugin's size rule ([`drawn_radius`]) and its colour its lane's method's, cut to its lane's band
/// ([`Discs::push_clipped`]). A ball wholly beyond its band is drawn nowhere and listed in [`StrayBalls`], for
/// the render plugin's edge marker and the labels' position text.
///
/// The mesh is never handed to the renderer without vertices: bevy_render's mesh allocator gives a mesh with no
/// vertex data no room, yet still copies its data in, and logs two "Use-after-free" errors for each upload. With
/// nothing to draw (the rod drop has no balls) the batch is hidden and its mesh not marked modified; the mesh
/// itself is only created with the first balls.
#[allow(clippy::too_many_arguments)] // a Bevy system: each parameter is one query, resource or buffer
pub fn draw_balls(
    mut commands: Commands,
    camera: Query<(&Projection, Option<&GlobalTransform>), With<MainCamera>>,
    lanes: Query<(Entity, &Lane)>,
    bands: Res<LaneBands>,
    balls: Query<(&Ball, &Transform, &LaneMember)>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut batch: Query<(Entity, Option<&Mesh2d>, &mut Visibility), With<BallBatch>>,
    mut strays: ResMut<StrayBalls>,
    mut discs: Local<Discs>,
    mut lanes_drawn: Local<Vec<LaneLook>>,
) {
    strays.0.clear();
    let (Ok((projection, camera_at)), Ok((batch_entity, mesh, mut visibility))) =
        (camera.single(), batch.single_mut())
    else {
        return;
    };
    let view = seen_area(projection, camera_at);
    if balls.is_empty() {
        visibility.set_if_neq(Visibility::Hidden);
        return;
    }
    let mesh_id = mesh.map(|mesh| mesh.id());
    // Taking last frame's buffers back (to reuse their memory) is no change worth uploading: the mesh is marked
    // modified below, as it gets this frame's balls.
    if let Some(mesh) = mesh_id.and_then(|id| meshes.get_mut_untracked(id)) {
        discs.take_back(mesh);
    } else {
        discs.clear();
    }
    lanes_drawn.clear();
    lanes_drawn.extend(lanes.iter().map(|(entity, lane)| {
        let color = lane_color(lane, lanes.iter().map(|(_, l)| l));
        LaneLook {
            lane: entity,
            color,
            vertex_color: color.to_linear().to_f32_array(),
            band: bands.of(entity),
            area: lane_bands::lane_area(lane),
            offset: lane.offset,
            walls: axis_aligned_walls(lane),
        }
    }));
    let px = camera_scale(projection);
    let margin = EDGE_MARGIN_PX * px;
    let unknown = LaneLook {
        lane: Entity::PLACEHOLDER,
        color: Color::WHITE,
        vertex_color: [1.0; 4],
        band: lane_bands::EVERYWHERE,
        area: lane_bands::EVERYWHERE,
        offset: DVec2::ZERO,
        walls: Vec::new(),
    };
    for (ball, transform, member) in &balls {
        let centre = transform.translation.truncate();
        let look = lanes_drawn
            .iter()
            .find(|look| look.lane == member.0)
            .unwrap_or(&unknown);
        let radius = drawn_radius(ball.radius, px);
        let clip = clear_of_walls(
            centre,
            ball.radius as f32 * UNITS_PER_METRE,
            radius,
            &look.walls,
            look.band,
        );
        let drawn = discs.push_clipped(centre, radius, margin, look.vertex_color, clip);
        // Beyond its band, or in it but out of sight (the penalty ball that went through the wall and on): marked
        // on the edge of what can be seen of its band. A ball beyond its band is marked there too, not on the
        // band's own edge level with the ball: a penalty ball that left the ball pit through its side wall and
        // fell for ever was marked far below the view, so nothing showed where it went.
        let seen = view.map_or(look.band, |view| view.intersect(look.band));
        let disc = Rect::from_center_half_size(centre, Vec2::splat(radius));
        // A ball out of sight inside its lane's own area is not marked: zoomed into the 2 000-ball pit, every ball
        // of the pile outside the view was, 1 800 arrows along the view's edges.
        let out_of_sight = drawn
            && !seen.is_empty()
            && disc.intersect(seen).is_empty()
            && disc.intersect(look.area).is_empty();
        if !drawn || out_of_sight {
            let (edge, direction) =
                edge_towards(centre, if seen.is_empty() { look.band } else { seen });
            strays.0.push(StrayBall {
                lane: member.0,
                edge,
                direction,
                position: centre.as_dvec2() / f64::from(UNITS_PER_METRE) - look.offset,
                color: look.color,
            });
        }
    }
    if discs.is_empty() {
        visibility.set_if_neq(Visibility::Hidden);
        return;
    }
    visibility.set_if_neq(Visibility::Inherited);
    if let Some(mut mesh) = mesh_id.and_then(|id| meshes.get_mut(id)) {
        discs.move_into(&mut mesh);
        return;
    }
    let mut mesh = Mesh::new(
        PrimitiveTopology::TriangleList,
        RenderAssetUsages::default(),
    );
    discs.move_into(&mut mesh);
    commands
        .entity(batch_entity)
        .insert(Mesh2d(meshes.add(mesh)));
}

/// The part of the scene the main camera shows (render units), once its projection has been sized to its
/// viewport; `None` before that, or without a placed camera.
fn seen_area(projection: &Projection, camera_at: Option<&GlobalTransform>) -> Option<Rect> {
    let (Projection::Orthographic(o), Some(at)) = (projection, camera_at) else {
        return None;
    };
    let area = o.area;
    (area.width() > 0.0 && area.height() > 0.0 && area.min.is_finite() && area.max.is_finite())
        .then(|| {
            let centre = at.translation().truncate();
            Rect::from_corners(centre + area.min, centre + area.max)
        })
}

#[cfg(test)]
mod tests {
    use bevy::asset::AssetPlugin;

    use super::*;
    use crate::physics::world::ContactMethod;

    /// A ball drawn larger than it is shows nothing inside a wall its body is clear of; a body inside the wall
    /// (penalty), a ball drawn at its true size, and a wall out of reach change nothing.
    #[test]
    fn a_ball_drawn_larger_than_it_is_is_cut_at_the_face_of_a_wall_it_is_clear_of() {
        let wall = Rect::new(10.0, 0.0, 12.0, 100.0);
        let band = Rect::new(-1e3, -1e3, 1e3, 1e3);
        let cut = |centre: Vec2, radius: f32, drawn: f32| {
            clear_of_walls(centre, radius, drawn, &[wall], band)
        };
        // The seed's point ball 24 µm (here 0.01 units) before the face: cut there.
        assert_eq!(
            cut(Vec2::new(9.99, 50.0), 0.0, 2.0),
            Rect::new(-1e3, -1e3, 10.0, 1e3)
        );
        // Beyond the back face, and above the top: cut at those faces.
        assert_eq!(cut(Vec2::new(12.5, 50.0), 0.0, 2.0).min.x, 12.0);
        assert_eq!(cut(Vec2::new(11.0, 101.0), 0.0, 2.0).min.y, 100.0);
        // A ball of radius 1 drawn 3 wide whose body is 0.5 clear: cut; whose body overlaps: whole.
        assert_eq!(cut(Vec2::new(8.5, 50.0), 1.0, 3.0).max.x, 10.0);
        assert_eq!(cut(Vec2::new(9.5, 50.0), 1.0, 3.0), band);
        // Beyond a corner (above the top and left of the front face): open air both ways, drawn whole.
        assert_eq!(cut(Vec2::new(9.5, 100.5), 0.0, 2.0), band);
        // A point inside the wall (a penalty ball sunk into it) is drawn whole, over the wall.
        assert_eq!(cut(Vec2::new(10.5, 50.0), 0.0, 2.0), band);
        // Drawn at its true size, or out of the wall's reach: nothing to cut.
        assert_eq!(cut(Vec2::new(9.5, 50.0), 0.4, 0.4), band);
        assert_eq!(cut(Vec2::new(5.0, 50.0), 0.0, 2.0), band);
    }

    /// The lanes of a shipped scene, laid out as the sim lays them out, without their bodies.
    fn lanes_of(path: &str) -> Vec<Lane> {
        super::super::lane_bands::laid_out_lanes(path)
    }

    /// Every mesh the renderer would be asked to upload (added or modified this frame), with its vertex data's
    /// size in bytes at the end of the frame, when the render world extracts it.
    #[derive(Resource, Default)]
    struct Uploads(Vec<(AssetId<Mesh>, usize)>);

    fn record_uploads(
        mut events: MessageReader<AssetEvent<Mesh>>,
        meshes: Res<Assets<Mesh>>,
        mut uploads: ResMut<Uploads>,
    ) {
        for event in events.read() {
            if let AssetEvent::Added { id } | AssetEvent::Modified { id } = *event {
                let bytes = meshes.get(id).map_or(0, Mesh::get_vertex_buffer_size);
                uploads.0.push((id, bytes));
            }
        }
    }

    /// The ball batch alone: the asset plugin, a camera at 1 unit per pixel, `draw_balls`, and the lanes of
    /// `scene`; returns the app and the lane entities.
    fn ball_batch_app(scene: &str) -> (App, Vec<Entity>) {
        let mut app = App::new();
        app.add_plugins((MinimalPlugins, AssetPlugin::default()))
            .init_asset::<Mesh>()
            .init_asset::<BallMaterial>()
            .init_resource::<Uploads>()
            .init_resource::<LaneBands>()
            .init_resource::<StrayBalls>()
            .add_systems(Startup, spawn_ball_batch)
            .add_systems(Update, (lane_bands::update_lane_bands, draw_balls).chain())
            .add_systems(Last, record_uploads);
        app.world_mut().spawn((
            MainCamera,
            Projection::Orthographic(OrthographicProjection::default_2d()),
        ));
        let lanes = lanes_of(scene)
            .into_iter()
            .map(|lane| app.world_mut().spawn(lane).id())
            .collect();
        (app, lanes)
    }

    fn batch_state(app: &mut App) -> (Option<usize>, Visibility) {
        let (mesh, visibility) = app
            .world_mut()
            .query_filtered::<(Option<&Mesh2d>, &Visibility), With<BallBatch>>()
            .single(app.world())
            .map(|(mesh, visibility)| (mesh.map(|m| m.id()), *visibility))
            .expect("one ball batch");
        let vertices = mesh.and_then(|id| {
            app.world()
                .resource::<Assets<Mesh>>()
                .get(id)
                .map(Mesh::count_vertices)
        });
        (vertices, visibility)
    }

    #[test]
    fn the_renderer_is_never_handed_an_empty_ball_mesh() {
        // The rod drop has no balls: nothing to upload, frame after frame (each empty upload logged two
        // "Use-after-free" errors from bevy_render's slab allocator).
        let (mut app, lanes) = ball_batch_app("assets/scenes/rod_drop.ron");
        for _ in 0..5 {
            app.update();
        }
        assert!(app.world().resource::<Uploads>().0.is_empty());
        assert_eq!(batch_state(&mut app), (None, Visibility::Hidden));

        // A ball dropped in: its quad is uploaded and shown.
        let ball = app
            .world_mut()
            .spawn((
                Ball {
                    index: 0,
                    radius: 0.05,
                    mass: 1.0,
                },
                Transform::from_xyz(0.0, 500.0, 1.0),
                LaneMember(lanes[0]),
            ))
            .id();
        app.update();
        assert_eq!(batch_state(&mut app), (Some(4), Visibility::Inherited));
        app.update();

        // Gone again (a restart): hidden, and the mesh is left as it was rather than emptied.
        app.world_mut().despawn(ball);
        for _ in 0..3 {
            app.update();
        }
        assert_eq!(batch_state(&mut app).1, Visibility::Hidden);
        let uploads = &app.world().resource::<Uploads>().0;
        assert_eq!(
            uploads.len(),
            2,
            "one upload per frame with the ball: {uploads:?}"
        );
        assert!(uploads.iter().all(|&(_, bytes)| bytes > 0), "{uploads:?}");
    }

    #[test]
    fn each_disc_is_a_counter_clockwise_quad_around_its_centre() {
        let mut discs = Discs::default();
        let green = [0.2, 0.6, 0.1, 1.0];
        let red = [0.8, 0.05, 0.03, 1.0];
        let cases = [
            (Vec2::new(3.0, -1.0), 2.0, 0.5, green),
            (Vec2::new(-5.0, 4.0), 0.5, 0.25, red),
        ];
        for (centre, radius, margin, color) in cases {
            discs.push(centre, radius, margin, color);
        }
        assert_eq!(discs.positions.len(), 8);
        assert_eq!(discs.indices.len(), 12);
        for (k, (centre, radius, margin, color)) in cases.into_iter().enumerate() {
            for v in 4 * k..4 * k + 4 {
                let p = Vec2::new(discs.positions[v][0], discs.positions[v][1]);
                let uv = Vec2::from(discs.uvs[v]);
                // The corner lies `radius + margin` out along each axis, and its uv measures that in radii,
                // so the shader's rim |uv| = 1 is the disc's true edge.
                assert!(((p - centre).abs() - Vec2::splat(radius + margin)).length() < 1e-6);
                assert!((uv * radius - (p - centre)).length() < 1e-6);
                assert_eq!(discs.colors[v], color);
            }
            for t in discs.indices[6 * k..6 * k + 6].chunks(3) {
                assert!(
                    t.iter()
                        .all(|&i| (4 * k..4 * k + 4).contains(&(i as usize)))
                );
                let [a, b, c] = [t[0], t[1], t[2]].map(|i| Vec2::from(discs.uvs[i as usize]));
                assert!((b - a).perp_dot(c - a) > 0.0, "counter-clockwise");
            }
        }
    }

    #[test]
    fn a_disc_across_its_band_edge_is_cut_there_and_one_beyond_adds_nothing() {
        let band = Rect::new(f32::NEG_INFINITY, -140.0, f32::INFINITY, -10.0);
        let color = [1.0; 4];
        // Wholly inside: the same quad as an unclipped push.
        let (mut clipped, mut plain) = (Discs::default(), Discs::default());
        assert!(clipped.push_clipped(Vec2::new(3.0, -50.0), 2.0, 0.5, color, band));
        plain.push(Vec2::new(3.0, -50.0), 2.0, 0.5, color);
        assert_eq!(clipped, plain);

        // Centre 1 below the top edge, radius 2, margin 0.5: the quad's top 1.5 is cut off, and its uv with it,
        // so the shader's disc (|uv| <= 1) is cut at the edge rather than squeezed under it.
        let mut discs = Discs::default();
        let centre = Vec2::new(3.0, -11.0);
        assert!(discs.push_clipped(centre, 2.0, 0.5, color, band));
        let ys: Vec<f32> = discs.positions.iter().map(|p| p[1]).collect();
        assert_eq!(ys, vec![-13.5, -13.5, -10.0, -10.0]);
        for (p, uv) in discs.positions.iter().zip(&discs.uvs) {
            let offset = Vec2::new(p[0], p[1]) - centre;
            assert!((Vec2::from(*uv) * 2.0 - offset).length() < 1e-6);
        }
        assert_eq!(discs.indices, vec![0, 1, 2, 0, 2, 3]);

        // Wholly beyond (its lowest pixel just above the edge): nothing is added.
        assert!(!discs.push_clipped(Vec2::new(3.0, -7.4), 2.0, 0.5, color, band));
        assert_eq!(discs.positions.len(), 4);
    }

    #[test]
    fn a_ball_that_leaves_its_lane_is_drawn_nowhere_in_another_lane_and_marked_at_its_own_edge() {
        // The wall throw: penalty lane on top, IPC lane below. An IPC ball that glanced off the top end of its
        // wall has risen to y = 0.62 m, which lies in the penalty lane's drawn area.
        let (mut app, lanes) = ball_batch_app("assets/scenes/wall_throw.ron");
        let offsets: Vec<DVec2> = lanes
            .iter()
            .map(|&lane| app.world().get::<Lane>(lane).expect("a lane").offset)
            .collect();
        let at = |lane: usize, local: DVec2| {
            let p = ((local + offsets[lane]) * f64::from(UNITS_PER_METRE)).as_vec2();
            Transform::from_xyz(p.x, p.y, 1.0)
        };
        let ball = |lane: usize| Ball {
            index: lane,
            radius: 0.01,
            mass: 1.0,
        };
        let risen = DVec2::new(0.3, 0.62);
        app.world_mut()
            .spawn((ball(0), at(0, DVec2::ZERO), LaneMember(lanes[0])));
        app.world_mut()
            .spawn((ball(1), at(1, risen), LaneMember(lanes[1])));
        app.update();

        let bands = app.world().resource::<LaneBands>().clone();
        let (penalty, ipc) = (bands.of(lanes[0]), bands.of(lanes[1]));
        let risen_drawn = at(1, risen).translation.truncate();
        assert!(penalty.contains(risen_drawn) && !ipc.contains(risen_drawn));

        // Only the penalty ball is in the mesh, inside its band, in its colour.
        let mesh_id = app
            .world_mut()
            .query_filtered::<&Mesh2d, With<BallBatch>>()
            .single(app.world())
            .expect("the batch has its mesh")
            .id();
        let meshes = app.world().resource::<Assets<Mesh>>();
        let mesh = meshes.get(mesh_id).expect("the mesh");
        use bevy::mesh::VertexAttributeValues as Values;
        let Some(Values::Float32x3(positions)) = mesh.attribute(Mesh::ATTRIBUTE_POSITION) else {
            panic!("positions");
        };
        assert_eq!(positions.len(), 4);
        assert!(
            positions
                .iter()
                .all(|p| penalty.contains(Vec2::new(p[0], p[1])))
        );

        // The IPC ball is marked on its band's top edge, straight below it, in green, with its position.
        let strays = &app.world().resource::<StrayBalls>().0;
        assert_eq!(strays.len(), 1, "{strays:?}");
        let stray = strays[0];
        assert_eq!(stray.lane, lanes[1]);
        assert_eq!(stray.edge, Vec2::new(risen_drawn.x, ipc.max.y));
        assert_eq!(stray.direction, Vec2::Y);
        assert!((stray.position - risen).length() < 1e-6, "{stray:?}");
        assert_eq!(stray.color, crate::app::method_color(ContactMethod::Ipc));

        // Back inside its band (falling back down), it is drawn again and no longer marked.
        let mut balls = app.world_mut().query::<(&Ball, &mut Transform)>();
        for (ball, mut transform) in balls.iter_mut(app.world_mut()) {
            if ball.index == 1 {
                *transform = at(1, DVec2::new(0.3, 0.1));
            }
        }
        app.update();
        assert!(app.world().resource::<StrayBalls>().0.is_empty());
        assert_eq!(batch_state(&mut app), (Some(8), Visibility::Inherited));
    }

    /// Points the main camera at `seen` (render units), as the window's view would be.
    fn look_at(app: &mut App, seen: Rect) {
        let mut projection = OrthographicProjection::default_2d();
        projection.area = Rect::from_center_size(Vec2::ZERO, seen.size());
        let mut cameras = app.world_mut().query_filtered::<Entity, With<MainCamera>>();
        let camera = cameras.single(app.world()).expect("the camera");
        app.world_mut().entity_mut(camera).insert((
            Projection::Orthographic(projection),
            GlobalTransform::from_translation(seen.center().extend(0.0)),
        ));
    }

    /// A ball of `lane` drawn at `at` (render units).
    fn spawn_ball_at(app: &mut App, lane: Entity, at: Vec2, index: usize, radius: f64) {
        app.world_mut().spawn((
            Ball {
                index,
                radius,
                mass: 1.0,
            },
            Transform::from_xyz(at.x, at.y, 1.0),
            LaneMember(lane),
        ));
    }

    /// The wall throw's penalty ball goes through the wall and on, within its band but out of the camera's sight:
    /// it is marked on the edge of what is seen of its band, level with it, with its position.
    #[test]
    fn a_ball_out_of_sight_in_its_own_band_is_marked_on_the_edge_of_the_view() {
        let (mut app, lanes) = ball_batch_app("assets/scenes/wall_throw.ron");
        let offset = app.world().get::<Lane>(lanes[0]).expect("a lane").offset;
        let drawn = |local: DVec2| ((local + offset) * f64::from(UNITS_PER_METRE)).as_vec2();
        // A camera that sees the lanes' first metre.
        let seen = Rect::from_corners(drawn(DVec2::new(-0.5, -1.0)), drawn(DVec2::new(1.0, 1.0)));
        look_at(&mut app, seen);
        let gone = DVec2::new(4.0, 0.0);
        for (index, local) in [(0, DVec2::new(0.2, 0.0)), (1, gone)] {
            spawn_ball_at(&mut app, lanes[0], drawn(local), index, 0.01);
        }
        app.update();
        let strays = &app.world().resource::<StrayBalls>().0;
        assert_eq!(strays.len(), 1, "{strays:?}");
        let stray = strays[0];
        assert_eq!(stray.lane, lanes[0]);
        assert!(
            (stray.edge - Vec2::new(seen.max.x, drawn(gone).y)).length() < 1e-3,
            "{stray:?}"
        );
        assert_eq!(stray.direction, Vec2::X);
        assert!((stray.position - gone).length() < 1e-6, "{stray:?}");
    }

    /// The ball pit's lanes stand side by side. A penalty ball that went out through its box's right wall and
    /// fell on is beyond its band and far below the view: it is marked inside the view, at the corner of what is
    /// seen of its band nearest it, pointing its way (it was marked on the band's edge level with the ball, 50 m
    /// below the view, so nothing showed where it went).
    #[test]
    fn a_ball_beyond_its_band_and_out_of_sight_is_marked_inside_the_view() {
        let (mut app, lanes) = ball_batch_app("assets/scenes/ball_pit.ron");
        let offset = app.world().get::<Lane>(lanes[0]).expect("a lane").offset;
        let drawn = |local: DVec2| ((local + offset) * f64::from(UNITS_PER_METRE)).as_vec2();
        let seen = Rect::from_corners(drawn(DVec2::new(-1.0, -0.5)), drawn(DVec2::new(3.5, 1.5)));
        look_at(&mut app, seen);
        let gone = DVec2::new(2.0, -50.0);
        let p = drawn(gone);
        spawn_ball_at(&mut app, lanes[0], p, 0, 0.05);
        app.update();
        let band = app.world().resource::<LaneBands>().of(lanes[0]);
        assert!(!band.contains(p), "the ball is beyond its band");
        let strays = &app.world().resource::<StrayBalls>().0;
        assert_eq!(strays.len(), 1, "{strays:?}");
        let stray = strays[0];
        let view = seen.intersect(band);
        assert!(
            (stray.edge - Vec2::new(view.max.x, view.min.y)).length() < 1e-3,
            "{stray:?} against the seen band {view:?}"
        );
        assert!(
            stray.direction.x > 0.0 && stray.direction.y < 0.0,
            "{stray:?}"
        );
        assert!((stray.position - gone).length() < 1e-6, "{stray:?}");
    }

    /// Zoomed into the ball pit's penalty box, a ball of the box outside the view is not marked (zoomed into the
    /// 2 000-ball pit, 1 800 arrows lined the view's edges); one that left the box is.
    #[test]
    fn a_ball_out_of_sight_inside_its_lane_s_area_is_not_marked() {
        let (mut app, lanes) = ball_batch_app("assets/scenes/ball_pit.ron");
        let offset = app.world().get::<Lane>(lanes[0]).expect("a lane").offset;
        let drawn = |local: DVec2| ((local + offset) * f64::from(UNITS_PER_METRE)).as_vec2();
        // The box's lower left quarter.
        let seen = Rect::from_corners(drawn(DVec2::new(-0.5, 0.0)), drawn(DVec2::new(0.0, 0.5)));
        look_at(&mut app, seen);
        let in_box = DVec2::new(0.3, 0.9);
        let flown = DVec2::new(0.0, 3.0);
        for (index, local) in [(0, in_box), (1, flown)] {
            spawn_ball_at(&mut app, lanes[0], drawn(local), index, 0.05);
        }
        app.update();
        let strays = &app.world().resource::<StrayBalls>().0;
        assert_eq!(strays.len(), 1, "{strays:?}");
        assert!((strays[0].position - flown).length() < 1e-6, "{strays:?}");
    }

    #[test]
    fn the_buffers_go_into_the_mesh_and_come_back_empty_with_their_memory() {
        let mut discs = Discs::default();
        for k in 0..100 {
            discs.push(Vec2::splat(k as f32), 1.0, 0.1, [1.0; 4]);
        }
        let expected = discs.clone();
        let mut mesh = Mesh::new(
            PrimitiveTopology::TriangleList,
            RenderAssetUsages::default(),
        );
        discs.move_into(&mut mesh);
        assert!(discs.is_empty());
        assert_eq!(mesh.count_vertices(), 400);
        assert_eq!(mesh.indices().map(|i| i.len()), Some(600));
        discs.take_back(&mut mesh);
        assert!(discs.is_empty() && discs.positions.is_empty() && discs.uvs.is_empty());
        assert!(discs.positions.capacity() >= 400 && discs.indices.capacity() >= 600);
        assert_eq!(mesh.count_vertices(), 0);
        // The same balls again give the same mesh.
        for k in 0..100 {
            discs.push(Vec2::splat(k as f32), 1.0, 0.1, [1.0; 4]);
        }
        assert_eq!(discs, expected);
    }
}
