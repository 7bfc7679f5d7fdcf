//! Label keys: interned for the well-known ones (`'static`), reference-counted otherwise, so that
//! cloning a requirement costs a reference-count increment at most.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use crate::labels;

/// A label key: a `'static` string for the keys carpentry knows ([`labels::static_key`]), so
/// cloning and dropping one costs nothing, or a reference-counted copy of any other key.
/// Compares, hashes and prints as the string.
#[derive(Clone)]
pub enum Key {
    Static(&'static str),
    Shared(Arc<str>),
}

impl Key {
    pub fn new(key: &str) -> Key {
        match labels::static_key(key) {
            Some(known) => Key::Static(known),
            None => Key::Shared(Arc::from(key)),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Key::Static(s) => s,
            Key::Shared(s) => s,
        }
    }
}

impl From<&str> for Key {
    fn from(key: &str) -> Key {
        Key::new(key)
    }
}

impl Deref for Key {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Key {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
