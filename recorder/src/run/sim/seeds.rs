//! Seeded fault plans: a seed draws a rate, a timeout, what keeps the worker from running and
//! how the target misbehaves, so many plans run the production loop in one test and a failing
//! one is named by its seed and reruns identically (`PERCENTES_SIM_SEED=N`).

use std::time::Duration;

use super::{Freezes, Stalls, Target, World, MS, S};

/// A world drawn from a seed.
#[derive(Clone, Debug)]
pub(in crate::run) struct Plan {
    pub(in crate::run) seed: u64,
    pub(in crate::run) world: World,
}

/// SplitMix64: small, fixed, and the same on every platform and Rust release.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[low, high)`.
    fn within(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low).max(1)
    }

    /// True with probability `1 / n`.
    fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[(self.next() % from.len() as u64) as usize]
    }
}

impl Plan {
    /// The plan of `seed`.
    pub(in crate::run) fn seeded(seed: u64) -> Plan {
        let mut d = Draw(seed);
        let rate_rps = d.pick(&[5.0, 20.0, 50.0, 100.0]);
        let timeout = Duration::from_millis(d.pick(&[500, 1_000, 3_000, 10_000]));
        let mut worker = Vec::new();
        let mut process = Vec::new();
        for _ in 0..d.within(0, 4) {
            let start = d.within(0, 40 * S);
            let length = d.pick(&[5 * MS, 50 * MS, 900 * MS, 2_500 * MS, 35 * S]);
            if d.one_in(3) {
                process.push((start, start + length));
            } else {
                worker.push((start, start + length));
            }
        }
        let stalls = Stalls {
            worker: Freezes::new(worker),
            process: Freezes::new(process),
            wake_floor_ns: d.within(10_000, 200_000),
            poll_cost_ns: if d.one_in(4) { d.within(0, 400_000) } else { 0 },
        };
        let window = |d: &mut Draw| {
            let start = d.within(0, 40 * S);
            (start, start + d.within(100 * MS, 10 * S))
        };
        let target = Target {
            slots: d.one_in(3).then(|| d.within(1, 8) as usize),
            head_ns: d.within(0, 50 * MS),
            ttft_ns: d.within(MS, 400 * MS),
            tpot_ns: d.within(0, 50 * MS),
            tokens: d.within(1, 6) as u32,
            connect_ns: d.within(50_000, 5 * MS),
            up_ns: if d.one_in(5) { d.within(0, 5 * S) } else { 0 },
            syn_drop: d.one_in(5).then(|| window(&mut d)),
            silent: d.one_in(5).then(|| window(&mut d)),
            reset_every: d.one_in(5).then(|| d.within(2, 20)),
            keep_alive: !d.one_in(4),
        };
        Plan {
            seed,
            world: World {
                rate_rps,
                timeout,
                stalls,
                target,
            },
        }
    }
}
