//! Sparse `LLᵀ` of a symmetric positive-definite matrix made of 2×2 blocks, one block row and column per ball.
//!
//! The Newton systems of a contact group couple balls, never single coordinates, so the factor's structure is
//! the ball graph's. Working on blocks instead of scalars quarters the index work of a scalar sparse Cholesky,
//! and the whole structure of `L` (elimination tree, every column's rows, every row's columns, and where each of
//! `A`'s blocks lands in `L`) is computed once per sparsity pattern. A numeric factorisation is then a plain
//! left-looking sweep over fixed positions: no elimination-tree walks, no permuted copy of `A`, no searches.
//! Its inner loop, the update of one column by an earlier one, runs on four lanes where the CPU has AVX2, with
//! the same bits as the portable loop.
//!
//! The elimination order is given by the caller (approximate minimum degree on the ball graph, under one level of
//! nested dissection for a large pattern: [`super::ordering`]) and renumbered
//! in postorder of its elimination tree (the same fill), so every subtree is a contiguous range of columns. A
//! large factorisation then has one thread factorise a heavy subtree while another computes the columns
//! that neither read it nor are its ancestors, and the ancestors come last; each column is computed by the
//! same operations in the same order as on one thread, so the factor is bit for bit the same. In exact
//! arithmetic this is the scalar Cholesky of the matrix permuted ball by ball, so it fails exactly when that one
//! meets a non-positive pivot.

use super::geometry::Sym2;
use glam::DVec2;
use std::ops::Range;

const NONE: u32 = u32::MAX;

/// Least work (in 2×2 block products) in the lighter of the two shares for a factorisation to use a second
/// thread. Starting a thread costs tens of microseconds; on the reference pit a block product takes about
/// 1.5 ns, so this share is worth about 0.15 ms.
const PARALLEL_MIN_WORK: u64 = 100_000;

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
    off: Vec<Block>,
    /// The same blocks by row, as the updates they make: row `j` has, for each `t` in
    /// `row_ptr[j]..row_ptr[j + 1]`, the block `L[j, k]` of a column `k < j` at `off[row_updates[t].0]`, and
    /// column `k` ends at slot `row_updates[t].1` (its blocks after `L[j, k]` update column `j`).
    row_ptr: Vec<usize>,
    row_updates: Vec<(u32, u32)>,
    /// `A`'s diagonal blocks in elimination order, then `L`'s diagonal blocks `(l₀₀, l₁₀, l₁₁)`.
    diag_a: Vec<Sym2>,
    diag: Vec<[f64; 3]>,
    /// How the columns are shared between two threads, when the pattern is large enough for that to pay.
    split: Option<Split>,
    /// Scratch: each row's place in the column being computed (one per thread).
    slot_of_row: Vec<usize>,
    slot_of_row_b: Vec<usize>,
    /// Scratch for the triangular solves, in elimination order.
    work: Vec<DVec2>,
    /// Factorise with [`update_portable`] even where the CPU has AVX2 (to compare the two).
    portable: bool,
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
    ///
    /// Panics on a malformed pattern (an entry not strictly below the diagonal or beyond `m`, or an `order`
    /// that is not a permutation): the factorisation's unchecked inner loop relies on the structure computed
    /// from a well-formed one.
    pub fn analyse(m: usize, col_ptr: &[usize], rows: &[u32], order: &[u32]) -> Self {
        assert!(
            col_ptr.len() == m + 1 && col_ptr.windows(2).all(|w| w[0] <= w[1]),
            "column pointers of a {m}-ball pattern"
        );
        for c in 0..m {
            for &r in &rows[col_ptr[c]..col_ptr[c + 1]] {
                assert!(
                    c < r as usize && (r as usize) < m,
                    "pattern entry ({r}, {c}) is not strictly below the diagonal of a {m}-ball matrix"
                );
            }
        }
        let mut seen = vec![false; m];
        assert!(
            order.len() == m
                && order
                    .iter()
                    .all(|&b| (b as usize) < m && !std::mem::replace(&mut seen[b as usize], true)),
            "the elimination order is not a permutation of the {m} balls"
        );
        let first = Tree::new(m, col_ptr, rows, order);
        let order = first.postorder(order);
        let Tree {
            position,
            adj_ptr,
            adj,
            parent,
        } = Tree::new(m, col_ptr, rows, &order);
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
        // 32 bits keep the factorisation's index stream small (4 % faster on the 10k pile); 2³² blocks of `L`
        // would need 128 GB.
        let narrow = |v: usize| u32::try_from(v).expect("fewer than 2^32 blocks in L");
        let mut next = l_col_ptr.clone();
        let mut l_rows = vec![0u32; row_cols.len()];
        let mut row_updates = Vec::with_capacity(row_cols.len());
        for i in 0..m {
            for &k in &row_cols[row_ptr[i]..row_ptr[i + 1]] {
                let k = k as usize;
                l_rows[next[k]] = i as u32;
                row_updates.push((narrow(next[k]), narrow(l_col_ptr[k + 1])));
                next[k] += 1;
            }
        }
        let split = parallel_split(&parent, &l_col_ptr, &row_ptr, &row_updates);
        BlockCholesky {
            order,
            split,
            slot_of_row_b: Vec::new(),
            position,
            off: vec![Block::ZERO; l_rows.len()],
            col_ptr: l_col_ptr,
            rows: l_rows,
            row_ptr,
            row_updates,
            diag_a: vec![Sym2::default(); m],
            diag: vec![[0.0; 3]; m],
            slot_of_row: vec![0; m],
            work: vec![DVec2::ZERO; m],
            portable: false,
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

    /// Whether factorisations use a second thread for part of the columns.
    pub fn is_split(&self) -> bool {
        self.split.is_some()
    }

    /// Columns computed on one thread after the two shares (the split subtree's ancestors); 0 without a split.
    pub fn serial_tail(&self) -> usize {
        self.split
            .as_ref()
            .map_or(0, |s| s.on_path.iter().filter(|&&p| p).count())
    }

    /// Factorises on one thread from now on (for comparisons).
    #[cfg(test)]
    pub fn serial(&mut self) {
        self.split = None;
    }

    /// Factorises with the portable update from now on (for comparisons with the AVX2 one).
    #[cfg(test)]
    pub fn portable(&mut self) {
        self.portable = true;
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

    /// Clears the diagonal blocks before a new matrix's are added.
    pub fn clear_diagonal(&mut self) {
        self.diag_a.iter_mut().for_each(|d| *d = Sym2::default());
    }

    /// Adds `block` to the diagonal block of `ball`.
    pub fn add_diagonal(&mut self, ball: usize, block: Sym2) {
        let p = self.position[ball] as usize;
        self.diag_a[p] = self.diag_a[p].plus(block);
    }

    /// Factorises the matrix whose diagonal blocks were added and whose off-diagonal blocks are
    /// `blocks[k].2`, at `L`'s slot `slots[k]` (from [`Self::slot`]; a slot may take several blocks, added in
    /// order). Left-looking, on two threads where the analysis found a share worth it: each thread clears and
    /// fills its own share of `L` before computing it, so the blocks it works on are already in its core's
    /// cache (the second thread also fills the path's columns, which lie among its blocks; the calling thread
    /// computes them after both shares). Every column is computed by the same operations in the same order either way, so the factor does
    /// not depend on the thread count.
    pub fn factorize(
        &mut self,
        blocks: &[(u32, u32, Sym2)],
        slots: &[usize],
    ) -> Result<(), NotPositiveDefinite> {
        let m = self.len();
        let BlockCholesky {
            order,
            split,
            col_ptr,
            rows,
            off,
            row_ptr,
            row_updates,
            diag_a,
            diag,
            slot_of_row,
            slot_of_row_b,
            portable,
            ..
        } = self;
        let columns = Columns {
            order,
            col_ptr,
            rows,
            row_ptr,
            row_updates,
            diag_a,
            avx2: !*portable && has_avx2(),
        };
        let Some(split) = split.as_ref() else {
            scatter(blocks, slots, 0..off.len(), off);
            return columns.factor(0..m, Share::whole(off, diag, slot_of_row));
        };
        slot_of_row_b.resize(m, 0);
        let sub = split.subtree.clone();
        let (sub_start, sub_end) = (col_ptr[sub.start], col_ptr[sub.end]);
        let (off_before, rest) = off.split_at_mut(sub_start);
        let (off_sub, off_after) = rest.split_at_mut(sub_end - sub_start);
        let (diag_before, rest) = diag.split_at_mut(sub.start);
        let (diag_sub, diag_after) = rest.split_at_mut(sub.len());
        let light = |k: &usize| !split.on_path[*k];
        let (here, there) = std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                scatter(blocks, slots, 0..sub_start, off_before);
                let after = sub_end..sub_end + off_after.len();
                scatter(blocks, slots, after, off_after);
                columns
                    .factor(
                        (0..sub.start).filter(light),
                        Share::whole(off_before, diag_before, slot_of_row_b),
                    )
                    .and_then(|()| {
                        let share = Share {
                            base: col_ptr[sub.end],
                            off: off_after,
                            diag_base: sub.end,
                            diag: diag_after,
                            slot_of_row: slot_of_row_b,
                        };
                        columns.factor((sub.end..m).filter(light), share)
                    })
            });
            scatter(blocks, slots, sub_start..sub_end, off_sub);
            let share = Share {
                base: col_ptr[sub.start],
                off: off_sub,
                diag_base: sub.start,
                diag: diag_sub,
                slot_of_row,
            };
            let here = columns.factor(sub.clone(), share);
            (here, worker.join())
        });
        // A panic on the second thread comes first: it must not be lost behind a failed pivot here.
        let there = there.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        here?;
        there?;
        let path = (sub.end..m).filter(|&k| split.on_path[k]);
        columns.factor(path, Share::whole(off, diag, slot_of_row))
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
                let [a, b, c, d] = self.off[q].0;
                let w = &mut self.work[self.rows[q] as usize];
                w.x -= a * y.x + b * y.y;
                w.y -= c * y.x + d * y.y;
            }
        }
        // Lᵀ x = y, backwards.
        for j in (0..m).rev() {
            let mut v = self.work[j];
            for q in self.col_ptr[j]..self.col_ptr[j + 1] {
                let [a, b, c, d] = self.off[q].0;
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

/// Clears `off`, which holds `L`'s slots `range`, and adds into it the blocks whose slot lies in `range`.
fn scatter(blocks: &[(u32, u32, Sym2)], slots: &[usize], range: Range<usize>, off: &mut [Block]) {
    off.iter_mut().for_each(|b| *b = Block::ZERO);
    for (&(_, _, block), &slot) in blocks.iter().zip(slots) {
        if range.contains(&slot) {
            let Block(b) = &mut off[slot - range.start];
            b[0] += block.xx;
            b[1] += block.xy;
            b[2] += block.xy;
            b[3] += block.yy;
        }
    }
}

/// One block of `L` (row-major `[l₀₀, l₀₁, l₁₀, l₁₁]`), aligned so that no block straddles two cache lines.
/// Unaligned, half of them did, and the update below ran about 10 % slower.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, align(32))]
struct Block([f64; 4]);

impl Block {
    const ZERO: Block = Block([0.0; 4]);
}

/// Whether the block update can use AVX2 on this CPU.
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return true;
    }
    false
}

/// `column[slot_of_row[rows[k]]] −= xs[k] · [a b; c d]ᵀ` for every `k`: the updates of column `j` by one
/// earlier column, whose blocks below row `j` are `xs` in rows `rows`. Every such row is one of column `j`'s,
/// and `slot_of_row` holds its place there.
#[inline(always)]
fn update_portable(
    xs: &[Block],
    rows: &[u32],
    slot_of_row: &[usize],
    column: &mut [Block],
    [a, b, c, d]: [f64; 4],
) {
    for (Block([x0, x1, x2, x3]), &row) in xs.iter().zip(rows) {
        let Block(y) = &mut column[slot_of_row[row as usize]];
        y[0] -= x0 * a + x1 * b;
        y[1] -= x0 * c + x1 * d;
        y[2] -= x2 * a + x3 * b;
        y[3] -= x2 * c + x3 * d;
    }
}

/// [`update_portable`] on four lanes: `y −= [x₀ x₀ x₂ x₂]·[a c a c] + [x₁ x₁ x₃ x₃]·[b d b d]`, each lane the
/// portable loop's multiplications, addition and subtraction in its order (no fused multiply–add), so the bits
/// are the same. The two indexed accesses per block are unchecked: the factorisation spends most of its time
/// here. The caller guarantees AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn update_avx2(
    xs: &[Block],
    rows: &[u32],
    slot_of_row: &[usize],
    column: &mut [Block],
    [a, b, c, d]: [f64; 4],
) {
    use std::arch::x86_64::*;
    let ac = _mm256_setr_pd(a, c, a, c);
    let bd = _mm256_setr_pd(b, d, b, d);
    for (x, &row) in xs.iter().zip(rows) {
        debug_assert!(slot_of_row[row as usize] < column.len());
        // SAFETY: a row of an earlier column `k` below row `j` is a row of column `j`: the rows of `L`'s
        // column `j` are `A`'s and those of its children's columns, so by induction those of every
        // descendant, and `L[j, k] ≠ 0` makes `k` one (`analyse` refuses a malformed pattern, from which this
        // would not follow). `factor_with` has just set that row's `slot_of_row` to its place in `column`, and
        // `rows` are ball indices below `slot_of_row.len()`. A `Block` is 32-byte aligned, as the aligned loads
        // and stores require.
        unsafe {
            let x = _mm256_load_pd(x.0.as_ptr());
            let sum = _mm256_add_pd(
                _mm256_mul_pd(_mm256_movedup_pd(x), ac),
                _mm256_mul_pd(_mm256_permute_pd(x, 0b1111), bd),
            );
            let slot = *slot_of_row.get_unchecked(row as usize);
            let y = column.get_unchecked_mut(slot).0.as_mut_ptr();
            _mm256_store_pd(y, _mm256_sub_pd(_mm256_load_pd(y), sum));
        }
    }
}

/// Where one call of [`Columns::factor`] writes: `L`'s blocks from slot `base` on and its diagonal blocks from
/// column `diag_base` on (every column the call reads must be among them), with the thread's scratch of each
/// row's place in the column being computed.
struct Share<'s> {
    base: usize,
    off: &'s mut [Block],
    diag_base: usize,
    diag: &'s mut [[f64; 3]],
    slot_of_row: &'s mut [usize],
}

impl<'s> Share<'s> {
    /// Blocks and diagonal from the first column on.
    fn whole(off: &'s mut [Block], diag: &'s mut [[f64; 3]], slot_of_row: &'s mut [usize]) -> Self {
        Share {
            base: 0,
            off,
            diag_base: 0,
            diag,
            slot_of_row,
        }
    }
}

/// The read-only part of a factorisation, shared by the threads.
struct Columns<'a> {
    order: &'a [u32],
    col_ptr: &'a [usize],
    rows: &'a [u32],
    row_ptr: &'a [usize],
    row_updates: &'a [(u32, u32)],
    diag_a: &'a [Sym2],
    /// Whether the CPU has AVX2 (and [`update_avx2`] is used instead of [`update_portable`]).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    avx2: bool,
}

impl Columns<'_> {
    /// Computes the columns `range` (ascending) of `L` into `share`.
    fn factor(
        &self,
        range: impl Iterator<Item = usize>,
        share: Share<'_>,
    ) -> Result<(), NotPositiveDefinite> {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is set only where the CPU has it.
            return unsafe { self.factor_avx2(range, share) };
        }
        self.factor_with(range, share, update_portable)
    }

    /// [`Self::factor`] compiled for AVX2, with [`update_avx2`] inlined. The caller guarantees AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn factor_avx2(
        &self,
        range: impl Iterator<Item = usize>,
        share: Share<'_>,
    ) -> Result<(), NotPositiveDefinite> {
        // SAFETY: this function runs only where the CPU has AVX2.
        self.factor_with(range, share, |xs, rows, slot_of_row, column, abcd| unsafe {
            update_avx2(xs, rows, slot_of_row, column, abcd)
        })
    }

    /// [`Self::factor`] with the block update `update` ([`update_portable`] or [`update_avx2`]).
    #[inline(always)]
    fn factor_with(
        &self,
        range: impl Iterator<Item = usize>,
        share: Share<'_>,
        update: impl Fn(&[Block], &[u32], &[usize], &mut [Block], [f64; 4]),
    ) -> Result<(), NotPositiveDefinite> {
        let Share {
            base,
            off,
            diag_base,
            diag,
            slot_of_row,
        } = share;
        for j in range {
            let (start, end) = (self.col_ptr[j] - base, self.col_ptr[j + 1] - base);
            // Columns are stored in order, so every earlier column lies before `start`.
            let (done, rest) = off.split_at_mut(start);
            let column = &mut rest[..end - start];
            for (q, &row) in self.rows[start + base..end + base].iter().enumerate() {
                slot_of_row[row as usize] = q;
            }
            let a = self.diag_a[j];
            let (mut dxx, mut dxy, mut dyy) = (a.xx, a.xy, a.yy);
            for t in self.row_ptr[j]..self.row_ptr[j + 1] {
                // L[j, k] at `slot` of column k; the column's rows after j update column j, which holds them all.
                let (slot, column_end) = self.row_updates[t];
                let (slot, column_end) = (slot as usize, column_end as usize);
                let p = slot - base;
                let [a, b, c, d] = done[p].0;
                dxx -= a * a + b * b;
                dxy -= a * c + b * d;
                dyy -= c * c + d * d;
                let column_end = column_end - base;
                update(
                    &done[p + 1..column_end],
                    &self.rows[slot + 1..column_end + base],
                    slot_of_row,
                    column,
                    [a, b, c, d],
                );
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
            diag[j - diag_base] = [l00, l10, l11];
            // L[i, j] = W[i, j] C⁻ᵀ, row by row: y₀ = x₀ / l₀₀, y₁ = (x₁ − l₁₀ y₀) / l₁₁.
            for Block(b) in column.iter_mut() {
                let y0 = b[0] / l00;
                let y2 = b[2] / l00;
                *b = [y0, (b[1] - l10 * y0) / l11, y2, (b[3] - l10 * y2) / l11];
            }
        }
        Ok(())
    }
}

/// How a factorisation shares its columns between two threads (columns in postorder). `subtree`, the
/// subtree of one node `x` on the elimination tree's heavy path, is one thread's; every column outside it that
/// is not an ancestor of `x` is the other's (none of them reads a column of the subtree or of the path); the
/// ancestors of `x` come last, on one thread.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Split {
    subtree: Range<usize>,
    /// `on_path[k]`: column `k` is an ancestor of `x`.
    on_path: Vec<bool>,
}

/// The split that minimises the estimated time (the larger share plus the path), or `None` when it would save
/// little or the lighter share is too small to pay for a thread.
fn parallel_split(
    parent: &[u32],
    col_ptr: &[usize],
    row_ptr: &[usize],
    row_updates: &[(u32, u32)],
) -> Option<Split> {
    let m = parent.len();
    let mut own = vec![0u64; m];
    let mut work = vec![0u64; m];
    let mut size = vec![0usize; m];
    let mut heaviest = vec![NONE; m + 1];
    for k in 0..m {
        // Computing column k costs one block product per block of each column that updates it, below row k.
        own[k] = (row_ptr[k]..row_ptr[k + 1])
            .map(|t| u64::from(row_updates[t].1 - row_updates[t].0))
            .sum::<u64>()
            + (col_ptr[k + 1] - col_ptr[k]) as u64
            + 1;
        work[k] += own[k];
        size[k] += 1;
        let p = if parent[k] == NONE {
            m
        } else {
            parent[k] as usize
        };
        if p < m {
            work[p] += work[k];
            size[p] += size[k];
        }
        // Children come before their parent in postorder, so each parent sees all of them here.
        if heaviest[p] == NONE || work[k] > work[heaviest[p] as usize] {
            heaviest[p] = k as u32;
        }
    }
    let total: u64 = (0..m).filter(|&k| parent[k] == NONE).map(|k| work[k]).sum();
    let mut best: Option<(u64, usize)> = None;
    let mut above = 0u64;
    let mut node = heaviest[m];
    while node != NONE {
        let x = node as usize;
        let mine = work[x];
        let other = total - mine - above;
        let cost = mine.max(other) + above;
        if mine.min(other) >= PARALLEL_MIN_WORK && best.is_none_or(|(c, _)| cost < c) {
            best = Some((cost, x));
        }
        above += own[x];
        node = heaviest[x];
    }
    let (cost, x) = best?;
    if cost * 10 > total * 8 {
        return None;
    }
    let mut on_path = vec![false; m];
    let mut a = parent[x];
    while a != NONE {
        on_path[a as usize] = true;
        a = parent[a as usize];
    }
    Some(Split {
        subtree: x + 1 - size[x]..x + 1,
        on_path,
    })
}

/// Positions of the balls in `order`, `A`'s lower entries by eliminated row (`adj[adj_ptr[i]..adj_ptr[i + 1]]`
/// are the positions `k < i` coupled to `i`) and the elimination tree.
struct Tree {
    position: Vec<u32>,
    adj_ptr: Vec<usize>,
    adj: Vec<u32>,
    parent: Vec<u32>,
}

impl Tree {
    fn new(m: usize, col_ptr: &[usize], rows: &[u32], order: &[u32]) -> Tree {
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
        Tree {
            position,
            adj_ptr,
            adj,
            parent,
        }
    }

    /// The same order, renumbered so that every subtree of the elimination tree is a contiguous range ending
    /// at its root (children in ascending order). The fill is the same.
    fn postorder(&self, order: &[u32]) -> Vec<u32> {
        let m = self.parent.len();
        let mut child_ptr = vec![0usize; m + 2];
        for &p in &self.parent {
            let slot = if p == NONE { m } else { p as usize };
            child_ptr[slot + 1] += 1;
        }
        for k in 0..=m {
            child_ptr[k + 1] += child_ptr[k];
        }
        let mut next = child_ptr.clone();
        let mut children = vec![0u32; m];
        for (k, &p) in self.parent.iter().enumerate() {
            let slot = if p == NONE { m } else { p as usize };
            children[next[slot]] = k as u32;
            next[slot] += 1;
        }
        let mut post = Vec::with_capacity(m);
        // Depth-first from the virtual root m: (node, next child index).
        let mut stack = vec![(m, child_ptr[m])];
        while let Some(top) = stack.last_mut() {
            let (node, cursor) = *top;
            let end = child_ptr[node + 1];
            if cursor < end {
                top.1 += 1;
                let c = children[cursor] as usize;
                stack.push((c, child_ptr[c]));
            } else {
                stack.pop();
                if node < m {
                    post.push(order[node]);
                }
            }
        }
        post
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

    /// Builds, factorises (with the portable update if `portable`) and solves; returns `x` for `b` and the
    /// factor's bits (`L`'s blocks, then its diagonal).
    fn solve(
        m: usize,
        pairs: &[(u32, u32)],
        order: &[u32],
        diag: &[Sym2],
        off: &[(u32, u32, Sym2)],
        b: &[DVec2],
        portable: bool,
    ) -> Result<(Vec<DVec2>, Vec<u64>), NotPositiveDefinite> {
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
        if portable {
            chol.portable();
        }
        chol.clear_diagonal();
        for (i, d) in diag.iter().enumerate() {
            chol.add_diagonal(i, *d);
        }
        let slots: Vec<usize> = off
            .iter()
            .map(|&(i, j, _)| {
                chol.slot(i as usize, j as usize)
                    .expect("pattern holds the pair")
            })
            .collect();
        chol.factorize(off, &slots)?;
        let bits = chol
            .off
            .iter()
            .flat_map(|b| b.0)
            .chain(chol.diag.iter().flatten().copied())
            .map(f64::to_bits)
            .collect();
        let mut x = b.to_vec();
        chol.solve_in_place(&mut x);
        Ok((x, bits))
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
            let (x, bits) = solve(m, &pairs, &order, &diag, &off, &b, false)
                .expect("dominant matrices are positive definite");
            let r = residual(&dense(m, &diag, &off), &x, &b);
            prop_assert!(r < 1e-10, "residual {}", r);
            // The CPU's update (AVX2 where it has it) and the portable one give the same factor, bit for bit.
            let (_, portable) = solve(m, &pairs, &order, &diag, &off, &b, true).expect("the same matrix");
            prop_assert!(bits == portable, "the AVX2 update changed the factor's bits");
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
            solve(2, &pairs, &[0, 1], &diag, &off, &b, false).map(|(x, _)| x),
            Err(NotPositiveDefinite { ball: 1 })
        );
        assert_eq!(
            solve(2, &pairs, &[1, 0], &diag, &off, &b, false).map(|(x, _)| x),
            Err(NotPositiveDefinite { ball: 0 })
        );
        let nan = vec![Sym2::scaled_identity(f64::NAN); 2];
        assert!(solve(2, &pairs, &[0, 1], &nan, &off, &b, false).is_err());
    }

    #[test]
    fn a_malformed_pattern_is_refused_before_the_unchecked_loop_can_see_it() {
        // A diagonal entry (the review's case: it once dropped a ball from the postorder and sent the update
        // loop to a stale row place), an entry beyond the matrix, and an order that repeats a ball.
        let refused = |col_ptr: Vec<usize>, rows: Vec<u32>, order: Vec<u32>| {
            std::panic::catch_unwind(|| BlockCholesky::analyse(4, &col_ptr, &rows, &order)).is_err()
        };
        assert!(refused(
            vec![0, 3, 3, 3, 3],
            vec![0, 1, 2],
            vec![0, 1, 3, 2]
        ));
        assert!(refused(vec![0, 1, 1, 1, 1], vec![4], vec![0, 1, 2, 3]));
        assert!(refused(vec![0, 1, 1, 1, 1], vec![1], vec![0, 1, 1, 3]));
        assert!(!refused(vec![0, 1, 1, 1, 1], vec![1], vec![3, 1, 2, 0]));
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
