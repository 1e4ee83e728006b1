//! Sparse `LLᵀ` of a symmetric positive-definite matrix made of 2×2 blocks, one block row and column per ball.
//!
//! The Newton systems of a contact group couple balls, never single coordinates, so the factor's structure is
//! the ball graph's. Working on blocks instead of scalars quarters the index work of a scalar sparse Cholesky,
//! and the whole structure of `L` (elimination tree, every column's rows, every row's columns, and where each of
//! `A`'s blocks lands in `L`) is computed once per sparsity pattern. A numeric factorisation is then a plain
//! left-looking sweep over fixed positions: no elimination-tree walks, no permuted copy of `A`, no index checks.
//!
//! The elimination order is given by the caller (approximate minimum degree on the ball graph). In exact
//! arithmetic this is the scalar Cholesky of the matrix permuted ball by ball, so it fails exactly when that one
//! meets a non-positive pivot.

use super::geometry::Sym2;
use glam::DVec2;

const NONE: u32 = u32::MAX;

/// The factor's structure and values for one sparsity pattern.
#[derive(Debug, Default, Clone)]
pub struct BlockCholesky {
    /// `order[k]`: the ball eliminated at step `k`; `position[ball]` is its inverse.
    order: Vec<u32>,
    position: Vec<u32>,
    /// Strictly lower blocks of `L`, by column: the rows of column `k` are
    /// `rows[col_ptr[k]..col_ptr[k + 1]]`, ascending; `off` holds the blocks row-major.
    col_ptr: Vec<usize>,
    rows: Vec<u32>,
    off: Vec<[f64; 4]>,
    /// The same blocks by row: row `j` has the block of column `row_cols[t]` at `off[row_blocks[t]]` for `t` in
    /// `row_ptr[j]..row_ptr[j + 1]`.
    row_ptr: Vec<usize>,
    row_cols: Vec<u32>,
    row_blocks: Vec<usize>,
    /// `A`'s diagonal blocks in elimination order, then `L`'s diagonal blocks `(l₀₀, l₁₀, l₁₁)`.
    diag_a: Vec<Sym2>,
    diag: Vec<[f64; 3]>,
    /// Scratch: each row's place in the column being computed.
    slot_of_row: Vec<usize>,
    /// Scratch for the triangular solves, in elimination order.
    work: Vec<DVec2>,
}

/// A diagonal pivot that was not positive: `A` is not positive definite (or not finite).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotPositiveDefinite {
    /// The ball (in the caller's numbering) whose pivot failed.
    pub ball: usize,
}

impl BlockCholesky {
    /// The structure of `L` for the block lower triangle `(col_ptr, rows)` of an `m × m` block matrix (column
    /// `c` holds the rows `> c` coupled to `c`) eliminated in `order` (a permutation of `0..m`).
    pub fn analyse(m: usize, col_ptr: &[usize], rows: &[u32], order: &[u32]) -> Self {
        debug_assert_eq!(order.len(), m);
        let mut position = vec![0u32; m];
        for (k, &b) in order.iter().enumerate() {
            position[b as usize] = k as u32;
        }
        // For each eliminated position i, the positions k < i that A couples to it.
        let mut adj_ptr = vec![0usize; m + 1];
        for c in 0..m {
            for &r in &rows[col_ptr[c]..col_ptr[c + 1]] {
                let (pc, pr) = (position[c], position[r as usize]);
                adj_ptr[pc.max(pr) as usize + 1] += 1;
            }
        }
        for i in 0..m {
            adj_ptr[i + 1] += adj_ptr[i];
        }
        let mut fill = adj_ptr.clone();
        let mut adj = vec![0u32; adj_ptr[m]];
        for c in 0..m {
            for &r in &rows[col_ptr[c]..col_ptr[c + 1]] {
                let (pc, pr) = (position[c], position[r as usize]);
                let (lo, hi) = (pc.min(pr), pc.max(pr) as usize);
                adj[fill[hi]] = lo;
                fill[hi] += 1;
            }
        }
        // Elimination tree (Liu's algorithm with path compression).
        let mut parent = vec![NONE; m];
        let mut ancestor = vec![NONE; m];
        for i in 0..m {
            for &k in &adj[adj_ptr[i]..adj_ptr[i + 1]] {
                let mut r = k as usize;
                while ancestor[r] != NONE && ancestor[r] != i as u32 {
                    let next = ancestor[r] as usize;
                    ancestor[r] = i as u32;
                    r = next;
                }
                if ancestor[r] == NONE {
                    ancestor[r] = i as u32;
                    parent[r] = i as u32;
                }
            }
        }
        // Row structure of L: row i holds the columns on the tree paths from A's entries up to i.
        let mut mark = vec![NONE; m];
        let mut row_ptr = vec![0usize; m + 1];
        let mut row_cols: Vec<u32> = Vec::with_capacity(adj.len() * 2);
        for i in 0..m {
            mark[i] = i as u32;
            for &k in &adj[adj_ptr[i]..adj_ptr[i + 1]] {
                let mut r = k as usize;
                while mark[r] != i as u32 {
                    mark[r] = i as u32;
                    row_cols.push(r as u32);
                    r = parent[r] as usize;
                }
            }
            row_ptr[i + 1] = row_cols.len();
        }
        // Column structure: rows arrive in ascending order.
        let mut l_col_ptr = vec![0usize; m + 1];
        for &k in &row_cols {
            l_col_ptr[k as usize + 1] += 1;
        }
        for k in 0..m {
            l_col_ptr[k + 1] += l_col_ptr[k];
        }
        let mut next = l_col_ptr.clone();
        let mut l_rows = vec![0u32; row_cols.len()];
        let mut row_blocks = vec![0usize; row_cols.len()];
        for i in 0..m {
            for t in row_ptr[i]..row_ptr[i + 1] {
                let k = row_cols[t] as usize;
                l_rows[next[k]] = i as u32;
                row_blocks[t] = next[k];
                next[k] += 1;
            }
        }
        BlockCholesky {
            order: order.to_vec(),
            position,
            off: vec![[0.0; 4]; l_rows.len()],
            col_ptr: l_col_ptr,
            rows: l_rows,
            row_ptr,
            row_cols,
            row_blocks,
            diag_a: vec![Sym2::default(); m],
            diag: vec![[0.0; 3]; m],
            slot_of_row: vec![0; m],
            work: vec![DVec2::ZERO; m],
        }
    }

    /// Number of block columns.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the matrix is empty.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Number of strictly lower blocks of `L` (the fill included).
    pub fn factor_blocks(&self) -> usize {
        self.rows.len()
    }

    /// `L`'s slot of the off-diagonal block coupling balls `a` and `b` (`a ≠ b`), if `A`'s pattern held it
    /// when analysed (every such block has one).
    pub fn slot(&self, a: usize, b: usize) -> Option<usize> {
        let (pa, pb) = (self.position[a], self.position[b]);
        let (col, row) = (pa.min(pb) as usize, pa.max(pb));
        let range = self.col_ptr[col]..self.col_ptr[col + 1];
        self.rows[range.clone()]
            .binary_search(&row)
            .ok()
            .map(|k| range.start + k)
    }

    /// Clears the values before a new matrix is scattered in.
    pub fn clear(&mut self) {
        self.off.iter_mut().for_each(|b| *b = [0.0; 4]);
        self.diag_a.iter_mut().for_each(|d| *d = Sym2::default());
    }

    /// Adds `block` to the diagonal block of `ball`.
    pub fn add_diagonal(&mut self, ball: usize, block: Sym2) {
        let p = self.position[ball] as usize;
        self.diag_a[p] = self.diag_a[p].plus(block);
    }

    /// Adds the symmetric `block` to the off-diagonal slot `slot` (from [`Self::slot`]).
    pub fn add_off_diagonal(&mut self, slot: usize, block: Sym2) {
        let b = &mut self.off[slot];
        b[0] += block.xx;
        b[1] += block.xy;
        b[2] += block.xy;
        b[3] += block.yy;
    }

    /// Factorises the scattered matrix in place (left-looking).
    pub fn factorize(&mut self) -> Result<(), NotPositiveDefinite> {
        let m = self.len();
        for j in 0..m {
            let (start, end) = (self.col_ptr[j], self.col_ptr[j + 1]);
            // Columns are stored in order, so every earlier column lies before `start`.
            let (done, rest) = self.off.split_at_mut(start);
            let column = &mut rest[..end - start];
            for (q, &row) in self.rows[start..end].iter().enumerate() {
                self.slot_of_row[row as usize] = q;
            }
            let a = self.diag_a[j];
            let (mut dxx, mut dxy, mut dyy) = (a.xx, a.xy, a.yy);
            for t in self.row_ptr[j]..self.row_ptr[j + 1] {
                // L[j, k] at slot p of column k; the column's rows after j update column j, which holds them all.
                let p = self.row_blocks[t];
                let [a, b, c, d] = done[p];
                dxx -= a * a + b * b;
                dxy -= a * c + b * d;
                dyy -= c * c + d * d;
                let column_end = self.col_ptr[self.row_cols[t] as usize + 1];
                for (x, &row) in done[p + 1..column_end]
                    .iter()
                    .zip(&self.rows[p + 1..column_end])
                {
                    let [x0, x1, x2, x3] = *x;
                    let y = &mut column[self.slot_of_row[row as usize]];
                    y[0] -= x0 * a + x1 * b;
                    y[1] -= x0 * c + x1 * d;
                    y[2] -= x2 * a + x3 * b;
                    y[3] -= x2 * c + x3 * d;
                }
            }
            let failed = NotPositiveDefinite {
                ball: self.order[j] as usize,
            };
            if !(dxx > 0.0 && dxx.is_finite()) {
                return Err(failed);
            }
            let l00 = dxx.sqrt();
            let l10 = dxy / l00;
            let s = dyy - l10 * l10;
            if !(s > 0.0 && s.is_finite()) {
                return Err(failed);
            }
            let l11 = s.sqrt();
            self.diag[j] = [l00, l10, l11];
            // L[i, j] = W[i, j] C⁻ᵀ, row by row: y₀ = x₀ / l₀₀, y₁ = (x₁ − l₁₀ y₀) / l₁₁.
            for b in &mut self.off[start..end] {
                let y0 = b[0] / l00;
                let y2 = b[2] / l00;
                *b = [y0, (b[1] - l10 * y0) / l11, y2, (b[3] - l10 * y2) / l11];
            }
        }
        Ok(())
    }

    /// Solves `A x = b` with the last factorisation. `rhs[ball]` is `b` on entry and `x` on return.
    pub fn solve_in_place(&mut self, rhs: &mut [DVec2]) {
        let m = self.len();
        for (k, &b) in self.order.iter().enumerate() {
            self.work[k] = rhs[b as usize];
        }
        // L y = b, column by column.
        for j in 0..m {
            let [l00, l10, l11] = self.diag[j];
            let v = self.work[j];
            let y0 = v.x / l00;
            let y = DVec2::new(y0, (v.y - l10 * y0) / l11);
            self.work[j] = y;
            for q in self.col_ptr[j]..self.col_ptr[j + 1] {
                let [a, b, c, d] = self.off[q];
                let w = &mut self.work[self.rows[q] as usize];
                w.x -= a * y.x + b * y.y;
                w.y -= c * y.x + d * y.y;
            }
        }
        // Lᵀ x = y, backwards.
        for j in (0..m).rev() {
            let mut v = self.work[j];
            for q in self.col_ptr[j]..self.col_ptr[j + 1] {
                let [a, b, c, d] = self.off[q];
                let x = self.work[self.rows[q] as usize];
                v.x -= a * x.x + c * x.y;
                v.y -= b * x.x + d * x.y;
            }
            let [l00, l10, l11] = self.diag[j];
            let x1 = v.y / l11;
            self.work[j] = DVec2::new((v.x - l10 * x1) / l00, x1);
        }
        for (k, &b) in self.order.iter().enumerate() {
            rhs[b as usize] = self.work[k];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A random symmetric block matrix on `m` balls with the given couplings, diagonally dominant (so positive
    /// definite).
    fn matrix(m: usize, pairs: &[(u32, u32)], seed: u64) -> (Vec<Sym2>, Vec<(u32, u32, Sym2)>) {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut rnd = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        };
        let mut diag = vec![Sym2::default(); m];
        let mut off = Vec::new();
        for &(i, j) in pairs {
            let b = Sym2 {
                xx: rnd() * 3.0,
                xy: rnd(),
                yy: rnd() * 2.0,
            };
            off.push((i, j, b));
            // Diagonal dominance: each coupling adds its absolute row sums to both diagonals.
            let w = b.xx.abs().max(b.yy.abs()) + b.xy.abs();
            for k in [i, j] {
                diag[k as usize] = diag[k as usize].plus(Sym2::scaled_identity(w));
            }
        }
        for d in &mut diag {
            let e = rnd() * 0.3;
            *d = d.plus(Sym2 {
                xx: 1.0 + rnd().abs(),
                xy: e,
                yy: 1.0 + rnd().abs(),
            });
        }
        (diag, off)
    }

    fn dense(m: usize, diag: &[Sym2], off: &[(u32, u32, Sym2)]) -> Vec<Vec<f64>> {
        let mut a = vec![vec![0.0; 2 * m]; 2 * m];
        let mut put = |i: usize, j: usize, b: Sym2| {
            a[2 * i][2 * j] += b.xx;
            a[2 * i][2 * j + 1] += b.xy;
            a[2 * i + 1][2 * j] += b.xy;
            a[2 * i + 1][2 * j + 1] += b.yy;
        };
        for (i, d) in diag.iter().enumerate() {
            put(i, i, *d);
        }
        for &(i, j, b) in off {
            put(i as usize, j as usize, b);
            put(j as usize, i as usize, b);
        }
        a
    }

    /// Builds, factorises and solves; returns `x` for `b`.
    fn solve(
        m: usize,
        pairs: &[(u32, u32)],
        order: &[u32],
        diag: &[Sym2],
        off: &[(u32, u32, Sym2)],
        b: &[DVec2],
    ) -> Result<Vec<DVec2>, NotPositiveDefinite> {
        let mut sorted: Vec<(u32, u32)> =
            pairs.iter().map(|&(i, j)| (i.min(j), i.max(j))).collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut col_ptr = vec![0usize; m + 1];
        let mut rows = Vec::new();
        for &(i, j) in &sorted {
            col_ptr[i as usize + 1] += 1;
            rows.push(j);
        }
        for c in 0..m {
            col_ptr[c + 1] += col_ptr[c];
        }
        let mut chol = BlockCholesky::analyse(m, &col_ptr, &rows, order);
        chol.clear();
        for (i, d) in diag.iter().enumerate() {
            chol.add_diagonal(i, *d);
        }
        for &(i, j, blk) in off {
            let slot = chol
                .slot(i as usize, j as usize)
                .expect("pattern holds the pair");
            chol.add_off_diagonal(slot, blk);
        }
        chol.factorize()?;
        let mut x = b.to_vec();
        chol.solve_in_place(&mut x);
        Ok(x)
    }

    fn residual(a: &[Vec<f64>], x: &[DVec2], b: &[DVec2]) -> f64 {
        let flat: Vec<f64> = x.iter().flat_map(|v| [v.x, v.y]).collect();
        let rhs: Vec<f64> = b.iter().flat_map(|v| [v.x, v.y]).collect();
        a.iter()
            .zip(&rhs)
            .map(|(row, r)| (row.iter().zip(&flat).map(|(p, q)| p * q).sum::<f64>() - r).abs())
            .fold(0.0, f64::max)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any coupling graph, any elimination order: `A x = b` to round-off.
        #[test]
        fn solves_random_block_systems_in_any_order(
            m in 1usize..40,
            raw_pairs in proptest::collection::vec((0u32..40, 0u32..40), 0..120),
            shuffle in proptest::collection::vec(any::<u32>(), 40),
            seed in any::<u64>(),
        ) {
            let pairs: Vec<(u32, u32)> = raw_pairs
                .into_iter()
                .map(|(i, j)| (i % m as u32, j % m as u32))
                .filter(|(i, j)| i != j)
                .map(|(i, j)| (i.min(j), i.max(j)))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let mut order: Vec<u32> = (0..m as u32).collect();
            order.sort_by_key(|&k| shuffle[k as usize]);
            let (diag, off) = matrix(m, &pairs, seed);
            let b: Vec<DVec2> = (0..m).map(|k| DVec2::new((k as f64).sin(), (k as f64 * 0.7).cos())).collect();
            let x = solve(m, &pairs, &order, &diag, &off, &b).expect("dominant matrices are positive definite");
            let r = residual(&dense(m, &diag, &off), &x, &b);
            prop_assert!(r < 1e-10, "residual {}", r);
        }
    }

    #[test]
    fn an_indefinite_matrix_is_refused_at_the_failing_ball() {
        // Two coupled balls whose coupling outweighs ball 1's own stiffness in y.
        let pairs = [(0u32, 1u32)];
        let diag = vec![
            Sym2 {
                xx: 2.0,
                xy: 0.0,
                yy: 1.0,
            },
            Sym2 {
                xx: 2.0,
                xy: 0.0,
                yy: 1.0,
            },
        ];
        let off = vec![(
            0u32,
            1u32,
            Sym2 {
                xx: 0.5,
                xy: 0.0,
                yy: 1.5,
            },
        )];
        let b = vec![DVec2::ONE; 2];
        assert_eq!(
            solve(2, &pairs, &[0, 1], &diag, &off, &b),
            Err(NotPositiveDefinite { ball: 1 })
        );
        assert_eq!(
            solve(2, &pairs, &[1, 0], &diag, &off, &b),
            Err(NotPositiveDefinite { ball: 0 })
        );
        let nan = vec![Sym2::scaled_identity(f64::NAN); 2];
        assert!(solve(2, &pairs, &[0, 1], &nan, &off, &b).is_err());
    }

    #[test]
    fn a_chain_in_natural_order_has_no_fill_and_an_arrow_eliminated_hub_first_fills_completely() {
        let m = 6;
        let chain: Vec<(u32, u32)> = (0..5).map(|k| (k, k + 1)).collect();
        let order: Vec<u32> = (0..6).collect();
        let (col_ptr, rows) = lower(m, &chain);
        assert_eq!(
            BlockCholesky::analyse(m, &col_ptr, &rows, &order).factor_blocks(),
            5
        );
        let arrow: Vec<(u32, u32)> = (1..6).map(|k| (0, k)).collect();
        let (col_ptr, rows) = lower(m, &arrow);
        assert_eq!(
            BlockCholesky::analyse(m, &col_ptr, &rows, &order).factor_blocks(),
            15
        );
        let hub_last: Vec<u32> = (1..6).chain([0]).collect();
        assert_eq!(
            BlockCholesky::analyse(m, &col_ptr, &rows, &hub_last).factor_blocks(),
            5
        );
    }

    fn lower(m: usize, pairs: &[(u32, u32)]) -> (Vec<usize>, Vec<u32>) {
        let mut col_ptr = vec![0usize; m + 1];
        let mut rows = Vec::new();
        for &(i, j) in pairs {
            col_ptr[i as usize + 1] += 1;
            rows.push(j);
        }
        for c in 0..m {
            col_ptr[c + 1] += col_ptr[c];
        }
        (col_ptr, rows)
    }
}
