//! Thinning a plotted series to what its pixels can show.
//!
//! A lane's history holds up to 2 000 steps, and its plot is about 250 points wide: eight samples per column. egui
//! turns every segment into feathered triangles, and a software renderer pays for each of them. Of the samples
//! that fall in one column only the lowest and the highest are kept, in their order, so the line still spans the
//! column's whole vertical extent: a one-step spike in the Newton count stays visible.

/// Appends to `out` the points of `points` (ascending in x) that a plot with `columns_per_unit` columns per x unit,
/// starting at `x0`, needs: the first and the last of the series, and the lowest and highest of each column.
pub fn min_max_per_column(
    points: impl IntoIterator<Item = [f64; 2]>,
    x0: f64,
    columns_per_unit: f64,
    out: &mut Vec<[f64; 2]>,
) {
    let thin = columns_per_unit.is_finite() && columns_per_unit > 0.0;
    // The column being gathered: its index, its lowest and highest points and which came first.
    let mut column: Option<(f64, [f64; 2], [f64; 2], bool)> = None;
    let mut last: Option<[f64; 2]> = None;
    let flush = |column: &(f64, [f64; 2], [f64; 2], bool), out: &mut Vec<[f64; 2]>| {
        let (_, low, high, low_first) = *column;
        let (a, b) = if low_first { (low, high) } else { (high, low) };
        push_new(out, a);
        push_new(out, b);
    };
    for p in points {
        if !thin {
            out.push(p);
            continue;
        }
        if last.is_none() {
            out.push(p);
        }
        last = Some(p);
        let index = ((p[0] - x0) * columns_per_unit).floor();
        match &mut column {
            Some((i, low, high, low_first)) if *i == index => {
                if p[1] < low[1] {
                    *low = p;
                    *low_first = false;
                }
                if p[1] > high[1] {
                    *high = p;
                    *low_first = true;
                }
            }
            _ => {
                if let Some(done) = column.take() {
                    flush(&done, out);
                }
                column = Some((index, p, p, true));
            }
        }
    }
    if let Some(done) = column {
        flush(&done, out);
    }
    if let Some(p) = last {
        push_new(out, p);
    }
}

/// Pushes `p` unless it is the point just pushed.
fn push_new(out: &mut Vec<[f64; 2]>, p: [f64; 2]) {
    if out.last() != Some(&p) {
        out.push(p);
    }
}

#[cfg(test)]
mod tests {
    use super::min_max_per_column;

    fn thin(points: &[[f64; 2]], x0: f64, columns_per_unit: f64) -> Vec<[f64; 2]> {
        let mut out = Vec::new();
        min_max_per_column(points.iter().copied(), x0, columns_per_unit, &mut out);
        out
    }

    #[test]
    fn each_column_keeps_its_extremes_in_order_and_the_ends() {
        // Ten samples per column (x in steps of 0.1, one column per unit); a spike at x = 1.3.
        let points: Vec<[f64; 2]> = (0..30)
            .map(|k| {
                let x = k as f64 * 0.1;
                let y = if k == 13 { 50.0 } else { (k % 7) as f64 };
                [x, y]
            })
            .collect();
        let out = thin(&points, 0.0, 1.0);
        // First point, then per column the lowest and the highest in their order, then the last point.
        let kept: Vec<[f64; 2]> = [0, 6, 13, 14, 20, 21, 29]
            .iter()
            .map(|&k| points[k])
            .collect();
        assert_eq!(out, kept);
        // Every column keeps its range.
        for c in 0..3 {
            let range = |pts: &[[f64; 2]]| {
                let ys: Vec<f64> = pts
                    .iter()
                    .filter(|p| (p[0].floor() as i32) == c)
                    .map(|p| p[1])
                    .collect();
                (
                    ys.iter().copied().fold(f64::INFINITY, f64::min),
                    ys.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                )
            };
            assert_eq!(range(&points), range(&out), "column {c}");
        }
    }

    #[test]
    fn a_series_sparser_than_the_columns_or_an_unknown_scale_is_kept_whole() {
        let points = [[0.0, 1.0], [1.0, 3.0], [2.0, 2.0], [3.0, 5.0]];
        assert_eq!(thin(&points, 0.0, 4.0), points.to_vec());
        assert_eq!(thin(&points, 0.0, f64::NAN), points.to_vec());
        assert_eq!(thin(&points, 0.0, 0.0), points.to_vec());
        assert!(thin(&[], 0.0, 1.0).is_empty());
        assert_eq!(thin(&[[5.0, 5.0]], 0.0, 1.0), vec![[5.0, 5.0]]);
    }
}
