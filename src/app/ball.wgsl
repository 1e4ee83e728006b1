// Balls as discs on quads (see src/app/ball_mesh.rs): uv is in units of the ball's radius, the disc is
// |uv| ≤ 1, its centre has the vertex colour and its rim RIM_SHADE of it, and the pixel across the rim fades so
// the edge stays smooth without multisampling.
#import bevy_sprite::{
    mesh2d_vertex_output::VertexOutput,
    mesh2d_view_bindings::view,
}
#ifdef TONEMAP_IN_SHADER
#import bevy_core_pipeline::tonemapping
#endif
#ifdef SRGB_OUTPUT
#import bevy_render::color_operations::linear_to_srgb
#endif
#ifdef OKLAB_OUTPUT
#import bevy_render::color_operations::linear_rgb_to_oklab
#endif

const RIM_SHADE: f32 = 0.55;

@fragment
fn fragment(mesh: VertexOutput) -> @location(0) vec4<f32> {
    let d = length(mesh.uv);
    // One pixel in uv units; the fade spans the pixel centred on the rim (the quad reaches half a pixel beyond).
    let pixel = max(fwidth(d), 1e-4);
    let coverage = clamp((1.0 - d) / pixel + 0.5, 0.0, 1.0);
    if coverage <= 0.0 {
        discard;
    }
    let shade = mix(1.0, RIM_SHADE, d * d * d);
    var output_color = vec4(mesh.color.rgb * shade, mesh.color.a * coverage);
#ifdef TONEMAP_IN_SHADER
    output_color = tonemapping::tone_mapping(output_color, view.color_grading);
#endif
#ifdef SRGB_OUTPUT
    output_color = vec4(linear_to_srgb(output_color.rgb), output_color.a);
#endif
#ifdef OKLAB_OUTPUT
    output_color = vec4(linear_rgb_to_oklab(output_color.rgb), output_color.a);
#endif
    return output_color;
}
