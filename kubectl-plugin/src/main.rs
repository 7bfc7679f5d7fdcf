//! `kubectl karpenter`: Karpenter's decisions, explained. An adapter over carpentry-core: it reads
//! files, calls the engine and renders; it holds no Karpenter rules.

mod cluster;
mod common;
mod compare;
mod convert;
mod explain;
mod input;
mod render;
mod simulate;
mod snapshot;
mod source;
mod types;
mod whatif;

use std::process::ExitCode;

/// See Cargo.toml: a faster allocator for the many small values of a large snapshot.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kubectl karpenter",
    bin_name = "kubectl karpenter",
    version,
    about = "Explain and predict what Karpenter (v1.14.1) does"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Convert v1beta1 / v1alpha5 Karpenter manifests to v1: YAML on stdout, a note per changed field on stderr.
    Convert(convert::ConvertArgs),
    /// List the instance types a NodePool allows, cheapest first, with allocatable resources and offerings.
    Types(types::TypesArgs),
    /// Run one provisioning round over the pending pods in the files, offline: new NodeClaims, pods placed on
    /// existing nodes, and why the others stay pending. Exit 0 when every provisionable pod is placed, 1 when some are not
    /// (unschedulable, or deferred to a later round by reserved capacity).
    Simulate(simulate::SimulateArgs),
    /// Explain a pod (why it is pending, where it would go), a node (why it stays or goes) or a
    /// NodePool (usage, limits, budgets, instance types), from the cluster or --from-file.
    /// Exit 0: the pod is running or schedulable; 1: it cannot be scheduled; 2: an error.
    Explain(explain::ExplainArgs),
    /// Apply the objects in a file on top of the cluster's state, in simulation only, and report
    /// what Karpenter would do: new NodeClaims and their cost, pods left pending and why, nodes
    /// that drift and their replacement under the budgets, the cost delta. Nothing is written.
    Whatif(whatif::WhatifArgs),
    /// Write the cluster state Karpenter looks at as a scenario file (redacted), for --from-file
    /// and the playground.
    Snapshot(snapshot::SnapshotArgs),
    /// Run the cluster in the files twice over the same simulated time, once with Karpenter's
    /// NodePools and once with Cluster Autoscaler (1.36.1) on the NodeGroups, and print them side
    /// by side: time until every pod is Running after the start and each step, pending
    /// pod-seconds, nodes, cost, requested/allocatable, disruptions, and the events behind them.
    Compare(compare::CompareArgs),
}

/// How a command failed: bad input (exit 2) or anything else (exit 1).
pub enum Failure {
    Input(String),
    Other(anyhow::Error),
    /// Output was printed; exit with this status and no message.
    Exit(u8),
}

/// The engine could not build the view of the input (unknown region, a reservation in another
/// region, a NodeClass the catalogue cannot serve): the user's input is at fault (exit 2).
impl From<carpentry_core::StateError> for Failure {
    fn from(e: carpentry_core::StateError) -> Self {
        Failure::Input(carpentry_core::error_chain(&e))
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Other(e)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Convert(args) => convert::run(args),
        Command::Types(args) => types::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Whatif(args) => whatif::run(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Compare(args) => compare::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(message)) => {
            eprint!("{message}");
            if !message.ends_with('\n') {
                eprintln!();
            }
            ExitCode::from(2)
        }
        Err(Failure::Exit(code)) => ExitCode::from(code),
        Err(Failure::Other(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
