//! `kubectl karpenter snapshot [-o FILE] [--keep-images]`: the state Karpenter looks at, redacted,
//! as a scenario file that `--from-file` and the playground load.
//!
//! The state is read as every command reads it ([`crate::source::read`]) and written by core's
//! [`carpentry_core::manifest::write_snapshot`] (the controller's `/snapshot` writes the same).

use carpentry_core::manifest::write_snapshot;

use crate::common::ReadArgs;
use crate::Failure;

#[derive(clap::Args)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub read: ReadArgs,
    /// Write the snapshot here instead of stdout.
    #[arg(short = 'o', long = "output-file", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Keep container image names (redacted by default).
    #[arg(long)]
    pub keep_images: bool,
}

pub fn run(args: SnapshotArgs) -> Result<(), Failure> {
    let state = crate::source::read(&args.read)?;
    for note in &state.notes {
        eprintln!("note: {note}");
    }
    let snapshot = write_snapshot(
        &state.manifests,
        &state.source,
        args.read.from_file.is_empty(),
        args.keep_images,
        &state.left_out,
    )
    .map_err(|e| Failure::Other(anyhow::anyhow!(carpentry_core::error_chain(&e))))?;
    match &args.output {
        Some(path) => {
            std::fs::write(path, &snapshot.text)
                .map_err(|e| Failure::Input(format!("cannot write {}: {e}", path.display())))?;
            eprintln!(
                "wrote {} objects ({}) from {} to {}",
                snapshot.count,
                snapshot.summary,
                state.source,
                path.display()
            );
        }
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            out.write_all(snapshot.text.as_bytes())
                .and_then(|()| out.flush())
                .map_err(|e| Failure::Other(anyhow::anyhow!("cannot write to stdout: {e}")))?;
        }
    }
    Ok(())
}
