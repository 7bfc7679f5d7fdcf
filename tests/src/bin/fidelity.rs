//! `cargo xtask fidelity [--count N] [--seed S]`: our scheduler against upstream Karpenter's on
//! every scenario under tests/scenarios/ and on N generated scenarios. Prints each divergence,
//! writes a minimal reproducing scenario file for it, and ends with `agreement: <agreeing>/<total>`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use carpentry_tests::fidelity::{export, generate, oracle, run};
use clap::Parser;

#[derive(Parser)]
#[command(name = "fidelity", about = "carpentry vs upstream Karpenter v1.14.1, side by side")]
struct Args {
    /// Generated scenarios to compare (after the corpus).
    #[arg(long, default_value_t = 100)]
    count: u64,
    /// The first generated scenario's seed (scenario i uses seed + i).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Skip the scenario corpus (tests/scenarios/).
    #[arg(long)]
    no_corpus: bool,
    /// The oracle binary (default: $CARPENTRY_ORACLE, else tests/oracle/bin/oracle).
    #[arg(long)]
    oracle: Option<PathBuf>,
    /// Where minimal reproducing scenarios are written.
    #[arg(long, default_value = "target/fidelity")]
    out: PathBuf,
    /// Oracle calls allowed to shrink one divergence (0: write the scenario as found).
    #[arg(long, default_value_t = 150)]
    shrink_budget: usize,
    /// Only write the generated scenarios into this directory (no oracle, no comparison).
    #[arg(long)]
    generate_only: Option<PathBuf>,
    /// Compare only these scenario files (no corpus, no generated scenarios).
    #[arg(long = "scenario")]
    scenarios: Vec<PathBuf>,
    /// Only print the oracle's input document for this scenario file (for running the oracle by hand).
    #[arg(long)]
    export: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(file) = &args.export {
        let yaml = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let (input, now) = run::input_of(&yaml)?;
        let name = file.file_stem().unwrap_or_default().to_string_lossy();
        println!("{}", serde_json::to_string(&export::oracle_input(&name, &input, &now, None))?);
        return Ok(());
    }
    if let Some(dir) = &args.generate_only {
        std::fs::create_dir_all(dir)?;
        // NodeClaims, unschedulable pods, pods onto existing nodes, pods: how varied the stream is.
        let mut stats = (0usize, 0usize, 0usize, 0usize);
        for i in 0..args.count {
            let g = generate::scenario(args.seed + i);
            // Each one must load: a generator bug is not a divergence.
            let (input, _) = run::input_of(&g.yaml).with_context(|| format!("generated scenario {}", g.name))?;
            let r = carpentry_core::scheduling::schedule(&input);
            stats.0 += r.nodeclaims.len();
            stats.1 += r.unschedulable.len();
            stats.2 += r.existing_nodes.iter().map(|n| n.pods.len()).sum::<usize>();
            stats.3 += input.pods.len();
            std::fs::write(dir.join(format!("{}.yaml", g.name)), g.yaml)?;
        }
        println!(
            "wrote {} scenarios to {}: {} pods, our engine made {} NodeClaims, placed {} pods on existing nodes, left {} unschedulable",
            args.count,
            dir.display(),
            stats.3,
            stats.0,
            stats.2,
            stats.1
        );
        return Ok(());
    }
    let oracle_path = args.oracle.clone().unwrap_or_else(oracle::default_path);
    let mut oracle = oracle::Oracle::start(&oracle_path)?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;

    let mut cases: Vec<(String, String)> = Vec::new();
    for f in &args.scenarios {
        let name = f.file_stem().unwrap_or_default().to_string_lossy().into_owned();
        cases.push((name, std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?));
    }
    let generated = if args.scenarios.is_empty() { args.count } else { 0 };
    if !args.no_corpus && args.scenarios.is_empty() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut files: Vec<_> = std::fs::read_dir(&dir)?.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        for f in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
            let name = f.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            cases.push((name, std::fs::read_to_string(&f)?));
        }
    }
    for i in 0..generated {
        let g = generate::scenario(args.seed + i);
        cases.push((g.name, g.yaml));
    }

    let (mut agreeing, mut total) = (0usize, 0usize);
    let mut ties: BTreeMap<String, usize> = BTreeMap::new();
    let mut random_ties = 0usize;
    let mut by_kind: BTreeMap<&'static str, usize> = BTreeMap::new();
    let (mut ours_time, mut upstream_time, mut pods) = (0.0, 0.0, 0usize);
    for (name, yaml) in &cases {
        total += 1;
        let comparison = match run::compare_one(&mut oracle, name, yaml) {
            Ok(c) => c,
            Err(e) => {
                println!("{name}: ERROR {e:#}");
                // A crashed oracle takes its sets with it: start a fresh one.
                oracle = oracle::Oracle::start(&oracle_path)?;
                continue;
            }
        };
        ours_time += comparison.ours_seconds;
        upstream_time += comparison.upstream_seconds;
        pods += comparison.pods;
        if comparison.differences.is_empty() {
            agreeing += 1;
            if let Some(t) = comparison.tie_break {
                *ties.entry(format!("{t:?}")).or_default() += 1;
            }
            continue;
        }
        if comparison.upstream_varies {
            println!("{name}: DIVERGES (upstream's own runs differ: it broke a tie at random)");
            random_ties += 1;
        } else {
            println!("{name}: DIVERGES");
        }
        for d in &comparison.differences {
            println!("  {d}");
            *by_kind.entry(d.kind()).or_default() += 1;
        }
        let kind = comparison.differences[0].kind();
        let minimal = if args.shrink_budget > 0 {
            run::shrink(&mut oracle, name, yaml, kind, args.shrink_budget)
        } else {
            yaml.clone()
        };
        let path = args.out.join(format!("{name}.yaml"));
        let header = format!(
            "# Fidelity divergence ({kind}) found in {name}, shrunk. Differences on this file:\n{}",
            run::compare_one(&mut oracle, name, &minimal)
                .map(|c| c.differences.iter().map(|d| format!("#   {d}\n")).collect::<String>())
                .unwrap_or_else(|e| format!("#   (could not re-run: {e})\n"))
        );
        std::fs::write(&path, header + &minimal)?;
        println!("  minimal scenario: {}", path.display());
    }
    println!();
    println!("divergences by kind: {by_kind:?}");
    println!("agreeing through a tie both rules allow: {ties:?}");
    println!(
        "diverging where upstream's own runs differ (a random tie none of its draws broke our way): {random_ties}"
    );
    println!(
        "scheduling time over {pods} pending pods: ours {:.1} ms, upstream {:.1} ms",
        ours_time * 1e3,
        upstream_time * 1e3
    );
    println!("agreement: {agreeing}/{total}");
    Ok(())
}
