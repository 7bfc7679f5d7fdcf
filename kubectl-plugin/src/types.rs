//! `kubectl karpenter types -f NODEPOOL_FILE [--region R] [-o table|json]`.

use std::fmt::Write as _;

use carpentry_core::api::ec2nodeclass::EC2NodeClassSpec;
use carpentry_core::catalogue::{Catalogue, PriceSource};
use carpentry_core::scheduling::{InstanceTypeOption, NodeClaimTemplate};
use serde::Serialize;

use crate::{input, Failure};

#[derive(clap::Args)]
pub struct TypesArgs {
    /// Manifest with the NodePool (and its EC2NodeClass, if you have one); `-` reads stdin.
    #[arg(short = 'f', long = "filename")]
    file: String,
    /// AWS region whose zones and offerings to use.
    #[arg(long, default_value = carpentry_core::manifest::scenario::DEFAULT_REGION)]
    region: String,
    /// Only this NodePool (default: every NodePool in the file).
    #[arg(long)]
    nodepool: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Table)]
    output: Output,
    /// Also list the instance types left out, with the reason.
    #[arg(long)]
    show_rejected: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Output {
    Table,
    Json,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TypeRow {
    nodepool: String,
    name: String,
    vcpu: String,
    memory: String,
    allocatable: std::collections::BTreeMap<String, String>,
    offerings: Vec<OfferingRow>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OfferingRow {
    zone: String,
    zone_id: String,
    capacity_type: String,
    price: f64,
    /// `published` (on-demand list price) or `synthetic` (spot: no registry ships real spot prices).
    price_source: &'static str,
}

pub fn run(args: TypesArgs) -> Result<(), Failure> {
    let mut manifests = input::load(&args.file)?;
    for note in manifests.convert_legacy() {
        eprintln!("note: {}: {}: {}", note.object, note.field, note.message);
    }
    let catalogue = Catalogue::embedded();
    if !catalogue.regions().any(|r| r == args.region) {
        let known: Vec<&str> = catalogue.regions().collect();
        return Err(Failure::Input(format!(
            "unknown region {:?}; the catalogue has {}",
            args.region,
            known.join(", ")
        )));
    }
    let nodepools: Vec<_> = manifests
        .nodepools
        .iter()
        .filter(|np| args.nodepool.as_deref().is_none_or(|n| np.metadata.name.as_deref() == Some(n)))
        .collect();
    if nodepools.is_empty() {
        return Err(Failure::Input(match &args.nodepool {
            Some(n) => format!("{}: no NodePool named {n:?}", args.file),
            None => format!("{}: no NodePool in the input", args.file),
        }));
    }
    let mut rows = Vec::new();
    let mut rejected_text = String::new();
    for np in nodepools {
        let np_name = np.metadata.name.clone().unwrap_or_default();
        let spec = match manifests.nodeclass_for(np) {
            Some(nc) => nc.spec.clone(),
            None => {
                eprintln!(
                    "note: NodePool {np_name} refers to EC2NodeClass {:?}, which is not in the input; assuming the default \
                     (AL2023, no kubelet overrides, default block devices)",
                    np.spec.template.spec.node_class_ref.name
                );
                EC2NodeClassSpec::default()
            }
        };
        let instance_types = catalogue
            .instance_types(&args.region, &spec)
            .map_err(|e| Failure::Input(format!("NodePool {np_name}: {e}")))?;
        let template = NodeClaimTemplate::new(np).map_err(|e| Failure::Input(format!("NodePool {np_name}: {e}")))?;
        let prefilter = template.prefilter(&instance_types);
        if let Err(shortfall) = &prefilter.min_values {
            eprintln!(
                "warning: NodePool {np_name}: {shortfall}; upstream (minValuesPolicy Strict) launches nothing for it"
            );
        }
        if prefilter.options.is_empty() {
            eprintln!(
                "warning: NodePool {np_name}: NodePool requirements filtered out all compatible available instance types \
                 ({} rejected; use --show-rejected to see why)",
                prefilter.rejected.len()
            );
        }
        rows.extend(prefilter.options.iter().map(|o| row(&np_name, o)));
        if args.show_rejected {
            for (it, reason) in &prefilter.rejected {
                let _ = writeln!(rejected_text, "{np_name}\t{}\t{reason}", it.name);
            }
        }
    }
    match args.output {
        Output::Json => {
            println!("{}", serde_json::to_string_pretty(&rows).map_err(|e| Failure::Other(e.into()))?);
            if args.show_rejected {
                eprint!("{rejected_text}");
            }
        }
        Output::Table => {
            print!("{}", table(&rows));
            if args.show_rejected && !rejected_text.is_empty() {
                println!("\nLEFT OUT");
                print!("{rejected_text}");
            }
        }
    }
    Ok(())
}

fn row(nodepool: &str, option: &InstanceTypeOption<'_>) -> TypeRow {
    let it = option.instance_type;
    let get = |r: &str| it.capacity.get(r).map(|q| q.to_string()).unwrap_or_default();
    TypeRow {
        nodepool: nodepool.to_string(),
        name: it.name.clone(),
        vcpu: get("cpu"),
        memory: get("memory"),
        allocatable: it.allocatable().iter().map(|(k, v)| (k.clone(), v.to_string())).collect(),
        offerings: option
            .offerings
            .iter()
            .map(|o| OfferingRow {
                zone: o.zone.clone(),
                zone_id: o.zone_id.clone(),
                capacity_type: o.capacity_type.to_string(),
                price: o.price,
                price_source: match o.price_source {
                    PriceSource::SyntheticSpot => "synthetic",
                    _ => "published",
                },
            })
            .collect(),
    }
}

/// A kubectl-style table: one line per instance type, its cheapest offering and the spread of zones.
fn table(rows: &[TypeRow]) -> String {
    let mut lines = vec![[
        "NODEPOOL",
        "NAME",
        "VCPU",
        "MEMORY",
        "ALLOC CPU",
        "ALLOC MEMORY",
        "ALLOC PODS",
        "ALLOC EPHEMERAL",
        "CHEAPEST",
        "OFFERINGS",
    ]
    .map(str::to_string)];
    for r in rows {
        let a = |k: &str| r.allocatable.get(k).cloned().unwrap_or_default();
        let cheapest = r.offerings.first().map_or(String::new(), |o| {
            format!(
                "${:.4}/h {} {}{}",
                o.price,
                o.capacity_type,
                o.zone,
                if o.price_source == "synthetic" { " (synthetic)" } else { "" }
            )
        });
        let zones: std::collections::BTreeSet<&str> = r.offerings.iter().map(|o| o.zone.as_str()).collect();
        let capacity_types: std::collections::BTreeSet<&str> =
            r.offerings.iter().map(|o| o.capacity_type.as_str()).collect();
        lines.push([
            r.nodepool.clone(),
            r.name.clone(),
            r.vcpu.clone(),
            r.memory.clone(),
            a("cpu"),
            a("memory"),
            a("pods"),
            a("ephemeral-storage"),
            cheapest,
            format!("{} zones, {}", zones.len(), capacity_types.into_iter().collect::<Vec<_>>().join("/")),
        ]);
    }
    let widths: Vec<usize> = (0..lines[0].len()).map(|i| lines.iter().map(|l| l[i].len()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for line in &lines {
        let cells: Vec<String> = line.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("   ").trim_end());
        out.push('\n');
    }
    if rows.iter().any(|r| r.offerings.iter().any(|o| o.price_source == "synthetic")) {
        out.push_str("\nSpot prices are synthetic (30–50% of on-demand, deterministic); on-demand prices are upstream's us-east-1 list prices.\n");
    }
    out
}
