//! Broad phase: which ball pairs can be within reach of each other, by a uniform grid.
//!
//! Deterministic by construction: balls are bucketed by sorting their cell keys (no hash-map order),
//! and the pair list comes out sorted by `(i, j)`.

use glam::DVec2;

/// Reusable grid storage, so repeated queries do not reallocate.
#[derive(Default, Debug, Clone)]
pub struct BroadPhase {
    keyed: Vec<(i64, i64, u32)>,
    large: Vec<u32>,
    sorted_bounds: Vec<f64>,
    /// The large balls' centres, bounds and pairs (in their own numbering), for their coarser grid.
    large_centre: Vec<DVec2>,
    large_bound: Vec<f64>,
    large_pairs: Vec<(u32, u32)>,
    /// How many pairs the last query tested (a measure of its work, for tests).
    tested: usize,
    /// Scratch for the counting sorts of the cells and of the pairs.
    counts: Vec<u32>,
    spare_keyed: Vec<(i64, i64, u32)>,
    pair_sort: PairSort,
}

/// Reusable storage for [`sort_pairs`].
#[derive(Default, Debug, Clone)]
pub struct PairSort {
    counts: Vec<usize>,
    spare: Vec<(u32, u32)>,
}

/// Sorts `pairs` ascending, into exactly the sequence `sort_unstable` gives: a pass that counts the first
/// elements, then a sort of each first element's second ones (an insertion sort for the usual few). A comparison sort's `log` factor
/// was a few per cent of a settled pile's step, spent on lists of pairs sorted several times a step.
pub fn sort_pairs(pairs: &mut Vec<(u32, u32)>, scratch: &mut PairSort) {
    let len = pairs.len();
    let Some(largest) = pairs.iter().map(|p| p.0 as usize).max() else {
        return;
    };
    // Sparse first elements (or a short list) would make the counts cost more than they save.
    if len < 64 || largest > 4 * len {
        pairs.sort_unstable();
        return;
    }
    let counts = &mut scratch.counts;
    counts.clear();
    counts.resize(largest + 2, 0);
    for p in pairs.iter() {
        counts[p.0 as usize + 1] += 1;
    }
    for k in 1..counts.len() {
        counts[k] += counts[k - 1];
    }
    let spare = &mut scratch.spare;
    spare.clear();
    spare.resize(len, (0, 0));
    for &p in pairs.iter() {
        let at = &mut counts[p.0 as usize];
        spare[*at] = p;
        *at += 1;
    }
    // `counts[i]` is now the end of first element i's run, the start of i + 1's.
    let mut start = 0;
    for &end in &counts[..=largest] {
        // One ball with many partners (a large or fast one, listed by the large balls' query in no order) would
        // make the insertion sort quadratic: 4 000 neighbours took 5.4 ms against 1.2 (review, fortieth session).
        let run = &mut spare[start..end];
        if run.len() > 32 {
            run.sort_unstable();
        } else {
            insertion_sort(run);
        }
        start = end;
    }
    std::mem::swap(pairs, spare);
}

/// Sorts a short run in place.
fn insertion_sort<T: Ord + Copy>(run: &mut [T]) {
    for k in 1..run.len() {
        let item = run[k];
        let mut at = k;
        while at > 0 && run[at - 1] > item {
            run[at] = run[at - 1];
            at -= 1;
        }
        run[at] = item;
    }
}

/// Sorts `keyed` by `(row, col, ball)`, as `sort_unstable` would, counting the cells when they are few beside
/// the balls (a pile: a few balls a cell). The entries must come in increasing ball order (the counting is
/// stable, so each cell keeps that order).
fn sort_by_cell(
    keyed: &mut Vec<(i64, i64, u32)>,
    counts: &mut Vec<u32>,
    spare: &mut Vec<(i64, i64, u32)>,
) {
    let len = keyed.len();
    if len < 64 {
        keyed.sort_unstable();
        return;
    }
    let (mut r0, mut r1, mut c0, mut c1) = (i64::MAX, i64::MIN, i64::MAX, i64::MIN);
    for &(r, c, _) in keyed.iter() {
        (r0, r1, c0, c1) = (r0.min(r), r1.max(r), c0.min(c), c1.max(c));
    }
    // Keys are clamped to ±2⁴⁰, so the spans fit an i64 and their product an f64's range.
    let width = c1 - c0 + 1;
    let cells = (r1 - r0 + 1) as f64 * width as f64;
    if cells > (4 * len) as f64 {
        keyed.sort_unstable();
        return;
    }
    debug_assert!(keyed.windows(2).all(|w| w[0].2 < w[1].2));
    let cell_of = |r: i64, c: i64| ((r - r0) * width + (c - c0)) as usize;
    counts.clear();
    counts.resize(cells as usize + 1, 0);
    for &(r, c, _) in keyed.iter() {
        counts[cell_of(r, c) + 1] += 1;
    }
    for k in 1..counts.len() {
        counts[k] += counts[k - 1];
    }
    spare.clear();
    spare.resize(len, (0, 0, 0));
    for &entry in keyed.iter() {
        let at = &mut counts[cell_of(entry.0, entry.1)];
        spare[*at as usize] = entry;
        *at += 1;
    }
    std::mem::swap(keyed, spare);
}

/// Balls whose bound exceeds this multiple of the median bound are queried against the grid instead of sizing its
/// cells (one fast ball, or one long Newton segment, would otherwise make every cell hold dozens of balls).
const LARGE_BOUND_FACTOR: f64 = 1.5;

/// Cell keys are clamped so that `key ± 1` cannot overflow for absurd coordinates (a fuzzed scene with balls at
/// 1e300 m); far-away balls then share an edge cell, which costs time, not correctness.
const KEY_LIMIT: f64 = (1u64 << 40) as f64;

fn cell_key(v: f64, cell: f64) -> i64 {
    (v / cell).floor().clamp(-KEY_LIMIT, KEY_LIMIT) as i64
}

impl BroadPhase {
    /// All pairs `(i, j)`, `i < j`, whose bounding circles `(centre[i], bound[i])` come within `reach`:
    /// `|cᵢ − cⱼ| ≤ boundᵢ + boundⱼ + reach`. `out` is cleared and filled sorted.
    ///
    /// The grid's cells fit the balls up to [`LARGE_BOUND_FACTOR`] × the median bound; the few larger ones
    /// look up the cells their bound covers, and find each other on a second, coarser grid.
    pub fn near_pairs(
        &mut self,
        centre: &[DVec2],
        bound: &[f64],
        reach: f64,
        out: &mut Vec<(u32, u32)>,
    ) {
        self.near_pairs_at_most(centre, bound, reach, usize::MAX, out);
    }

    /// [`Self::near_pairs`], unless there are more than `max_pairs`: then it stops soon after finding that many
    /// (at most one ball's pairs later) and returns `false`, with `out` holding those it found, unsorted. A
    /// heap of coincident balls has `n²/2` pairs; this finds out without listing them all.
    pub fn near_pairs_at_most(
        &mut self,
        centre: &[DVec2],
        bound: &[f64],
        reach: f64,
        max_pairs: usize,
        out: &mut Vec<(u32, u32)>,
    ) -> bool {
        out.clear();
        self.tested = 0;
        let n = centre.len();
        if n < 2 {
            return true;
        }
        if n <= 24 {
            self.tested = n * (n - 1) / 2;
            for i in 0..n {
                for j in i + 1..n {
                    if within(centre, bound, reach, i, j) {
                        out.push((i as u32, j as u32));
                    }
                }
            }
            return out.len() <= max_pairs;
        }
        self.sorted_bounds.clear();
        self.sorted_bounds.extend_from_slice(bound);
        let (_, median, _) = self
            .sorted_bounds
            .select_nth_unstable_by(n / 2, f64::total_cmp);
        let limit = LARGE_BOUND_FACTOR * *median;
        self.large.clear();
        self.large.extend(
            (0..n as u32).filter(|&i| bound[i as usize].is_nan() || bound[i as usize] > limit), // NaN counts as large
        );
        let max_bound = bound.iter().copied().fold(0.0f64, f64::max);
        if self.large.len() * 4 > n || limit.is_nan() || limit <= 0.0 {
            // Bounds too spread for a split to pay: one grid sized for the largest.
            self.large.clear();
            if !self.grid_pairs(centre, bound, reach, max_bound, None, max_pairs, out) {
                return false;
            }
        } else {
            if !self.grid_pairs(centre, bound, reach, limit, Some(limit), max_pairs, out) {
                return false;
            }
            let cell = (2.0 * limit + reach).max(1e-9);
            for &i in &self.large {
                self.tested += self.query_cells(centre, bound, reach, cell, limit, i as usize, out);
                if out.len() > max_pairs {
                    return false;
                }
            }
            // Large against large, on a grid over them alone (the fine grid's keys are no longer needed).
            let mut sub_centre = std::mem::take(&mut self.large_centre);
            let mut sub_bound = std::mem::take(&mut self.large_bound);
            let mut sub_pairs = std::mem::take(&mut self.large_pairs);
            sub_centre.clear();
            sub_centre.extend(self.large.iter().map(|&i| centre[i as usize]));
            sub_bound.clear();
            sub_bound.extend(self.large.iter().map(|&i| bound[i as usize]));
            sub_pairs.clear();
            let within_limit = self.grid_pairs(
                &sub_centre,
                &sub_bound,
                reach,
                max_bound,
                None,
                max_pairs.saturating_sub(out.len()),
                &mut sub_pairs,
            );
            let large = &self.large;
            out.extend(
                sub_pairs
                    .iter()
                    .map(|&(a, b)| (large[a as usize], large[b as usize])),
            );
            self.large_centre = sub_centre;
            self.large_bound = sub_bound;
            self.large_pairs = sub_pairs;
            if !within_limit || out.len() > max_pairs {
                return false;
            }
        }
        sort_pairs(out, &mut self.pair_sort);
        true
    }

    /// How many pairs the last query tested for being within reach: about the number of balls times their
    /// neighbours in a cell, whatever the layout.
    pub fn pairs_tested(&self) -> usize {
        self.tested
    }

    /// The half-stencil sweep of a uniform grid whose cell fits bounds up to `fit`; with `only_up_to`, balls
    /// with larger bounds are left out of it. Stops with `false` once `out` holds more than `max_pairs`.
    #[allow(clippy::too_many_arguments)]
    fn grid_pairs(
        &mut self,
        centre: &[DVec2],
        bound: &[f64],
        reach: f64,
        fit: f64,
        only_up_to: Option<f64>,
        max_pairs: usize,
        out: &mut Vec<(u32, u32)>,
    ) -> bool {
        let cell = (2.0 * fit + reach).max(1e-9);
        self.keyed.clear();
        self.keyed.extend(
            centre
                .iter()
                .enumerate()
                .filter(|&(i, _)| only_up_to.is_none_or(|l| bound[i] <= l))
                .map(|(i, c)| (cell_key(c.y, cell), cell_key(c.x, cell), i as u32)),
        );
        sort_by_cell(&mut self.keyed, &mut self.counts, &mut self.spare_keyed);
        let keyed = &self.keyed;
        // The entries are sorted by (row, col), so as the sweep advances, the first entry of the cell to the
        // right and of the row above's three cells only move forward: one cursor each, no searches.
        let mut right = 0usize;
        let mut above = 0usize;
        let mut tested = 0usize;
        for (a, &(row, col, i)) in keyed.iter().enumerate() {
            let mut pair_with = |start: usize, r_want: i64, c_last: i64| {
                for &(r, c, j) in &keyed[start..] {
                    if r != r_want || c > c_last {
                        break;
                    }
                    tested += 1;
                    if within(centre, bound, reach, i as usize, j as usize) {
                        out.push((i.min(j), i.max(j)));
                    }
                }
            };
            // Same cell: only later entries.
            pair_with(a + 1, row, col);
            // The cell to the right.
            right = right.max(a + 1);
            while right < keyed.len() && (keyed[right].0, keyed[right].1) < (row, col + 1) {
                right += 1;
            }
            pair_with(right, row, col + 1);
            // The row above: cells col − 1 ..= col + 1.
            while above < keyed.len() && (keyed[above].0, keyed[above].1) < (row + 1, col - 1) {
                above += 1;
            }
            pair_with(above, row + 1, col + 1);
            if out.len() > max_pairs {
                self.tested += tested;
                return false;
            }
        }
        self.tested += tested;
        true
    }

    /// Pairs of the large ball `i` with the grid's balls (bounds up to `fit`, cells of size `cell`); returns how
    /// many pairs it tested.
    ///
    /// Only rows that hold balls are visited, each entered by a galloping search, so the work is the balls under
    /// the bound's box plus one search per row holding balls, and never more than a scan. (Balls along one line
    /// fill one row of the grid; the rows a large bound spans used to be searched one by one, or, once the box
    /// covered more cells than there were balls, every ball was tested: n²/40 tests for a row of balls with
    /// every tenth one large, minutes for a 66 MB scene.)
    #[allow(clippy::too_many_arguments)]
    fn query_cells(
        &self,
        centre: &[DVec2],
        bound: &[f64],
        reach: f64,
        cell: f64,
        fit: f64,
        i: usize,
        out: &mut Vec<(u32, u32)>,
    ) -> usize {
        let keyed = &self.keyed;
        let span = bound[i] + fit + reach;
        let c = centre[i];
        let (mut r0, mut r1) = (cell_key(c.y - span, cell), cell_key(c.y + span, cell));
        let (mut c0, mut c1) = (cell_key(c.x - span, cell), cell_key(c.x + span, cell));
        let cells = (r1 - r0 + 1) as f64 * (c1 - c0 + 1) as f64;
        if cells.is_nan() || cells > keyed.len() as f64 {
            // Such a box used to be answered by testing every ball. One more cell on each side finds exactly the
            // same pairs (a pair within reach lies within `span` of the centre up to rounding, far less than a
            // cell while no key is clamped), so the pairs, and the physics, stay bit for bit the same.
            let clamped = [r0, r1, c0, c1]
                .iter()
                .any(|&k| k.unsigned_abs() >= KEY_LIMIT as u64);
            if clamped || !span.is_finite() {
                for &(_, _, j) in keyed {
                    if within(centre, bound, reach, i, j as usize) {
                        out.push((i.min(j as usize) as u32, i.max(j as usize) as u32));
                    }
                }
                return keyed.len();
            }
            (r0, r1, c0, c1) = (r0 - 1, r1 + 1, c0 - 1, c1 + 1);
        }
        let mut tested = 0;
        let mut k = keyed.partition_point(|&(r, col, _)| (r, col) < (r0, c0));
        while let Some(&(row, col, _)) = keyed.get(k) {
            if row > r1 {
                break;
            }
            if col < c0 {
                // A later row, entered left of the box: on to its column c0.
                k += gallop(&keyed[k..], |&(r, col, _)| (r, col) < (row, c0));
                continue;
            }
            while let Some(&(r, col, j)) = keyed.get(k) {
                if r != row || col > c1 {
                    break;
                }
                tested += 1;
                if within(centre, bound, reach, i, j as usize) {
                    out.push((i.min(j as usize) as u32, i.max(j as usize) as u32));
                }
                k += 1;
            }
            // The rest of this row lies right of the box.
            k += gallop(&keyed[k..], |&(r, _, _)| r <= row);
        }
        tested
    }
}

/// How many leading elements of `s` satisfy `pred` (true on a prefix, false after it), in `O(log answer)`
/// steps: a galloping search, so that many short hops cost no more than one scan.
fn gallop<T>(s: &[T], pred: impl Fn(&T) -> bool) -> usize {
    let mut hi = 1;
    while hi < s.len() && pred(&s[hi]) {
        hi *= 2;
    }
    let lo = hi / 2;
    let hi = hi.min(s.len());
    lo + s[lo..hi].partition_point(pred)
}

fn within(centre: &[DVec2], bound: &[f64], reach: f64, i: usize, j: usize) -> bool {
    let limit = bound[i] + bound[j] + reach;
    centre[i].distance_squared(centre[j]) <= limit * limit
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::uniform;

    /// Every pair within reach, by checking them all.
    fn brute_force(centre: &[DVec2], bound: &[f64], reach: f64) -> Vec<(u32, u32)> {
        let mut pairs = Vec::new();
        for i in 0..centre.len() {
            for j in i + 1..centre.len() {
                if within(centre, bound, reach, i, j) {
                    pairs.push((i as u32, j as u32));
                }
            }
        }
        pairs
    }

    /// `n` centres uniform in the box `[−width/2, width/2] × [0, height]`.
    fn scattered(next: &mut impl FnMut() -> f64, n: usize, width: f64, height: f64) -> Vec<DVec2> {
        (0..n)
            .map(|_| DVec2::new(next() * width - 0.5 * width, next() * height))
            .collect()
    }

    fn grid(centre: &[DVec2], bound: &[f64], reach: f64) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        BroadPhase::default().near_pairs(centre, bound, reach, &mut out);
        out
    }

    #[test]
    fn grid_finds_exactly_the_pairs_brute_force_finds() {
        let mut next = uniform(12345);
        let n = 400;
        let centre = scattered(&mut next, n, 5.0, 3.0);
        let bound: Vec<f64> = (0..n).map(|_| 0.02 + 0.06 * next()).collect();
        let brute = brute_force(&centre, &bound, 0.01);
        assert!(!brute.is_empty());
        assert_eq!(grid(&centre, &bound, 0.01), brute);
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
        assert_eq!(
            grid(&centre, &bound, 0.01),
            brute_force(&centre, &bound, 0.01)
        );
    }

    #[test]
    fn a_few_huge_bounds_find_exactly_the_pairs_brute_force_finds() {
        let mut next = uniform(987);
        let n = 600;
        let centre = scattered(&mut next, n, 8.0, 4.0);
        // 5 % of the balls carry bounds up to 20 × the others' (fast balls, long Newton segments).
        let bound: Vec<f64> = (0..n)
            .map(|k| {
                let b = 0.04 + 0.03 * next();
                if k % 20 == 7 {
                    b * (2.0 + 18.0 * next())
                } else {
                    b
                }
            })
            .collect();
        for reach in [0.0, 0.001, 0.05] {
            let brute = brute_force(&centre, &bound, reach);
            assert!(brute.iter().any(|&(i, j)| i % 20 == 7 && j % 20 == 7));
            assert_eq!(grid(&centre, &bound, reach), brute, "reach {reach}");
        }
    }

    /// `n` balls along the x axis: nine of bound 1 cm, 10 cm apart, then one of bound `large` with 1 m gaps.
    fn row_with_large_balls(n: usize, large: f64) -> (Vec<DVec2>, Vec<f64>) {
        let (mut centre, mut bound) = (Vec::new(), Vec::new());
        let mut x = 0.0;
        for k in 0..n {
            if k % 10 == 9 {
                x += large + 1.0;
                centre.push(DVec2::new(x, 0.0));
                bound.push(large);
                x += large + 1.0;
            } else {
                x += 0.1;
                centre.push(DVec2::new(x, 0.0));
                bound.push(0.01);
            }
        }
        (centre, bound)
    }

    #[test]
    fn a_row_of_balls_with_large_ones_among_them_costs_linear_work() {
        // All cells in one row: a large ball's box covers more cells than there are balls, and each large ball
        // used to test every ball, 20 000 × 2 000 tests here.
        let (centre, bound) = row_with_large_balls(20_000, 50.0);
        let mut grid = BroadPhase::default();
        let mut out = Vec::new();
        grid.near_pairs(&centre, &bound, 0.1, &mut out);
        assert!(
            grid.pairs_tested() <= 4 * centre.len(),
            "{} pairs tested for {} balls",
            grid.pairs_tested(),
            centre.len()
        );
        assert_eq!(
            out.len(),
            16_000,
            "neighbours in each run of nine small balls, and no more"
        );
    }

    #[test]
    fn balls_along_a_line_with_bounds_of_every_size_find_exactly_the_pairs_brute_force_finds() {
        let mut next = uniform(4242);
        for (n, large) in [(2_000, 50.0), (2_000, 0.5)] {
            let (centre, bound) = row_with_large_balls(n, large);
            for reach in [0.0, 0.1, 2.0] {
                assert_eq!(
                    grid(&centre, &bound, reach),
                    brute_force(&centre, &bound, reach),
                    "{n} balls, large {large}, reach {reach}"
                );
            }
        }
        // Random bounds spread over five decades on a slightly wavy line (a row or two of cells).
        let n = 1_500;
        let centre: Vec<DVec2> = (0..n)
            .map(|k| DVec2::new(0.05 * k as f64 + 0.01 * next(), 0.003 * next()))
            .collect();
        let bound: Vec<f64> = (0..n).map(|_| 10f64.powf(-4.0 + 5.0 * next())).collect();
        for reach in [0.0, 0.01] {
            let brute = brute_force(&centre, &bound, reach);
            assert!(brute.len() > n);
            assert_eq!(grid(&centre, &bound, reach), brute, "reach {reach}");
        }
    }

    #[test]
    fn a_heap_of_coincident_balls_is_caught_without_listing_its_pairs() {
        let n = 20_000;
        let centre = vec![DVec2::new(1.0, 2.0); n];
        let bound = vec![0.1; n];
        let mut out = Vec::new();
        let mut grid = BroadPhase::default();
        assert!(!grid.near_pairs_at_most(&centre, &bound, 0.0, 1000, &mut out));
        // 200 million pairs exist; it stopped after the first ball's.
        assert!(out.len() <= 1000 + n, "{}", out.len());
        // Under the limit, the same pairs as without one, sorted.
        let mut next = uniform(55);
        let centre = scattered(&mut next, 500, 4.0, 2.0);
        let bound: Vec<f64> = (0..500).map(|k| if k == 3 { 1.5 } else { 0.05 }).collect();
        let all = grid_pairs_of(&centre, &bound);
        assert!(grid.near_pairs_at_most(&centre, &bound, 0.01, all.len(), &mut out));
        assert_eq!(out, all);
        assert!(!grid.near_pairs_at_most(&centre, &bound, 0.01, all.len() - 1, &mut out));
    }

    #[test]
    fn the_counting_sorts_give_the_sequence_a_comparison_sort_gives() {
        let mut next = uniform(11);
        let mut scratch = PairSort::default();
        let (mut counts, mut spare) = (Vec::new(), Vec::new());
        // Short and long lists; first elements dense (counted) and sparse (left to the comparison sort);
        // repeated pairs; cells in a few rows and spread over a huge range (also left to the comparison sort).
        for (len, range, spread) in [
            (10, 5, 3.0),
            (300, 50, 10.0),
            (3_000, 1_000, 40.0),
            (3_000, 1 << 30, 1e12),
            (5_000, 20, 2.0),
            (5_000, 1, 2.0),
        ] {
            let mut pairs: Vec<(u32, u32)> = (0..len)
                .map(|_| {
                    let i = (next() * range as f64) as u32;
                    (i, i + 1 + (next() * 9.0) as u32)
                })
                .collect();
            let mut expected = pairs.clone();
            expected.sort_unstable();
            sort_pairs(&mut pairs, &mut scratch);
            assert_eq!(pairs, expected, "{len} pairs over {range}");

            let mut keyed: Vec<(i64, i64, u32)> = (0..len as u32)
                .map(|i| {
                    let key = |v: f64| (v * spread - spread * 0.5).floor() as i64;
                    (key(next()), key(next()), i)
                })
                .collect();
            let mut expected = keyed.clone();
            expected.sort_unstable();
            sort_by_cell(&mut keyed, &mut counts, &mut spare);
            assert_eq!(keyed, expected, "{len} balls over {spread} cells a side");
        }
    }

    fn grid_pairs_of(centre: &[DVec2], bound: &[f64]) -> Vec<(u32, u32)> {
        let pairs = grid(centre, bound, 0.01);
        assert_eq!(pairs, brute_force(centre, bound, 0.01));
        pairs
    }

    #[test]
    fn a_huge_bound_at_an_absurd_coordinate_neither_overflows_nor_loops() {
        let mut centre: Vec<DVec2> = (0..40)
            .map(|i| DVec2::new(f64::from(i) * 0.1, 0.0))
            .collect();
        let mut bound = vec![0.05; centre.len()];
        centre.push(DVec2::new(1e300, 0.0));
        bound.push(1e299);
        centre.push(DVec2::new(1.0, 0.0));
        bound.push(1e300);
        assert_eq!(
            grid(&centre, &bound, 0.01),
            brute_force(&centre, &bound, 0.01)
        );
    }
}
