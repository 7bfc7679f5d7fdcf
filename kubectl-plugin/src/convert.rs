//! `kubectl karpenter convert -f FILE`.

use std::fmt::Write as _;

use crate::{input, Failure};

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// Manifest file (YAML or JSON, several documents allowed); `-` reads stdin.
    #[arg(short = 'f', long = "filename")]
    file: String,
}

/// Prints every Karpenter object of the input as v1 YAML (legacy objects converted, v1 objects as
/// loaded with their defaults), and each conversion note on stderr.
pub fn run(args: ConvertArgs) -> Result<(), Failure> {
    let mut manifests = input::load(&args.file)?;
    let legacy_count = manifests.legacy.len();
    let notes = manifests.convert_legacy();
    let mut out = String::new();
    let mut documents = 0usize;
    let mut push = |yaml: Result<String, serde_yaml::Error>| -> Result<(), Failure> {
        let yaml = yaml.map_err(|e| Failure::Other(e.into()))?;
        if documents > 0 {
            out.push_str("---\n");
        }
        out.push_str(&yaml);
        documents += 1;
        Ok(())
    };
    for nc in &manifests.nodeclasses {
        push(serde_yaml::to_string(nc))?;
    }
    for np in &manifests.nodepools {
        push(serde_yaml::to_string(np))?;
    }
    for claim in &manifests.nodeclaims {
        push(serde_yaml::to_string(claim))?;
    }
    print!("{out}");
    let mut summary = String::new();
    for note in &notes {
        let _ = writeln!(summary, "note: {}: {}: {}", note.object, note.field, note.message);
    }
    let others = manifests.all_pods().len() + manifests.nodes.len();
    let _ = writeln!(
        summary,
        "converted {legacy_count} legacy object(s); wrote {documents} v1 object(s){}",
        if others > 0 { "; non-Karpenter objects are not printed" } else { "" }
    );
    eprint!("{summary}");
    Ok(())
}
