//! Browser adapter: exposes carpentry-core through wasm-bindgen. It translates and renders; the
//! Karpenter rules stay in carpentry-core.

use wasm_bindgen::prelude::*;

/// A JSON summary of the embedded EC2 catalogue (types, regions, zones, provenance), which the
/// placeholder playground page renders.
#[wasm_bindgen]
pub fn catalogue_summary() -> String {
    summary_json()
}

fn summary_json() -> String {
    let catalogue = carpentry_core::catalogue::Catalogue::embedded();
    let regions: Vec<serde_json::Value> = catalogue
        .regions()
        .map(|name| {
            let zones: Vec<&str> = catalogue.zones(name).unwrap_or_default().iter().map(|z| z.name.as_str()).collect();
            let offered =
                catalogue.infos().iter().filter(|it| !catalogue.offered_zones(name, &it.name).is_empty()).count();
            serde_json::json!({ "name": name, "zones": zones, "instanceTypes": offered })
        })
        .collect();
    serde_json::json!({
        "instanceTypes": catalogue.instance_type_count(),
        "provenance": catalogue
            .provenance()
            .inputs
            .iter()
            .map(|i| format!("{} {} ({})", i.package, i.version, i.registry))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
            .join(", "),
        "regions": regions,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn summary_lists_every_region_with_zones() {
        let summary: serde_json::Value = serde_json::from_str(&super::summary_json()).unwrap();
        let regions = summary["regions"].as_array().unwrap();
        assert_eq!(regions.len(), 30);
        assert!(regions.iter().all(|r| !r["zones"].as_array().unwrap().is_empty()));
        assert!(summary["instanceTypes"].as_u64().unwrap() > 1000);
    }
}
