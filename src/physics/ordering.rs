//! The elimination order of a sparsity pattern: approximate minimum degree, with one level of nested
//! dissection on top for a large pattern.
//!
//! A large factorisation shares its columns between two threads ([`super::block_cholesky`]): one takes a
//! subtree of the elimination tree, the other the columns beside it, and the subtree's ancestors come last on
//! one thread. Minimum degree on a landed 10 000-ball pile leaves 140–360 ancestors holding a third of the
//! work. So a large pattern is first cut in two by a small separator, each half is ordered by minimum degree,
//! and the separator comes last: the halves become the two threads' shares, and the serial tail shrinks to the
//! separator (on the pile, 49 columns) or little more (on a 200 × 50 grid, 92 columns: the split's own choice of
//! subtree leaves a few of a half's top columns to it). On the 10 000-ball pile that cut the estimated critical path from 1.6–2.1 to 1.37 million block
//! products, with no more fill than minimum degree on the whole (144 000 blocks against 146 000–150 000).
//!
//! Minimum degree on a half alone does not know that its boundary couples to the separator; it eliminates
//! boundary balls early, and the separator's rows then fill half the factor (4.3 million products instead of
//! 2.6). Each half is therefore ordered together with the separator, which is joined into one clique with
//! [`SEPARATOR_WEIGHT`] extra vertices: its degree then stays above what the half reaches, so minimum degree
//! tends to leave it to the end, and the boundary balls carry their coupling to it in their degrees (if it
//! eliminated a separator ball early, only the fill would suffer: the separator is placed last regardless). The half's order is
//! then read without the separator and the extra vertices. This stands in for constrained minimum degree
//! (CAMD), which faer does not have.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::sparse::SymbolicSparseColMatRef;
use faer::sparse::linalg::amd;

/// Coupled balls from which a pattern is dissected before minimum degree. The 4 000-ball pit's factorisations
/// came out even from 2 500 on; the 10 000-ball pit's took 2.24–2.36 instead of 2.68 ms.
pub const DISSECTION_MIN_BALLS: usize = 5000;

/// Extra vertices in the separator's clique while a half is ordered (see the module documentation). On the
/// 10 000-ball pile 100 and 300 gave the same order.
pub const SEPARATOR_WEIGHT: usize = 100;

/// A separator larger than this multiple of `√m` is not worth its clique; minimum degree orders the whole.
const MAX_SEPARATOR_PER_SQRT: f64 = 4.0;

/// An elimination order (a permutation of `0..m`) for the block lower triangle `(col_ptr, rows)` of an
/// `m × m` block matrix (column `c` holds the rows `> c` coupled to `c`).
pub fn fill_reducing_order(m: usize, col_ptr: &[usize], rows: &[u32]) -> Result<Vec<u32>, String> {
    if m >= DISSECTION_MIN_BALLS {
        let graph = Graph::new(m, col_ptr, rows);
        if let Some(parts) = bisect(&graph) {
            return dissected_order(&graph, &parts);
        }
    }
    minimum_degree(m, col_ptr, rows)
}

/// Approximate minimum degree (faer's AMD) on the ball graph.
pub fn minimum_degree(m: usize, col_ptr: &[usize], rows: &[u32]) -> Result<Vec<u32>, String> {
    let rows: Vec<usize> = rows.iter().map(|&r| r as usize).collect();
    let graph = SymbolicSparseColMatRef::new_checked(m, m, col_ptr, None, &rows);
    let mut forward = vec![0usize; m];
    let mut inverse = vec![0usize; m];
    let mut buffer = MemBuffer::try_new(amd::order_scratch::<usize>(m, rows.len()))
        .map_err(|e| format!("{e:?}"))?;
    amd::order(
        &mut forward,
        &mut inverse,
        graph,
        amd::Control::default(),
        MemStack::new(&mut buffer),
    )
    .map_err(|e| format!("{e:?}"))?;
    Ok(forward.iter().map(|&b| b as u32).collect())
}

/// Which side of the cut a ball lies on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    First,
    Second,
    Separator,
}

/// The ball graph with both directions of every coupling.
pub struct Graph {
    start: Vec<usize>,
    neighbours: Vec<u32>,
}

impl Graph {
    pub fn new(m: usize, col_ptr: &[usize], rows: &[u32]) -> Graph {
        let mut start = vec![0usize; m + 1];
        for c in 0..m {
            for &r in &rows[col_ptr[c]..col_ptr[c + 1]] {
                start[c + 1] += 1;
                start[r as usize + 1] += 1;
            }
        }
        for k in 0..m {
            start[k + 1] += start[k];
        }
        let mut next = start.clone();
        let mut neighbours = vec![0u32; start[m]];
        for c in 0..m {
            for &r in &rows[col_ptr[c]..col_ptr[c + 1]] {
                neighbours[next[c]] = r;
                next[c] += 1;
                neighbours[next[r as usize]] = c as u32;
                next[r as usize] += 1;
            }
        }
        Graph { start, neighbours }
    }

    pub fn len(&self) -> usize {
        self.start.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn neighbours(&self, v: usize) -> &[u32] {
        &self.neighbours[self.start[v]..self.start[v + 1]]
    }

    /// A ball of the largest connected component (the first such, in ball order).
    fn largest_component(&self) -> usize {
        let (mut level, mut queue) = (vec![u32::MAX; self.len()], Vec::new());
        let (mut best, mut best_size) = (0, 0);
        for root in 0..self.len() {
            if level[root] == u32::MAX {
                self.sweep(root, &mut level, &mut queue);
                if queue.len() > best_size {
                    (best, best_size) = (root, queue.len());
                }
            }
        }
        best
    }

    /// Breadth-first levels from `root` (`u32::MAX` where not reached), and the last ball reached.
    fn levels(&self, root: usize, level: &mut Vec<u32>, queue: &mut Vec<u32>) -> usize {
        level.clear();
        level.resize(self.len(), u32::MAX);
        self.sweep(root, level, queue);
        queue[queue.len() - 1] as usize
    }

    /// Numbers the balls that `root` reaches and `level` still marks `u32::MAX` by their distance from it;
    /// `queue` ends holding them in that order.
    fn sweep(&self, root: usize, level: &mut [u32], queue: &mut Vec<u32>) {
        queue.clear();
        queue.push(root as u32);
        level[root] = 0;
        let mut head = 0;
        while head < queue.len() {
            let v = queue[head] as usize;
            head += 1;
            for &w in self.neighbours(v) {
                if level[w as usize] == u32::MAX {
                    level[w as usize] = level[v] + 1;
                    queue.push(w);
                }
            }
        }
    }
}

/// Cuts the graph at the breadth-first level from a pseudo-peripheral ball of its largest component that has
/// half the balls before it. The separator is that level's balls with a neighbour on the next level, so no
/// coupling joins the two parts. Balls the search does not reach (other components) join the first part.
/// `None` when the levels are too few for a cut or the separator would be too large.
pub fn bisect(graph: &Graph) -> Option<Vec<Part>> {
    let m = graph.len();
    if m == 0 {
        return None;
    }
    let (mut level, mut queue) = (Vec::new(), Vec::new());
    // Two sweeps from the largest component find a ball at the end of a longest shortest path (for a wide
    // pile: at one side).
    let far = graph.levels(graph.largest_component(), &mut level, &mut queue);
    let far = graph.levels(far, &mut level, &mut queue);
    graph.levels(far, &mut level, &mut queue);
    let deepest = level.iter().filter(|&&l| l != u32::MAX).max().copied()? as usize;
    let mut count = vec![0usize; deepest + 1];
    for &l in level.iter().filter(|&&l| l != u32::MAX) {
        count[l as usize] += 1;
    }
    let mut before = level.iter().filter(|&&l| l == u32::MAX).count();
    let mut cut = None;
    for (l, &c) in count.iter().enumerate() {
        if before + c > m / 2 {
            cut = Some(l as u32);
            break;
        }
        before += c;
    }
    let cut = cut.filter(|&c| c > 0 && (c as usize) < deepest)?;
    let parts: Vec<Part> = (0..m)
        .map(|v| match level[v] {
            l if l == u32::MAX || l < cut => Part::First,
            l if l > cut => Part::Second,
            _ if graph
                .neighbours(v)
                .iter()
                .any(|&w| level[w as usize] == cut + 1) =>
            {
                Part::Separator
            }
            _ => Part::First,
        })
        .collect();
    let separator = parts.iter().filter(|&&p| p == Part::Separator).count();
    (separator as f64 <= MAX_SEPARATOR_PER_SQRT * (m as f64).sqrt()).then_some(parts)
}

/// The first part, then the second, each by minimum degree beside the weighted separator clique (the two on
/// their own threads), then the separator in its balls' order.
fn dissected_order(graph: &Graph, parts: &[Part]) -> Result<Vec<u32>, String> {
    let separator: Vec<u32> = (0..graph.len() as u32)
        .filter(|&v| parts[v as usize] == Part::Separator)
        .collect();
    let (first, second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| half_order(graph, parts, &separator, Part::Second));
        let first = half_order(graph, parts, &separator, Part::First);
        (first, second.join())
    });
    let second = second.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let mut order = first?;
    order.extend(second?);
    order.extend_from_slice(&separator);
    Ok(order)
}

/// The balls of `half` in the order minimum degree eliminates them beside the separator's weighted clique.
fn half_order(
    graph: &Graph,
    parts: &[Part],
    separator: &[u32],
    half: Part,
) -> Result<Vec<u32>, String> {
    // The half's balls and the separator, numbered in ball order; the extra vertices after them.
    let members: Vec<u32> = (0..graph.len() as u32)
        .filter(|&v| matches!(parts[v as usize], p if p == half || p == Part::Separator))
        .collect();
    let mut local = vec![u32::MAX; graph.len()];
    for (i, &v) in members.iter().enumerate() {
        local[v as usize] = i as u32;
    }
    let k = members.len() + SEPARATOR_WEIGHT;
    let mut lower: Vec<Vec<u32>> = vec![Vec::new(); k];
    for (i, &v) in members.iter().enumerate() {
        for &w in graph.neighbours(v as usize) {
            let j = local[w as usize];
            if j != u32::MAX && j as usize > i {
                lower[i].push(j);
            }
        }
    }
    let clique: Vec<u32> = separator
        .iter()
        .map(|&v| local[v as usize])
        .chain((members.len()..k).map(|i| i as u32))
        .collect();
    for (a, &x) in clique.iter().enumerate() {
        for &y in &clique[a + 1..] {
            lower[x.min(y) as usize].push(x.max(y));
        }
    }
    let mut col_ptr = Vec::with_capacity(k + 1);
    col_ptr.push(0);
    let mut rows = Vec::new();
    for column in &mut lower {
        column.sort_unstable();
        column.dedup();
        rows.extend_from_slice(column);
        col_ptr.push(rows.len());
    }
    let sub = minimum_degree(k, &col_ptr, &rows)?;
    Ok(sub
        .iter()
        .filter(|&&i| (i as usize) < members.len())
        .map(|&i| members[i as usize])
        .filter(|&v| parts[v as usize] == half)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::physics::block_cholesky::BlockCholesky;
    use crate::physics::geometry::Sym2;
    use glam::DVec2;
    use proptest::prelude::*;

    /// The block lower triangle of the pairs of `points` closer than `reach` (a contact graph; balls out of
    /// reach of the rest make further components).
    fn contact_graph(points: &[(f64, f64)], reach: f64) -> (usize, Vec<usize>, Vec<u32>) {
        let m = points.len();
        let mut col_ptr = vec![0];
        let mut rows = Vec::new();
        for (i, a) in points.iter().enumerate() {
            for (j, b) in points.iter().enumerate().skip(i + 1) {
                if (a.0 - b.0).hypot(a.1 - b.1) < reach {
                    rows.push(j as u32);
                }
            }
            col_ptr.push(rows.len());
        }
        (m, col_ptr, rows)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Any contact graph: a cut that no coupling crosses, a permutation with the separator last, and a
        /// factorisation in that order that solves `A x = b` to round-off.
        #[test]
        fn a_dissected_order_of_any_contact_graph_factorises(
            points in proptest::collection::vec((0.0f64..20.0, 0.0f64..4.0), 2..600),
            reach in 0.3f64..1.5,
        ) {
            let (m, col_ptr, rows) = contact_graph(&points, reach);
            let graph = Graph::new(m, &col_ptr, &rows);
            let cut = bisect(&graph);
            let Some(parts) = cut else {
                return Ok(());
            };
            for c in 0..m {
                for &r in &rows[col_ptr[c]..col_ptr[c + 1]] {
                    let pair = (parts[c], parts[r as usize]);
                    prop_assert!(pair != (Part::First, Part::Second) && pair != (Part::Second, Part::First));
                }
            }
            let order = dissected_order(&graph, &parts).expect("orders");
            let mut seen = vec![false; m];
            for &v in &order {
                prop_assert!(!seen[v as usize]);
                seen[v as usize] = true;
            }
            prop_assert!(seen.iter().all(|&s| s));
            let tail = parts.iter().filter(|&&p| p == Part::Separator).count();
            prop_assert!(order[m - tail..].iter().all(|&v| parts[v as usize] == Part::Separator));
            // A diagonally dominant block matrix on the graph, and b.
            let mut diag: Vec<Sym2> = (0..m).map(|i| Sym2::scaled_identity(1.0 + i as f64 % 3.0)).collect();
            let mut off = Vec::new();
            for c in 0..m {
                for &r in &rows[col_ptr[c]..col_ptr[c + 1]] {
                    let b = Sym2 { xx: 2.0, xy: 0.5, yy: 1.5 };
                    diag[c] = diag[c].plus(b);
                    diag[r as usize] = diag[r as usize].plus(b);
                    off.push((c as u32, r, b.scale(-1.0)));
                }
            }
            let b: Vec<DVec2> = (0..m).map(|i| DVec2::new((i as f64).sin(), (i as f64 * 0.3).cos())).collect();
            let mut chol = BlockCholesky::analyse(m, &col_ptr, &rows, &order);
            chol.clear_diagonal();
            for (i, d) in diag.iter().enumerate() {
                chol.add_diagonal(i, *d);
            }
            let slots: Vec<usize> = off
                .iter()
                .map(|&(i, j, _)| chol.slot(i as usize, j as usize).expect("pattern holds the pair"))
                .collect();
            chol.factorize(&off, &slots).expect("positive definite");
            let mut x = b.clone();
            chol.solve_in_place(&mut x);
            let mut ax: Vec<DVec2> = (0..m).map(|i| diag[i].mul_vec(x[i])).collect();
            for &(i, j, blk) in &off {
                ax[i as usize] += blk.mul_vec(x[j as usize]);
                ax[j as usize] += blk.mul_vec(x[i as usize]);
            }
            let worst = ax.iter().zip(&b).map(|(p, q)| (*p - *q).abs().max_element()).fold(0.0, f64::max);
            prop_assert!(worst < 1e-10, "residual {worst}");
        }
    }

    /// A `w × h` grid of balls coupled to their right, upper and upper-right neighbours (a landed pile's
    /// contact graph), as a block lower triangle.
    fn grid(w: usize, h: usize) -> (usize, Vec<usize>, Vec<u32>) {
        let m = w * h;
        let mut col_ptr = vec![0];
        let mut rows = Vec::new();
        for k in 0..m {
            let (c, r) = (k % w, k / w);
            let mut mine = Vec::new();
            for (dc, dr) in [(1, 0), (0, 1), (1, 1)] {
                if c + dc < w && r + dr < h {
                    mine.push(((r + dr) * w + c + dc) as u32);
                }
            }
            mine.sort_unstable();
            rows.extend(mine);
            col_ptr.push(rows.len());
        }
        (m, col_ptr, rows)
    }

    #[test]
    fn a_wide_pile_is_cut_across_by_a_separator_that_no_coupling_crosses() {
        let (m, col_ptr, rows) = grid(200, 50);
        let graph = Graph::new(m, &col_ptr, &rows);
        let parts = bisect(&graph).expect("a 200 × 50 grid has a cut");
        for c in 0..m {
            for &r in &rows[col_ptr[c]..col_ptr[c + 1]] {
                let pair = (parts[c], parts[r as usize]);
                assert!(
                    pair != (Part::First, Part::Second) && pair != (Part::Second, Part::First),
                    "balls {c} and {r} couple across the cut"
                );
            }
        }
        let count = |p: Part| parts.iter().filter(|&&q| q == p).count();
        // Across the pile: about one column of 50 balls, and two halves of about 5 000.
        let separator = count(Part::Separator);
        assert!((50..=110).contains(&separator), "separator {separator}");
        let first = count(Part::First);
        assert!(first.abs_diff(m / 2) < m / 20, "first part {first} of {m}");
    }

    #[test]
    fn a_small_group_numbered_first_does_not_stop_the_cut() {
        // Two balls in contact of their own, numbered before a 200 × 50 pile.
        let (m, col_ptr, rows) = grid(200, 50);
        let mut shifted_ptr = vec![0, 1, 1];
        shifted_ptr.extend(col_ptr[1..].iter().map(|&p| p + 1));
        let mut shifted_rows = vec![1];
        shifted_rows.extend(rows.iter().map(|&r| r + 2));
        let graph = Graph::new(m + 2, &shifted_ptr, &shifted_rows);
        let parts = bisect(&graph).expect("the pile is cut");
        let separator = parts.iter().filter(|&&p| p == Part::Separator).count();
        assert!((50..=110).contains(&separator), "separator {separator}");
    }

    #[test]
    fn the_dissected_order_is_a_permutation_with_the_separator_last() {
        let (m, col_ptr, rows) = grid(200, 50);
        let order = fill_reducing_order(m, &col_ptr, &rows).expect("orders");
        let mut seen = vec![false; m];
        for &v in &order {
            assert!(!seen[v as usize], "ball {v} twice");
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        let parts = bisect(&Graph::new(m, &col_ptr, &rows)).expect("a cut");
        let tail = parts.iter().filter(|&&p| p == Part::Separator).count();
        assert!(
            order[m - tail..]
                .iter()
                .all(|&v| parts[v as usize] == Part::Separator)
        );
    }

    #[test]
    fn a_chain_too_short_to_cut_and_a_small_pattern_keep_minimum_degree() {
        // A path of three balls has levels 0, 1, 2: the middle ball separates the ends. Two balls have no cut.
        let parts = bisect(&Graph::new(3, &[0, 1, 2, 2], &[1, 2])).expect("a cut");
        assert_eq!(parts[1], Part::Separator);
        assert_ne!(parts[0], parts[2]);
        let graph = Graph::new(2, &[0, 1, 1], &[1]);
        assert!(bisect(&graph).is_none());
        let (m, col_ptr, rows) = grid(40, 20);
        assert!(m < DISSECTION_MIN_BALLS);
        assert_eq!(
            fill_reducing_order(m, &col_ptr, &rows),
            minimum_degree(m, &col_ptr, &rows)
        );
    }
}
