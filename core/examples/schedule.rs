//! One provisioning round over a benchmark input, timed, for profiling and peak-memory
//! measurement (criterion measures time only):
//!
//! ```text
//! cargo run --release -p carpentry-core --example schedule -- fake|catalogue generic|diverse N [ROUNDS]
//! /usr/bin/time -v target/release/examples/schedule fake diverse 20000   # peak RSS
//! ```

use std::sync::Arc;
use std::time::Instant;

use carpentry_core::api::ec2nodeclass::EC2NodeClassSpec;
use carpentry_core::catalogue::Catalogue;
use carpentry_core::scheduling::fake::{self, benchmark_input, diverse_pods, pods};
use carpentry_core::scheduling::schedule;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: schedule fake|catalogue generic|diverse N [ROUNDS]";
    let (Some(types), Some(mix), Some(n)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let n: usize = n.parse().unwrap_or_else(|_| {
        eprintln!("{usage}");
        std::process::exit(2)
    });
    let rounds: usize = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(1);
    let types = match types.as_str() {
        "fake" => Arc::new(fake::instance_types(400)),
        "catalogue" => Catalogue::embedded()
            .instance_types_shared("us-east-1", &EC2NodeClassSpec::default())
            .expect("us-east-1 is in the catalogue"),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2)
        }
    };
    let pods = match mix.as_str() {
        "generic" => pods(n),
        "diverse" => diverse_pods(n),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2)
        }
    };
    let input = benchmark_input(types, pods);
    for _ in 0..rounds {
        let start = Instant::now();
        let results = schedule(&input);
        let elapsed = start.elapsed();
        let (nodeclaims, unschedulable) = (results.nodeclaims.len(), results.unschedulable.len());
        let start_drop = Instant::now();
        drop(results);
        let dropped = start_drop.elapsed();
        println!(
            "{n} pods: {nodeclaims} NodeClaims, {unschedulable} unschedulable, {:.1} ms ({:.0} pods/s), dropping the results {:.1} ms",
            elapsed.as_secs_f64() * 1e3,
            n as f64 / elapsed.as_secs_f64(),
            dropped.as_secs_f64() * 1e3
        );
    }
}
