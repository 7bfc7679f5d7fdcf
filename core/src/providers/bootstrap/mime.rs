//! MIME multi-part archives as EC2 user data carries them (upstream
//! `pkg/providers/amifamily/bootstrap/mime/mime.go` and the archive handling of `eksbootstrap.go`,
//! which read with Go's `net/mail` + `mime/multipart` and write with `multipart.Writer`, the
//! boundary `//`, carriage returns removed).
//!
//! Reading follows Go's reader where a user's archive can differ: the message headers end at the
//! first empty line, `Content-Type` must be `multipart/*` with a `boundary` parameter (quoted or
//! not), text before the first delimiter line is ignored, a delimiter line is `--<boundary>` (or
//! `--<boundary>--` for the last) with trailing blanks allowed, the line break before a delimiter
//! belongs to it, and each part's headers end at its first empty line. The closing delimiter may
//! be missing (Go's reader stops at the end of the text), but a part must end with a delimiter.

use super::BootstrapError;

/// The boundary upstream writes.
pub const BOUNDARY: &str = "//";
pub const CONTENT_TYPE_SHELL_SCRIPT: &str = "text/x-shellscript; charset=\"us-ascii\"";
/// `application/` + nodeadm's API group.
pub const CONTENT_TYPE_NODE_CONFIG: &str = "application/node.eks.aws";

/// One part: its headers (canonical keys, in the order read) and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub headers: Vec<(String, String)>,
    pub content: String,
}

impl Part {
    /// A part with only a `Content-Type` header.
    pub fn typed(content_type: &str, content: &str) -> Part {
        Part { headers: vec![("Content-Type".into(), content_type.into())], content: content.into() }
    }

    /// Its `Content-Type` header, or `""`.
    pub fn content_type(&self) -> &str {
        self.headers.iter().find(|(k, _)| k == "Content-Type").map_or("", |(_, v)| v.as_str())
    }
}

/// Whether `text` is meant as a MIME archive (upstream: it starts, blanks aside, with
/// `MIME-Version:` or `Content-Type:`).
pub fn is_mime(text: &str) -> bool {
    let t = text.trim();
    t.starts_with("MIME-Version:") || t.starts_with("Content-Type:")
}

/// Go's `textproto.CanonicalMIMEHeaderKey`: `content-type` → `Content-Type`.
fn canonical_key(key: &str) -> String {
    let mut upper = true;
    key.chars()
        .map(|c| {
            let out = if upper { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() };
            upper = c == '-';
            out
        })
        .collect()
}

/// Lines with their line breaks, the break removed: (`text`, `break`).
fn lines(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.split_inclusive('\n').map(|line| {
        let body = line.trim_end_matches('\n').trim_end_matches('\r');
        (body, &line[body.len()..])
    })
}

/// Header lines up to the first empty one: (headers, the rest of `text`). A line that starts with
/// a blank continues the header before it.
fn read_headers(text: &str, what: &str) -> Result<(Vec<(String, String)>, usize), BootstrapError> {
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut offset = 0;
    for (line, eol) in lines(text) {
        offset += line.len() + eol.len();
        if line.is_empty() {
            return Ok((headers, offset));
        }
        if line.starts_with([' ', '\t']) {
            let Some((_, value)) = headers.last_mut() else {
                return Err(BootstrapError::user_data(format!("{what}: a header line starts with a blank: {line:?}")));
            };
            value.push(' ');
            value.push_str(line.trim());
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(BootstrapError::user_data(format!("{what}: {line:?} is not a `Name: value` header line")));
        };
        if key.is_empty() || key.contains([' ', '\t']) {
            return Err(BootstrapError::user_data(format!("{what}: {key:?} is not a header name")));
        }
        headers.push((canonical_key(key), value.trim().to_string()));
    }
    Err(BootstrapError::user_data(format!("{what}: the headers are not followed by an empty line")))
}

/// The `boundary` parameter of a `multipart/*` content type.
fn boundary_of(content_type: &str) -> Result<String, BootstrapError> {
    let mut params = content_type.split(';');
    let media = params.next().unwrap_or_default().trim().to_ascii_lowercase();
    if !media.starts_with("multipart/") {
        return Err(BootstrapError::user_data(format!(
            "the archive's Content-Type is {content_type:?}, not multipart"
        )));
    }
    for param in params {
        if let Some((name, value)) = param.split_once('=') {
            if name.trim().eq_ignore_ascii_case("boundary") {
                let value = value.trim();
                let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
                if !value.is_empty() {
                    return Ok(value.to_string());
                }
            }
        }
    }
    Err(BootstrapError::user_data(format!("the archive's Content-Type {content_type:?} has no boundary")))
}

/// The parts of the MIME multi-part archive `text`.
pub fn parse(text: &str) -> Result<Vec<Part>, BootstrapError> {
    let (headers, body_at) = read_headers(text, "the archive's headers")?;
    let content_type = headers
        .iter()
        .find(|(k, _)| k == "Content-Type")
        .map(|(_, v)| v.as_str())
        .ok_or_else(|| BootstrapError::user_data("the archive has no Content-Type header".into()))?;
    let boundary = boundary_of(content_type)?;
    let delimiter = format!("--{boundary}");
    let closing = format!("--{boundary}--");
    let body = &text[body_at..];
    let mut parts = Vec::new();
    // The text of the part being read (from just after the delimiter line), if one is open.
    let mut open: Option<usize> = None;
    let mut offset = 0;
    for (line, eol) in lines(body) {
        let start = offset;
        offset += line.len() + eol.len();
        let trimmed = line.trim_end_matches([' ', '\t']);
        let is_last = trimmed == closing;
        if trimmed != delimiter && !is_last {
            continue;
        }
        if let Some(from) = open.take() {
            // The line break before the delimiter belongs to it.
            let raw = &body[from..start];
            let raw = raw.strip_suffix('\n').map_or(raw, |r| r.strip_suffix('\r').unwrap_or(r));
            parts.push(part(raw, parts.len() + 1)?);
        }
        if is_last {
            return Ok(parts);
        }
        open = Some(offset);
    }
    // Go's reader ends an archive at the end of the text, closing delimiter or not, but not in
    // the middle of a part.
    match open {
        Some(from) if !body[from..].trim().is_empty() => Err(BootstrapError::user_data(format!(
            "part {} is not followed by a delimiter line {delimiter:?} or {closing:?}",
            parts.len() + 1
        ))),
        _ => Ok(parts),
    }
}

fn part(raw: &str, index: usize) -> Result<Part, BootstrapError> {
    let (headers, at) = read_headers(raw, &format!("part {index}"))?;
    Ok(Part { headers, content: raw[at..].to_string() })
}

/// The archive of `parts` as upstream writes it (Go's `multipart.Writer` with the boundary `//`,
/// each part's headers sorted by name, carriage returns removed).
pub fn serialize(parts: &[Part]) -> String {
    let mut out = format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str("--");
        out.push_str(BOUNDARY);
        out.push('\n');
        let mut headers: Vec<&(String, String)> = part.headers.iter().collect();
        headers.sort_by(|a, b| a.0.cmp(&b.0));
        for (k, v) in headers {
            out.push_str(k);
            out.push_str(": ");
            out.push_str(v);
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&part.content.replace('\r', ""));
    }
    out.push_str("\n--");
    out.push_str(BOUNDARY);
    out.push_str("--\n");
    out
}
