//! Every ball of every lane drawn as one mesh, rebuilt each frame from the balls' interpolated transforms.
//!
//! Each ball is a quad. Its fragment shader (`ball.wgsl`) cuts out the disc, shades it darker towards the rim (so
//! touching balls in a pile stay apart on screen) and fades the pixel across its rim, a smooth edge without
//! multisampling. A software renderer (Mesa's llvmpipe, the only one on a machine without a GPU) pays on the CPU
//! for every triangle it sets up: the 2 000-ball pit drew with the UI hidden at 27–30 fps with a 12-gon per ball
//! (a fan of 10 triangles), as one mesh entity per ball or all in one mesh alike, and at 51 fps with no balls at
//! all. Two triangles per ball cost a fifth of the 12-gon's set-up, and the disc is exact at every size.

use bevy::asset::{RenderAssetUsages, embedded_asset, embedded_path};
use bevy::camera::visibility::NoFrustumCulling;
use bevy::mesh::{Indices, PrimitiveTopology};
use bevy::prelude::*;
use bevy::render::render_resource::AsBindGroup;
use bevy::shader::ShaderRef;
use bevy::sprite_render::{AlphaMode2d, Material2d, Material2dPlugin};

use super::method_color;
use super::render::{MainCamera, camera_scale, drawn_radius};
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

/// Opacity of a ball drawn over another lane's area ([`in_another_lane`]).
const STRAY_ALPHA: f32 = 0.3;

/// Whether `p` (render units) lies in the drawn area of a lane other than `own`: a ball that has flown out of
/// its own lane (a penalty ball through a wall, an IPC ball rebounding) is drawn faint over its neighbour,
/// where it would otherwise pass for one of that lane's balls.
fn in_another_lane(p: Vec2, own: Entity, areas: &[(Entity, [f32; 4], Rect)]) -> bool {
    areas
        .iter()
        .any(|(lane, _, area)| *lane != own && area.contains(p))
}

/// Rebuilds the balls' mesh: each ball's centre is its (interpolated) translation, its radius the render
/// plugin's size rule ([`drawn_radius`]) and its colour its lane's method's, faint inside another lane's area
/// ([`in_another_lane`]).
///
/// The mesh is never handed to the renderer without vertices: bevy_render's mesh allocator gives a mesh with no
/// vertex data no room, yet still copies its data in, and logs two "Use-after-free" errors for each upload. With
/// no balls to draw (the rod drop has none) the batch is hidden and its mesh left as it was, unmodified; the
/// mesh itself is only created with the first balls.
#[allow(clippy::too_many_arguments)] // a Bevy system: each parameter is one query, resource or buffer
pub fn draw_balls(
    mut commands: Commands,
    camera: Query<&Projection, With<MainCamera>>,
    lanes: Query<(Entity, &Lane)>,
    balls: Query<(&Ball, &Transform, &LaneMember)>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut batch: Query<(Entity, Option<&Mesh2d>, &mut Visibility), With<BallBatch>>,
    mut discs: Local<Discs>,
    mut lanes_drawn: Local<Vec<(Entity, [f32; 4], Rect)>>,
) {
    let (Ok(projection), Ok((batch_entity, mesh, mut visibility))) =
        (camera.single(), batch.single_mut())
    else {
        return;
    };
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
        let color = method_color(lane.world.settings.method).to_linear();
        let (lo, hi) = lane.bounds;
        let corner =
            |p: crate::physics::DVec2| ((p + lane.offset) * f64::from(UNITS_PER_METRE)).as_vec2();
        let area = Rect::from_corners(corner(lo), corner(hi));
        (entity, color.to_f32_array(), area)
    }));
    let px = camera_scale(projection);
    let margin = EDGE_MARGIN_PX * px;
    for (ball, transform, member) in &balls {
        let centre = transform.translation.truncate();
        let mut color = lanes_drawn
            .iter()
            .find(|(lane, _, _)| *lane == member.0)
            .map_or([1.0; 4], |&(_, color, _)| color);
        if in_another_lane(centre, member.0, &lanes_drawn) {
            color[3] = STRAY_ALPHA;
        }
        discs.push(centre, drawn_radius(ball.radius, px), margin, color);
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use bevy::asset::AssetPlugin;

    use super::*;
    use crate::physics::DVec2;
    use crate::scene::Scene;
    use crate::sim::{lane_bounds, lane_offsets};

    /// The lanes of a shipped scene, laid out as the sim lays them out, without their bodies.
    fn lanes_of(path: &str) -> Vec<Lane> {
        let scene = Scene::load(Path::new(path)).expect("a built-in scene loads");
        let worlds = scene.build();
        let bounds: Vec<(DVec2, DVec2)> = worlds.iter().map(lane_bounds).collect();
        let offsets = lane_offsets(&bounds);
        worlds
            .into_iter()
            .zip(bounds)
            .zip(offsets)
            .enumerate()
            .map(|(index, ((world, bounds), offset))| Lane {
                index,
                world,
                offset,
                bounds,
                ball_entities: Vec::new(),
                rod_entities: Vec::new(),
                wall_entities: Vec::new(),
            })
            .collect()
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
            .add_systems(Startup, spawn_ball_batch)
            .add_systems(Update, draw_balls)
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
    fn a_ball_in_another_lanes_area_is_told_apart_and_one_in_its_own_or_outside_all_is_not() {
        let (left, right) = (Entity::from_raw_u32(1), Entity::from_raw_u32(2));
        let (left, right) = (left.expect("an entity"), right.expect("an entity"));
        let areas = [
            (left, [1.0; 4], Rect::new(0.0, 0.0, 10.0, 10.0)),
            (right, [1.0; 4], Rect::new(12.0, 0.0, 22.0, 10.0)),
        ];
        // A left-lane ball that flew through its wall into the right lane's box.
        assert!(in_another_lane(Vec2::new(15.0, 5.0), left, &areas));
        // In its own lane, in the gap between the lanes, or far away: drawn.
        assert!(!in_another_lane(Vec2::new(5.0, 5.0), left, &areas));
        assert!(!in_another_lane(Vec2::new(11.0, 5.0), left, &areas));
        assert!(!in_another_lane(Vec2::new(100.0, 5.0), left, &areas));
        assert!(!in_another_lane(Vec2::new(15.0, 5.0), right, &areas));
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
