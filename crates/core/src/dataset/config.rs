//! `data.yaml`, the Ultralytics dataset description, read as Ultralytics' `check_det_dataset` reads it.
//!
//! Keys used: `path` (dataset root), `train`, `val` (both required; `validation` is accepted for `val`
//! with a warning), `test` (optional), `names` (a list, or a mapping `{index: name}` whose indices are
//! exactly `0..nc`), `nc` (optional; must match `names`; with `nc` alone the names are `class_0`, …).
//! Other keys (`download`, `channels`, …) are ignored, as Ultralytics ignores what it does not use.
//!
//! Each split is a folder (searched recursively), a text file listing image paths, or a YAML list
//! of those, relative to the root. A relative split that does not exist and starts with `../` is tried
//! again without it (Ultralytics does this too).
//!
//! **The dataset root.** A missing or empty `path` means the folder of the data.yaml. An absolute
//! `path` is used as is. A relative `path` is resolved against the data.yaml's folder first, so a
//! dataset folder can be moved or copied as a whole; if that does not exist but the path exists
//! relative to the working directory, that is used (Ultralytics' first choice). Ultralytics then tries
//! its `datasets_dir` setting; headroom has no such setting, so it reports both places it looked.
//!
//! Differences in YAML dialect: PyYAML reads YAML 1.1, where a bare `no` or `yes` is a boolean (a class
//! named `no` becomes `False` in Ultralytics); serde_yaml_ng reads YAML 1.2, where it stays `no`.

use std::path::{Path, PathBuf};

use serde_yaml_ng::{Mapping, Value};

use crate::{Error, Result};

/// A dataset split, named by its data.yaml key.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// `train`.
    Train,
    /// `val`.
    Val,
    /// `test`.
    Test,
}

impl Split {
    /// Every split, in data.yaml order.
    pub const ALL: [Split; 3] = [Split::Train, Split::Val, Split::Test];

    /// The data.yaml key (`train`, `val`, `test`).
    pub fn key(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Val => "val",
            Split::Test => "test",
        }
    }
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key())
    }
}

/// A parsed and resolved data.yaml.
#[derive(Debug, Clone, PartialEq)]
pub struct DataConfig {
    /// The data.yaml file itself (errors about the dataset name it).
    pub file: PathBuf,
    /// The dataset root, absolute.
    pub root: PathBuf,
    /// Class names, index = class id.
    pub names: Vec<String>,
    train: Vec<PathBuf>,
    val: Vec<PathBuf>,
    test: Vec<PathBuf>,
}

impl DataConfig {
    /// Reads and checks a data.yaml. Errors name the file and the key at fault; YAML syntax errors
    /// carry the line and column. Split paths are resolved but not checked here: [`super::load_split`]
    /// reports a split that points nowhere.
    pub fn load(path: &Path) -> Result<Self> {
        if path.is_dir() {
            let message = "is a folder: give the data.yaml in it".to_string();
            return Err(Error::Dataset { path: path.to_path_buf(), message });
        }
        if !path.exists() {
            let message = "no such file: give a dataset's data.yaml (`headroom synth` or `label` writes one)"
                .to_string();
            return Err(Error::Dataset { path: path.to_path_buf(), message });
        }
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::from_yaml_str(path, &text)
    }

    /// Parses the text of a data.yaml found at `path` (used for errors and to resolve relative paths).
    pub fn from_yaml_str(path: &Path, text: &str) -> Result<Self> {
        let fail = |message: String| Error::Dataset { path: path.to_path_buf(), message };
        let value: Value = serde_yaml_ng::from_str(text)
            .map_err(|source| Error::Yaml { path: path.to_path_buf(), source })?;
        let mut map = match value {
            Value::Mapping(map) => map,
            Value::Null => Mapping::new(),
            _ => return Err(fail("is not a YAML mapping of keys (`path`, `train`, `val`, `names`)".into())),
        };
        if !map.contains_key("val")
            && let Some(validation) = map.remove("validation")
        {
            tracing::warn!("{}: renaming key `validation` to `val`, as Ultralytics does", path.display());
            map.insert(Value::from("val"), validation);
        }
        for key in ["train", "val"] {
            if !map.contains_key(key) {
                return Err(fail(format!("key `{key}:` is missing; `train` and `val` are required")));
            }
        }
        let names = read_names(&map).map_err(fail)?;
        let root = resolve_root(path, &map).map_err(fail)?;
        let split = |key: &str| read_split(&root, &map, key).map_err(fail);
        let (train, val, test) = (split("train")?, split("val")?, split("test")?);
        if train.is_empty() {
            return Err(fail("key `train:` is empty; give a folder, an image list file, or a list".into()));
        }
        Ok(Self { file: path.to_path_buf(), root, names, train, val, test })
    }

    /// The number of classes.
    pub fn nc(&self) -> usize {
        self.names.len()
    }

    /// The resolved sources (folders or list files) of `split`, or `None` if the data.yaml leaves it
    /// empty (`test` absent, or `val:` with no value; Ultralytics then validates on `test`).
    pub fn split_sources(&self, split: Split) -> Option<&[PathBuf]> {
        let sources = match split {
            Split::Train => &self.train,
            Split::Val => &self.val,
            Split::Test => &self.test,
        };
        (!sources.is_empty()).then_some(sources.as_slice())
    }
}

/// `names` (list or `{index: name}`) and `nc`, checked against each other.
fn read_names(map: &Mapping) -> Result<Vec<String>, String> {
    let nc = match map.get("nc") {
        None => None,
        Some(value) => Some(read_nc(value)?),
    };
    let names = match map.get("names") {
        None | Some(Value::Null) => {
            let nc = nc.ok_or("key `names:` is missing; give the class names as a list")?;
            (0..nc).map(|i| format!("class_{i}")).collect()
        }
        Some(Value::Sequence(items)) => items.iter().map(scalar_text).collect::<Result<Vec<_>, _>>()?,
        Some(Value::Mapping(entries)) => names_from_mapping(entries)?,
        Some(other) => return Err(format!("`names:` must be a list or a mapping, not {}", kind(other))),
    };
    if names.is_empty() {
        return Err("`names:` is empty; at least one class name is required".into());
    }
    if let Some(nc) = nc
        && nc != names.len()
    {
        return Err(format!("`names:` has {} entries but `nc: {nc}`; they must match", names.len()));
    }
    Ok(names)
}

/// The most classes a dataset may declare. The largest detection vocabularies in use (LVIS 1,203,
/// Objects365 365, Open Images 601) are far below it; a larger `nc` is a typo, and generating
/// placeholder names for it would exhaust memory (found by fuzzing: `nc: 0000000000138492511`).
pub const MAX_CLASSES: usize = 100_000;

/// `nc`: an integer, or anything Ultralytics' `float(nc)` turns into a whole number (`10.0`, `'10'`),
/// at most [`MAX_CLASSES`].
fn read_nc(value: &Value) -> Result<usize, String> {
    let number = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match number {
        Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= MAX_CLASSES as f64 => Ok(n as usize),
        Some(n) if n.fract() == 0.0 && n > MAX_CLASSES as f64 => {
            Err(format!("`nc: {n}` is more than {MAX_CLASSES} classes; is it a typo?"))
        }
        _ => Err(format!("`nc: {}` must be a whole number", scalar_text(value).unwrap_or_default())),
    }
}

/// `names: {0: a, 1: b}`: integer (or integer-string) keys that are exactly `0..n`.
fn names_from_mapping(entries: &Mapping) -> Result<Vec<String>, String> {
    let mut indexed = Vec::with_capacity(entries.len());
    for (key, name) in entries {
        let index = match key {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        }
        .and_then(|i| usize::try_from(i).ok())
        .ok_or_else(|| {
            format!("`names:` key `{}` is not a class index", scalar_text(key).unwrap_or_default())
        })?;
        indexed.push((index, scalar_text(name)?));
    }
    indexed.sort_by_key(|(i, _)| *i);
    let n = indexed.len();
    let missing: Vec<String> = (0..n)
        .filter(|i| indexed.binary_search_by_key(i, |(j, _)| *j).is_err())
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "`names:` with {n} entries needs class indices 0..={}, but {} missing (keys must be contiguous)",
            n.saturating_sub(1),
            if missing.len() == 1 {
                format!("{} is", missing[0])
            } else {
                format!("{} are", missing.join(", "))
            }
        ));
    }
    Ok(indexed.into_iter().map(|(_, name)| name).collect())
}

/// A scalar as Python's `str()` would write it (names may be numbers or booleans in YAML).
fn scalar_text(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(if *b { "True" } else { "False" }.into()),
        Value::Null => Ok("None".into()),
        other => Err(format!("a class name must be text, not {}", kind(other))),
    }
}

/// The dataset root (see the module documentation for the rules).
fn resolve_root(file: &Path, map: &Mapping) -> Result<PathBuf, String> {
    let yaml_dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let absolute = |p: &Path| std::path::absolute(p).map_err(|e| format!("`path:` {}: {e}", p.display()));
    let path = match map.get("path") {
        None | Some(Value::Null) => return absolute(&yaml_dir),
        Some(Value::String(s)) if s.is_empty() => return absolute(&yaml_dir),
        Some(Value::String(s)) => PathBuf::from(s),
        Some(other) => return Err(format!("`path:` must be text, not {}", kind(other))),
    };
    if path.is_absolute() {
        return Ok(path);
    }
    let beside_yaml = yaml_dir.join(&path);
    if beside_yaml.exists() {
        return absolute(&beside_yaml);
    }
    if path.exists() {
        return absolute(&path);
    }
    Err(format!(
        "`path: {}` not found: looked in {} (relative to the data.yaml) and {} (relative to the working \
         directory)",
        path.display(),
        absolute(&beside_yaml)?.display(),
        absolute(&path)?.display()
    ))
}

/// The sources of one split, resolved against the root; empty if the key is absent or empty.
fn read_split(root: &Path, map: &Mapping, key: &str) -> Result<Vec<PathBuf>, String> {
    let entries: Vec<&str> = match map.get(key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) if s.is_empty() => Vec::new(),
        Some(Value::String(s)) => {
            let resolved = root.join(s);
            return Ok(match s.strip_prefix("../") {
                Some(rest) if !resolved.exists() => vec![root.join(rest)],
                _ => vec![resolved],
            });
        }
        Some(Value::Sequence(items)) => items
            .iter()
            .map(|item| {
                item.as_str().ok_or_else(|| format!("`{key}:` entries must be paths, not {}", kind(item)))
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(format!("`{key}:` must be a path or a list of paths, not {}", kind(other)));
        }
    };
    Ok(entries.into_iter().map(|e| root.join(e)).collect())
}

/// The YAML kind of a value, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(dir: &Path, text: &str) -> Result<DataConfig> {
        DataConfig::from_yaml_str(&dir.join("data.yaml"), text)
    }

    fn message(dir: &Path, text: &str) -> String {
        let err = parse(dir, text).expect_err("must fail");
        let text = err.to_string();
        assert!(text.contains("data.yaml"), "error does not name the file: {text}");
        text
    }

    #[test]
    fn list_names_and_root_beside_the_yaml() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("ds/images/train")).expect("mkdir");
        let config =
            parse(dir.path(), "path: ds\ntrain: images/train\nval: [images/val, extra.txt]\nnames: [a, b]\n")
                .expect("valid");
        let root = std::path::absolute(dir.path().join("ds")).expect("absolute");
        assert_eq!(config.root, root);
        assert_eq!(config.names, ["a", "b"]);
        assert_eq!(config.nc(), 2);
        assert_eq!(config.split_sources(Split::Train), Some(&[root.join("images/train")][..]));
        assert_eq!(
            config.split_sources(Split::Val),
            Some(&[root.join("images/val"), root.join("extra.txt")][..])
        );
        assert_eq!(config.split_sources(Split::Test), None);
    }

    #[test]
    fn names_mapping_nc_and_validation_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = parse(dir.path(), "train: t\nvalidation: v\nnc: 3.0\nnames: {2: c, '0': a, 1: 7}\n")
            .expect("valid");
        assert_eq!(config.names, ["a", "7", "c"]);
        assert_eq!(config.root, std::path::absolute(dir.path()).expect("absolute"));
        assert!(config.split_sources(Split::Val).is_some());
        let config = parse(dir.path(), "train: t\nval: v\nnc: 2\n").expect("nc alone");
        assert_eq!(config.names, ["class_0", "class_1"]);
    }

    #[test]
    fn parent_prefix_fallback() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("images")).expect("mkdir");
        let config = parse(dir.path(), "train: ../images\nval: ../images\nnames: [a]\n").expect("valid");
        let root = std::path::absolute(dir.path()).expect("absolute");
        assert_eq!(config.split_sources(Split::Train), Some(&[root.join("images")][..]));
    }

    #[test]
    fn each_bad_key_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let cases = [
            ("val: v\nnames: [a]\n", "key `train:` is missing"),
            ("train: t\nnames: [a]\n", "key `val:` is missing"),
            ("train: t\nval: v\n", "key `names:` is missing"),
            ("train: t\nval: v\nnames: []\n", "`names:` is empty"),
            ("train: t\nval: v\nnames: a\n", "`names:` must be a list or a mapping, not text"),
            ("train: t\nval: v\nnames: {0: a, 2: c}\n", "needs class indices 0..=1, but 1 is missing"),
            ("train: t\nval: v\nnames: {0: a, x: c}\n", "`names:` key `x` is not a class index"),
            ("train: t\nval: v\nnames: [a, b]\nnc: 3\n", "`names:` has 2 entries but `nc: 3`"),
            ("train: t\nval: v\nnames: [a]\nnc: 1.5\n", "`nc: 1.5` must be a whole number"),
            // Fuzzing found it: placeholder names for 138 million classes exhausted memory.
            ("train: t\nval: v\nnc: 000000000138492511\n", "is more than 100000 classes"),
            ("train: t\nval: v\nnames: [a]\npath: 3\n", "`path:` must be text, not a number"),
            ("train: t\nval: v\nnames: [a]\npath: nowhere\n", "`path: nowhere` not found"),
            ("train: {a: 1}\nval: v\nnames: [a]\n", "`train:` must be a path or a list of paths"),
            ("train: [1]\nval: v\nnames: [a]\n", "`train:` entries must be paths, not a number"),
            ("train:\nval: v\nnames: [a]\n", "key `train:` is empty"),
            ("- a\n- b\n", "is not a YAML mapping"),
        ];
        for (text, want) in cases {
            let got = message(d, text);
            assert!(got.contains(want), "for {text:?}: `{got}` lacks `{want}`");
        }
    }

    #[test]
    fn syntax_error_has_line_and_column() {
        let dir = tempfile::tempdir().expect("tempdir");
        let got = message(dir.path(), "train: t\nval: [v\nnames: [a]\n");
        assert!(got.contains("invalid YAML") && got.contains("line"), "{got}");
    }

    #[test]
    fn load_names_a_missing_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = DataConfig::load(&dir.path().join("data.yaml")).expect_err("missing");
        assert!(err.to_string().contains("data.yaml"), "{err}");
    }
}
