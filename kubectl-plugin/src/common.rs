//! The flags every command that reads a cluster shares, named and behaving as kubectl's.

use std::io::IsTerminal;
use std::path::PathBuf;

/// Reading and printing: what `explain` and `whatif` take.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct CommonArgs {
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Where the cluster state comes from.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ReadArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace of the pod (default: the context's namespace, else `default`).
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Every namespace (for `explain pod`: find the pod by name in any namespace).
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// Read the cluster state from these files instead of the cluster (a `snapshot`, or
    /// manifests); repeatable; `-` reads stdin.
    #[arg(long = "from-file", global = true, value_name = "FILE")]
    pub from_file: Vec<String>,
    /// AWS region for the catalogue (default: the snapshot's, else the nodes'
    /// topology.kubernetes.io/region label, else us-east-1).
    #[arg(long, global = true, value_name = "REGION")]
    pub region: Option<String>,
    /// An instance-type catalogue (JSON, as `cargo xtask catalog` writes it) instead of the
    /// embedded one.
    #[arg(long, global = true, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
}

/// How answers are printed.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Leave out the header row of tables.
    #[arg(long, global = true)]
    pub no_headers: bool,
    /// Colour: only on a terminal (auto, honouring NO_COLOR), always or never.
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    #[default]
    Text,
    Wide,
    Json,
    Yaml,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    #[default]
    Auto,
    Always,
    Never,
}

impl OutputArgs {
    /// Whether to colour stdout: `always`, or `auto` on a terminal without NO_COLOR (any value,
    /// as no-color.org asks).
    pub fn colour(&self) -> bool {
        match self.color {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal(),
        }
    }
}
