//! The resources an adapter reads from an API server for [`super::load_from_api_server`] (the plugin
//! lists them, the controller watches them), and the text the loader reads them as.

use serde_json::Value;

/// A resource an adapter reads from an API server, cluster-wide (listed by the plugin, watched by the
/// controller), for [`super::load_from_api_server`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedResource {
    /// API group, `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    /// A Karpenter CRD (missing means Karpenter is not installed), not a built-in type.
    pub karpenter: bool,
}

impl ListedResource {
    const fn new(group: &'static str, kind: &'static str, plural: &'static str, karpenter: bool) -> ListedResource {
        ListedResource { group, version: "v1", kind, plural, karpenter }
    }

    /// `nodepools.karpenter.sh`, or `pods` for the core group (as kubectl names them).
    pub fn name(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The collection's path on the API server.
    pub fn path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}/{}", self.version, self.plural)
        } else {
            format!("/apis/{}/{}/{}", self.group, self.version, self.plural)
        }
    }

    /// The ClusterRole rule that allows listing it.
    pub fn rule(&self) -> String {
        let group = if self.group.is_empty() { "\"\"" } else { self.group };
        format!("{{apiGroups: [{group}], resources: [{}], verbs: [list]}}", self.plural)
    }

    /// An object of this resource as the API server returned it (a list item, a watch event's
    /// object), ready for the loader: `apiVersion` and `kind` set (list items lack them) and
    /// first, `metadata.managedFields` gone.
    pub fn prepare(&self, item: Value) -> Value {
        let Value::Object(mut map) = item else { return item };
        map.insert("apiVersion".into(), Value::String(self.api_version()));
        map.insert("kind".into(), Value::String(self.kind.into()));
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            meta.remove("managedFields");
        }
        // Keep apiVersion and kind first, as written manifests have them.
        let mut ordered = serde_json::Map::with_capacity(map.len());
        for key in ["apiVersion", "kind", "metadata"] {
            if let Some(v) = map.remove(key) {
                ordered.insert(key.into(), v);
            }
        }
        ordered.extend(map);
        Value::Object(ordered)
    }
}

/// Everything the adapters read, in the order the objects are loaded.
pub const LISTED_RESOURCES: [ListedResource; 12] = [
    ListedResource::new("karpenter.sh", "NodePool", "nodepools", true),
    ListedResource::new("karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses", true),
    ListedResource::new("karpenter.sh", "NodeClaim", "nodeclaims", true),
    ListedResource::new("", "Node", "nodes", false),
    ListedResource::new("apps", "DaemonSet", "daemonsets", false),
    ListedResource::new("policy", "PodDisruptionBudget", "poddisruptionbudgets", false),
    ListedResource::new("storage.k8s.io", "StorageClass", "storageclasses", false),
    ListedResource::new("", "PersistentVolume", "persistentvolumes", false),
    ListedResource::new("", "PersistentVolumeClaim", "persistentvolumeclaims", false),
    ListedResource::new("storage.k8s.io", "CSINode", "csinodes", false),
    ListedResource::new("storage.k8s.io", "VolumeAttachment", "volumeattachments", false),
    ListedResource::new("", "Pod", "pods", false),
];

/// One multi-document text of objects written as JSON (JSON is YAML: one compact document each),
/// for [`super::load_from_api_server`].
pub fn api_documents<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let mut text = String::new();
    for item in items {
        if !text.is_empty() {
            text.push_str("---\n");
        }
        text.push_str(item);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(plural: &str) -> ListedResource {
        *LISTED_RESOURCES.iter().find(|r| r.plural == plural).unwrap()
    }

    #[test]
    fn items_get_their_type_and_lose_managed_fields() {
        let item = serde_json::json!({"metadata": {"name": "n", "managedFields": [{}]}, "spec": {}});
        let v = resource("nodes").prepare(item);
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["kind"], "Node");
        assert!(v["metadata"].get("managedFields").is_none());
        assert_eq!(v.as_object().unwrap().keys().next().unwrap(), "apiVersion");
        assert_eq!(resource("poddisruptionbudgets").path(), "/apis/policy/v1/poddisruptionbudgets");
        assert_eq!(resource("pods").path(), "/api/v1/pods");
        assert_eq!(resource("nodepools").name(), "nodepools.karpenter.sh");
        assert_eq!(api_documents(["{}", "{\"a\":1}"]), "{}\n---\n{\"a\":1}\n");
    }
}
