//! `kubectl karpenter`: Karpenter's decisions, explained. An adapter over carpentry-core: it reads
//! files, calls the engine and renders; it holds no Karpenter rules.

mod convert;
mod input;
mod simulate;
mod types;

use std::process::ExitCode;

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
}

/// How a command failed: bad input (exit 2) or anything else (exit 1).
pub enum Failure {
    Input(String),
    Other(anyhow::Error),
    /// Output was printed; exit with this status and no message.
    Exit(u8),
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
