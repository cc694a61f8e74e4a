//! `cargo bench -p fastshake-sim --bench events`: the same workload as `fastshake bench sim`,
//! without building the whole CLI. Prints; never asserts.

use fastshake_core::Instant;
use fastshake_sim::workload::lossy_chain;

fn main() {
    let virtual_s = 5;
    let mut rates = Vec::new();
    let mut events = 0;
    for rep in 0..5u64 {
        let mut sim = lossy_chain(rep + 1, 16, virtual_s);
        let started = std::time::Instant::now();
        sim.run_until(Instant::from_millis(virtual_s * 1000 + 100));
        events = sim.events_processed();
        rates.push(events as f64 / started.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "sim events/s: median {:.0} (min {:.0}, max {:.0}) over 5 runs of {events} events; target 2000000",
        rates[2], rates[0], rates[4]
    );
}
