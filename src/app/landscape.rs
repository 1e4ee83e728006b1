//! The seed's energy-landscape figure: `E(x)` of one step along the throw line, for penalty and for IPC, with a
//! movable predicted position `x̃` and each model's minimiser. Every number comes from the core's
//! [`IncrementalPotential`] and its Newton solver [`minimize`]; nothing is re-derived here.

use crate::physics::DVec2;
use crate::physics::geometry::Wall;
use crate::physics::newton::{NewtonSettings, NewtonWorkspace, minimize};
use crate::physics::potential::{
    ContactModel, ContactSet, IncrementalPotential, WallIndex, Workspace,
};

/// One model's curve and minimiser.
#[derive(Clone, Debug, Default)]
pub struct LandscapeCurve {
    /// `(x, E(x))` samples [m, J] where `E` is finite, in runs of consecutive samples: a sample where `E = +∞`
    /// (inside the IPC wall) ends one piece and the next finite sample starts another, so a line drawn through a
    /// piece never joins the two sides of the barrier.
    pub pieces: Vec<Vec<[f64; 2]>>,
    /// Each run of samples where `E` is not finite, as (its first x, its last x) [m].
    pub infinite: Vec<(f64, f64)>,
    /// Where Newton from the step's start `xᵗ` ends [m].
    pub minimiser: Option<f64>,
    pub newton_iterations: u32,
}

impl LandscapeCurve {
    /// Every finite sample, left to right.
    pub fn points(&self) -> impl Iterator<Item = &[f64; 2]> {
        self.pieces.iter().flatten()
    }
}

/// Inputs of the landscape: one ball of mass `m` and radius `radius` on the line `y = line_y`, walls, the step `h`.
pub struct LandscapeInput<'a> {
    pub walls: &'a [Wall],
    pub mass: f64,
    /// The ball's radius [m]: the seed's is a point (0); the contact distance is to the ball's surface.
    pub radius: f64,
    pub h: f64,
    pub line_y: f64,
    /// Start of the step `xᵗ` [m] (Newton starts here, as the solver does).
    pub x_start: f64,
    pub x_tilde: f64,
    /// Sampled range [m].
    pub x_range: (f64, f64),
    pub samples: usize,
    pub newton: NewtonSettings,
}

/// `E(x)` along the line for `model`, and the minimiser Newton finds from `x_start`.
pub fn landscape(input: &LandscapeInput<'_>, model: ContactModel) -> LandscapeCurve {
    let wall_index = WallIndex::new(input.walls);
    let x_tilde = [DVec2::new(input.x_tilde, input.line_y)];
    let mass = [input.mass];
    let radius = [input.radius];
    let mut potential = IncrementalPotential::new(
        &x_tilde,
        &mass,
        &radius,
        input.walls,
        &wall_index,
        input.h,
        model,
    );
    let mut workspace = Workspace::default();
    let mut contacts = ContactSet::default();
    let n = input.samples.max(2);
    let (a, b) = input.x_range;
    let mut pieces: Vec<Vec<[f64; 2]>> = Vec::new();
    let mut infinite: Vec<(f64, f64)> = Vec::new();
    let mut previous_finite = false;
    for i in 0..n {
        let x = a + (b - a) * i as f64 / (n - 1) as f64;
        let e = potential.energy(
            &[DVec2::new(x, input.line_y)],
            &mut workspace,
            &mut contacts,
        );
        let finite = e.is_finite();
        match (finite, previous_finite) {
            (true, true) => {
                if let Some(piece) = pieces.last_mut() {
                    piece.push([x, e]);
                }
            }
            (true, false) => pieces.push(vec![[x, e]]),
            (false, false) if i > 0 => {
                if let Some(run) = infinite.last_mut() {
                    run.1 = x;
                }
            }
            (false, _) => infinite.push((x, x)),
        }
        previous_finite = finite;
    }
    let mut x = vec![DVec2::new(input.x_start, input.line_y)];
    let start_energy = potential.energy(&x, &mut workspace, &mut contacts);
    let (minimiser, newton_iterations) = if start_energy.is_finite() {
        let report = minimize(
            &mut potential,
            &mut x,
            &input.newton,
            None,
            &mut NewtonWorkspace::default(),
        );
        (x[0].x.is_finite().then_some(x[0].x), report.iterations)
    } else {
        (None, 0)
    };
    LandscapeCurve {
        pieces,
        infinite,
        minimiser,
        newton_iterations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's wall (front face 0.503 m, 20 mm thick) and x̃ behind it, where IPC's curve has two sides.
    fn seed_input(walls: &[Wall], samples: usize) -> LandscapeInput<'_> {
        LandscapeInput {
            walls,
            mass: 1.0,
            radius: 0.0,
            h: 0.01,
            line_y: 0.0,
            x_start: 0.473,
            x_tilde: 0.56,
            x_range: (0.403, 0.583),
            samples,
            newton: NewtonSettings {
                tolerance: 1e-10,
                max_iterations: 59,
                ccd_factor: 0.9,
            },
        }
    }

    /// A ball of radius r meets the wall r before its centre would: its IPC minimiser is a point ball's in front
    /// of the wall moved r nearer (the gauntlet's 5 mm balls were drawn as points, reading a 33 mm gap where
    /// their surface was 28 mm from the wall).
    #[test]
    fn a_ball_of_some_radius_meets_the_wall_that_much_sooner() {
        let r = 0.005;
        let wall = |shift: f64| {
            [Wall {
                center: DVec2::new(0.513 - shift, 0.0),
                half_extents: DVec2::new(0.01, 0.5),
                angle: 0.0,
            }]
        };
        let barrier = ContactModel::Barrier {
            dhat: 1e-3,
            kappa: 1e4,
        };
        let (round_walls, point_walls) = (wall(0.0), wall(r));
        let round = LandscapeInput {
            radius: r,
            x_start: 0.473 - r,
            ..seed_input(&round_walls, 101)
        };
        let point = LandscapeInput {
            x_start: 0.473 - r,
            ..seed_input(&point_walls, 101)
        };
        let (a, b) = (landscape(&round, barrier), landscape(&point, barrier));
        let (a, b) = (
            a.minimiser.expect("a minimiser"),
            b.minimiser.expect("a minimiser"),
        );
        assert!((a - b).abs() < 1e-9, "{a} against {b}");
        // x̃ lies behind the wall: the ball stops in front of it, its surface short of the face at 0.503 m.
        assert!(a + r < 0.503 && a + r > 0.503 - 1e-3, "{a}");
    }

    #[test]
    fn the_curve_pieces_never_span_a_non_finite_sample() {
        let walls = [Wall {
            center: DVec2::new(0.513, 0.0),
            half_extents: DVec2::new(0.01, 0.5),
            angle: 0.0,
        }];
        let samples = 181;
        let input = seed_input(&walls, samples);
        let step = (input.x_range.1 - input.x_range.0) / (samples - 1) as f64;
        let barrier = ContactModel::Barrier {
            dhat: 1e-3,
            kappa: 1e4,
        };
        let curve = landscape(&input, barrier);
        assert_eq!(curve.pieces.len(), 2, "one piece either side of the wall");
        assert_eq!(curve.infinite.len(), 1);
        let (lo, hi) = curve.infinite[0];
        assert!(lo >= 0.503 && hi <= 0.523, "{lo}..{hi} lies in the wall");
        for piece in &curve.pieces {
            for pair in piece.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                assert!(a[1].is_finite() && b[1].is_finite());
                // Neighbouring samples: nothing (in particular no infinite sample) was skipped between them.
                assert!(
                    ((b[0] - a[0]) - step).abs() < 1e-9 * step.max(1.0),
                    "{a:?} → {b:?} skips a sample"
                );
            }
        }
        // Every sample is in a piece or in an infinite run: none is lost.
        let in_runs: usize = curve
            .infinite
            .iter()
            .map(|(a, b)| ((b - a) / step).round() as usize + 1)
            .sum();
        assert_eq!(curve.points().count() + in_runs, samples);
        // One piece lies before the wall's front face, the other behind its back face (a sample on a face,
        // a rounding off it, may still be finite).
        let (front, back) = (0.503 + 1e-12, 0.523 - 1e-12);
        assert!(curve.pieces[0].iter().all(|p| p[0] <= front));
        assert!(curve.pieces[1].iter().all(|p| p[0] >= back));
        // Penalty's energy is finite everywhere: one piece of every sample.
        let penalty = landscape(&input, ContactModel::Penalty { stiffness: 1e4 });
        assert_eq!(penalty.pieces.len(), 1);
        assert!(penalty.infinite.is_empty());
        assert_eq!(penalty.points().count(), samples);
    }
}
