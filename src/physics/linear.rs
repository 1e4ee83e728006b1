//! The Newton system `H Δx = −g` for a [`BlockHessian`].
//!
//! Balls that share no off-diagonal block are independent 2×2 systems and are solved in closed form
//! (an isolated ball, as in the seed's experiment, never touches the sparse solver). The coupled balls are
//! gathered into one sparse symmetric matrix and factorised with faer's sparse Cholesky (`LLᵀ`), whose
//! fill-reducing ordering keeps the cost near the number of coupled pairs.

use faer::Side;
use faer::prelude::*;
use faer::sparse::linalg::solvers::{Llt, SymbolicLlt};
use faer::sparse::{SparseColMat, Triplet};
use glam::DVec2;

use super::geometry::Sym2;
use super::potential::BlockHessian;

/// Why a Newton system could not be solved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinearSolveError {
    #[error("Hessian block of ball {ball} is not positive definite")]
    SingularBlock { ball: usize },
    #[error("sparse Cholesky failed: {0}")]
    Cholesky(String),
}

/// Reused buffers for the coupled part.
#[derive(Default, Debug, Clone)]
pub struct LinearWorkspace {
    compact: Vec<u32>,
    coupled: Vec<u32>,
    triplets: Vec<Triplet<usize, usize, f64>>,
    /// The last symbolic factorisation (fill-reducing ordering and elimination tree) and the sparsity pattern
    /// it was computed for: Newton iterations with an unchanged contact graph skip the symbolic phase.
    symbolic: Option<(Vec<usize>, Vec<usize>, SymbolicLlt<usize>)>,
}

const UNCOUPLED: u32 = u32::MAX;

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
    workspace.compact.clear();
    workspace.compact.resize(n, UNCOUPLED);
    workspace.coupled.clear();
    for &(i, j, _) in &hessian.off_diagonal {
        for b in [i, j] {
            if workspace.compact[b as usize] == UNCOUPLED {
                workspace.compact[b as usize] = 0;
                workspace.coupled.push(b);
            }
        }
    }
    workspace.coupled.sort_unstable();
    for (c, &b) in workspace.coupled.iter().enumerate() {
        workspace.compact[b as usize] = c as u32;
    }
    for i in 0..n {
        if workspace.compact[i] == UNCOUPLED {
            out[i] = solve_block(hessian.diagonal[i], gradient[i])
                .ok_or(LinearSolveError::SingularBlock { ball: i })?;
        }
    }
    if workspace.coupled.is_empty() {
        return Ok(());
    }
    let m = 2 * workspace.coupled.len();
    let triplets = &mut workspace.triplets;
    triplets.clear();
    for (c, &b) in workspace.coupled.iter().enumerate() {
        let block = hessian.diagonal[b as usize];
        let r = 2 * c;
        triplets.push(Triplet::new(r, r, block.xx));
        triplets.push(Triplet::new(r + 1, r, block.xy));
        triplets.push(Triplet::new(r + 1, r + 1, block.yy));
    }
    for &(i, j, block) in &hessian.off_diagonal {
        let ci = workspace.compact[i as usize] as usize;
        let cj = workspace.compact[j as usize] as usize;
        let (row, col) = if ci > cj {
            (2 * ci, 2 * cj)
        } else {
            (2 * cj, 2 * ci)
        };
        triplets.push(Triplet::new(row, col, block.xx));
        triplets.push(Triplet::new(row, col + 1, block.xy));
        triplets.push(Triplet::new(row + 1, col, block.xy));
        triplets.push(Triplet::new(row + 1, col + 1, block.yy));
    }
    let matrix = SparseColMat::<usize, f64>::try_new_from_triplets(m, m, triplets)
        .map_err(|e| LinearSolveError::Cholesky(format!("{e:?}")))?;
    let pattern = matrix.symbolic();
    let reusable = matches!(&workspace.symbolic,
        Some((col_ptr, row_idx, _)) if col_ptr.as_slice() == pattern.col_ptr() && row_idx.as_slice() == pattern.row_idx());
    if !reusable {
        let symbolic = SymbolicLlt::try_new(pattern, Side::Lower)
            .map_err(|e| LinearSolveError::Cholesky(format!("{e:?}")))?;
        workspace.symbolic = Some((
            pattern.col_ptr().to_vec(),
            pattern.row_idx().to_vec(),
            symbolic,
        ));
    }
    let symbolic = match &workspace.symbolic {
        Some((_, _, symbolic)) => symbolic.clone(),
        None => {
            return Err(LinearSolveError::Cholesky(
                "no symbolic factorisation".into(),
            ));
        }
    };
    let llt = Llt::try_new_with_symbolic(symbolic, matrix.rb(), Side::Lower)
        .map_err(|e| LinearSolveError::Cholesky(format!("{e:?}")))?;
    let coupled = &workspace.coupled;
    let rhs = Col::<f64>::from_fn(m, |r| {
        let g = gradient[coupled[r / 2] as usize];
        -(if r % 2 == 0 { g.x } else { g.y })
    });
    let solution = llt.solve(&rhs);
    for (c, &b) in coupled.iter().enumerate() {
        out[b as usize] = DVec2::new(solution[2 * c], solution[2 * c + 1]);
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
}
