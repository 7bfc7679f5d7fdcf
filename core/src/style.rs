//! How the text renderers mark what passed, what failed and what needs a look, so that an adapter
//! can colour core's text (ANSI in the plugin, classes in a page) without parsing it.
//!
//! Every `render_*` function in core writes plain text; the `*_styled` variants take a [`Style`]
//! and pass each marked span through it. [`Plain`] leaves the text as it is.

/// What a span of rendered text says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A check that passed, a pod that runs.
    Pass,
    /// A check that failed, a pod that cannot schedule.
    Fail,
    /// Something that may change on its own, or that the user should look at.
    Warn,
    /// A name or headline.
    Strong,
}

/// Turns a marked span into what the adapter prints.
pub trait Style {
    fn mark(&self, mark: Mark, text: &str) -> String;
}

/// No styling: the span as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plain;

impl Style for Plain {
    fn mark(&self, _mark: Mark, text: &str) -> String {
        text.to_string()
    }
}
