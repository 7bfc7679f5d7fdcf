//! The browser playground: a yew UI over carpentry-wasm's session. Translation and rendering only:
//! every decision (scheduling, disruption, explanations, prices) comes from carpentry-core.
//!
//! - `examples`: the gallery; `replay`: the recording (scenario + actions) that rebuilds any moment;
//!   `share`: the recording in a URL fragment; `app`: the page; `view`: formatting helpers.

pub mod app;
pub mod examples;
pub mod replay;
pub mod share;
pub mod view;

/// The JavaScript `Playground` class (the engine without the UI), for scripts and the browser tests.
pub use carpentry_wasm::Playground;

use wasm_bindgen::prelude::*;

/// Renders the app into `#app` once the module is loaded.
#[wasm_bindgen(start)]
pub fn start() {
    #[cfg(target_arch = "wasm32")]
    {
        let root = gloo::utils::document().get_element_by_id("app").expect("index.html has #app");
        yew::Renderer::<app::App>::with_root(root).render();
    }
}
