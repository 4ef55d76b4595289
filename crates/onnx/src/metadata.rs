//! The `metadata_props` of Ultralytics exports: `names`, `stride`, `imgsz`, `task`, `end2end`, ...
//!
//! Ultralytics writes them with Python's `str()`: `names` is a dict literal such as
//! `{0: 'person', 1: "it's"}`, `imgsz` a list `[640, 640]`. Older exports lack some keys, so every
//! field is optional.

use std::collections::BTreeMap;

use serde::Serialize;

/// A metadata value that could not be parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("metadata key `{key}`: cannot parse `{value}`: {reason}")]
pub struct MetadataError {
    /// The metadata key.
    pub key: String,
    /// Its raw value (truncated to 200 characters).
    pub value: String,
    /// What is wrong.
    pub reason: String,
}

/// The metadata headroom uses, parsed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ModelMetadata {
    /// Class names by id (`names`).
    pub names: Option<Vec<String>>,
    /// Largest stride (`stride`).
    pub stride: Option<u32>,
    /// Export input size as `[height, width]` (`imgsz`).
    pub imgsz: Option<[u32; 2]>,
    /// `detect`, `segment`, ... (`task`).
    pub task: Option<String>,
    /// Whether the export ends in its own NMS-free top-k (`end2end`).
    pub end2end: Option<bool>,
    /// The Ultralytics version that exported the model (`version`).
    pub version: Option<String>,
}

impl ModelMetadata {
    /// Parses the known keys from `(key, value)` pairs; unknown keys are ignored.
    pub fn from_props<'a>(
        props: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, MetadataError> {
        let mut meta = ModelMetadata::default();
        for (key, value) in props {
            let err = |reason: &str| MetadataError {
                key: key.to_string(),
                value: value.chars().take(200).collect(),
                reason: reason.to_string(),
            };
            match key {
                "names" => meta.names = Some(parse_names(value).map_err(|r| err(&r))?),
                "stride" => meta.stride = Some(value.trim().parse().map_err(|_| err("not an integer"))?),
                "imgsz" => meta.imgsz = Some(parse_imgsz(value).ok_or_else(|| err("expected [h, w]"))?),
                "task" => meta.task = Some(value.to_string()),
                "end2end" => meta.end2end = Some(value.trim() == "True"),
                "version" => meta.version = Some(value.to_string()),
                _ => {}
            }
        }
        Ok(meta)
    }
}

fn parse_imgsz(value: &str) -> Option<[u32; 2]> {
    let inner = value.trim().strip_prefix('[')?.strip_suffix(']')?;
    let parts: Vec<u32> = inner.split(',').map(|p| p.trim().parse().ok()).collect::<Option<_>>()?;
    match parts[..] {
        [h, w] => Some([h, w]),
        [s] => Some([s, s]),
        _ => None,
    }
}

/// Parses a Python dict literal `{0: 'a', 1: "b"}` of class names into a list indexed by id.
/// Ids must be 0..n-1 without gaps.
pub fn parse_names(value: &str) -> Result<Vec<String>, String> {
    let inner = value
        .trim()
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .ok_or("expected a dict literal `{0: 'name', ...}`")?;
    let mut chars = inner.chars().peekable();
    let mut names = BTreeMap::new();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let id: String = chars.by_ref().take_while(|c| *c != ':').collect();
        let id: usize =
            id.trim().parse().map_err(|_| format!("class id `{}` is not an integer", id.trim()))?;
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let quote = chars.next().filter(|q| *q == '\'' || *q == '"').ok_or("expected a quoted name")?;
        let mut name = String::new();
        loop {
            match chars.next().ok_or("unterminated string")? {
                '\\' => name.push(chars.next().ok_or("unterminated escape")?),
                c if c == quote => break,
                c => name.push(c),
            }
        }
        if names.insert(id, name).is_some() {
            return Err(format!("class id {id} appears twice"));
        }
    }
    for (expected, id) in names.keys().enumerate() {
        if *id != expected {
            return Err(format!("class ids must be 0..{} without gaps; {expected} is missing", names.len()));
        }
    }
    Ok(names.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ultralytics_names() {
        assert_eq!(
            parse_names("{0: 'person', 1: \"it's\", 2: 'a\\'b'}"),
            Ok(vec!["person".to_string(), "it's".to_string(), "a'b".to_string()])
        );
        assert_eq!(parse_names("{}"), Ok(vec![]));
        assert!(parse_names("{0: 'a', 2: 'c'}").is_err());
        assert!(parse_names("[a, b]").is_err());
        assert!(parse_names("{0: 'a").is_err());
    }

    #[test]
    fn parses_props() {
        let meta = ModelMetadata::from_props([
            ("names", "{0: 'circle', 1: 'square'}"),
            ("stride", "32"),
            ("imgsz", "[160, 160]"),
            ("end2end", "False"),
            ("other", "x"),
        ])
        .expect("valid");
        assert_eq!(meta.names.as_deref(), Some(&["circle".to_string(), "square".to_string()][..]));
        assert_eq!(meta.stride, Some(32));
        assert_eq!(meta.imgsz, Some([160, 160]));
        assert_eq!(meta.end2end, Some(false));
        let err = ModelMetadata::from_props([("stride", "x")]).expect_err("bad stride");
        assert!(err.to_string().contains("stride"));
    }
}
