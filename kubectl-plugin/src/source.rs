//! Where a command's cluster state comes from: the live cluster (`cluster`, list calls only) or
//! `--from-file` (a `snapshot` or manifests). Both end as the same [`Manifests`], so a command
//! answers the same on a cluster and on its snapshot.

use carpentry_core::catalogue::Catalogue;
use carpentry_core::manifest::scenario::{Scenario, DEFAULT_REGION};
use carpentry_core::manifest::Manifests;
use carpentry_core::state;

use crate::common::ReadArgs;
use crate::{input, Failure};

/// A cluster state, ready for the core.
pub struct ClusterState {
    /// Legacy objects converted; `scenario` set (start time = when the state was read, region).
    pub manifests: Manifests,
    /// A live read's objects that do not load (named on stderr when read, and in a snapshot).
    pub left_out: Vec<carpentry_core::Skipped>,
    pub catalogue: &'static Catalogue,
    /// Where prices come from: `embedded (generated DATE)` or the `--catalog` file; spot prices
    /// are synthetic either way.
    pub catalogue_source: String,
    /// Where it came from: `context NAME (SERVER)` or the files.
    pub source: String,
    /// Assumptions made reading it (conversions, the region's origin), for stderr.
    pub notes: Vec<String>,
    /// The namespace a pod name without `-n` is looked up in: the kubeconfig context's, else
    /// `default`.
    pub default_namespace: String,
}

impl ClusterState {
    pub fn region(&self) -> &str {
        self.manifests.scenario.as_ref().map_or(DEFAULT_REGION, |s| s.spec.region.as_str())
    }
}

/// Reads the state the flags name.
pub fn read(common: &ReadArgs) -> Result<ClusterState, Failure> {
    let catalogue = catalogue(common)?;
    let mut default_namespace = "default".to_string();
    let mut left_out = Vec::new();
    let (mut manifests, source, start) = if common.from_file.is_empty() {
        let live = crate::cluster::read_live(common)?;
        default_namespace = live.default_namespace;
        left_out = live.left_out;
        (live.manifests, live.source, Some(live.read_at))
    } else {
        let mut manifests = Manifests::default();
        for file in &common.from_file {
            let m = input::load(file)?;
            manifests.merge(m).map_err(|e| Failure::Input(format!("{file}: {e}")))?;
        }
        (manifests, common.from_file.join(", "), None)
    };
    let mut notes: Vec<String> = manifests.convert_legacy().into_iter().map(|n| n.on_load()).collect();
    // The region: the flag, else the file's Scenario's (`snapshot` writes one), else the nodes'
    // label, else the default (core's rule), chosen before a default Scenario is added below.
    let region = state::choose_region(&manifests, common.region.as_deref());
    if region.source == state::RegionSource::Default {
        notes.push(format!(
            "no node has a {} label: using {DEFAULT_REGION} (--region to choose)",
            carpentry_core::labels::TOPOLOGY_REGION
        ));
    }
    let region = region.region;
    let scenario = manifests.scenario.get_or_insert_with(|| Scenario {
        api_version: "carpentry.dev/v1alpha1".into(),
        kind: "Scenario".into(),
        metadata: None,
        spec: Default::default(),
    });
    match start {
        Some(start) => scenario.spec.start_time = Some(start),
        // A file without a start time (a `kubectl get -o yaml` dump): explained as of now, so that
        // its timestamps (creation, last pod event, drift) keep their age.
        None if scenario.spec.start_time.is_none() => {
            let now = now_rfc3339();
            notes.push(format!("the input has no Scenario startTime: explained as of now ({now})"));
            scenario.spec.start_time = Some(now);
        }
        None => {}
    }
    if catalogue.zones(&region).is_none() {
        return Err(Failure::Input(format!(
            "region {region:?} is not in the catalogue (it has: {})",
            catalogue.regions().collect::<Vec<_>>().join(", ")
        )));
    }
    if let Some(s) = manifests.scenario.as_mut() {
        s.spec.region = region;
    }
    let catalogue_source = match &common.catalog {
        Some(path) => format!("{} (generated {})", path.display(), catalogue.provenance().generated_at),
        None => format!("embedded (generated {})", catalogue.provenance().generated_at),
    };
    Ok(ClusterState { manifests, catalogue, catalogue_source, source, notes, default_namespace, left_out })
}

/// The current UTC time, RFC 3339 in whole seconds (the adapter's clock; core has none).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    carpentry_core::api::time::format_time(secs as i64)
}

fn catalogue(common: &ReadArgs) -> Result<&'static Catalogue, Failure> {
    let Some(path) = &common.catalog else { return Ok(Catalogue::embedded()) };
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Input(format!("--catalog {}: cannot read it: {e}", path.display())))?;
    let catalogue = Catalogue::from_json(&text)
        .map_err(|e| Failure::Input(format!("--catalog {}: not a catalogue: {e}", path.display())))?;
    // One catalogue per process, used until it exits.
    Ok(Box::leak(Box::new(catalogue)))
}
