//! Exact continuous collision detection for straight-line motion (SPEC §1.3): the earliest
//! `t ∈ [0, 1]` at which a moving circle touches a static box, or two moving circles touch.

use glam::DVec2;

use super::geometry::Wall;

/// Earliest `t ∈ [0, 1]` at which a circle of radius `r` moving `p → p + Δ` touches `wall`, or `None`.
///
/// The set of centres within `r` of the box is the box grown by `r` with rounded corners. The segment is
/// clipped against the grown box (slab test); if it enters through a corner square the exact time is the
/// first intersection with that corner's circle. A segment that misses the corner circle misses the
/// rounded box entirely (it could only reach a face strip through the circle).
/// Returns `Some(0.0)` when the circle already touches or overlaps the box.
pub fn time_of_impact_ball_wall(p: DVec2, delta: DVec2, radius: f64, wall: &Wall) -> Option<f64> {
    if wall.signed_distance(p).value <= radius {
        return Some(0.0);
    }
    // The start's rounding error joins each face's distance last, as in `signed_distance`, so the time of impact
    // and the distance agree on where a face is to the last bit.
    let (o, error) = wall.to_local_with_error(p);
    let dir = wall.to_local_direction(delta);
    let grown = wall.half_extents + DVec2::splat(radius);
    let mut t_enter = 0.0f64;
    let mut t_exit = 1.0f64;
    for axis in 0..2 {
        let (o_a, e_a, d_a, g_a) = (o[axis], error[axis], dir[axis], grown[axis]);
        // The start's distances past the low and the high face along this axis.
        let below = (-g_a - o_a) - e_a;
        let above = (o_a - g_a) + e_a;
        if d_a == 0.0 {
            if below > 0.0 || above > 0.0 {
                return None;
            }
            continue;
        }
        // Entering face: the one facing the start point.
        let (t0, t1) = if d_a > 0.0 {
            (below / d_a, -above / d_a)
        } else {
            (-above / d_a, below / d_a)
        };
        t_enter = t_enter.max(t0);
        t_exit = t_exit.min(t1);
        if t_enter > t_exit {
            return None;
        }
    }
    let hit = o + dir * t_enter;
    let h = wall.half_extents;
    if radius > 0.0 && hit.x.abs() > h.x && hit.y.abs() > h.y {
        let corner = DVec2::new(h.x.copysign(hit.x), h.y.copysign(hit.y));
        return circle_ray_first_hit((o - corner) + error, dir, radius).filter(|t| *t <= 1.0);
    }
    Some(t_enter)
}

/// Earliest `t ∈ [0, 1]` at which circles `(pᵢ + t Δᵢ, rᵢ)` and `(pⱼ + t Δⱼ, rⱼ)` touch, or `None`.
/// Returns `Some(0.0)` when they already touch or overlap.
pub fn time_of_impact_ball_ball(
    pi: DVec2,
    delta_i: DVec2,
    ri: f64,
    pj: DVec2,
    delta_j: DVec2,
    rj: f64,
) -> Option<f64> {
    circle_ray_first_hit(pi - pj, delta_i - delta_j, ri + rj).filter(|t| *t <= 1.0)
}

/// A position's resolution in units of its last place: no separation below `RESOLUTION_ULPS · ε · |x|` is
/// trusted, whatever `d̂` (see [`time_of_impact_ball_wall_within`]).
const RESOLUTION_ULPS: f64 = 64.0;

/// The separation below which two bodies around `scale` metres from the origin count as touching: at least
/// `min_separation`, and never finer than their coordinates can resolve.
fn separation_floor(min_separation: f64, scale: f64) -> f64 {
    min_separation.max(RESOLUTION_ULPS * f64::EPSILON * scale)
}

/// [`time_of_impact_ball_wall`], with a segment that ends closer than `min_separation` to the wall (and closer
/// than it starts) counted as touching at its end, `t = 1`.
///
/// A straight segment can end a hair's breadth from contact without reaching it: a ball whose free flight lands
/// on a wall's face to the last bit ends `10⁻¹⁷` m from it, closer than a position near 1 m can resolve, where
/// no Newton step can move it. Clamped like an impact, the line search stops it short instead.
pub fn time_of_impact_ball_wall_within(
    p: DVec2,
    delta: DVec2,
    radius: f64,
    wall: &Wall,
    min_separation: f64,
) -> Option<f64> {
    time_of_impact_ball_wall(p, delta, radius, wall).or_else(|| {
        let end = wall.signed_distance(p + delta).value - radius;
        let scale = p.abs().max_element().max(wall.center.abs().max_element());
        (end < separation_floor(min_separation, scale)
            && end < wall.signed_distance(p).value - radius)
            .then_some(1.0)
    })
}

/// [`time_of_impact_ball_ball`], with a pair whose relative motion passes closer than `min_separation` to contact
/// (and closer than it starts) counted as touching where it passes closest.
///
/// As against a wall, a segment can end a hair's breadth from contact; and two point balls (`R = 0`) thrown at
/// each other along a slant pass within `10⁻¹⁷` m, where `a R² − (p × d)²` rounds below zero and the exact time
/// of impact reports a miss: they would pass through each other.
pub fn time_of_impact_ball_ball_within(
    pi: DVec2,
    delta_i: DVec2,
    ri: f64,
    pj: DVec2,
    delta_j: DVec2,
    rj: f64,
    min_separation: f64,
) -> Option<f64> {
    time_of_impact_ball_ball(pi, delta_i, ri, pj, delta_j, rj).or_else(|| {
        // The same relative course as the exact test, so the verdict does not depend on the pair's order.
        let (p, d, radii) = (pi - pj, delta_i - delta_j, ri + rj);
        let a = d.length_squared();
        let t = if a > 0.0 {
            (-p.dot(d) / a).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let nearest = p + d * t;
        let scale = pi.abs().max_element().max(pj.abs().max_element());
        let floor = separation_floor(min_separation, scale);
        // Most candidate pairs pass far apart: skip the square roots for them (the margin keeps every verdict
        // of the exact test below).
        let reach = (radii + floor) * (1.0 + 1e-9);
        if nearest.length_squared() > reach * reach {
            return None;
        }
        let closest = nearest.length() - radii;
        (closest < floor && closest < p.length() - radii).then_some(t)
    })
}

/// Below this share of `b²`, `b² − a c` has lost most of its digits to cancellation (see [`circle_ray_first_hit`]).
const CANCELLATION: f64 = 1e-6;

/// Smallest `t ≥ 0` with `|p + t d| = R`, or `None` when the ray misses or moves away.
/// Uses the cancellation-free root `t = c / (−b + √(b² − a c))`.
fn circle_ray_first_hit(p: DVec2, d: DVec2, radius: f64) -> Option<f64> {
    let c = p.length_squared() - radius * radius;
    if c <= 0.0 {
        return Some(0.0);
    }
    let b = p.dot(d);
    if b >= 0.0 {
        return None;
    }
    let a = d.length_squared();
    let mut discriminant = b * b - a * c;
    if discriminant < CANCELLATION * b * b && a * (radius * radius) <= b * b {
        // `b² − a c = a R² − (p × d)²`, exactly. The left form cancels where its two terms nearly agree: on a
        // head-on course with `R = 0` (two point balls along an axis, `p × d = 0`) it rounds to a tiny negative
        // value, and the balls would pass through each other unseen, or to a tiny positive one, whose square root
        // moves the time by 10⁻⁸. The right form is exact there (0), and its terms are the smaller ones while
        // `a R² ≤ b²`; a ball grazing close to contact (`a R²` far above `b²`) keeps the left form, which is the
        // more accurate there. Used only in that regime, so every other time keeps its bits.
        let cross = p.perp_dot(d);
        discriminant = a * (radius * radius) - cross * cross;
        if discriminant < 0.0 {
            return None;
        }
    }
    Some(c / (-b + discriminant.sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::uniform;

    fn unit_box() -> Wall {
        Wall {
            center: DVec2::ZERO,
            half_extents: DVec2::new(1.0, 1.0),
            angle: 0.0,
        }
    }

    /// The first root of a convex `g` on `[0, 1]` with `g(0) > 0`, or `None` when `g > 0` throughout: golden-
    /// section search for the minimiser (exact for convex functions), then bisection on `[0, t_min]`, where a
    /// convex `g` crosses zero once. Also returns `min g`, to tell grazing cases apart.
    fn first_root_of_convex(g: impl Fn(f64) -> f64) -> (Option<f64>, f64) {
        let ratio = 0.5 * (5f64.sqrt() - 1.0);
        let (mut a, mut b) = (0.0f64, 1.0f64);
        for _ in 0..200 {
            let c = b - ratio * (b - a);
            let d = a + ratio * (b - a);
            if g(c) <= g(d) {
                b = d;
            } else {
                a = c;
            }
        }
        let mut t_min = 0.5 * (a + b);
        for t in [0.0, 1.0] {
            if g(t) < g(t_min) {
                t_min = t;
            }
        }
        let min = g(t_min);
        if min > 0.0 {
            return (None, min);
        }
        let (mut lo, mut hi) = (0.0f64, t_min);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if g(mid) > 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (Some(hi), min)
    }

    /// The signed distance to a box, by clamping in box coordinates (independent of [`Wall::signed_distance`]).
    fn clamp_distance(wall: &Wall, p: DVec2) -> f64 {
        let (s, c) = wall.angle.sin_cos();
        let d = p - wall.center;
        let q = DVec2::new(c * d.x + s * d.y, -s * d.x + c * d.y);
        let h = wall.half_extents;
        let outside = (q.abs() - h).max(DVec2::ZERO);
        outside.length() + (q.abs() - h).max_element().min(0.0)
    }

    /// Random rotated boxes, radii (0 included) and straight motions: the time of impact is the first zero of
    /// `g(t) = sd(p + tΔ) − r`, which is convex in `t` (the signed distance to a convex set is convex), found by
    /// golden section and bisection. Tolerance 10⁻⁹ in `t`; motions whose closest approach is within 10⁻⁷ m of
    /// touching are grazes, where the root is ill-conditioned (√ of the error), so there only the verdict's
    /// consistency is checked.
    #[test]
    fn ball_wall_time_of_impact_matches_a_convex_root_search_on_random_motions() {
        let mut next = uniform(0xCC_D001);
        let (mut hits, mut misses) = (0, 0);
        for case in 0..3000 {
            let wall = Wall {
                center: DVec2::new(2.0 * next() - 1.0, 2.0 * next() - 1.0),
                half_extents: DVec2::new(0.005 + 0.5 * next(), 0.005 + 0.5 * next()),
                angle: if case % 5 == 0 {
                    0.0
                } else {
                    7.0 * next() - 3.5
                },
            };
            let radius = if case % 4 == 0 { 0.0 } else { 0.3 * next() };
            let p = DVec2::new(6.0 * next() - 3.0, 6.0 * next() - 3.0);
            // Aim near the box most of the time, so hits, misses and corner hits all occur.
            let target = wall.center + DVec2::new(2.0 * next() - 1.0, 2.0 * next() - 1.0);
            let delta = (target - p) * (0.3 + 1.5 * next());
            let g = |t: f64| clamp_distance(&wall, p + delta * t) - radius;
            if g(0.0) <= 0.0 {
                assert_eq!(time_of_impact_ball_wall(p, delta, radius, &wall), Some(0.0));
                continue;
            }
            let (expected, min) = first_root_of_convex(g);
            let got = time_of_impact_ball_wall(p, delta, radius, &wall);
            if min.abs() < 1e-7 {
                continue;
            }
            match (got, expected) {
                (Some(t), Some(e)) => {
                    hits += 1;
                    assert!(
                        (t - e).abs() <= 1e-9,
                        "case {case}: t = {t}, reference {e} ({wall:?}, p {p}, Δ {delta}, r {radius})"
                    );
                }
                (None, None) => misses += 1,
                _ => panic!(
                    "case {case}: {got:?} vs reference {expected:?} ({wall:?}, p {p}, Δ {delta}, r {radius})"
                ),
            }
        }
        assert!(hits > 500 && misses > 500, "hits {hits}, misses {misses}");
    }

    /// Random pairs of moving circles: the time of impact is the first zero of the convex
    /// `g(t) = |(pᵢ − pⱼ) + t(Δᵢ − Δⱼ)| − rᵢ − rⱼ`, as above.
    #[test]
    fn ball_ball_time_of_impact_matches_a_convex_root_search_on_random_motions() {
        let mut next = uniform(0xCC_D002);
        let (mut hits, mut misses) = (0, 0);
        for case in 0..3000 {
            let mut point = || DVec2::new(4.0 * next() - 2.0, 4.0 * next() - 2.0);
            let (pi, pj) = (point(), point());
            let (ti, tj) = (point() * 0.3, point() * 0.3);
            let scale = 0.5 + 1.5 * next();
            let (di, dj) = ((tj - pi) * scale, (ti - pj) * scale * next());
            let (ri, rj) = (0.3 * next(), if case % 4 == 0 { 0.0 } else { 0.3 * next() });
            let g = |t: f64| ((pi - pj) + (di - dj) * t).length() - ri - rj;
            if g(0.0) <= 0.0 {
                assert_eq!(time_of_impact_ball_ball(pi, di, ri, pj, dj, rj), Some(0.0));
                continue;
            }
            let (expected, min) = first_root_of_convex(g);
            let got = time_of_impact_ball_ball(pi, di, ri, pj, dj, rj);
            if min.abs() < 1e-7 {
                continue;
            }
            match (got, expected) {
                (Some(t), Some(e)) => {
                    hits += 1;
                    assert!((t - e).abs() <= 1e-9, "case {case}: t = {t}, reference {e}");
                }
                (None, None) => misses += 1,
                _ => panic!("case {case}: {got:?} vs reference {expected:?}"),
            }
        }
        assert!(hits > 300 && misses > 300, "hits {hits}, misses {misses}");
    }

    #[test]
    fn point_through_a_face_head_on_hits_at_one_half() {
        let t = time_of_impact_ball_wall(
            DVec2::new(-3.0, 0.0),
            DVec2::new(4.0, 0.0),
            0.0,
            &unit_box(),
        );
        assert_eq!(t, Some(0.5));
    }

    #[test]
    fn circle_head_on_hits_when_its_surface_arrives() {
        let t = time_of_impact_ball_wall(
            DVec2::new(-3.0, 0.2),
            DVec2::new(4.0, 0.0),
            0.5,
            &unit_box(),
        );
        assert_eq!(t, Some(0.375));
    }

    #[test]
    fn oblique_motion_into_a_rotated_box() {
        let wall = Wall {
            center: DVec2::new(1.0, 1.0),
            half_extents: DVec2::new(1.0, 0.5),
            angle: std::f64::consts::FRAC_PI_2,
        };
        // Rotated by 90°, the box spans x ∈ [0.5, 1.5], y ∈ [0, 2]. Move from (-0.5, 0) by (2, 2):
        // x reaches 0.5 at t = 0.5, where y = 1 is inside the span.
        let t = time_of_impact_ball_wall(DVec2::new(-0.5, 0.0), DVec2::new(2.0, 2.0), 0.0, &wall)
            .expect("hits");
        assert!((t - 0.5).abs() < 1e-12, "{t}");
    }

    #[test]
    fn parallel_motion_beside_a_box_never_hits() {
        let t = time_of_impact_ball_wall(
            DVec2::new(-3.0, 1.5),
            DVec2::new(6.0, 0.0),
            0.4,
            &unit_box(),
        );
        assert_eq!(t, None);
        let t = time_of_impact_ball_ball(
            DVec2::new(0.0, 0.0),
            DVec2::new(1.0, 0.0),
            0.1,
            DVec2::new(0.0, 1.0),
            DVec2::new(1.0, 0.0),
            0.1,
        );
        assert_eq!(t, None);
    }

    #[test]
    fn grazing_a_rounded_corner_touches_exactly_once() {
        // Radius 0.5 moving along y = 1.5 first touches the corner (−1, 1) when its centre is at x = −1,
        // then slides along the top face at distance exactly 0.5.
        let t = time_of_impact_ball_wall(
            DVec2::new(-3.0, 1.5),
            DVec2::new(8.0, 0.0),
            0.5,
            &unit_box(),
        );
        assert_eq!(t, Some(0.25));
        // A hair higher misses.
        let t = time_of_impact_ball_wall(
            DVec2::new(-3.0, 1.5001),
            DVec2::new(8.0, 0.0),
            0.5,
            &unit_box(),
        );
        assert_eq!(t, None);
    }

    #[test]
    fn diagonal_approach_to_a_corner_hits_the_corner_circle() {
        let r = 0.5;
        let start = DVec2::new(3.0, 3.0);
        let t =
            time_of_impact_ball_wall(start, DVec2::new(-4.0, -4.0), r, &unit_box()).expect("hits");
        let centre = start + DVec2::new(-4.0, -4.0) * t;
        assert!(((centre - DVec2::new(1.0, 1.0)).length() - r).abs() < 1e-12);
    }

    #[test]
    fn circles_head_on_meet_at_the_predicted_time() {
        let t = time_of_impact_ball_ball(
            DVec2::new(-2.0, 0.0),
            DVec2::new(2.0, 0.0),
            0.5,
            DVec2::new(2.0, 0.0),
            DVec2::new(-2.0, 0.0),
            0.5,
        );
        assert_eq!(t, Some(0.75));
    }

    #[test]
    fn circles_grazing_touch_once() {
        let t = time_of_impact_ball_ball(
            DVec2::new(-2.0, 1.0),
            DVec2::new(4.0, 0.0),
            0.5,
            DVec2::ZERO,
            DVec2::ZERO,
            0.5,
        );
        assert_eq!(t, Some(0.5));
    }

    #[test]
    fn short_motion_that_stops_before_contact_reports_none() {
        let t = time_of_impact_ball_wall(
            DVec2::new(-3.0, 0.0),
            DVec2::new(1.0, 0.0),
            0.0,
            &unit_box(),
        );
        assert_eq!(t, None);
    }

    /// Two point balls (R = 0) on a head-on course along an axis, their segments crossing: every one meets, and at
    /// the time the coordinates give. Under `b² − a c` alone a share of them rounded to a miss and the balls
    /// passed through each other; the check counts those, so it fails if the exact form is ever dropped.
    #[test]
    fn point_balls_on_a_head_on_course_always_meet() {
        let mut next = crate::testing::uniform(11);
        let mut naive_misses = 0;
        for _ in 0..20_000 {
            let (a, b) = (next() - 0.5, next() + 0.5);
            let (va, vb) = (0.5 + next(), -0.5 - next());
            let (pa, pb) = (DVec2::new(a, 0.0), DVec2::new(b, 0.0));
            let (da, db) = (DVec2::new(va, 0.0), DVec2::new(vb, 0.0));
            let expected = (b - a) / (va - vb);
            if expected > 1.0 {
                continue;
            }
            let t = time_of_impact_ball_ball(pa, da, 0.0, pb, db, 0.0)
                .unwrap_or_else(|| panic!("{a} → {va} and {b} → {vb} pass through each other"));
            assert!((t - expected).abs() <= 1e-14, "t {t} against {expected}");
            let (p, d) = (pa - pb, da - db);
            if p.dot(d) * p.dot(d) - d.length_squared() * p.length_squared() < 0.0 {
                naive_misses += 1;
            }
        }
        assert!(naive_misses > 0, "no case where b² − a c rounds below zero");
    }

    /// A segment that ends closer than the minimum separation to a wall counts as touching at its end; one that
    /// ends farther, or that moves away from a wall it is already that close to, does not.
    #[test]
    fn a_segment_ending_a_hairs_breadth_from_a_wall_touches_at_its_end() {
        let wall = unit_box();
        let from = DVec2::new(-1.05, 0.0);
        let just_short = DVec2::new(0.05 - 1e-12, 0.0);
        assert_eq!(time_of_impact_ball_wall(from, just_short, 0.0, &wall), None);
        assert_eq!(
            time_of_impact_ball_wall_within(from, just_short, 0.0, &wall, 1e-9),
            Some(1.0)
        );
        let short = DVec2::new(0.05 - 1e-6, 0.0);
        assert_eq!(
            time_of_impact_ball_wall_within(from, short, 0.0, &wall, 1e-9),
            None
        );
        let away = DVec2::new(-1e-12 - 0.01, 0.0);
        let close = DVec2::new(-1.0 - 1e-12, 0.0);
        assert_eq!(
            time_of_impact_ball_wall_within(close, away, 0.0, &wall, 1e-9),
            None
        );
        // A real impact keeps its own time.
        let through = DVec2::new(0.1, 0.0);
        assert_eq!(
            time_of_impact_ball_wall_within(from, through, 0.0, &wall, 1e-9),
            time_of_impact_ball_wall(from, through, 0.0, &wall)
        );
        // Two balls the same way.
        let (pi, pj) = (DVec2::new(0.0, 0.0), DVec2::new(1.0, 0.0));
        let (ri, rj) = (0.25, 0.25);
        let meet = DVec2::new(0.5 - 1e-12, 0.0);
        assert_eq!(
            time_of_impact_ball_ball(pi, meet, ri, pj, DVec2::ZERO, rj),
            None
        );
        assert_eq!(
            time_of_impact_ball_ball_within(pi, meet, ri, pj, DVec2::ZERO, rj, 1e-9),
            Some(1.0)
        );
        let half = DVec2::new(0.25, 0.0);
        assert_eq!(
            time_of_impact_ball_ball_within(pi, half, ri, pj, DVec2::ZERO, rj, 1e-9),
            None
        );
    }

    /// Two point balls thrown at each other along a slant meet where their courses cross, within the minimum
    /// separation: the exact test misses most of these (`p × d` rounds to about 10⁻¹⁷, and its square is above
    /// `a R² = 0`); the check counts them, so it fails if the closest-approach test is dropped. Either order of
    /// the pair gives the same verdict.
    #[test]
    fn point_balls_on_a_slanted_head_on_course_meet_within_the_minimum_separation() {
        let mut next = crate::testing::uniform(23);
        let mut exact_misses = 0;
        for _ in 0..20_000 {
            let angle = std::f64::consts::TAU * next();
            let u = DVec2::new(angle.cos(), angle.sin());
            let start = DVec2::new(next() - 0.5, next() - 0.5) * 10.0;
            let a = next();
            let b = a + 0.1 + next();
            let (va, vb) = (0.5 + next(), -0.5 - next());
            let (pa, pb) = (start + u * a, start + u * b);
            let (da, db) = (u * va, u * vb);
            let expected = (b - a) / (va - vb);
            if expected > 1.0 {
                continue;
            }
            if time_of_impact_ball_ball(pa, da, 0.0, pb, db, 0.0).is_none() {
                exact_misses += 1;
            }
            let t = time_of_impact_ball_ball_within(pa, da, 0.0, pb, db, 0.0, 1e-9)
                .unwrap_or_else(|| panic!("{pa} → {da} and {pb} → {db} pass through each other"));
            assert!((t - expected).abs() <= 1e-9, "t {t} against {expected}");
            let swapped = time_of_impact_ball_ball_within(pb, db, 0.0, pa, da, 0.0, 1e-9);
            assert!(
                swapped.is_some_and(|s| (s - t).abs() <= 1e-12),
                "{swapped:?} against {t}"
            );
        }
        assert!(exact_misses > 1000, "only {exact_misses} exact misses");
    }
}
