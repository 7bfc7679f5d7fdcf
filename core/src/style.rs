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

/// Serialises a typed reason as its rendered text: the JSON shape reasons had when they were
/// strings, which the playground, the plugin's `--output json` and saved recordings read.
/// Use with `#[serde(serialize_with = "crate::style::as_text")]`.
pub(crate) fn as_text<T: std::fmt::Display, S: serde::Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

/// [`as_text`] for an optional reason: `null` when there is none.
pub(crate) fn option_as_text<T: std::fmt::Display, S: serde::Serializer>(
    value: &Option<T>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => serializer.collect_str(value),
        None => serializer.serialize_none(),
    }
}
