//! Static assets of the browser playground. Until the playground issue lands this is a single
//! page that loads carpentry-core as wasm and shows what the embedded catalogue holds.

/// The placeholder playground page, served by `cargo xtask play` next to the wasm bundle.
pub const INDEX_HTML: &str = include_str!("../static/index.html");
