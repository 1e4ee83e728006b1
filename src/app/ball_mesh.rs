//! Every ball of every lane drawn as one mesh, rebuilt each frame from the balls' interpolated transforms.
//!
//! Each ball is a quad. Its fragment shader (`ball.wgsl`) cuts out the disc, shades it darker towards the rim (so
//! touching balls in a pile stay apart on screen) and fades its outermost pixel, a smooth edge without
//! multisampling. A software renderer (Mesa's llvmpipe, the only one on a machine without a GPU) pays on the CPU
//! for every triangle it sets up: the 2 000-ball pit drew with the UI hidden at 27–30 fps with a 12-gon per ball,
//! as one mesh entity per ball or all in one mesh alike, and at 51 fps with no balls at all. Two triangles per
//! ball cost a sixth as much set-up as the 12-gon's fan, and the disc is exact at every size.

use bevy::asset::{RenderAssetUsages, embedded_asset, embedded_path};
use bevy::camera::visibility::NoFrustumCulling;
use bevy::mesh::{Indices, PrimitiveTopology};
use bevy::prelude::*;
use bevy::render::render_resource::AsBindGroup;
use bevy::shader::ShaderRef;
use bevy::sprite_render::{AlphaMode2d, Material2d, Material2dPlugin};

use super::method_color;
use crate::sim::{Ball, Lane, LaneMember};

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

/// The corners of a quad in the shader's uv units, counter-clockwise.
const CORNERS: [[f32; 2]; 4] = [[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]];

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

    /// Adds the quad of side `2 radius` around `centre`, its four corners with uv at (±1, ±1) and `color`, and
    /// its two triangles, counter-clockwise.
    pub fn push(&mut self, centre: Vec2, radius: f32, color: LinearRgba) {
        let first = self.positions.len() as u32;
        for uv in CORNERS {
            let p = centre + radius * Vec2::from(uv);
            self.positions.push([p.x, p.y, 0.0]);
            self.uvs.push(uv);
            self.colors.push(color.to_f32_array());
        }
        self.indices
            .extend_from_slice(&[first, first + 1, first + 2, first, first + 2, first + 3]);
    }

    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// Writes the quads into `mesh`.
    pub fn write_to(&self, mesh: &mut Mesh) {
        mesh.insert_attribute(Mesh::ATTRIBUTE_POSITION, self.positions.clone());
        mesh.insert_attribute(Mesh::ATTRIBUTE_UV_0, self.uvs.clone());
        mesh.insert_attribute(Mesh::ATTRIBUTE_COLOR, self.colors.clone());
        mesh.insert_indices(Indices::U32(self.indices.clone()));
    }
}

#[derive(Resource)]
pub struct BallShapes {
    mesh: Handle<Mesh>,
}

fn spawn_ball_batch(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<BallMaterial>>,
) {
    let mesh = meshes.add(Mesh::new(
        PrimitiveTopology::TriangleList,
        RenderAssetUsages::default(),
    ));
    commands.spawn((
        BallBatch,
        Mesh2d(mesh.clone()),
        MeshMaterial2d(materials.add(BallMaterial::default())),
        Transform::from_xyz(0.0, 0.0, BALL_Z),
        // The mesh changes every frame, and its bounds would be computed once, from an empty mesh.
        NoFrustumCulling,
        Visibility::Hidden,
    ));
    commands.insert_resource(BallShapes { mesh });
}

/// Rebuilds the balls' mesh from their transforms: the translation is a ball's centre and `scale.x` its drawn
/// radius (set by the render plugin's size rule); the colour is its lane's method's.
pub fn draw_balls(
    shapes: Option<Res<BallShapes>>,
    lanes: Query<&Lane>,
    balls: Query<(&Transform, &LaneMember), With<Ball>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut batch: Query<&mut Visibility, With<BallBatch>>,
    mut discs: Local<Discs>,
) {
    let (Some(shapes), Ok(mut visibility)) = (shapes, batch.single_mut()) else {
        return;
    };
    discs.clear();
    for (transform, member) in &balls {
        let color = lanes
            .get(member.0)
            .map(|lane| method_color(lane.world.settings.method))
            .unwrap_or(Color::WHITE)
            .to_linear();
        discs.push(transform.translation.truncate(), transform.scale.x, color);
    }
    visibility.set_if_neq(if discs.is_empty() {
        Visibility::Hidden
    } else {
        Visibility::Inherited
    });
    if !discs.is_empty()
        && let Some(mut mesh) = meshes.get_mut(&shapes.mesh)
    {
        discs.write_to(&mut mesh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_disc_is_a_counter_clockwise_quad_around_its_centre() {
        let mut discs = Discs::default();
        let green = LinearRgba::new(0.2, 0.6, 0.1, 1.0);
        let red = LinearRgba::new(0.8, 0.05, 0.03, 1.0);
        discs.push(Vec2::new(3.0, -1.0), 2.0, green);
        discs.push(Vec2::new(-5.0, 4.0), 0.5, red);
        assert_eq!(discs.positions.len(), 8);
        assert_eq!(discs.indices.len(), 12);
        for (k, (centre, radius, color)) in [
            (Vec2::new(3.0, -1.0), 2.0, green),
            (Vec2::new(-5.0, 4.0), 0.5, red),
        ]
        .into_iter()
        .enumerate()
        {
            for v in 4 * k..4 * k + 4 {
                let p = Vec2::new(discs.positions[v][0], discs.positions[v][1]);
                let uv = Vec2::from(discs.uvs[v]);
                assert_eq!(uv.abs(), Vec2::ONE);
                assert!((p - (centre + radius * uv)).length() < 1e-6);
                assert_eq!(discs.colors[v], color.to_f32_array());
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
        discs.clear();
        assert!(discs.is_empty());
        assert_eq!(discs, Discs::default());
    }
}
