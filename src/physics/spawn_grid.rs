//! The spawn check's index: which of a lane's balls a new ball can touch, without comparing it with all of them.
//!
//! [`LaneWorld::add_ball`](super::world::LaneWorld::add_ball) compares a new ball with every ball of its lane, so
//! n spawns in a row cost n²/2 comparisons (a script of 150 000 spawns in one tick took minutes to record). A
//! [`SpawnGrid`] buckets the balls by size class and cell, and the check compares only the few it lists.
//!
//! Size class `L` holds radii in `(2^(L−1), 2^L]` on square cells of side `2^(L+1)`, so a class's cells fit its
//! balls however the sizes are mixed; a query looks, in each class, at the cells within `r + r_max(L)`.
//!
//! A class's cells are kept in Morton (Z) order, so the balls of any aligned block of `2^ℓ × 2^ℓ` cells are one
//! range of keys. A query that spans many cells of a class of much smaller balls (a ball dropped among point
//! balls, whose cells are 2 nm wide) reads the few blocks that cover its reach instead of every ball of the
//! class.

use std::collections::BTreeMap;

use glam::DVec2;

use super::geometry::Ball;

/// The smallest size class: radii up to 2⁻³⁰ m (about 1 nm), point balls included, share it.
const MIN_CLASS: i32 = -30;
/// The largest size class (2³⁰ m, far beyond [`MAX_LENGTH`](super::world::MAX_LENGTH)).
const MAX_CLASS: i32 = 30;
/// Cell keys are clamped so that `key ± 1` cannot overflow. Up to ±8·10⁶ m no key reaches it even in the smallest
/// class; beyond, far-away balls share an edge cell, which costs time, not correctness.
const KEY_LIMIT: f64 = (1u64 << 52) as f64;
/// Added to a clamped key (±2⁵² ± 1) to make it an unsigned number of 54 bits for the Morton code.
const KEY_OFFSET: i64 = 1 << 53;
/// A query reads its cells one by one up to this many in a class; beyond, it reads aligned blocks of cells.
const CELLS_READ_ONE_BY_ONE: i64 = 64;

/// A lane's balls by size class and cell, for spawn checks; it holds ball indices, not the balls.
#[derive(Clone, Debug, Default)]
pub struct SpawnGrid {
    /// (class, Morton code of the cell) → the balls in it.
    cells: BTreeMap<(i32, u128), Vec<u32>>,
    classes: BTreeMap<i32, SizeClass>,
    len: usize,
}

#[derive(Clone, Debug, Default)]
struct SizeClass {
    members: Vec<u32>,
    max_radius: f64,
}

impl SpawnGrid {
    /// A grid over `balls`, ball `i` under index `i`.
    pub fn new(balls: &[Ball]) -> SpawnGrid {
        let mut grid = SpawnGrid::default();
        for (i, ball) in balls.iter().enumerate() {
            grid.insert(i as u32, ball);
        }
        grid
    }

    /// How many balls the grid holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds ball `index`.
    pub fn insert(&mut self, index: u32, ball: &Ball) {
        let class = size_class(ball.radius);
        let cell = cell_side(class);
        let members = self.classes.entry(class).or_default();
        members.members.push(index);
        // `f64::max` skips NaN: a ball with a NaN radius touches nothing, so it need not widen the queries.
        members.max_radius = members.max_radius.max(ball.radius);
        let code = morton(
            cell_key(ball.position.x, cell),
            cell_key(ball.position.y, cell),
        );
        self.cells.entry((class, code)).or_default().push(index);
        self.len += 1;
    }

    /// Appends to `out`, in no particular order, every ball that may touch the circle `(c, r)`: at least every
    /// ball `j` with `|c − cⱼ| ≤ r + rⱼ` (a ball with a non-finite centre or radius touches nothing and may be
    /// left out). In each class, the balls listed lie in cells within about five times the reach of `c` (and a
    /// few cells), or the class is small enough to be listed whole.
    pub fn candidates(&self, c: DVec2, r: f64, out: &mut Vec<u32>) {
        for (&class, members) in &self.classes {
            let cell = cell_side(class);
            let reach = r + members.max_radius;
            // A negative radius (refused before any check) or NaN touches nothing; it must not invert the range.
            if reach.is_nan() || reach < 0.0 {
                continue;
            }
            // One cell more on each side absorbs the rounding of `c ± reach` and of the distance itself.
            let (x0, x1) = (
                cell_key(c.x - reach, cell) - 1,
                cell_key(c.x + reach, cell) + 1,
            );
            let (y0, y1) = (
                cell_key(c.y - reach, cell) - 1,
                cell_key(c.y + reach, cell) + 1,
            );
            let cells = (x1 - x0 + 1) as f64 * (y1 - y0 + 1) as f64;
            if cells <= CELLS_READ_ONE_BY_ONE as f64 {
                for x in x0..=x1 {
                    for y in y0..=y1 {
                        if let Some(found) = self.cells.get(&(class, morton(x, y))) {
                            out.extend_from_slice(found);
                        }
                    }
                }
            } else if members.members.len() as f64 <= cells.min(CELLS_READ_ONE_BY_ONE as f64) {
                out.extend_from_slice(&members.members);
            } else {
                self.blocks_within(class, (x0, x1), (y0, y1), out);
            }
        }
    }

    /// Appends the balls of `class` in the cells `x0..=x1 × y0..=y1`, and perhaps some near them: the smallest
    /// aligned blocks of cells of which at most two a side cover the range are read as ranges of Morton codes.
    fn blocks_within(
        &self,
        class: i32,
        (x0, x1): (i64, i64),
        (y0, y1): (i64, i64),
        out: &mut Vec<u32>,
    ) {
        let (ux0, ux1, uy0, uy1) = (unsigned(x0), unsigned(x1), unsigned(y0), unsigned(y1));
        let mut level = 0u32;
        while level < 54
            && ((ux1 >> level) - (ux0 >> level) > 1 || (uy1 >> level) - (uy0 >> level) > 1)
        {
            level += 1;
        }
        for bx in (ux0 >> level)..=(ux1 >> level) {
            for by in (uy0 >> level)..=(uy1 >> level) {
                let first = interleave(bx, by) << (2 * level);
                let end = (interleave(bx, by) + 1) << (2 * level);
                for found in self
                    .cells
                    .range((class, first)..(class, end))
                    .map(|(_, v)| v)
                {
                    out.extend_from_slice(found);
                }
            }
        }
    }
}

/// The size class of radius `r`: the smallest `L` with `r ≤ 2^L`, clamped to the classes there are.
fn size_class(r: f64) -> i32 {
    if r > 0.0 && r.is_finite() {
        (r.log2().ceil() as i32).clamp(MIN_CLASS, MAX_CLASS)
    } else {
        MIN_CLASS
    }
}

/// The cell side of class `L`, `2^(L+1)`: a ball of the class fits its cell.
fn cell_side(class: i32) -> f64 {
    2f64.powi(class + 1)
}

fn cell_key(v: f64, cell: f64) -> i64 {
    (v / cell).floor().clamp(-KEY_LIMIT, KEY_LIMIT) as i64
}

/// A clamped cell key (±2⁵² ± 1) as an unsigned number below 2⁵⁴.
fn unsigned(key: i64) -> u64 {
    (key + KEY_OFFSET) as u64
}

/// The Morton code of the cell `(x, y)`: the bits of its unsigned keys interleaved, x in the even places.
fn morton(x: i64, y: i64) -> u128 {
    interleave(unsigned(x), unsigned(y))
}

fn interleave(x: u64, y: u64) -> u128 {
    spread(x) | (spread(y) << 1)
}

/// The 64 bits of `v` in the even bit places of a `u128`.
fn spread(v: u64) -> u128 {
    let mut v = u128::from(v);
    v = (v | (v << 32)) & 0x0000_0000_FFFF_FFFF_0000_0000_FFFF_FFFF;
    v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF_0000_FFFF_0000_FFFF;
    v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF_00FF_00FF_00FF_00FF;
    v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F_0F0F_0F0F_0F0F_0F0F;
    v = (v | (v << 2)) & 0x3333_3333_3333_3333_3333_3333_3333_3333;
    v = (v | (v << 1)) & 0x5555_5555_5555_5555_5555_5555_5555_5555;
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::uniform;

    fn ball(x: f64, y: f64, radius: f64) -> Ball {
        Ball {
            position: DVec2::new(x, y),
            velocity: DVec2::ZERO,
            radius,
            mass: 1.0,
        }
    }

    #[test]
    fn every_ball_a_new_one_touches_is_a_candidate_whatever_the_sizes() {
        let mut next = uniform(7);
        // Point balls and radii from 1 µm to 2 m, log-uniform, crowded into a 4 m square so that many touch.
        let balls: Vec<Ball> = (0..600)
            .map(|k| {
                let radius = if k % 7 == 0 {
                    0.0
                } else {
                    10f64.powf(-6.0 + 6.3 * next())
                };
                ball(4.0 * next() - 2.0, 4.0 * next() - 2.0, radius)
            })
            .collect();
        let grid = SpawnGrid::new(&balls);
        assert_eq!(grid.len(), balls.len());
        let mut touching_seen = 0;
        for probe in &balls {
            let mut found = Vec::new();
            grid.candidates(probe.position, probe.radius, &mut found);
            for (j, other) in balls.iter().enumerate() {
                let distance =
                    (other.position - probe.position).length() - other.radius - probe.radius;
                if distance <= 0.0 {
                    touching_seen += 1;
                    assert!(
                        found.contains(&(j as u32)),
                        "ball {j} touches the probe but is no candidate"
                    );
                }
            }
        }
        assert!(
            touching_seen > 2 * balls.len(),
            "the case tests few contacts"
        );
    }

    #[test]
    fn a_ball_on_a_lattice_has_a_handful_of_candidates_however_many_balls_there_are() {
        // 100 × 100 balls of radius 1 mm, 1 cm apart: a new ball's check must not grow with the lattice.
        let balls: Vec<Ball> = (0..10_000)
            .map(|k| ball(0.01 * f64::from(k % 100), 0.01 * f64::from(k / 100), 1e-3))
            .collect();
        let grid = SpawnGrid::new(&balls);
        let mut most = 0;
        for k in 0..100 {
            let mut found = Vec::new();
            grid.candidates(DVec2::new(0.0101 * f64::from(k), 0.5), 1e-3, &mut found);
            most = most.max(found.len());
        }
        assert!(
            most <= 9,
            "a check lists {most} candidates among 10 000 balls"
        );
    }

    #[test]
    fn a_larger_ball_lists_the_small_ones_under_it_and_leaves_far_ones_out() {
        // A point, a 1 mm ball 3 cm away, and 2000 more 1 mm balls in a row from 10 m on.
        let mut balls = vec![ball(0.0, 0.0, 0.0), ball(0.03, 0.0, 1e-3)];
        balls.extend((0..2000).map(|k| ball(10.0 + 0.01 * f64::from(k), 0.0, 1e-3)));
        let grid = SpawnGrid::new(&balls);
        let mut found = Vec::new();
        grid.candidates(DVec2::ZERO, 0.05, &mut found);
        found.sort_unstable();
        assert_eq!(found, [0, 1]);
    }

    #[test]
    fn non_finite_and_absurd_values_neither_panic_nor_hide_a_touching_ball() {
        let balls = vec![
            ball(f64::NAN, 0.0, 1.0),
            ball(f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY),
            ball(1e300, -1e300, 1e300),
            ball(7e6, 7e6, 0.0),
        ];
        let grid = SpawnGrid::new(&balls);
        let mut found = Vec::new();
        grid.candidates(DVec2::new(7e6, 7e6), 0.0, &mut found);
        assert!(found.contains(&3));
        found.clear();
        grid.candidates(DVec2::new(1e300, -1e300), 1.0, &mut found);
        assert!(found.contains(&2));
    }

    #[test]
    fn a_ball_among_many_point_balls_lists_only_the_points_near_it() {
        // 40 000 point balls 1 cm apart: their cells are 2 nm wide, so a 5 cm ball's reach spans 10¹⁵ of them,
        // and the whole class was listed for every check (n spawns cost n² comparisons).
        let points: Vec<Ball> = (0..40_000)
            .map(|k| ball(0.01 * f64::from(k % 200), 0.01 * f64::from(k / 200), 0.0))
            .collect();
        let grid = SpawnGrid::new(&points);
        let mut next = uniform(3);
        let mut most = 0;
        for _ in 0..200 {
            let c = DVec2::new(2.0 * next(), 2.0 * next());
            let mut found = Vec::new();
            grid.candidates(c, 0.05, &mut found);
            for (j, p) in points.iter().enumerate() {
                if (p.position - c).length() <= 0.05 {
                    assert!(found.contains(&(j as u32)), "point {j} is within reach");
                }
            }
            most = most.max(found.len());
        }
        // A 10 cm disc holds about 80 of the points; the blocks read cover at most 16 times its square.
        assert!(most <= 2_000, "a check lists {most} of 40 000 points");
    }

    #[test]
    fn morton_codes_interleave_the_keys_bits() {
        assert_eq!(interleave(0b101, 0b011), 0b01_10_11);
        assert_eq!(interleave(u64::MAX, 0), u128::MAX / 3);
        assert_eq!(interleave(0, u64::MAX), (u128::MAX / 3) << 1);
        // Keys at both clamps and one beyond, where `candidates` may reach.
        let lo = morton(-(1 << 52) - 1, -(1 << 52) - 1);
        let hi = morton((1 << 52) + 1, (1 << 52) + 1);
        assert!(lo < hi && hi < 1u128 << 108);
    }
}
