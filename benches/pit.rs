//! Criterion bench over the reference ball pit of `contact-sandbox bench` (SPEC §6) at N = 1000.
//!
//! ```text
//! cargo bench --bench pit
//! ```
//! Each sample steps a copy of the pit, taken after 30 steps (the first rows have landed, the rest fall onto
//! them), through the next 10 steps; the time per step is a tenth of the reported time.

use std::hint::black_box;

use contact_sandbox::cli::bench::{PIT_WIDTH, pit_lane};
use contact_sandbox::physics::world::ContactMethod;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

const N: usize = 1000;
const WARM_STEPS: usize = 30;
const TIMED_STEPS: usize = 10;

fn pit(c: &mut Criterion) {
    let mut group = c.benchmark_group(format!("pit_n{N}_{TIMED_STEPS}_steps"));
    group.sample_size(10);
    for method in [ContactMethod::Ipc, ContactMethod::Penalty] {
        let mut warm = pit_lane(N, method, PIT_WIDTH);
        for _ in 0..WARM_STEPS {
            warm.step();
        }
        group.bench_function(method.label(), |b| {
            b.iter_batched_ref(
                || warm.clone(),
                |lane| {
                    for _ in 0..TIMED_STEPS {
                        black_box(lane.step().map(|d| d.newton_iterations));
                    }
                },
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, pit);
criterion_main!(benches);
