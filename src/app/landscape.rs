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
    /// `(x, E(x))` samples [m, J]; samples where `E = +∞` (inside the IPC wall) are left out.
    pub points: Vec<[f64; 2]>,
    /// Where Newton from the step's start `xᵗ` ends [m].
    pub minimiser: Option<f64>,
    pub newton_iterations: u32,
}

/// Inputs of the landscape: one ball of mass `m` on the line `y = line_y`, walls, the step `h`.
pub struct LandscapeInput<'a> {
    pub walls: &'a [Wall],
    pub mass: f64,
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
    let radius = [0.0];
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
    let mut points = Vec::with_capacity(n);
    for i in 0..n {
        let x = a + (b - a) * i as f64 / (n - 1) as f64;
        let e = potential.energy(
            &[DVec2::new(x, input.line_y)],
            &mut workspace,
            &mut contacts,
        );
        if e.is_finite() {
            points.push([x, e]);
        }
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
        points,
        minimiser,
        newton_iterations,
    }
}
