//! Share links: a recording in the URL fragment, deflated and base64url-encoded, so a link holds
//! the whole scenario and nothing is sent to a server (fragments never are).

use base64::Engine as _;

use crate::replay::Recording;

/// The fragment's key: `#s=<payload>`.
pub const FRAGMENT_KEY: &str = "s=";
/// A decoded recording larger than this is refused (a link is not a way to exhaust memory).
const MAX_DECODED: usize = 16 << 20;

pub fn encode(recording: &Recording) -> String {
    let json = serde_json::to_vec(recording).unwrap_or_default();
    let deflated = miniz_oxide::deflate::compress_to_vec(&json, 9);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(deflated)
}

pub fn decode(payload: &str) -> Result<Recording, String> {
    let deflated = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim())
        .map_err(|e| format!("the share link is damaged (base64: {e})"))?;
    let json = miniz_oxide::inflate::decompress_to_vec_with_limit(&deflated, MAX_DECODED)
        .map_err(|e| format!("the share link is damaged (deflate: {e:?})"))?;
    serde_json::from_slice(&json).map_err(|e| format!("the share link is damaged (content: {e})"))
}

/// The recording in a URL fragment (`#s=…`), if there is one.
pub fn from_fragment(fragment: &str) -> Option<Result<Recording, String>> {
    let fragment = fragment.trim_start_matches('#');
    fragment.strip_prefix(FRAGMENT_KEY).map(decode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::ActionKind;
    use carpentry_core::manifest::scenario::{DeleteAction, Step};

    #[test]
    fn a_recording_round_trips_and_compresses() {
        let mut r = Recording::new(crate::examples::by_id("thousand-pods").unwrap().yaml.to_string(), None);
        let delete = DeleteAction { kind: "Deployment".into(), namespace: None, name: "api".into() };
        r.record(1_000, ActionKind::Act(Step::delete("0s", delete)));
        r.now_ms = 90_000;
        let link = encode(&r);
        assert!(link.len() < r.yaml.len() / 3, "{} vs {}", link.len(), r.yaml.len());
        assert!(link.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(from_fragment(&format!("#s={link}")).unwrap().unwrap(), r);
        assert!(from_fragment("#other").is_none());
    }

    #[test]
    fn damaged_links_are_errors() {
        assert!(decode("!!!").unwrap_err().contains("base64"));
        assert!(decode("AAAA").unwrap_err().contains("deflate"));
        let not_a_recording =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(miniz_oxide::deflate::compress_to_vec(b"[1]", 6));
        assert!(decode(&not_a_recording).unwrap_err().contains("content"));
    }
}
