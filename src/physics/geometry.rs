//! Balls (circles), walls (static oriented boxes), and the distances between them with their gradients
//! and Hessians (SPEC §1.6).
//!
//! Distances are unsigned surface distances for IPC and signed for penalty:
//! ball–wall `d = sd_box(c) − r`, ball–ball `d = |cᵢ − cⱼ| − rᵢ − rⱼ`.

use glam::DVec2;
use serde::{Deserialize, Serialize};

/// A symmetric 2×2 matrix `[[xx, xy], [xy, yy]]`: the per-ball block of a Hessian.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sym2 {
    pub xx: f64,
    pub xy: f64,
    pub yy: f64,
}

impl Sym2 {
    pub const ZERO: Sym2 = Sym2 {
        xx: 0.0,
        xy: 0.0,
        yy: 0.0,
    };

    /// `s · I`.
    pub fn scaled_identity(s: f64) -> Sym2 {
        Sym2 {
            xx: s,
            xy: 0.0,
            yy: s,
        }
    }

    /// The outer product `u uᵀ`.
    pub fn outer(u: DVec2) -> Sym2 {
        Sym2 {
            xx: u.x * u.x,
            xy: u.x * u.y,
            yy: u.y * u.y,
        }
    }

    pub fn scale(self, s: f64) -> Sym2 {
        Sym2 {
            xx: self.xx * s,
            xy: self.xy * s,
            yy: self.yy * s,
        }
    }

    /// `self + o`.
    pub fn plus(self, o: Sym2) -> Sym2 {
        Sym2 {
            xx: self.xx + o.xx,
            xy: self.xy + o.xy,
            yy: self.yy + o.yy,
        }
    }

    pub fn mul_vec(self, v: DVec2) -> DVec2 {
        DVec2::new(self.xx * v.x + self.xy * v.y, self.xy * v.x + self.yy * v.y)
    }

    /// `R A Rᵀ` for the rotation `R = [[c, −s], [s, c]]` given as `rotation = (c, s)`.
    pub fn rotated(self, rotation: DVec2) -> Sym2 {
        if rotation.y == 0.0 && rotation.x == 1.0 {
            return self;
        }
        let (c, s) = (rotation.x, rotation.y);
        // Columns of R·A.
        let ra_xx = c * self.xx - s * self.xy;
        let ra_xy = c * self.xy - s * self.yy;
        let ra_yx = s * self.xx + c * self.xy;
        let ra_yy = s * self.xy + c * self.yy;
        Sym2 {
            xx: ra_xx * c - ra_xy * s,
            xy: ra_xx * s + ra_xy * c,
            yy: ra_yx * s + ra_yy * c,
        }
    }

    /// Eigenvalues `(λ₁ ≤ λ₂)` and the unit eigenvector of `λ₂`.
    pub fn eigen(self) -> (f64, f64, DVec2) {
        let mean = 0.5 * (self.xx + self.yy);
        let half_diff = 0.5 * (self.xx - self.yy);
        let radius = (half_diff * half_diff + self.xy * self.xy).sqrt();
        let (l1, l2) = (mean - radius, mean + radius);
        let v = if self.xy == 0.0 {
            if self.xx >= self.yy {
                DVec2::X
            } else {
                DVec2::Y
            }
        } else {
            DVec2::new(l2 - self.yy, self.xy).normalize()
        };
        (l1, l2, v)
    }

    /// Eigenvalues clamped from below at `floor` (`floor = 0` is [`Self::project_psd`]).
    pub fn clamp_eigenvalues(self, floor: f64) -> Sym2 {
        if self.xy == 0.0 {
            return Sym2 {
                xx: self.xx.max(floor),
                xy: 0.0,
                yy: self.yy.max(floor),
            };
        }
        let (l1, l2, v2) = self.eigen();
        if l1 >= floor {
            return self;
        }
        let v1 = DVec2::new(-v2.y, v2.x);
        Sym2::outer(v2)
            .scale(l2.max(floor))
            .plus(Sym2::outer(v1).scale(l1.max(floor)))
    }

    /// The nearest positive semi-definite matrix: negative eigenvalues clamped to zero (IPC's projection).
    pub fn project_psd(self) -> Sym2 {
        if self.xy == 0.0 {
            return Sym2 {
                xx: self.xx.max(0.0),
                xy: 0.0,
                yy: self.yy.max(0.0),
            };
        }
        let (l1, l2, v2) = self.eigen();
        if l1 >= 0.0 {
            return self;
        }
        let v1 = DVec2::new(-v2.y, v2.x);
        Sym2::outer(v2)
            .scale(l2.max(0.0))
            .plus(Sym2::outer(v1).scale(l1.max(0.0)))
    }
}

/// A ball: a circle with centre, velocity, radius ≥ 0 (0 is the seed's point ball) and mass > 0.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ball {
    pub position: DVec2,
    pub velocity: DVec2,
    pub radius: f64,
    pub mass: f64,
}

/// A static wall: an oriented box with centre, half-extents and angle (radians, counter-clockwise).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Wall {
    pub center: DVec2,
    pub half_extents: DVec2,
    pub angle: f64,
}

/// A signed distance with its gradient and Hessian with respect to the query point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DistanceDerivatives {
    pub value: f64,
    pub gradient: DVec2,
    pub hessian: Sym2,
}

impl Wall {
    /// `(cos θ, sin θ)`; exact `(1, 0)` for an axis-aligned wall.
    pub fn rotation(&self) -> DVec2 {
        if self.angle == 0.0 {
            DVec2::X
        } else {
            DVec2::new(self.angle.cos(), self.angle.sin())
        }
    }

    /// World point → box-local coordinates `Rᵀ (p − c)`.
    pub fn to_local(&self, p: DVec2) -> DVec2 {
        self.to_local_direction(p - self.center)
    }

    /// World direction → box-local direction `Rᵀ u`; exactly `u` for an axis-aligned wall.
    pub fn to_local_direction(&self, u: DVec2) -> DVec2 {
        let r = self.rotation();
        if r.y == 0.0 && r.x == 1.0 {
            return u;
        }
        DVec2::new(r.x * u.x + r.y * u.y, -r.y * u.x + r.x * u.y)
    }

    /// [`Wall::to_local`] with the rounding error of `p − c`: for an axis-aligned wall `p − c = local + error`
    /// exactly (a rotated wall's error is 0: its rotation rounds anyway). Distances near a face use it, so that
    /// they are measured to the face to the last bit, however far the centre lies: with the error dropped, a wall
    /// whose centre is 128 m away moved its face in steps of 2.8·10⁻¹⁴ m, and a ball landing on a face exactly
    /// was found 2·10⁻¹⁶ m inside it.
    pub fn to_local_with_error(&self, p: DVec2) -> (DVec2, DVec2) {
        let r = self.rotation();
        if r.y == 0.0 && r.x == 1.0 {
            let (x, ex) = difference_with_error(p.x, self.center.x);
            let (y, ey) = difference_with_error(p.y, self.center.y);
            return (DVec2::new(x, y), DVec2::new(ex, ey));
        }
        (self.to_local(p), DVec2::ZERO)
    }

    /// Box-local direction → world direction `R u`.
    pub fn to_world_direction(&self, u: DVec2) -> DVec2 {
        let r = self.rotation();
        if r.y == 0.0 && r.x == 1.0 {
            return u;
        }
        DVec2::new(r.x * u.x - r.y * u.y, r.y * u.x + r.x * u.y)
    }

    /// The four corners in world coordinates, counter-clockwise.
    pub fn corners(&self) -> [DVec2; 4] {
        let h = self.half_extents;
        [
            DVec2::new(-h.x, -h.y),
            DVec2::new(h.x, -h.y),
            DVec2::new(h.x, h.y),
            DVec2::new(-h.x, h.y),
        ]
        .map(|l| self.center + self.to_world_direction(l))
    }

    /// World-space axis-aligned bounds `(min, max)`.
    pub fn aabb(&self) -> (DVec2, DVec2) {
        let c = self.corners();
        let mut lo = c[0];
        let mut hi = c[0];
        for p in &c[1..] {
            lo = lo.min(*p);
            hi = hi.max(*p);
        }
        (lo, hi)
    }

    /// Signed distance from `p` to the box (negative inside) with gradient and Hessian.
    ///
    /// Outside a face: the distance to that face, gradient its normal, Hessian 0. Outside a corner:
    /// `|p − corner|`, gradient `n = (p − corner)/|p − corner|`, Hessian `(I − n nᵀ)/|p − corner|`.
    /// Inside: minus the depth to the **nearest face**, gradient that face's outward normal (SPEC §1.1).
    pub fn signed_distance(&self, p: DVec2) -> DistanceDerivatives {
        let (local, error) = self.to_local_with_error(p);
        let h = self.half_extents;
        // A centre exactly on a mid-plane goes out the face on the negative side, as the seed's `a <= c` sends a
        // ball out the front face of its wall.
        let sx = if local.x > 0.0 { 1.0 } else { -1.0 };
        let sy = if local.y > 0.0 { 1.0 } else { -1.0 };
        // Near a face `sx·local.x − h.x` is exact (the two are within a factor 2), so adding the error last gives
        // the distance to that face rounded once.
        let qx = (sx * local.x - h.x) + sx * error.x;
        let qy = (sy * local.y - h.y) + sy * error.y;
        let rotation = self.rotation();
        if qx > 0.0 && qy > 0.0 {
            let q = DVec2::new(qx, qy);
            let value = q.length();
            let n_local = DVec2::new(sx * qx / value, sy * qy / value);
            let hessian_local = Sym2::scaled_identity(1.0)
                .plus(Sym2::outer(n_local).scale(-1.0))
                .scale(1.0 / value);
            return DistanceDerivatives {
                value,
                gradient: self.to_world_direction(n_local),
                hessian: hessian_local.rotated(rotation),
            };
        }
        // Face regions and the inside: the nearest face is the one with the larger q.
        let (value, n_local) = if qx >= qy {
            (qx, DVec2::new(sx, 0.0))
        } else {
            (qy, DVec2::new(0.0, sy))
        };
        DistanceDerivatives {
            value,
            gradient: self.to_world_direction(n_local),
            hessian: Sym2::ZERO,
        }
    }

    /// The index (0 = local x, 1 = local y) of the wall's thickness axis: its shorter half-extent.
    pub fn thickness_axis(&self) -> usize {
        if self.half_extents.x <= self.half_extents.y {
            0
        } else {
            1
        }
    }
}

/// `a − b` as the rounded difference and its rounding error, `a − b = s + e` exactly (Knuth's two-sum); the error is
/// 0 where the difference is not finite.
pub fn difference_with_error(a: f64, b: f64) -> (f64, f64) {
    let s = a - b;
    let a_part = s + b;
    let b_part = a_part - s;
    let e = (a - a_part) + (b_part - b);
    (s, if e.is_finite() { e } else { 0.0 })
}

/// Ball–wall surface distance `d = sd_box(c) − r` with derivatives with respect to the ball centre.
pub fn ball_wall_distance(center: DVec2, radius: f64, wall: &Wall) -> DistanceDerivatives {
    let mut sd = wall.signed_distance(center);
    sd.value -= radius;
    sd
}

/// Ball–ball surface distance `d = |cᵢ − cⱼ| − rᵢ − rⱼ`; gradient with respect to `cᵢ` is
/// `n = (cᵢ − cⱼ)/|cᵢ − cⱼ|` (with respect to `cⱼ` it is `−n`), and the Hessian block
/// `A = (I − n nᵀ)/|cᵢ − cⱼ|` enters as `[[A, −A], [−A, A]]`.
///
/// Coincident centres have no direction; the x axis is used so the result stays finite.
pub fn ball_ball_distance(ci: DVec2, ri: f64, cj: DVec2, rj: f64) -> DistanceDerivatives {
    let delta = ci - cj;
    let length = delta.length();
    if length == 0.0 {
        return DistanceDerivatives {
            value: -ri - rj,
            gradient: DVec2::X,
            hessian: Sym2::ZERO,
        };
    }
    let n = delta / length;
    DistanceDerivatives {
        value: length - ri - rj,
        gradient: n,
        hessian: Sym2::scaled_identity(1.0)
            .plus(Sym2::outer(n).scale(-1.0))
            .scale(1.0 / length),
    }
}

/// The distance value only (no derivatives) for a ball–wall pair.
pub fn ball_wall_gap(center: DVec2, radius: f64, wall: &Wall) -> f64 {
    wall.signed_distance(center).value - radius
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd_check(f: impl Fn(DVec2) -> DistanceDerivatives, p: DVec2) {
        let eps = 1e-6;
        let d = f(p);
        for (axis, e) in [DVec2::X, DVec2::Y].into_iter().enumerate() {
            let plus = f(p + e * eps);
            let minus = f(p - e * eps);
            let fd_grad = (plus.value - minus.value) / (2.0 * eps);
            let g = if axis == 0 {
                d.gradient.x
            } else {
                d.gradient.y
            };
            assert!(
                (fd_grad - g).abs() < 1e-6,
                "gradient {axis}: {fd_grad} vs {g} at {p}"
            );
            let fd_hess = (plus.gradient - minus.gradient) / (2.0 * eps);
            let h = d.hessian.mul_vec(e);
            assert!(
                (fd_hess - h).length() < 1e-5 * (1.0 + h.length()),
                "hessian column {axis}: {fd_hess} vs {h} at {p}"
            );
        }
    }

    /// The signed distance to a box and its gradient, written independently of [`Wall::signed_distance`]: in box
    /// coordinates (rotation by `−θ` done here with `sin`/`cos`), outside it is `|q − clamp(q)|` with gradient
    /// along `q − clamp(q)`; inside it is `−min_a (hₐ − |qₐ|)`, gradient the outward normal of that face.
    fn reference_signed_distance(wall: &Wall, p: DVec2) -> (f64, DVec2) {
        let (s, c) = wall.angle.sin_cos();
        let d = p - wall.center;
        let q = DVec2::new(c * d.x + s * d.y, -s * d.x + c * d.y);
        let h = wall.half_extents;
        let clamped = DVec2::new(q.x.clamp(-h.x, h.x), q.y.clamp(-h.y, h.y));
        let (value, local_gradient) = if clamped != q {
            let out = q - clamped;
            (out.length(), out / out.length())
        } else {
            let to_x = h.x - q.x.abs();
            let to_y = h.y - q.y.abs();
            if to_x <= to_y {
                (-to_x, DVec2::new(q.x.signum(), 0.0))
            } else {
                (-to_y, DVec2::new(0.0, q.y.signum()))
            }
        };
        let world = DVec2::new(
            c * local_gradient.x - s * local_gradient.y,
            s * local_gradient.x + c * local_gradient.y,
        );
        (value, world)
    }

    /// An axis-aligned wall between faces `lo` and `hi` whose centre and half-width are exact: multiples of 2⁻³⁰
    /// within ±2¹¹, so their sum and difference fit in a double.
    fn wall_with_exact_faces(next: &mut impl FnMut() -> f64) -> (Wall, f64) {
        let unit = 2f64.powi(-30);
        let lo = ((next() * 2f64.powi(41)).floor() - 2f64.powi(40)) * unit;
        let width = (1.0 + next() * 2f64.powi(40)).floor() * unit;
        let hi = lo + width;
        let wall = Wall {
            center: DVec2::new((lo + hi) * 0.5, 0.0),
            half_extents: DVec2::new((hi - lo) * 0.5, 1e4),
            angle: 0.0,
        };
        assert_eq!(wall.center.x - wall.half_extents.x, lo);
        (wall, lo)
    }

    /// The distance to a face is `lo − p` rounded once, however far the centre lies (up to 1 024 m here), in
    /// front of the face and inside the wall near it; and a point moving at the face hits it at `(lo − p) / Δ`
    /// rounded. Measured from the centre with its rounding error dropped, about one in nine of these was off in its
    /// last bits (counted, so the test shows it can tell).
    #[test]
    fn a_distance_to_a_face_is_rounded_once_however_far_the_centre_lies() {
        let mut next = crate::testing::uniform(0xFACE);
        let mut off_without_the_error = 0;
        for case in 0..20_000 {
            let (wall, lo) = wall_with_exact_faces(&mut next);
            // Within a millimetre of the face, either side, at most a quarter of the wall's width in.
            let reach = (1e-3f64).min(wall.half_extents.x * 0.5);
            let p = DVec2::new(lo + (2.0 * next() - 1.0) * reach, 0.3);
            let got = wall.signed_distance(p).value;
            assert_eq!(got, lo - p.x, "case {case}: wall {wall:?}, p {p}");
            let centred = -(p.x - wall.center.x) - wall.half_extents.x;
            off_without_the_error += usize::from(centred != got);
            if p.x < lo {
                let delta = DVec2::new(2.0 * (lo - p.x) + next(), 0.0);
                let hit = crate::physics::ccd::time_of_impact_ball_wall(p, delta, 0.0, &wall);
                assert_eq!(
                    hit,
                    Some((lo - p.x) / delta.x),
                    "case {case}: wall {wall:?}, p {p}"
                );
            }
        }
        assert!(off_without_the_error > 1_000, "{off_without_the_error}");
    }

    #[test]
    fn a_difference_with_its_error_is_exact() {
        let mut next = crate::testing::uniform(0xD1FF);
        for _ in 0..10_000 {
            let a = (next() - 0.5) * 10f64.powi((next() * 20.0) as i32 - 10);
            let b = (next() - 0.5) * 10f64.powi((next() * 20.0) as i32 - 10);
            let (s, e) = difference_with_error(a, b);
            let exact = |x: f64| num_rational::BigRational::from_float(x).expect("finite");
            assert_eq!(
                exact(a) - exact(b),
                exact(s) + exact(e),
                "{a} − {b} = {s} + {e}"
            );
        }
        assert_eq!(difference_with_error(f64::MAX, -f64::MAX).1, 0.0);
    }

    /// Random rotated boxes and random points inside, beside and beyond them (radii random too): the ball–wall
    /// distance is the reference signed distance minus the radius, and its gradient the reference's. Tolerance
    /// 10⁻¹² of the scene size (a few roundings of coordinates of order 1); points within 10⁻⁹ of a tie between
    /// two faces (where the gradient jumps) compare the value only.
    #[test]
    fn box_distance_matches_a_clamp_based_reference_on_random_boxes() {
        let mut next = crate::testing::uniform(0x6E0_3E7);
        let mut inside = 0;
        let mut corner = 0;
        for _ in 0..4000 {
            let wall = Wall {
                center: DVec2::new(4.0 * next() - 2.0, 4.0 * next() - 2.0),
                half_extents: DVec2::new(0.01 + next(), 0.01 + next()),
                angle: 7.0 * next() - 3.5,
            };
            let p = wall.center + DVec2::new(6.0 * next() - 3.0, 6.0 * next() - 3.0) * next();
            let radius = 0.2 * next();
            let (value, gradient) = reference_signed_distance(&wall, p);
            let got = ball_wall_distance(p, radius, &wall);
            assert!(
                (got.value - (value - radius)).abs() <= 1e-12,
                "d at {p} for {wall:?}: {} vs {}",
                got.value,
                value - radius
            );
            assert_eq!(ball_wall_gap(p, radius, &wall), got.value);
            let local = wall.to_local(p).abs() - wall.half_extents;
            if value < 0.0 {
                inside += 1;
                if (local.x - local.y).abs() < 1e-9 {
                    continue;
                }
            } else if local.x > 0.0 && local.y > 0.0 {
                corner += 1;
            }
            assert!(
                (got.gradient - gradient).length() <= 1e-12,
                "gradient at {p} for {wall:?}: {} vs {gradient}",
                got.gradient
            );
        }
        assert!(
            inside > 200 && corner > 200,
            "inside {inside}, corner {corner}"
        );
    }

    /// Random pairs of circles: `|cᵢ − cⱼ| − rᵢ − rⱼ` with gradient `(cᵢ − cⱼ)/|cᵢ − cⱼ|`, computed here with
    /// `hypot`, to 10⁻¹⁴ (coordinates of order 1).
    #[test]
    fn ball_ball_distance_matches_its_formula_on_random_pairs() {
        let mut next = crate::testing::uniform(0xBA11);
        for _ in 0..2000 {
            let ci = DVec2::new(2.0 * next() - 1.0, 2.0 * next() - 1.0);
            let cj = DVec2::new(2.0 * next() - 1.0, 2.0 * next() - 1.0);
            let (ri, rj) = (0.3 * next(), 0.3 * next());
            let delta = ci - cj;
            let length = delta.x.hypot(delta.y);
            let got = ball_ball_distance(ci, ri, cj, rj);
            assert!((got.value - (length - ri - rj)).abs() <= 1e-14);
            assert!((got.gradient - delta / length).length() <= 1e-14);
        }
    }

    #[test]
    fn box_distance_derivatives_match_finite_differences_in_every_region() {
        let wall = Wall {
            center: DVec2::new(0.3, -0.2),
            half_extents: DVec2::new(0.5, 0.1),
            angle: 0.4,
        };
        for p in [
            DVec2::new(2.0, 0.1),
            DVec2::new(-1.0, 1.3),
            DVec2::new(1.5, 1.5),
            DVec2::new(-1.2, -1.4),
            DVec2::new(0.35, -0.18),
            DVec2::new(0.1, -0.25),
        ] {
            fd_check(|q| ball_wall_distance(q, 0.05, &wall), p);
        }
    }

    #[test]
    fn ball_ball_distance_derivatives_match_finite_differences() {
        let cj = DVec2::new(0.2, 0.7);
        for ci in [
            DVec2::new(1.0, 0.0),
            DVec2::new(-0.3, 0.9),
            DVec2::new(0.21, 0.6),
        ] {
            fd_check(|q| ball_ball_distance(q, 0.1, cj, 0.2), ci);
        }
    }

    #[test]
    fn inside_a_wall_the_distance_is_to_the_nearest_face() {
        let wall = Wall {
            center: DVec2::new(0.513, 0.0),
            half_extents: DVec2::new(0.01, 1.0),
            angle: 0.0,
        };
        let front_half = wall.signed_distance(DVec2::new(0.506, 0.0));
        assert!((front_half.value + 0.003).abs() < 1e-12);
        assert_eq!(front_half.gradient, DVec2::new(-1.0, 0.0));
        let back_half = wall.signed_distance(DVec2::new(0.52, 0.0));
        assert!((back_half.value + 0.003).abs() < 1e-12);
        assert_eq!(back_half.gradient, DVec2::new(1.0, 0.0));
    }

    #[test]
    fn psd_projection_clamps_negative_eigenvalues_only() {
        let a = Sym2 {
            xx: 2.0,
            xy: 3.0,
            yy: -1.0,
        };
        let p = a.project_psd();
        let (l1, l2, _) = p.eigen();
        assert!(l1 > -1e-12 && l1 < 1e-12, "smallest eigenvalue {l1}");
        let (_, a2, _) = a.eigen();
        assert!((l2 - a2).abs() < 1e-12);
        let spd = Sym2 {
            xx: 2.0,
            xy: 0.5,
            yy: 1.0,
        };
        assert_eq!(spd.project_psd(), spd);
    }

    #[test]
    fn rotation_of_a_hessian_matches_explicit_product() {
        let a = Sym2 {
            xx: 1.0,
            xy: 0.25,
            yy: -0.5,
        };
        let theta: f64 = 0.7;
        let r = DVec2::new(theta.cos(), theta.sin());
        let rotated = a.rotated(r);
        // R A Rᵀ v == R (A (Rᵀ v))
        let v = DVec2::new(0.3, -1.1);
        let rt_v = DVec2::new(r.x * v.x + r.y * v.y, -r.y * v.x + r.x * v.y);
        let a_rt_v = a.mul_vec(rt_v);
        let expected = DVec2::new(
            r.x * a_rt_v.x - r.y * a_rt_v.y,
            r.y * a_rt_v.x + r.x * a_rt_v.y,
        );
        assert!((rotated.mul_vec(v) - expected).length() < 1e-14);
    }
}
