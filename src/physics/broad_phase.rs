//! Broad phase: which ball pairs can be within reach of each other, by a uniform grid.
//!
//! Deterministic by construction: balls are bucketed by sorting their cell keys (no hash-map order),
//! and the pair list comes out sorted by `(i, j)`.

use glam::DVec2;

/// Reusable grid storage, so repeated queries do not reallocate.
#[derive(Default, Debug, Clone)]
pub struct BroadPhase {
    keyed: Vec<(i64, i64, u32)>,
}

impl BroadPhase {
    /// All pairs `(i, j)`, `i < j`, whose bounding circles `(centre[i], bound[i])` come within `reach`:
    /// `|cᵢ − cⱼ| ≤ boundᵢ + boundⱼ + reach`. `out` is cleared and filled sorted.
    pub fn near_pairs(
        &mut self,
        centre: &[DVec2],
        bound: &[f64],
        reach: f64,
        out: &mut Vec<(u32, u32)>,
    ) {
        out.clear();
        let n = centre.len();
        if n < 2 {
            return;
        }
        if n <= 24 {
            for i in 0..n {
                for j in i + 1..n {
                    if within(centre, bound, reach, i, j) {
                        out.push((i as u32, j as u32));
                    }
                }
            }
            return;
        }
        let max_bound = bound.iter().copied().fold(0.0f64, f64::max);
        let cell = (2.0 * max_bound + reach).max(1e-9);
        self.keyed.clear();
        // Cell keys are clamped so that `key ± 1` cannot overflow for absurd coordinates (a fuzzed scene with
        // balls at 1e300 m); far-away balls then share an edge cell, which costs time, not correctness.
        const KEY_LIMIT: f64 = (1u64 << 40) as f64;
        let key = |v: f64| (v / cell).floor().clamp(-KEY_LIMIT, KEY_LIMIT) as i64;
        self.keyed.extend(
            centre
                .iter()
                .enumerate()
                .map(|(i, c)| (key(c.y), key(c.x), i as u32)),
        );
        self.keyed.sort_unstable();
        let keyed = &self.keyed;
        let find = |row: i64, col: i64| -> usize {
            keyed.partition_point(|&(r, c, _)| (r, c) < (row, col))
        };
        for (a, &(row, col, i)) in keyed.iter().enumerate() {
            // Same cell: only later entries. Neighbours: the half-stencil (right, and the row above).
            for &(dr, dc) in &[(0i64, 0i64), (0, 1), (1, -1), (1, 0), (1, 1)] {
                let start = if (dr, dc) == (0, 0) {
                    a + 1
                } else {
                    find(row + dr, col + dc)
                };
                for &(r, c, j) in &keyed[start..] {
                    if (r, c) != (row + dr, col + dc) {
                        break;
                    }
                    if within(centre, bound, reach, i as usize, j as usize) {
                        out.push((i.min(j), i.max(j)));
                    }
                }
            }
        }
        out.sort_unstable();
    }
}

fn within(centre: &[DVec2], bound: &[f64], reach: f64, i: usize, j: usize) -> bool {
    let limit = bound[i] + bound[j] + reach;
    centre[i].distance_squared(centre[j]) <= limit * limit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_finds_exactly_the_pairs_brute_force_finds() {
        let mut seed = 12345u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 11) as f64) / ((1u64 << 53) as f64)
        };
        let n = 400;
        let centre: Vec<DVec2> = (0..n)
            .map(|_| DVec2::new(next() * 5.0 - 2.5, next() * 3.0))
            .collect();
        let bound: Vec<f64> = (0..n).map(|_| 0.02 + 0.06 * next()).collect();
        let mut out = Vec::new();
        BroadPhase::default().near_pairs(&centre, &bound, 0.01, &mut out);
        let mut brute = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                if within(&centre, &bound, 0.01, i, j) {
                    brute.push((i as u32, j as u32));
                }
            }
        }
        assert!(!brute.is_empty());
        assert_eq!(out, brute);
    }

    #[test]
    fn absurd_coordinates_do_not_overflow_the_cell_keys() {
        // 30 balls (past the brute-force cut-off) at coordinates whose cell index exceeds i64.
        let centre: Vec<DVec2> = (0..30)
            .map(|i| match i % 3 {
                0 => DVec2::new(1e300, -1e300),
                1 => DVec2::new(-1e300, 1e300 + f64::from(i)),
                _ => DVec2::new(f64::from(i) * 0.1, 0.0),
            })
            .collect();
        let bound = vec![0.05; centre.len()];
        let mut out = Vec::new();
        BroadPhase::default().near_pairs(&centre, &bound, 0.01, &mut out);
        let mut brute = Vec::new();
        for i in 0..centre.len() {
            for j in i + 1..centre.len() {
                if within(&centre, &bound, 0.01, i, j) {
                    brute.push((i as u32, j as u32));
                }
            }
        }
        assert_eq!(out, brute);
    }
}
