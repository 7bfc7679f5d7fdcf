//! Printing answers: JSON or YAML of the documented shapes, and ANSI colour for text when asked.

use serde::Serialize;

use crate::common::Output;
use crate::Failure;

/// Prints `value` as JSON (pretty) or YAML.
pub fn structured(value: &impl Serialize, output: Output) -> Result<(), Failure> {
    let text = match output {
        Output::Yaml => serde_yaml::to_string(value).map_err(|e| Failure::Other(e.into()))?,
        _ => serde_json::to_string_pretty(value).map_err(|e| Failure::Other(e.into()))? + "\n",
    };
    print!("{text}");
    Ok(())
}

/// ANSI colour, or plain text when colour is off.
#[derive(Clone, Copy)]
pub struct Paint {
    on: bool,
}

impl Paint {
    pub fn new(on: bool) -> Paint {
        Paint { on }
    }

    fn wrap(&self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    pub fn good(&self, text: &str) -> String {
        self.wrap("32", text)
    }

    pub fn bad(&self, text: &str) -> String {
        self.wrap("31", text)
    }

    pub fn warn(&self, text: &str) -> String {
        self.wrap("33", text)
    }

    pub fn bold(&self, text: &str) -> String {
        self.wrap("1", text)
    }

    /// The first line of a block in bold.
    pub fn headline(&self, block: &str) -> String {
        match block.split_once('\n') {
            Some((first, rest)) => format!("{}\n{rest}", self.bold(first)),
            None => self.bold(block),
        }
    }
}

/// Core's marks in the plugin's colours.
impl carpentry_core::style::Style for Paint {
    fn mark(&self, mark: carpentry_core::style::Mark, text: &str) -> String {
        use carpentry_core::style::Mark;
        match mark {
            Mark::Pass => self.good(text),
            Mark::Fail => self.bad(text),
            Mark::Warn => self.warn(text),
            Mark::Strong => self.bold(text),
        }
    }
}
