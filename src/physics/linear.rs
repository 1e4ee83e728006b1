//! The Newton system `H Δx = −g` for a [`BlockHessian`].
//!
//! Balls outside the sparsity pattern are independent 2×2 systems and are solved in closed form (an isolated
//! ball, as in the seed's experiment, never touches the sparse solver). The balls of the pattern are factorised
//! together by a sparse block Cholesky ([`BlockCholesky`], one 2×2 block per ball pair).
//!
//! The pattern is a set of coupled ball pairs that only grows during one minimisation: it is seeded with the
//! pairs predicted to come within reach during the step ([`LinearWorkspace::reset_pattern`]), and a Newton
//! iteration that couples a pair outside it adds the pair. Pairs of the pattern that are not in contact hold
//! explicit zero blocks. So the fill-reducing ordering (faer's approximate minimum degree on the ball graph,
//! under one level of nested dissection for a large pattern: [`super::ordering`]) and the factor's structure are
//! computed once per pattern, not once per iteration; each iteration only scatters its blocks into fixed slots
//! and refactorises numerically. A step seeded with the very pattern the workspace last analysed (a pile at rest)
//! keeps that analysis: the 2 000-ball pit at rest steps in 2.8 ms instead of 4.0 (`run --scene
//! assets/scenes/ball_pit_2000.ron`, 900 steps against 300; docs/performance.md, sixteenth session). A large
//! factorisation shares its columns between two threads, each column computed by the same operations in the same
//! order, so the result does not depend on the thread count.
//!
//! faer's own sparse `LLᵀ` (simplicial, or supernodal from 2 000 coupled balls) was used before; on the
//! reference pit the block factorisation cut the linear solve from 5.53 to 2.30 ms per step at N = 1 000, from
//! 80.8 to 34.6 at 4 000 and from 420 to 243 at 10 000 (`bench-one --engine ipc --steps 120`, one build).

use glam::DVec2;

use super::block_cholesky::BlockCholesky;
use super::geometry::Sym2;
use super::ordering::fill_reducing_order;
use super::potential::BlockHessian;

/// Why a Newton system could not be solved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinearSolveError {
    #[error("Hessian block of ball {ball} is not positive definite")]
    SingularBlock { ball: usize },
    #[error("sparse Cholesky failed: {0}")]
    Cholesky(String),
}

/// How often each phase of the sparse solve ran (for profiling).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinearCounters {
    /// Orderings and symbolic factorisations (one per new pattern that couples some balls).
    pub symbolic: u64,
    /// Numeric factorisations and solves.
    pub numeric: u64,
    /// Steps whose seed equalled the pattern last analysed, so that analysis was kept.
    pub reused: u64,
}

/// The sparsity pattern, the factor's structure and reused buffers.
#[derive(Default, Debug)]
pub struct LinearWorkspace {
    /// Number of balls the pattern indexes.
    balls: usize,
    /// Coupled pairs `(i < j)` of the pattern, sorted.
    pairs: Vec<(u32, u32)>,
    /// `compact[ball]`: the ball's index among the pattern's balls, or `UNCOUPLED`.
    compact: Vec<u32>,
    /// The pattern's balls, ascending.
    coupled: Vec<u32>,
    /// Block lower triangle: for compact column `c`, the compact rows `> c` are
    /// `block_rows[block_col_ptr[c]..block_col_ptr[c + 1]]`, ascending.
    block_col_ptr: Vec<usize>,
    block_rows: Vec<u32>,
    /// The factorisation of the pattern, and `L`'s slot of each block of `block_rows`.
    factor: Option<BlockCholesky>,
    targets: Vec<usize>,
    /// `L`'s slot of each off-diagonal block of the Hessian being solved, in its order.
    slots: Vec<usize>,
    /// The pairs `(i < j)` of `slots`, while the analysis that gave them stands: the next Hessian's pairs
    /// found among them take their slots without a search (a pile's contacts change little between
    /// iterations).
    slot_pairs: Vec<(u32, u32)>,
    last_slots: Vec<usize>,
    spare_pairs: Vec<(u32, u32)>,
    /// Right-hand side and solution of the pattern's balls, in compact order.
    rhs: Vec<DVec2>,
    scratch: Vec<(u32, u32)>,
    /// `compact`, the block triangle and `factor`'s structure match `pairs`.
    analysed: bool,
    pub counters: LinearCounters,
    /// Pairs likely to couple soon (set by the caller): whenever the pattern has to grow anyway, they join it
    /// too, so the next iterations rarely need another ordering and symbolic analysis.
    pub anticipated: Vec<(u32, u32)>,
}

impl Clone for LinearWorkspace {
    /// A fresh workspace: the symbolic factorisation is a cache, rebuilt on first use.
    fn clone(&self) -> Self {
        LinearWorkspace {
            counters: self.counters,
            ..LinearWorkspace::default()
        }
    }
}

const UNCOUPLED: u32 = u32::MAX;

impl LinearWorkspace {
    /// Starts a new pattern for a system of `balls` balls, seeded with `pairs` (`i < j`, any order,
    /// duplicates allowed). If that is the pattern already analysed, the analysis is kept (the ordering and the
    /// structure depend on the pattern alone, so the bits are the same).
    pub fn reset_pattern(&mut self, balls: usize, pairs: &[(u32, u32)]) {
        let mut seed = std::mem::take(&mut self.scratch);
        seed.clear();
        seed.extend_from_slice(pairs);
        seed.sort_unstable();
        seed.dedup();
        if self.analysed && self.balls == balls && seed == self.pairs {
            self.counters.reused += 1;
            self.scratch = seed;
            return;
        }
        self.balls = balls;
        self.scratch = std::mem::replace(&mut self.pairs, seed);
        self.analysed = false;
    }

    /// Adds pairs to the pattern; the symbolic factorisation is recomputed on the next solve.
    fn grow_pattern(&mut self, extra: &[(u32, u32)]) {
        self.pairs.extend_from_slice(extra);
        self.pairs.sort_unstable();
        self.pairs.dedup();
        self.analysed = false;
    }

    /// Slot of the block `(i, j)` (`i < j`, ball indices) in the block lower triangle, if the pattern holds it.
    fn block_slot(&self, i: u32, j: u32) -> Option<usize> {
        let ci = self.compact[i as usize];
        let cj = self.compact[j as usize];
        if ci == UNCOUPLED || cj == UNCOUPLED {
            return None;
        }
        let (col, row) = (ci.min(cj) as usize, ci.max(cj));
        let range = self.block_col_ptr[col]..self.block_col_ptr[col + 1];
        self.block_rows[range.clone()]
            .binary_search(&row)
            .ok()
            .map(|k| range.start + k)
    }

    /// `L`'s slot of each off-diagonal block of `hessian` into `slots`; the pairs outside the pattern into
    /// `scratch`. Whether there were none.
    fn find_slots(&mut self, hessian: &BlockHessian) -> bool {
        self.scratch.clear();
        std::mem::swap(&mut self.slots, &mut self.last_slots);
        self.slots.clear();
        let previous = std::mem::take(&mut self.slot_pairs);
        let mut pairs = std::mem::take(&mut self.spare_pairs);
        pairs.clear();
        // A walk along the last solve's pairs; a pair it does not meet is searched for in the block triangle. The
        // Hessian lists its contacts' pairs, then its friction's, each sorted: where the list starts again from a
        // smaller pair, so does the walk.
        let mut k = 0;
        let mut last = (0, 0);
        for &(i, j, _) in &hessian.off_diagonal {
            let pair = (i.min(j), i.max(j));
            if pair < last {
                k = previous.partition_point(|p| *p < pair);
            }
            last = pair;
            while k < previous.len() && previous[k] < pair {
                k += 1;
            }
            if k < previous.len() && previous[k] == pair {
                self.slots.push(self.last_slots[k]);
                pairs.push(pair);
                continue;
            }
            match self.block_slot(pair.0, pair.1) {
                Some(slot) => {
                    self.slots.push(self.targets[slot]);
                    pairs.push(pair);
                }
                None => self.scratch.push(pair),
            }
        }
        let found = self.scratch.is_empty();
        if !found {
            // The pattern grows and is analysed again: no slot stands.
            pairs.clear();
        }
        self.slot_pairs = pairs;
        self.spare_pairs = previous;
        found
    }

    /// Builds the compact numbering, the block lower triangle, the ordering and the factor's structure for
    /// `self.pairs`.
    fn analyse(&mut self) -> Result<(), LinearSolveError> {
        let n = self.balls;
        self.compact.clear();
        self.compact.resize(n, UNCOUPLED);
        self.coupled.clear();
        for &(i, j) in &self.pairs {
            for b in [i, j] {
                if self.compact[b as usize] == UNCOUPLED {
                    self.compact[b as usize] = 0;
                    self.coupled.push(b);
                }
            }
        }
        self.coupled.sort_unstable();
        for (c, &b) in self.coupled.iter().enumerate() {
            self.compact[b as usize] = c as u32;
        }
        let m = self.coupled.len();
        // Block lower triangle: pairs sorted by (compact column, compact row). The compact numbering keeps the
        // balls' order, so (i, j) sorted is already (column, row) sorted.
        self.block_col_ptr.clear();
        self.block_col_ptr.resize(m + 1, 0);
        self.block_rows.clear();
        for &(i, j) in &self.pairs {
            let col = self.compact[i as usize] as usize;
            self.block_col_ptr[col + 1] += 1;
            self.block_rows.push(self.compact[j as usize]);
        }
        for c in 0..m {
            self.block_col_ptr[c + 1] += self.block_col_ptr[c];
        }
        self.factor = None;
        self.targets.clear();
        self.slot_pairs.clear();
        if m == 0 {
            // No coupled ball: nothing to order or factorise, and nothing counted (`bench` at 100 balls read 16
            // symbolic analyses a step and no numeric factorisation).
            self.analysed = true;
            return Ok(());
        }
        self.counters.symbolic += 1;
        // Approximate minimum degree, under one level of nested dissection for a large pattern.
        let order = fill_reducing_order(m, &self.block_col_ptr, &self.block_rows)
            .map_err(LinearSolveError::Cholesky)?;
        let factor = BlockCholesky::analyse(m, &self.block_col_ptr, &self.block_rows, &order);
        for c in 0..m {
            for &r in &self.block_rows[self.block_col_ptr[c]..self.block_col_ptr[c + 1]] {
                let slot = factor.slot(c, r as usize).ok_or_else(|| {
                    LinearSolveError::Cholesky("the factor's structure lost a coupling".into())
                })?;
                self.targets.push(slot);
            }
        }
        self.factor = Some(factor);
        // Only a complete analysis counts: after a failed one the next solve analyses again (and a step seeded
        // with the same pattern does not keep a half-built structure).
        self.analysed = true;
        Ok(())
    }
}

/// Solves `H Δx = −g`, writing `Δx` into `out`.
pub fn solve_newton_direction(
    hessian: &BlockHessian,
    gradient: &[DVec2],
    workspace: &mut LinearWorkspace,
    out: &mut Vec<DVec2>,
) -> Result<(), LinearSolveError> {
    let n = gradient.len();
    out.clear();
    out.resize(n, DVec2::ZERO);
    if workspace.balls != n {
        workspace.reset_pattern(n, &[]);
    }
    if !workspace.analysed {
        workspace.analyse()?;
    }
    // Every coupled pair must have a slot; new ones grow the pattern (once: then they all have one).
    if !workspace.find_slots(hessian) {
        workspace.scratch.extend_from_slice(&workspace.anticipated);
        let extra = std::mem::take(&mut workspace.scratch);
        workspace.grow_pattern(&extra);
        workspace.scratch = extra;
        workspace.analyse()?;
        if !workspace.find_slots(hessian) {
            return Err(LinearSolveError::Cholesky(
                "coupled pair outside the grown pattern".into(),
            ));
        }
    }
    for i in 0..n {
        if workspace.compact[i] == UNCOUPLED {
            out[i] = solve_block(hessian.diagonal[i], gradient[i])
                .ok_or(LinearSolveError::SingularBlock { ball: i })?;
        }
    }
    let m = workspace.coupled.len();
    if m == 0 {
        return Ok(());
    }
    workspace.counters.numeric += 1;
    let Some(mut factor) = workspace.factor.take() else {
        return Err(LinearSolveError::Cholesky("no factor structure".into()));
    };
    let solved = solve_pattern(workspace, &mut factor, hessian, gradient, out);
    workspace.factor = Some(factor);
    solved
}

/// The pattern's part of `H Δx = −g` by the block factorisation.
fn solve_pattern(
    ws: &mut LinearWorkspace,
    chol: &mut BlockCholesky,
    hessian: &BlockHessian,
    gradient: &[DVec2],
    out: &mut [DVec2],
) -> Result<(), LinearSolveError> {
    chol.clear_diagonal();
    for (c, &b) in ws.coupled.iter().enumerate() {
        chol.add_diagonal(c, hessian.diagonal[b as usize]);
    }
    chol.factorize(&hessian.off_diagonal, &ws.slots)
        .map_err(|e| {
            LinearSolveError::Cholesky(format!(
                "not positive definite at ball {}",
                ws.coupled[e.ball]
            ))
        })?;
    ws.rhs.clear();
    ws.rhs
        .extend(ws.coupled.iter().map(|&b| -gradient[b as usize]));
    chol.solve_in_place(&mut ws.rhs);
    for (c, &b) in ws.coupled.iter().enumerate() {
        out[b as usize] = ws.rhs[c];
    }
    Ok(())
}

/// `−A⁻¹ g` for one symmetric positive-definite 2×2 block; a diagonal block divides exactly.
fn solve_block(a: Sym2, g: DVec2) -> Option<DVec2> {
    if a.xy == 0.0 {
        if a.xx > 0.0 && a.yy > 0.0 {
            return Some(DVec2::new(-(g.x / a.xx), -(g.y / a.yy)));
        }
        return None;
    }
    let det = a.xx * a.yy - a.xy * a.xy;
    if !(det > 0.0 && a.xx > 0.0) {
        return None;
    }
    Some(DVec2::new(
        -(a.yy * g.x - a.xy * g.y) / det,
        -(a.xx * g.y - a.xy * g.x) / det,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coupled_and_uncoupled_balls_solve_the_same_system_as_dense_elimination() {
        // Three balls: 0 and 2 coupled, 1 alone.
        let s = Sym2 {
            xx: 3.0,
            xy: 1.0,
            yy: 2.0,
        };
        let hessian = BlockHessian {
            diagonal: vec![
                Sym2::scaled_identity(1.0).plus(s),
                Sym2 {
                    xx: 2.0,
                    xy: 0.5,
                    yy: 1.0,
                },
                Sym2::scaled_identity(2.0).plus(s),
            ],
            off_diagonal: vec![(0, 2, s.scale(-1.0))],
        };
        let g = vec![
            DVec2::new(1.0, -2.0),
            DVec2::new(0.5, 0.25),
            DVec2::new(-1.0, 3.0),
        ];
        let mut out = Vec::new();
        solve_newton_direction(&hessian, &g, &mut LinearWorkspace::default(), &mut out)
            .expect("solves");
        // Residual H Δx + g = 0.
        let mut r: Vec<DVec2> = hessian
            .diagonal
            .iter()
            .zip(&out)
            .map(|(b, x)| b.mul_vec(*x))
            .collect();
        r[0] += s.scale(-1.0).mul_vec(out[2]);
        r[2] += s.scale(-1.0).mul_vec(out[0]);
        for (ri, gi) in r.iter().zip(&g) {
            assert!((*ri + *gi).length() < 1e-12, "residual {}", *ri + *gi);
        }
    }

    /// `H Δx + g` for a block Hessian.
    fn residual(hessian: &BlockHessian, dx: &[DVec2], g: &[DVec2]) -> f64 {
        let mut r: Vec<DVec2> = hessian
            .diagonal
            .iter()
            .zip(dx)
            .zip(g)
            .map(|((b, x), g)| b.mul_vec(*x) + *g)
            .collect();
        for &(i, j, b) in &hessian.off_diagonal {
            r[i as usize] += b.mul_vec(dx[j as usize]);
            r[j as usize] += b.mul_vec(dx[i as usize]);
        }
        r.iter().fold(0.0f64, |m, v| m.max(v.length()))
    }

    /// A chain of four balls where `pairs` are coupled by the same contact block.
    fn chain(pairs: &[(u32, u32)]) -> BlockHessian {
        let s = Sym2 {
            xx: 3.0,
            xy: 1.0,
            yy: 2.0,
        };
        let mut diagonal = vec![Sym2::scaled_identity(1.5); 4];
        for &(i, j) in pairs {
            diagonal[i as usize] = diagonal[i as usize].plus(s);
            diagonal[j as usize] = diagonal[j as usize].plus(s);
        }
        BlockHessian {
            diagonal,
            off_diagonal: pairs.iter().map(|&(i, j)| (i, j, s.scale(-1.0))).collect(),
        }
    }

    #[test]
    fn anticipated_pairs_join_the_pattern_when_it_grows_and_spare_the_next_analysis() {
        let g = vec![
            DVec2::new(1.0, -2.0),
            DVec2::new(0.5, 0.25),
            DVec2::new(-1.0, 3.0),
            DVec2::new(2.0, 1.0),
        ];
        let mut out = Vec::new();
        for anticipate in [false, true] {
            let mut ws = LinearWorkspace::default();
            ws.reset_pattern(4, &[]);
            if anticipate {
                ws.anticipated = vec![(1, 2), (2, 3)];
            }
            // (0, 1) is outside the empty pattern: it grows (the first analysis counted; the empty pattern's, which
            // couples nothing, is not).
            let first = chain(&[(0, 1)]);
            solve_newton_direction(&first, &g, &mut ws, &mut out).expect("solves");
            assert!(residual(&first, &out, &g) < 1e-12);
            assert_eq!(ws.counters.symbolic, 1);
            // Then the anticipated pairs couple.
            let second = chain(&[(0, 1), (1, 2), (2, 3)]);
            solve_newton_direction(&second, &g, &mut ws, &mut out).expect("solves");
            assert!(residual(&second, &out, &g) < 1e-12);
            let expected = if anticipate { 1 } else { 2 };
            assert_eq!(ws.counters.symbolic, expected, "anticipate = {anticipate}");
        }
    }

    #[test]
    fn a_step_seeded_with_the_pattern_already_analysed_keeps_its_analysis_and_its_bits() {
        let (hessian, g, _) = grid_system(12, 8, &[(1, 0), (0, 1), (1, 1)]);
        let seed = pairs_of(&hessian);
        let n = g.len();
        let mut ws = LinearWorkspace::default();
        let mut first = Vec::new();
        ws.reset_pattern(n, &seed);
        solve_newton_direction(&hessian, &g, &mut ws, &mut first).expect("solves");
        assert_eq!((ws.counters.symbolic, ws.counters.reused), (1, 0));

        // The next step's seed is the same pairs, listed in another order and twice over: kept.
        let mut again: Vec<(u32, u32)> = seed.iter().rev().copied().collect();
        again.extend_from_slice(&seed);
        let mut second = Vec::new();
        ws.reset_pattern(n, &again);
        solve_newton_direction(&hessian, &g, &mut ws, &mut second).expect("solves");
        assert_eq!((ws.counters.symbolic, ws.counters.reused), (1, 1));
        assert!(same_bits(&first, &second));
        let mut fresh = LinearWorkspace::default();
        let mut third = Vec::new();
        fresh.reset_pattern(n, &again);
        solve_newton_direction(&hessian, &g, &mut fresh, &mut third).expect("solves");
        assert!(
            same_bits(&first, &third),
            "a fresh workspace gives the same bits"
        );

        // One pair fewer, or another ball count, is a new pattern.
        ws.reset_pattern(n, &seed[1..]);
        solve_newton_direction(&hessian, &g, &mut ws, &mut second).expect("solves");
        assert_eq!(
            ws.counters.symbolic, 3,
            "analysed, then grown by the pair it lacked"
        );
        ws.reset_pattern(n + 1, &seed);
        let mut g_more = g.clone();
        g_more.push(DVec2::new(1.0, 1.0));
        let mut h_more = hessian.clone();
        h_more.diagonal.push(Sym2::scaled_identity(1.0));
        solve_newton_direction(&h_more, &g_more, &mut ws, &mut second).expect("solves");
        assert_eq!((ws.counters.symbolic, ws.counters.reused), (4, 1));
    }

    #[test]
    fn slots_kept_from_the_last_direction_give_the_bits_a_fresh_search_gives() {
        let (full, g, _) = grid_system(12, 8, &[(1, 0), (0, 1), (1, 1)]);
        let seed = pairs_of(&full);
        let n = g.len();
        let mut kept = LinearWorkspace::default();
        kept.reset_pattern(n, &seed);
        let mut next = crate::testing::uniform(7);
        // Each direction's Hessian holds a random part of the pattern's pairs (the rest of its blocks stay on the
        // diagonal, which keeps it positive definite), some listed as (j, i), in sorted, reversed or shuffled order.
        for round in 0..12 {
            let mut hessian = full.clone();
            hessian.off_diagonal.retain(|_| next() < 0.85);
            for entry in hessian.off_diagonal.iter_mut() {
                if next() < 0.2 {
                    *entry = (entry.1, entry.0, entry.2);
                }
            }
            match round % 3 {
                1 => hessian.off_diagonal.reverse(),
                2 => {
                    let len = hessian.off_diagonal.len();
                    for k in 0..len {
                        let other = k + ((next() * (len - k) as f64) as usize).min(len - k - 1);
                        hessian.off_diagonal.swap(k, other);
                    }
                }
                _ => {}
            }
            let mut with_kept_slots = Vec::new();
            solve_newton_direction(&hessian, &g, &mut kept, &mut with_kept_slots).expect("solves");
            let mut fresh = LinearWorkspace::default();
            fresh.reset_pattern(n, &seed);
            let mut searched = Vec::new();
            solve_newton_direction(&hessian, &g, &mut fresh, &mut searched).expect("solves");
            assert!(residual(&hessian, &searched, &g) < 1e-12, "round {round}");
            assert!(same_bits(&with_kept_slots, &searched), "round {round}");
        }
        assert_eq!(kept.counters.symbolic, 1, "the pattern never grew");
    }

    /// The pairs `(i < j)` of a Hessian's off-diagonal blocks, in its order.
    fn pairs_of(hessian: &BlockHessian) -> Vec<(u32, u32)> {
        hessian
            .off_diagonal
            .iter()
            .map(|&(i, j, _)| (i.min(j), i.max(j)))
            .collect()
    }

    /// A `w × h` grid of balls, each coupled to its neighbours at the offsets `(column, row)` in `links`, with
    /// positive-definite blocks, and a gradient.
    fn grid_system(w: u32, h: u32, links: &[(u32, u32)]) -> (BlockHessian, Vec<DVec2>, usize) {
        let n = (w * h) as usize;
        let mut diagonal = vec![Sym2::scaled_identity(1.0); n];
        let mut off_diagonal = Vec::new();
        for r in 0..h {
            for c in 0..w {
                let k = r * w + c;
                for &(dc, dr) in links {
                    if c + dc < w && r + dr < h {
                        let j = (r + dr) * w + c + dc;
                        let e = off_diagonal.len() as u32;
                        let b = Sym2 {
                            xx: 2.0 + f64::from(e % 7) * 0.25,
                            xy: 0.5 - f64::from(e % 3) * 0.25,
                            yy: 1.5 + f64::from(e % 5) * 0.5,
                        };
                        diagonal[k as usize] = diagonal[k as usize].plus(b);
                        diagonal[j as usize] = diagonal[j as usize].plus(b);
                        off_diagonal.push((k, j, b.scale(-1.0)));
                    }
                }
            }
        }
        let g = (0..n)
            .map(|k| DVec2::new((k as f64 * 0.37).sin(), (k as f64 * 0.11).cos()))
            .collect();
        let pairs = off_diagonal.len();
        (
            BlockHessian {
                diagonal,
                off_diagonal,
            },
            g,
            pairs,
        )
    }

    fn same_bits(a: &[DVec2], b: &[DVec2]) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(p, q)| (p.x.to_bits(), p.y.to_bits()) == (q.x.to_bits(), q.y.to_bits()))
    }

    #[test]
    fn a_wide_pile_factorises_on_two_threads_with_the_same_bits_as_on_one() {
        // A 150 × 30 grid of balls like the landed pit: minimum degree gives a long heavy path in the
        // elimination tree, and the factorisation splits its columns between two threads.
        let (hessian, g, _) = grid_system(150, 30, &[(1, 0), (0, 1), (1, 1)]);
        let mut ws = LinearWorkspace::default();
        let mut parallel = Vec::new();
        solve_newton_direction(&hessian, &g, &mut ws, &mut parallel).expect("solves");
        assert!(ws.factor.as_ref().is_some_and(BlockCholesky::is_split));
        assert!(residual(&hessian, &parallel, &g) < 1e-10);
        ws.factor.as_mut().expect("analysed").serial();
        let mut serial = Vec::new();
        solve_newton_direction(&hessian, &g, &mut ws, &mut serial).expect("solves");
        assert!(!ws.factor.as_ref().is_some_and(BlockCholesky::is_split));
        assert!(
            same_bits(&parallel, &serial),
            "the split changed the factor's bits"
        );
        // The portable update, on two threads, gives the same bits as the CPU's (AVX2 where it has it).
        let mut ws = LinearWorkspace::default();
        let mut portable = Vec::new();
        solve_newton_direction(&hessian, &g, &mut ws, &mut portable).expect("solves");
        let analyses = ws.counters.symbolic;
        ws.factor.as_mut().expect("analysed").portable();
        solve_newton_direction(&hessian, &g, &mut ws, &mut portable).expect("solves");
        assert!(ws.factor.as_ref().is_some_and(BlockCholesky::is_split));
        assert_eq!(
            ws.counters.symbolic, analyses,
            "the same pattern, so the same split"
        );
        assert!(
            same_bits(&parallel, &portable),
            "the portable update changed the bits"
        );
        // An indefinite matrix is still refused with both threads running.
        let mut broken = hessian.clone();
        broken.diagonal.iter_mut().for_each(|d| d.xx = -1.0);
        assert!(
            solve_newton_direction(&broken, &g, &mut LinearWorkspace::default(), &mut serial)
                .is_err()
        );
    }

    #[test]
    fn a_pile_past_the_dissection_threshold_leaves_a_short_serial_tail() {
        // A 200 × 50 grid like the landed 10 000-ball pit: cut across, each half one thread's share, and left to
        // compute after them the separator (one column of 50 balls) and a few of a half's top columns (92 in all
        // here; on the pit the split takes exactly the separator's 49).
        let (hessian, g, _) = grid_system(200, 50, &[(1, 0), (0, 1), (1, 1)]);
        let mut ws = LinearWorkspace::default();
        let mut out = Vec::new();
        solve_newton_direction(&hessian, &g, &mut ws, &mut out).expect("solves");
        let r = residual(&hessian, &out, &g);
        assert!(r < 1e-10, "residual {r}");
        let factor = ws.factor.as_ref().expect("analysed");
        assert!(factor.is_split());
        let tail = factor.serial_tail();
        assert!((50..=110).contains(&tail), "serial tail {tail}");
        // No more fill than minimum degree over the whole pattern gives (246 017 blocks on this grid).
        let (m, col_ptr, rows) = (
            ws.coupled.len(),
            ws.block_col_ptr.clone(),
            ws.block_rows.clone(),
        );
        let plain = crate::physics::ordering::minimum_degree(m, &col_ptr, &rows).expect("orders");
        let plain = BlockCholesky::analyse(m, &col_ptr, &rows, &plain);
        assert!(
            factor.factor_blocks() <= plain.factor_blocks(),
            "{} blocks against {}",
            factor.factor_blocks(),
            plain.factor_blocks()
        );
        assert!(plain.serial_tail() > 2 * tail);
    }

    #[test]
    fn a_large_grid_pattern_solves_with_the_fill_of_a_good_ordering() {
        // A 50 × 45 grid of balls, each coupled to its right and upper neighbours: 2 250 coupled balls.
        let n = 50 * 45;
        let (hessian, g, pairs) = grid_system(50, 45, &[(1, 0), (0, 1)]);
        let mut ws = LinearWorkspace::default();
        let mut out = Vec::new();
        solve_newton_direction(&hessian, &g, &mut ws, &mut out).expect("solves");
        // Minimum degree keeps the factor near nested dissection's O(n log n) (29 057 blocks here); the grid's
        // natural order would fill the whole band of 50 balls, about 110 000 blocks.
        let fill = ws.factor.as_ref().map_or(0, BlockCholesky::factor_blocks);
        assert!(fill >= pairs && fill <= 20 * n, "fill {fill}");
        let r = residual(&hessian, &out, &g);
        assert!(r < 1e-10, "residual {r}");
    }
}
