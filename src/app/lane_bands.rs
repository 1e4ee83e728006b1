//! Lane bands: the part of the scene each lane's bodies are drawn in.
//!
//! Lanes are laid out in a column or a row with a gap between them (`sim::lane_offsets`). Each lane owns the
//! strip across the layout from the middle of the gap before it to the middle of the gap after it; the first and
//! last lanes' strips reach out to infinity, and every strip is unbounded across the layout. A ball outside its
//! own lane's strip would otherwise be drawn over another lane and pass for one of that lane's balls (an IPC ball
//! glancing off the top of its wall rises into the penalty lane above it). So each lane's balls are clipped to
//! its band, a ball entirely beyond it is shown by a marker on the band's edge in its lane's colour with its
//! position (a [`StrayBall`]), and a faint line marks where one band ends and the next begins.

use bevy::prelude::*;

use crate::physics::DVec2;
use crate::sim::{Lane, UNITS_PER_METRE};

/// The whole plane: the band of a lane alone (or of lanes that overlap, which no layout makes), which clips
/// nothing.
pub const EVERYWHERE: Rect = Rect {
    min: Vec2::NEG_INFINITY,
    max: Vec2::INFINITY,
};

/// The area a lane's contents were laid out in: its bounds moved by its offset, in render units.
pub fn lane_area(lane: &Lane) -> Rect {
    let corner = |p: DVec2| ((p + lane.offset) * f64::from(UNITS_PER_METRE)).as_vec2();
    Rect::from_corners(corner(lane.bounds.0), corner(lane.bounds.1))
}

/// The bands of lanes laid out in `areas` (render units), in the same order.
///
/// The axis the lanes are stacked along is the one along which no two areas overlap (y first: lanes wider than
/// tall are stacked one above the other). Along it, neighbours split the gap between them at its middle; across
/// it, every band is unbounded. One lane, overlapping areas or a non-finite one give every lane the whole plane.
pub fn lane_bands(areas: &[Rect]) -> Vec<Rect> {
    let everywhere = vec![EVERYWHERE; areas.len()];
    if areas.len() < 2 || !areas.iter().all(|a| a.min.is_finite() && a.max.is_finite()) {
        return everywhere;
    }
    let apart_along = |axis: usize| {
        areas.iter().enumerate().all(|(i, a)| {
            areas[i + 1..]
                .iter()
                .all(|b| a.max[axis] <= b.min[axis] || b.max[axis] <= a.min[axis])
        })
    };
    let Some(axis) = [1, 0].into_iter().find(|&axis| apart_along(axis)) else {
        return everywhere;
    };
    let mut order: Vec<usize> = (0..areas.len()).collect();
    order.sort_by(|&i, &j| areas[i].min[axis].total_cmp(&areas[j].min[axis]));
    let mut bands = everywhere;
    for pair in order.windows(2) {
        let (before, after) = (pair[0], pair[1]);
        let cut = 0.5 * (areas[before].max[axis] + areas[after].min[axis]);
        bands[before].max[axis] = cut;
        bands[after].min[axis] = cut;
    }
    bands
}

/// Each lane entity's band ([`lane_bands`]) this frame, in lane order.
#[derive(Resource, Debug, Default, Clone)]
pub struct LaneBands(pub Vec<(Entity, Rect)>);

impl LaneBands {
    /// The band of `lane` (the whole plane for a lane not seen).
    pub fn of(&self, lane: Entity) -> Rect {
        self.0
            .iter()
            .find(|(entity, _)| *entity == lane)
            .map_or(EVERYWHERE, |&(_, band)| band)
    }

    /// The lines between neighbouring bands, each as its two ends (render units), spanning the lanes' `areas`
    /// across the layout.
    pub fn boundaries(&self, areas: &[Rect]) -> Vec<(Vec2, Vec2)> {
        let span = areas.iter().fold(Rect::EMPTY, |all, a| all.union(*a));
        let mut lines = Vec::new();
        for (_, band) in &self.0 {
            // Each boundary is the finite top (or right) edge of the band below (or left of) it.
            if band.max.y.is_finite() {
                lines.push((
                    Vec2::new(span.min.x, band.max.y),
                    Vec2::new(span.max.x, band.max.y),
                ));
            }
            if band.max.x.is_finite() {
                lines.push((
                    Vec2::new(band.max.x, span.min.y),
                    Vec2::new(band.max.x, span.max.y),
                ));
            }
        }
        lines
    }
}

/// Computes [`LaneBands`] from the lanes' areas.
pub fn update_lane_bands(lanes: Query<(Entity, &Lane)>, mut bands: ResMut<LaneBands>) {
    let mut lanes: Vec<(Entity, &Lane)> = lanes.iter().collect();
    lanes.sort_by_key(|(_, lane)| lane.index);
    let areas: Vec<Rect> = lanes.iter().map(|(_, lane)| lane_area(lane)).collect();
    bands.0.clear();
    bands.0.extend(
        lanes
            .iter()
            .map(|&(entity, _)| entity)
            .zip(lane_bands(&areas)),
    );
}

/// The lanes of the scene at `path`, laid out as the sim lays them out, without their bodies.
#[cfg(test)]
pub(crate) fn laid_out_lanes(path: &str) -> Vec<Lane> {
    let scene =
        crate::scene::Scene::load(std::path::Path::new(path)).expect("a built-in scene loads");
    let worlds = scene.build();
    let bounds: Vec<_> = worlds.iter().map(crate::sim::lane_bounds).collect();
    let offsets = crate::sim::lane_offsets(&bounds);
    worlds
        .into_iter()
        .zip(bounds)
        .zip(offsets)
        .enumerate()
        .map(|(index, ((world, bounds), offset))| Lane::new(index, world, offset, bounds))
        .collect()
}

/// A ball drawn nowhere because it is entirely beyond its lane's band: it is shown by a marker where it left.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StrayBall {
    pub lane: Entity,
    /// Where the marker sits: the point of the band nearest the ball's centre, on its edge (render units).
    pub edge: Vec2,
    /// The unit vector from `edge` towards the ball.
    pub direction: Vec2,
    /// The ball's lane-local position in metres, as the selected-body panel gives it.
    pub position: DVec2,
    /// Its lane's colour.
    pub color: Color,
}

/// The balls beyond their lanes' bands this frame (see [`crate::app::ball_mesh::draw_balls`]).
#[derive(Resource, Debug, Default, Clone)]
pub struct StrayBalls(pub Vec<StrayBall>);

/// The point of `band` nearest `centre` (on the band's edge when `centre` is beyond it) and the unit vector
/// from there towards `centre` (zero when it is inside, or when `centre` is not a number).
///
/// A ball beyond f32's range (its f64 position converted) arrives as ±∞: it is taken at the largest finite
/// coordinate, so its marker still points its way. The offset is scaled before it is normalised, since its
/// length overflows near that range.
pub fn edge_towards(centre: Vec2, band: Rect) -> (Vec2, Vec2) {
    let centre = Vec2::new(
        centre.x.clamp(f32::MIN, f32::MAX),
        centre.y.clamp(f32::MIN, f32::MAX),
    );
    let edge = centre.max(band.min).min(band.max);
    let away = centre - edge;
    let scale = away.abs().max_element();
    let direction = if scale > 0.0 && scale.is_finite() {
        (away / scale).normalize_or_zero()
    } else {
        Vec2::ZERO
    };
    (edge, direction)
}

/// The part of the segment `a`–`b` inside `band`, if any (Liang–Barsky: the segment's parameter range is cut
/// by each of the band's four half-planes in turn; an infinite side cuts nothing).
pub fn clip_segment(a: Vec2, b: Vec2, band: Rect) -> Option<(Vec2, Vec2)> {
    let d = b - a;
    let (mut t0, mut t1) = (0.0_f32, 1.0_f32);
    for axis in 0..2 {
        // Inside the half-plane where p t <= q.
        for (p, q) in [
            (-d[axis], a[axis] - band.min[axis]),
            (d[axis], band.max[axis] - a[axis]),
        ] {
            if p == 0.0 {
                if q < 0.0 {
                    return None;
                }
            } else if p < 0.0 {
                t0 = t0.max(q / p);
            } else {
                t1 = t1.min(q / p);
            }
        }
    }
    (t0 < t1).then(|| (a + d * t0, a + d * t1))
}

/// The parts of the segment `a`–`b` outside every rectangle of `holes`, in order from `a`: the segment's
/// parameter range less the range [`clip_segment`] finds inside each hole.
pub fn clear_of(a: Vec2, b: Vec2, holes: &[Rect]) -> Vec<(Vec2, Vec2)> {
    let d = b - a;
    let along = |p: Vec2| {
        if d == Vec2::ZERO {
            0.0
        } else {
            (p - a).dot(d) / d.length_squared()
        }
    };
    let mut cut: Vec<(f32, f32)> = holes
        .iter()
        .filter_map(|&hole| clip_segment(a, b, hole))
        .map(|(p, q)| (along(p), along(q)))
        .collect();
    cut.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut parts = Vec::new();
    let mut t = 0.0_f32;
    for (t0, t1) in cut {
        if t0 > t {
            parts.push((a + d * t, a + d * t0));
        }
        t = t.max(t1);
    }
    if t < 1.0 {
        parts.push((a + d * t, b));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacked_lanes_split_the_gap_between_them_and_reach_out_to_infinity() {
        // Three lanes one above the other (the first on top), 100 units tall with gaps of 20 and 40.
        let areas = [
            Rect::new(0.0, 0.0, 300.0, 100.0),
            Rect::new(10.0, -120.0, 250.0, -20.0),
            Rect::new(0.0, -260.0, 300.0, -160.0),
        ];
        let bands = lane_bands(&areas);
        let inf = f32::INFINITY;
        assert_eq!(bands[0], Rect::new(-inf, -10.0, inf, inf));
        assert_eq!(bands[1], Rect::new(-inf, -140.0, inf, -10.0));
        assert_eq!(bands[2], Rect::new(-inf, -inf, inf, -140.0));
        // Every lane's own area lies in its band, and in no other.
        for (k, area) in areas.iter().enumerate() {
            for (j, band) in bands.iter().enumerate() {
                let inside = band.contains(area.min) && band.contains(area.max);
                assert_eq!(inside, j == k, "lane {k} in band {j}");
            }
        }
    }

    #[test]
    fn side_by_side_lanes_get_columns_and_a_lone_or_overlapping_lane_the_plane() {
        let areas = [
            Rect::new(0.0, 0.0, 100.0, 300.0),
            Rect::new(130.0, 0.0, 230.0, 300.0),
        ];
        let bands = lane_bands(&areas);
        let inf = f32::INFINITY;
        assert_eq!(bands[0], Rect::new(-inf, -inf, 115.0, inf));
        assert_eq!(bands[1], Rect::new(115.0, -inf, inf, inf));
        assert_eq!(lane_bands(&areas[..1]), vec![EVERYWHERE]);
        let overlapping = [
            Rect::new(0.0, 0.0, 100.0, 100.0),
            Rect::new(50.0, 50.0, 150.0, 150.0),
        ];
        assert_eq!(lane_bands(&overlapping), vec![EVERYWHERE; 2]);
        let broken = [
            Rect::new(0.0, 0.0, 1.0, 1.0),
            // `Rect::new` would drop the NaN.
            Rect {
                min: Vec2::new(2.0, 0.0),
                max: Vec2::new(f32::NAN, 1.0),
            },
        ];
        assert_eq!(lane_bands(&broken), vec![EVERYWHERE; 2]);
    }

    #[test]
    fn a_ball_beyond_its_band_is_marked_on_the_edge_nearest_it() {
        let band = Rect::new(f32::NEG_INFINITY, -140.0, f32::INFINITY, -10.0);
        assert_eq!(
            edge_towards(Vec2::new(50.0, 30.0), band),
            (Vec2::new(50.0, -10.0), Vec2::Y)
        );
        assert_eq!(
            edge_towards(Vec2::new(-5.0, -300.0), band),
            (Vec2::new(-5.0, -140.0), Vec2::NEG_Y)
        );
        assert_eq!(
            edge_towards(Vec2::new(7.0, -50.0), band),
            (Vec2::new(7.0, -50.0), Vec2::ZERO)
        );
        // Beyond f32's range, or so far that the offset's length overflows: the marker still points the ball's
        // way (it had no length).
        let lane = Rect::new(-100.0, -140.0, 100.0, -10.0);
        for (centre, direction) in [
            (Vec2::new(f32::INFINITY, -50.0), Vec2::X),
            (Vec2::new(-50.0, f32::NEG_INFINITY), Vec2::NEG_Y),
            (Vec2::new(3e38, 3e38), Vec2::ONE.normalize()),
            (
                Vec2::new(f32::INFINITY, f32::INFINITY),
                Vec2::ONE.normalize(),
            ),
        ] {
            let (edge, found) = edge_towards(centre, lane);
            assert!(edge.is_finite() && lane.contains(edge), "{centre}: {edge}");
            assert!((found - direction).length() < 1e-6, "{centre}: {found}");
        }
        assert_eq!(
            edge_towards(Vec2::new(f32::INFINITY, 30.0), band),
            (Vec2::new(f32::MAX, -10.0), Vec2::Y)
        );
        // Not a number: no direction to point (the sim pauses such a lane and says why).
        assert_eq!(edge_towards(Vec2::new(f32::NAN, 0.0), lane).1, Vec2::ZERO);
    }

    #[test]
    fn a_line_is_broken_where_it_runs_through_a_hole_and_whole_elsewhere() {
        let (a, b) = (Vec2::new(0.0, 10.0), Vec2::new(100.0, 10.0));
        assert_eq!(clear_of(a, b, &[]), vec![(a, b)]);
        // Two holes across it, overlapping each other, and one beside it.
        let holes = [
            Rect::new(20.0, 0.0, 40.0, 20.0),
            Rect::new(35.0, 5.0, 50.0, 15.0),
            Rect::new(60.0, 11.0, 70.0, 30.0),
        ];
        assert_eq!(
            clear_of(a, b, &holes),
            vec![(a, Vec2::new(20.0, 10.0)), (Vec2::new(50.0, 10.0), b)]
        );
        // A hole over its start, and one over all of it.
        let start = Rect::new(-5.0, 0.0, 10.0, 20.0);
        assert_eq!(clear_of(a, b, &[start]), vec![(Vec2::new(10.0, 10.0), b)]);
        assert!(clear_of(a, b, &[Rect::new(-1.0, 0.0, 101.0, 20.0)]).is_empty());
    }

    #[test]
    fn a_rod_across_the_edge_of_its_band_is_cut_there_and_one_beyond_it_is_not_drawn() {
        let band = Rect::new(f32::NEG_INFINITY, -140.0, f32::INFINITY, -10.0);
        // Inside: unchanged.
        let inside = (Vec2::new(0.0, -100.0), Vec2::new(50.0, -20.0));
        assert_eq!(clip_segment(inside.0, inside.1, band), Some(inside));
        // Across the top edge: cut at y = -10, halfway along.
        assert_eq!(
            clip_segment(Vec2::new(0.0, -30.0), Vec2::new(40.0, 10.0), band),
            Some((Vec2::new(0.0, -30.0), Vec2::new(20.0, -10.0)))
        );
        // Through both edges (to a few ulps: the cut points come from divisions).
        let (a, b) = clip_segment(Vec2::new(5.0, 60.0), Vec2::new(5.0, -240.0), band)
            .expect("it crosses the band");
        assert!(a.abs_diff_eq(Vec2::new(5.0, -10.0), 1e-4), "{a}");
        assert!(b.abs_diff_eq(Vec2::new(5.0, -140.0), 1e-4), "{b}");
        // Beyond, parallel to the edge or not.
        assert_eq!(
            clip_segment(Vec2::new(0.0, 0.0), Vec2::new(90.0, 0.0), band),
            None
        );
        assert_eq!(
            clip_segment(Vec2::new(0.0, 0.0), Vec2::new(10.0, 30.0), band),
            None
        );
    }
}
