//! YAML (and JSON, which is YAML) documents read into JSON values plus a field-path → position
//! index, so that every later error — a type mismatch, an unknown field, a failed validation rule —
//! can name the line and column the user wrote it on.
//!
//! Scalars are typed as the Kubernetes YAML reader types them: plain `true`/`false`, `null`/`~`/
//! empty, integers and floats become JSON booleans, null and numbers; quoted scalars stay strings.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A position in the input text, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// One parsed document: its value, where it starts, and where each field path sits.
#[derive(Debug, Clone)]
pub struct Document {
    /// 1-based index of the document in the stream.
    pub index: usize,
    pub start: Position,
    pub value: Value,
    /// `spec.template.spec.requirements[0].key` → position of that key (or sequence item).
    pub positions: HashMap<String, Position>,
}

impl Document {
    /// The position of `path`, or of its nearest ancestor that was written in the input.
    pub fn locate(&self, path: &str) -> Position {
        // Validation names map keys `labels["a/b"]`; positions are keyed as the loader walked them
        // (`labels.a/b`).
        let dotted = dotted_keys(path);
        let mut path = dotted.as_deref().unwrap_or(path);
        loop {
            if let Some(p) = self.positions.get(path) {
                return *p;
            }
            match parent_path(path) {
                Some(parent) => path = parent,
                None => return self.start,
            }
        }
    }
}

/// `a.labels["k"].c` → `a.labels.k.c` (a JSON string key, as `{:?}` writes it); `None` when the
/// path has no such key.
fn dotted_keys(path: &str) -> Option<String> {
    if !path.contains("[\"") {
        return None;
    }
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(open) = rest.find("[\"") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        // The quoted key runs to the first unescaped quote.
        let mut end = None;
        let mut escaped = false;
        for (i, c) in after.char_indices().skip(1) {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let end = end?;
        let key: String = serde_json::from_str(&after[..=end]).ok()?;
        out.push('.');
        out.push_str(&key);
        rest = after[end + 1..].strip_prefix(']')?;
    }
    out.push_str(rest);
    Some(out)
}

/// `a.b[2].c` → `a.b[2]` → `a.b` → `a` → None.
fn parent_path(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let cut = path.rfind(['.', '[']).unwrap_or(0);
    Some(&path[..cut])
}

/// Joins a map key onto a path the way serde_path_to_error prints paths.
pub fn child_key(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Joins a sequence index onto a path.
pub fn child_index(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

/// A YAML syntax or structure error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// The document the error is in (1-based).
    pub document: usize,
    pub position: Position,
    pub message: String,
}

/// Parses a multi-document stream. Empty documents are dropped.
#[cfg(test)]
pub fn parse_documents(text: &str) -> Result<Vec<Document>, SyntaxError> {
    let mut documents = Vec::new();
    each_document(text, &mut |d| documents.push(d))?;
    Ok(documents)
}

/// Parses a multi-document stream, handing each non-empty document to `sink` as soon as it is
/// read (a large snapshot is never held as values and positions all at once). On a syntax error
/// the documents already handed over are followed by the error.
pub fn each_document(text: &str, sink: &mut dyn FnMut(Document)) -> Result<(), SyntaxError> {
    let mut builder = Builder::new(sink);
    let mut parser = Parser::new_from_str(text);
    if let Err(e) = parser.load(&mut builder, true) {
        let marker = e.marker();
        return Err(SyntaxError {
            document: builder.count + usize::from(builder.in_document),
            position: position(marker),
            message: e.info().to_string(),
        });
    }
    match builder.error {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

fn position(m: &Marker) -> Position {
    // yaml-rust2 markers: 1-based lines, 0-based columns.
    Position { line: m.line(), column: m.col() + 1 }
}

enum Frame {
    Seq { items: Vec<Value>, path: String, anchor: usize },
    Map { map: Map<String, Value>, path: String, anchor: usize, pending_key: Option<String> },
}

struct Builder<'a> {
    /// Documents finished so far.
    count: usize,
    sink: &'a mut dyn FnMut(Document),
    in_document: bool,
    start: Option<Position>,
    stack: Vec<Frame>,
    root: Option<Value>,
    positions: HashMap<String, Position>,
    anchors: BTreeMap<usize, Value>,
    error: Option<SyntaxError>,
}

impl<'a> Builder<'a> {
    fn new(sink: &'a mut dyn FnMut(Document)) -> Builder<'a> {
        Builder {
            count: 0,
            sink,
            in_document: false,
            start: None,
            stack: Vec::new(),
            root: None,
            positions: HashMap::new(),
            anchors: BTreeMap::new(),
            error: None,
        }
    }

    fn document_index(&self) -> usize {
        self.count + 1
    }

    fn fail(&mut self, mark: &Marker, message: String) {
        if self.error.is_none() {
            self.error = Some(SyntaxError { document: self.document_index(), position: position(mark), message });
        }
    }

    /// Places a new node: records a sequence item's position; `None` when the node is a mapping
    /// key. (The path string is built only for containers, in [`Builder::new_node_path`]: most
    /// nodes are scalars, and a discarded path per scalar was a large part of loading a snapshot.)
    fn place_new_node(&mut self, mark: &Marker) -> Option<()> {
        match self.stack.last() {
            None => Some(()),
            Some(Frame::Seq { items, path, .. }) => {
                let p = child_index(path, items.len());
                self.positions.entry(p).or_insert(position(mark));
                Some(())
            }
            Some(Frame::Map { pending_key: Some(_), .. }) => Some(()),
            Some(Frame::Map { pending_key: None, .. }) => None,
        }
    }

    /// The path of the node just placed by [`Builder::place_new_node`].
    fn new_node_path(&self) -> String {
        match self.stack.last() {
            Some(Frame::Seq { items, path, .. }) => child_index(path, items.len()),
            Some(Frame::Map { pending_key: Some(key), path, .. }) => child_key(path, key),
            _ => String::new(),
        }
    }

    /// [`Builder::place_new_node`] with the path, for a container.
    fn path_for_new_node(&mut self, mark: &Marker) -> Option<String> {
        self.place_new_node(mark)?;
        Some(self.new_node_path())
    }

    fn finish_node(&mut self, value: Value, anchor: usize, mark: &Marker) {
        if anchor > 0 {
            self.anchors.insert(anchor, value.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, pending_key, path, .. }) => {
                let key = pending_key.take().unwrap_or_default();
                let duplicate = map.contains_key(&key).then(|| {
                    format!(
                        "duplicate key {:?} in {}",
                        key,
                        if path.is_empty() { "the document" } else { path.as_str() }
                    )
                });
                map.insert(key, value);
                if let Some(msg) = duplicate {
                    self.fail(mark, msg);
                }
            }
        }
    }

    fn on_scalar(&mut self, text: String, style: TScalarStyle, anchor: usize, tag: Option<Tag>, mark: &Marker) {
        match self.place_new_node(mark) {
            Some(_) => {
                let value = typed_scalar(text, style, tag.as_ref());
                self.finish_node(value, anchor, mark);
            }
            None => {
                // A mapping key.
                let Some(Frame::Map { path, pending_key, .. }) = self.stack.last_mut() else { unreachable!() };
                let p = child_key(path, &text);
                *pending_key = Some(text);
                self.positions.entry(p).or_insert(position(mark));
            }
        }
    }
}

fn typed_scalar(text: String, style: TScalarStyle, tag: Option<&Tag>) -> Value {
    if style != TScalarStyle::Plain {
        return Value::String(text);
    }
    if let Some(tag) = tag {
        if tag.suffix == "str" || tag.suffix.ends_with(":str") {
            return Value::String(text);
        }
    }
    match text.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Some(n) = parse_int(&text) {
        return Value::Number(n);
    }
    if looks_like_float(&text) {
        if let Some(n) = text.parse::<f64>().ok().and_then(Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(text)
}

fn parse_int(text: &str) -> Option<Number> {
    let (neg, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(h) = digits.strip_prefix("0x") {
        (16, h)
    } else if let Some(o) = digits.strip_prefix("0o") {
        (8, o)
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if neg {
        let v = i64::try_from(magnitude).ok()?;
        Some(Number::from(-v))
    } else {
        Some(Number::from(magnitude))
    }
}

fn looks_like_float(text: &str) -> bool {
    // YAML 1.2 core schema floats: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((i, f)) => {
            (!i.is_empty() || !f.is_empty())
                && i.chars().all(|c| c.is_ascii_digit())
                && f.chars().all(|c| c.is_ascii_digit())
        }
        None => !mantissa.is_empty() && mantissa.chars().all(|c| c.is_ascii_digit()),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

impl MarkedEventReceiver for Builder<'_> {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        match ev {
            Event::DocumentStart => {
                self.in_document = true;
                // An implicit document's start mark lies after its first scalar; the line is
                // right, the column is not, and a document always starts a line.
                self.start = Some(Position { line: mark.line(), column: 1 });
                self.positions.clear();
                self.anchors.clear();
                self.root = None;
            }
            Event::DocumentEnd => {
                self.in_document = false;
                let index = self.document_index();
                let start = self.start.take().unwrap_or(Position { line: 1, column: 1 });
                self.count += 1;
                let value = self.root.take().unwrap_or(Value::Null);
                let positions = std::mem::take(&mut self.positions);
                if !value.is_null() {
                    (self.sink)(Document { index, start, value, positions });
                }
            }
            Event::Scalar(text, style, anchor, tag) => self.on_scalar(text, style, anchor, tag, &mark),
            Event::Alias(anchor) => {
                let value = self.anchors.get(&anchor).cloned();
                match (value, self.place_new_node(&mark)) {
                    (Some(v), Some(_)) => self.finish_node(v, 0, &mark),
                    (Some(Value::String(key)), None) => self.on_scalar(key, TScalarStyle::Plain, 0, None, &mark),
                    (Some(_), None) => self.fail(&mark, "an alias used as a mapping key must name a string".into()),
                    (None, _) => self.fail(&mark, format!("unknown alias *{anchor}")),
                }
            }
            Event::SequenceStart(anchor, _) => match self.path_for_new_node(&mark) {
                Some(path) => self.stack.push(Frame::Seq { items: Vec::new(), path, anchor }),
                None => self.fail(&mark, "a sequence cannot be a mapping key".into()),
            },
            Event::MappingStart(anchor, _) => match self.path_for_new_node(&mark) {
                Some(path) => {
                    // The root is located by the document start (a block mapping's start mark
                    // lies after its first key).
                    if !path.is_empty() {
                        self.positions.entry(path.clone()).or_insert(position(&mark));
                    }
                    self.stack.push(Frame::Map { map: Map::new(), path, anchor, pending_key: None })
                }
                None => self.fail(&mark, "a mapping cannot be a mapping key".into()),
            },
            Event::SequenceEnd => {
                if let Some(Frame::Seq { items, anchor, .. }) = self.stack.pop() {
                    self.finish_node(Value::Array(items), anchor, &mark);
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map { map, anchor, .. }) = self.stack.pop() {
                    self.finish_node(Value::Object(map), anchor, &mark);
                }
            }
            Event::StreamStart | Event::StreamEnd | Event::Nothing => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_map_key_is_located_on_its_own_line() {
        let text = "spec:\n  labels:\n    team: a\n    karpenter.sh/x\\\"y: b\n";
        let doc = parse_documents(text).unwrap().remove(0);
        assert_eq!(doc.locate(r#"spec.labels["team"]"#).line, 3);
        assert_eq!(doc.locate(r#"spec.labels["karpenter.sh/x\\\"y"]"#).line, 4);
        // A key not written, or a path that is not a quoted key: the nearest ancestor.
        assert_eq!(doc.locate(r#"spec.labels["other"]"#).line, 2);
        assert_eq!(doc.locate(r#"spec.labels["unterminated"#).line, 2);
        assert_eq!(dotted_keys("spec.taints[0].key"), None);
    }

    #[test]
    fn splits_documents_and_records_positions() {
        let text = "a: 1\nb:\n  c: [x, y]\n---\n---\nkind: Pod\nlist:\n- name: n\n  v: \"5\"\n";
        let docs = parse_documents(text).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].index, 1);
        assert_eq!(docs[1].index, 3, "the empty middle document keeps its number");
        assert_eq!(docs[0].value, serde_json::json!({"a": 1, "b": {"c": ["x", "y"]}}));
        assert_eq!(docs[0].positions["b.c"], Position { line: 3, column: 3 });
        assert_eq!(docs[0].positions["b.c[1]"], Position { line: 3, column: 10 });
        assert_eq!(docs[1].value["list"][0]["v"], serde_json::json!("5"));
        assert_eq!(docs[1].positions["list[0].v"], Position { line: 9, column: 3 });
        assert_eq!(docs[1].locate("list[0].v.deeper[3]"), Position { line: 9, column: 3 });
    }

    #[test]
    fn types_scalars_like_kubernetes() {
        let docs =
            parse_documents("a: true\nb: '1'\nc: 1.5\nd: ~\ne: 0x10\nf: 1Gi\ng: -3\nh: !!str 5\ni: .5\n").unwrap();
        let v = &docs[0].value;
        assert_eq!(v["a"], Value::Bool(true));
        assert_eq!(v["b"], Value::String("1".into()));
        assert_eq!(v["c"], serde_json::json!(1.5));
        assert_eq!(v["d"], Value::Null);
        assert_eq!(v["e"], serde_json::json!(16));
        assert_eq!(v["f"], Value::String("1Gi".into()));
        assert_eq!(v["g"], serde_json::json!(-3));
        assert_eq!(v["h"], Value::String("5".into()));
        assert_eq!(v["i"], serde_json::json!(0.5));
    }

    #[test]
    fn reads_json_and_anchors() {
        let docs = parse_documents(r#"{"kind": "List", "items": [{"a": 1}]}"#).unwrap();
        assert_eq!(docs[0].value["items"][0]["a"], serde_json::json!(1));
        let docs = parse_documents("base: &b {x: 1}\ncopy: *b\n").unwrap();
        assert_eq!(docs[0].value["copy"], serde_json::json!({"x": 1}));
    }

    #[test]
    fn reports_syntax_errors_with_document_and_line() {
        let err = parse_documents("a: 1\n---\nb: [1, 2\nc: 3\n").unwrap_err();
        assert_eq!(err.document, 2);
        assert!(err.position.line >= 3, "{err:?}");
        let err = parse_documents("a: 1\na: 2\n").unwrap_err();
        assert!(err.message.contains("duplicate key \"a\""), "{err:?}");
        assert_eq!(err.position.line, 2);
    }
}
