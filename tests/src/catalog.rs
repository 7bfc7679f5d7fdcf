//! The generator of `core/data/ec2-catalogue.json`, the EC2 catalogue that carpentry-core embeds
//! (`cargo xtask catalog` runs it through the `catalog` binary; `cargo xtask test` checks that the
//! committed file is what it produces).
//!
//! Inputs, both taken from package registries with their ordinary clients and never committed
//! (xtask fetches them and passes their paths):
//!
//! * the PyPI wheel of `moto` (`pip download --no-deps moto==<version>`): the
//!   `DescribeInstanceTypes` records in `moto/ec2/resources/instance_types.json.gz` and the
//!   zone-ID offerings in `moto/ec2/resources/instance_type_offerings/availability-zone-id/*.json.gz`;
//! * the Go module `github.com/aws/karpenter-provider-aws` (`go mod download -json`), whose
//!   generated Go files hold three tables that the EC2 API does not expose: the us-east-1
//!   on-demand prices, the documented network bandwidth and the VPC branch-ENI (pod-eni) limits.
//!   Those files are regular `"key": value,` literals; a small parser below reads their values.
//!
//! The output is compact JSON with a `provenance` object. Its schema is defined once, in
//! carpentry-core (`core/src/catalogue/data.rs`: [`CatalogueFile`] and the types it holds): this
//! generator builds those types and serialises them, and `carpentry_core::catalogue` reads them
//! back. The format is described in `core/data/PROVENANCE.md`.
//! The generation date is the only input that changes from run to run: a check reuses the date
//! of the existing file, so it only fails when the data itself would change.
//!
//! It lives in this crate rather than in xtask so that xtask does not compile the core: the
//! generator is built with the tests, in the same profile, and xtask starts sooner.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, ensure, Context, Result};
use carpentry_core::catalogue::{
    CatalogueFile, DescribedInstanceType, InstanceTypeInfo, KarpenterTables, Provenance, ProvenanceInput, RegionFile,
    SCHEMA,
};
use serde_json::Value;

/// Recorded in the provenance of the file (unchanged since the generator lived in xtask, so that
/// a check of an unchanged catalogue passes).
const GENERATOR: &str = concat!("carpentry xtask catalog ", env!("CARGO_PKG_VERSION"));

const MOTO_TYPES: &str = "moto/ec2/resources/instance_types.json.gz";
const MOTO_OFFERINGS_DIR: &str = "moto/ec2/resources/instance_type_offerings/availability-zone-id/";
const KARPENTER_MODULE: &str = "github.com/aws/karpenter-provider-aws";
const PRICING_FILE: &str = "pkg/providers/pricing/zz_generated.pricing_aws.go";
const BANDWIDTH_FILE: &str = "pkg/providers/instancetype/zz_generated.bandwidth.go";
const VPCLIMITS_FILE: &str = "pkg/providers/instancetype/zz_generated.vpclimits.go";
/// The only region in karpenter's commercial-partition price table; upstream applies it everywhere.
const PRICE_REGION: &str = "us-east-1";

/// The fetched inputs and the versions they are of.
pub struct Inputs {
    pub moto_wheel: PathBuf,
    pub moto_version: String,
    /// The extracted karpenter-provider-aws module (inside a Go module cache, its publication
    /// date is read from the cache's `.info` file).
    pub karpenter_dir: PathBuf,
    pub karpenter_version: String,
}

/// What [`run`] does with the generated text.
pub enum Mode {
    /// Write `out`, recording this generation date (today when None).
    Write { date: Option<String> },
    /// Fail unless `out` already holds what the inputs produce (with its own generation date).
    Check,
}

/// Generates the catalogue from `inputs` and writes or checks `out`.
pub fn run(inputs: &Inputs, out: &Path, mode: Mode) -> Result<()> {
    let karpenter = KarpenterModule {
        dir: inputs.karpenter_dir.clone(),
        time: module_time_near(&inputs.karpenter_dir, &inputs.karpenter_version),
    };
    let date = match &mode {
        Mode::Write { date: Some(d) } => d.clone(),
        Mode::Write { date: None } => today_utc(),
        Mode::Check => existing_generation_date(out).unwrap_or_else(today_utc),
    };
    let catalogue = build(&inputs.moto_wheel, &inputs.moto_version, &karpenter, &inputs.karpenter_version, &date)?;
    let mut text = serde_json::to_string(&catalogue)?;
    text.push('\n');

    if let Mode::Check = mode {
        let current = fs::read_to_string(out).with_context(|| format!("reading {}", out.display()))?;
        ensure!(current == text, "{} is out of date: run `cargo xtask catalog` and commit the result", out.display());
        eprintln!("{} is up to date", out.display());
        return Ok(());
    }
    if let Some(parent) = out.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(out, &text).with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "wrote {} ({} bytes): {} instance types, {} regions, {} priced",
        out.display(),
        text.len(),
        catalogue.types.len(),
        catalogue.regions.len(),
        catalogue.types.iter().filter(|t| t.on_demand_price.is_some()).count()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Building.

fn build(
    wheel: &Path,
    moto_version: &str,
    karpenter: &KarpenterModule,
    karpenter_version: &str,
    date: &str,
) -> Result<CatalogueFile> {
    let moto = read_moto(wheel)?;
    let prices_src = read_text(&karpenter.dir.join(PRICING_FILE))?;
    let bandwidth_src = read_text(&karpenter.dir.join(BANDWIDTH_FILE))?;
    let vpclimits_src = read_text(&karpenter.dir.join(VPCLIMITS_FILE))?;

    let prices = parse_prices(&prices_src, PRICE_REGION).context(PRICING_FILE)?;
    let bandwidth = parse_int_map(&bandwidth_src, "InstanceTypeBandwidthMegabits").context(BANDWIDTH_FILE)?;
    let limits = parse_vpc_limits(&vpclimits_src).context(VPCLIMITS_FILE)?;
    let prices_date = generated_at(&prices_src).context("pricing file has no \"generated at\" stamp")?;
    let limits_date = generated_at(&vpclimits_src).context("vpclimits file has no \"generated at\" stamp")?;
    let module_date = karpenter.time.clone().unwrap_or_else(|| "unknown".to_string());

    // Instance types, filtered as upstream's DescribeInstanceTypes call is: hvm, x86_64 or arm64.
    let mut types = Vec::new();
    for (name, info) in &moto.types {
        if let Some(t) = convert_type(name, info, &prices, &bandwidth, &limits)? {
            types.push(t);
        }
    }
    types.sort_by(|a, b| a.name.cmp(&b.name));
    let index: BTreeMap<&str, usize> = types.iter().enumerate().map(|(i, t)| (t.name.as_str(), i)).collect();

    let mut regions = Vec::new();
    for (region, offerings) in &moto.offerings {
        let zone_ids = sort_zone_ids(offerings.iter().map(|(_, z)| z.clone()).collect::<BTreeSet<_>>());
        ensure!(!zone_ids.is_empty(), "region {region} has no zones");
        ensure!(zone_ids.len() <= 64, "region {region} has more than 64 zones");
        let mut offered = vec![0u64; types.len()];
        for (ty, zone) in offerings {
            if let Some(&i) = index.get(ty.as_str()) {
                let bit = zone_ids.iter().position(|z| z == zone).expect("zone collected above");
                offered[i] |= 1 << bit;
            }
        }
        regions.push(RegionFile { name: region.clone(), zone_ids, offered });
    }
    ensure!(regions.iter().any(|r| r.name == PRICE_REGION), "no offerings for {PRICE_REGION}");

    let provenance = Provenance {
        generator: format!("{GENERATOR} (schema {SCHEMA})"),
        generated_at: date.to_string(),
        inputs: vec![
            ProvenanceInput {
                package: "moto".into(),
                registry: "PyPI".into(),
                version: moto_version.into(),
                file: MOTO_TYPES.into(),
                date: moto.types_date.clone(),
                content: "DescribeInstanceTypes records: vCPU, memory, architecture, processor, hypervisor, \
                          usage classes, ENIs, EFA, GPUs, accelerators, Neuron, instance storage, EBS"
                    .into(),
            },
            ProvenanceInput {
                package: "moto".into(),
                registry: "PyPI".into(),
                version: moto_version.into(),
                file: format!("{MOTO_OFFERINGS_DIR}<region>.json.gz"),
                date: moto.offerings_date.clone(),
                content: format!("instance type offerings by availability-zone ID, {} regions", regions.len()),
            },
            ProvenanceInput {
                package: KARPENTER_MODULE.into(),
                registry: "Go module proxy".into(),
                version: karpenter_version.into(),
                file: PRICING_FILE.into(),
                date: prices_date,
                content: format!(
                    "InitialOnDemandPricesAWS[{PRICE_REGION}]: on-demand USD/hour, Linux, {} types",
                    prices.len()
                ),
            },
            ProvenanceInput {
                package: KARPENTER_MODULE.into(),
                registry: "Go module proxy".into(),
                version: karpenter_version.into(),
                file: BANDWIDTH_FILE.into(),
                date: module_date,
                content: format!("InstanceTypeBandwidthMegabits: {} numeric entries", bandwidth.len()),
            },
            ProvenanceInput {
                package: KARPENTER_MODULE.into(),
                registry: "Go module proxy".into(),
                version: karpenter_version.into(),
                file: VPCLIMITS_FILE.into(),
                date: limits_date,
                content: format!(
                    "Limits: IPv4PerInterface, IsTrunkingCompatible, BranchInterface; {} types",
                    limits.len()
                ),
            },
        ],
        notes: vec![
            "Filtered as upstream: supported virtualization hvm, architecture x86_64 or arm64.".into(),
            "Zones are keyed by zone ID. Zone names are derived in carpentry-core (catalogue::zone_name): \
             a region's zone IDs sorted by their trailing number are named <region>a, <region>b, ... in order."
                .into(),
            format!(
                "On-demand prices are karpenter's {PRICE_REGION} table, applied to every region as upstream does \
                 when it has no table for a region. Types without a price have no available offering."
            ),
            "Spot prices are not data: carpentry-core derives a synthetic spot price = on-demand x r, with r in \
             [0.30, 0.50] from an FNV-1a hash of (type, zone ID)."
                .into(),
        ],
    };
    Ok(CatalogueFile { schema: SCHEMA, provenance, types, regions })
}

fn convert_type(
    name: &str,
    info: &Value,
    prices: &BTreeMap<String, f64>,
    bandwidth: &BTreeMap<String, i64>,
    limits: &BTreeMap<String, VpcLimits>,
) -> Result<Option<InstanceTypeInfo>> {
    // The record as EC2 answers it, read by the same rules the controller's live refresh uses.
    let mut described: DescribedInstanceType =
        serde_json::from_value(info.clone()).with_context(|| format!("instance type {name}"))?;
    described.instance_type = name.to_string();
    let limit = limits.get(name);
    let tables = KarpenterTables {
        on_demand_price: prices.get(name).copied(),
        network_bandwidth_mbps: bandwidth.get(name).map(|b| *b as u64),
        branch_enis: limit.filter(|l| l.trunking).map(|l| l.branch),
        vpc_ipv4_per_eni: limit.map(|l| l.ipv4),
    };
    Ok(described.info(&tables)?)
}

/// Zone IDs in core's canonical order ([`carpentry_core::catalogue::zone_id_sort_key`]), which
/// is the order core names zones in.
fn sort_zone_ids(ids: BTreeSet<String>) -> Vec<String> {
    let mut v: Vec<String> = ids.into_iter().collect();
    v.sort_by(|a, b| {
        carpentry_core::catalogue::zone_id_sort_key(a)
            .cmp(&carpentry_core::catalogue::zone_id_sort_key(b))
            .then(a.cmp(b))
    });
    v
}

// ---------------------------------------------------------------------------------------------
// moto.

struct Moto {
    types: BTreeMap<String, Value>,
    types_date: String,
    /// region → (instance type, zone ID)
    offerings: BTreeMap<String, Vec<(String, String)>>,
    offerings_date: String,
}

fn read_moto(wheel: &Path) -> Result<Moto> {
    let file = fs::File::open(wheel).with_context(|| format!("opening {}", wheel.display()))?;
    let mut zip = zip::ZipArchive::new(file).with_context(|| format!("reading {}", wheel.display()))?;
    let (types_json, types_date) = read_gz_entry(&mut zip, MOTO_TYPES)?;
    let types: BTreeMap<String, Value> = serde_json::from_slice(&types_json).context(MOTO_TYPES)?;
    ensure!(types.len() > 500, "{MOTO_TYPES}: only {} instance types", types.len());

    let names: Vec<String> = zip
        .file_names()
        .filter_map(|n| n.ok().map(|n| n.to_string()))
        .filter(|n| n.starts_with(MOTO_OFFERINGS_DIR) && n.ends_with(".json.gz"))
        .collect();
    let mut offerings = BTreeMap::new();
    let mut offerings_date = String::new();
    for name in names {
        let region = name[MOTO_OFFERINGS_DIR.len()..].trim_end_matches(".json.gz").to_string();
        let (json, date) = read_gz_entry(&mut zip, &name)?;
        offerings_date = offerings_date.max(date);
        let records: Vec<Value> = serde_json::from_slice(&json).with_context(|| name.clone())?;
        let pairs = records
            .iter()
            .map(|r| match (r["InstanceType"].as_str(), r["Location"].as_str()) {
                (Some(t), Some(z)) => Ok((t.to_string(), z.to_string())),
                _ => Err(anyhow!("{name}: record without InstanceType/Location")),
            })
            .collect::<Result<Vec<_>>>()?;
        offerings.insert(region, pairs);
    }
    ensure!(offerings.len() >= 10, "only {} regions of offerings found in the wheel", offerings.len());
    Ok(Moto { types, types_date, offerings, offerings_date })
}

/// Reads and gunzips one wheel entry; also returns the entry's modification date (YYYY-MM-DD).
fn read_gz_entry(zip: &mut zip::ZipArchive<fs::File>, name: &str) -> Result<(Vec<u8>, String)> {
    let entry = zip.by_name(name).with_context(|| format!("{name} is not in the wheel"))?;
    let date = entry
        .last_modified()
        .map(|d| format!("{:04}-{:02}-{:02}", d.year(), d.month(), d.day()))
        .unwrap_or_else(|| "unknown".into());
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(entry).read_to_end(&mut out).with_context(|| format!("gunzip {name}"))?;
    Ok((out, date))
}

// ---------------------------------------------------------------------------------------------
// karpenter-provider-aws (Go module).

struct KarpenterModule {
    dir: PathBuf,
    /// The module version's publication time (YYYY-MM-DD), from the proxy's .info file.
    time: Option<String>,
}

/// For a module directory inside a Go module cache (`<cache>/github.com/aws/<module>@<version>`),
/// the version time recorded in that cache's `.info` file, if it is there.
fn module_time_near(dir: &Path, version: &str) -> Option<String> {
    let cache = dir.ancestors().nth(3)?;
    let info = cache.join("cache/download").join(KARPENTER_MODULE).join("@v").join(format!("{version}.info"));
    let v: Value = serde_json::from_str(&fs::read_to_string(info).ok()?).ok()?;
    v["Time"].as_str().map(|t| t.chars().take(10).collect())
}

fn read_text(path: &Path) -> Result<String> {
    fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// The date of a `// generated at 2026-07-06T14:20:29Z ...` or `// This file was generated at ...`
/// comment, as YYYY-MM-DD.
fn generated_at(src: &str) -> Option<String> {
    src.lines().filter(|l| l.trim_start().starts_with("//")).find_map(|l| {
        let rest = &l[l.find("generated at ")? + "generated at ".len()..];
        let date: String = rest.chars().take(10).collect();
        (date.len() == 10 && date.as_bytes()[4] == b'-' && date.as_bytes()[7] == b'-').then_some(date)
    })
}

/// Strips a trailing `// comment` (the literals never contain `//` inside strings).
fn strip_comment(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

/// Parses one line of `"key": value, "key": value,` pairs; errors on anything else.
fn parse_pairs(line: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        let body = rest.strip_prefix('"').ok_or_else(|| anyhow!("expected a quoted key in {line:?}"))?;
        let end = body.find('"').ok_or_else(|| anyhow!("unterminated key in {line:?}"))?;
        let key = &body[..end];
        let after = body[end + 1..].trim_start();
        let after = after.strip_prefix(':').ok_or_else(|| anyhow!("expected ':' after {key:?} in {line:?}"))?;
        let after = after.trim_start();
        let value_len = after.find(',').unwrap_or(after.len());
        let value = after[..value_len].trim();
        ensure!(!value.is_empty(), "empty value for {key:?} in {line:?}");
        out.push((key.to_string(), value.to_string()));
        rest = after[value_len..].trim_start_matches(',').trim();
    }
    Ok(out)
}

/// The entries of `"<region>": { ... }` inside `InitialOnDemandPricesAWS`.
fn parse_prices(src: &str, region: &str) -> Result<BTreeMap<String, f64>> {
    let opener = format!("\"{region}\": {{");
    let mut lines = src.lines().skip_while(|l| !l.contains("InitialOnDemandPricesAWS"));
    lines.find(|l| l.trim() == opener).ok_or_else(|| anyhow!("no {opener} block"))?;
    let mut prices = BTreeMap::new();
    for line in lines {
        let code = strip_comment(line).trim();
        if code.is_empty() {
            continue;
        }
        if code == "}," || code == "}" {
            ensure!(prices.len() > 500, "only {} prices for {region}", prices.len());
            return Ok(prices);
        }
        for (name, value) in parse_pairs(code)? {
            let price: f64 = value.parse().with_context(|| format!("price {value:?} of {name}"))?;
            ensure!(price.is_finite() && price >= 0.0, "bad price {value} for {name}");
            ensure!(prices.insert(name.clone(), price).is_none(), "duplicate price for {name}");
        }
    }
    bail!("unterminated {opener} block")
}

/// The numeric entries of `<var> = map[string]int64{ ... }`; commented-out entries are skipped.
fn parse_int_map(src: &str, var: &str) -> Result<BTreeMap<String, i64>> {
    let mut lines = src.lines();
    lines.find(|l| l.contains(var) && l.trim_end().ends_with('{')).ok_or_else(|| anyhow!("no {var} map"))?;
    let mut map = BTreeMap::new();
    for line in lines {
        let code = strip_comment(line).trim();
        if code.is_empty() {
            continue;
        }
        if code.starts_with('}') {
            ensure!(map.len() > 500, "only {} entries in {var}", map.len());
            return Ok(map);
        }
        for (name, value) in parse_pairs(code)? {
            let n: i64 = value.parse().with_context(|| format!("value {value:?} of {name}"))?;
            ensure!(map.insert(name.clone(), n).is_none(), "duplicate entry for {name}");
        }
    }
    bail!("unterminated {var} map")
}

#[derive(Debug, Clone, Copy)]
struct VpcLimits {
    ipv4: u32,
    trunking: bool,
    branch: u32,
}

/// The top-level scalar fields of each entry of `var Limits = map[string]*VPCLimits{ ... }`.
fn parse_vpc_limits(src: &str) -> Result<BTreeMap<String, VpcLimits>> {
    let mut lines = src.lines();
    lines.find(|l| l.trim_start().starts_with("var Limits ")).ok_or_else(|| anyhow!("no Limits map"))?;
    let mut out = BTreeMap::new();
    let mut current: Option<(String, BTreeMap<String, String>)> = None;
    let mut finish = |cur: Option<(String, BTreeMap<String, String>)>| -> Result<()> {
        if let Some((name, fields)) = cur {
            let get = |k: &str| fields.get(k).ok_or_else(|| anyhow!("{name}: no {k}"));
            let limits = VpcLimits {
                ipv4: get("IPv4PerInterface")?.parse()?,
                trunking: get("IsTrunkingCompatible")?.parse()?,
                branch: get("BranchInterface")?.parse()?,
            };
            ensure!(out.insert(name.clone(), limits).is_none(), "duplicate limits for {name}");
        }
        Ok(())
    };
    let mut depth = 0usize; // brace depth inside the current entry
    for line in lines {
        let code = strip_comment(line).trim();
        if code.is_empty() {
            continue;
        }
        if current.is_none() {
            if code == "}" {
                break;
            }
            let name = code
                .strip_suffix(": {")
                .and_then(|k| k.strip_prefix('"'))
                .and_then(|k| k.strip_suffix('"'))
                .ok_or_else(|| anyhow!("unexpected line in Limits: {line:?}"))?;
            current = Some((name.to_string(), BTreeMap::new()));
            depth = 1;
            continue;
        }
        let opens = code.matches('{').count();
        let closes = code.matches('}').count();
        if depth == 1 && opens == 0 && closes == 0 {
            let (key, value) = code.split_once(':').ok_or_else(|| anyhow!("unexpected line in Limits: {line:?}"))?;
            let value = value.trim().trim_end_matches(',').trim().trim_matches('"');
            if let Some((_, fields)) = current.as_mut() {
                fields.insert(key.trim().to_string(), value.to_string());
            }
        }
        depth = depth + opens - closes;
        if depth == 0 {
            finish(current.take())?;
        }
    }
    ensure!(current.is_none(), "unterminated Limits entry");
    ensure!(out.len() > 500, "only {} entries in Limits", out.len());
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Dates.

fn existing_generation_date(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v["provenance"]["generated_at"].as_str().map(String::from)
}

fn today_utc() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_literal_lines() {
        let pairs = parse_pairs(r#""a1.2xlarge": 0.204000, "a1.4xlarge": 0.408000,"#).unwrap();
        assert_eq!(pairs, vec![("a1.2xlarge".into(), "0.204000".into()), ("a1.4xlarge".into(), "0.408000".into())]);
        assert!(parse_pairs("Foo: 1,").is_err());
    }

    #[test]
    fn parses_vpc_limits() {
        let src = "var Limits = map[string]*VPCLimits{\n\t\"a1.large\": {\n\t\tInterface: 3,\n\t\tIPv4PerInterface: 10,\n\t\tIsTrunkingCompatible: true,\n\t\tBranchInterface: 9,\n\t\tNetworkCards: []NetworkCard{\n\t\t\t{\n\t\t\t\tMaximumNetworkInterfaces: 3,\n\t\t\t},\n\t\t},\n\t\tHypervisor: \"nitro\",\n\t},\n}\n";
        let err = parse_vpc_limits(src).unwrap_err().to_string();
        assert!(err.contains("only 1 entries"), "{err}");
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_000), (2024, 10, 4));
        assert_eq!(generated_at("// generated at 2026-07-06T14:20:29Z for us-east-1\n").as_deref(), Some("2026-07-06"));
        assert_eq!(sort_zone_ids(["a-az10", "a-az2", "a-az1"].map(String::from).into()), ["a-az1", "a-az2", "a-az10"]);
    }
}
