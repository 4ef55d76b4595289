//! The teacher → student class map of `headroom label --class-map`.
//!
//! Text: entries `TEACHER=STUDENT` separated by commas or newlines, `#` starts a comment. `TEACHER` is
//! a teacher class id or name (from the model's `names`), `STUDENT` a student class id. Teacher
//! classes not in the map are dropped (and counted). Student class `s` is named after the teacher
//! classes mapped to it, joined by `+`, unless names are given.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// How teacher classes become student classes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassMap {
    /// `student[t]`: the student class of teacher class `t`, or `None` to drop it.
    pub student: Vec<Option<usize>>,
    /// Student class names, index = student class id.
    pub names: Vec<String>,
}

impl ClassMap {
    /// Every teacher class to itself, with the teacher's names.
    pub fn identity(teacher_names: &[String]) -> Self {
        Self { student: (0..teacher_names.len()).map(Some).collect(), names: teacher_names.to_vec() }
    }

    /// Parses `text` (from `source_name`, a file or `--class-map`) against the teacher's class names.
    /// Unknown teacher classes are one error that lists them all.
    pub fn parse(text: &str, source_name: &str, teacher_names: &[String]) -> Result<Self> {
        let fail = |reason: String| Error::ClassMap { source_name: source_name.to_string(), reason };
        let mut student = vec![None; teacher_names.len()];
        let mut unknown = Vec::new();
        let lines = text.lines().map(|l| l.split('#').next().unwrap_or(""));
        let entries = lines.flat_map(|l| l.split(',')).map(str::trim).filter(|e| !e.is_empty());
        for entry in entries {
            let Some((teacher, target)) = entry.split_once('=') else {
                return Err(fail(format!("entry `{entry}` is not TEACHER=STUDENT")));
            };
            let (teacher, target) = (teacher.trim(), target.trim());
            let id = teacher_names
                .iter()
                .position(|n| n == teacher)
                .or_else(|| teacher.parse::<usize>().ok().filter(|&t| t < teacher_names.len()));
            let Some(id) = id else {
                unknown.push(teacher.to_string());
                continue;
            };
            let target: usize = target
                .parse()
                .map_err(|_| fail(format!("entry `{entry}`: student class `{target}` is not a class id")))?;
            if target >= usize::from(u16::MAX) {
                return Err(fail(format!("entry `{entry}`: student class {target} is too large")));
            }
            if let Some(previous) = student[id].replace(target) {
                return Err(fail(format!(
                    "teacher class `{teacher}` is mapped twice ({previous} and {target})"
                )));
            }
        }
        if !unknown.is_empty() {
            return Err(fail(format!(
                "the teacher has no class {} (its classes: {})",
                unknown.iter().map(|u| format!("`{u}`")).collect::<Vec<_>>().join(", "),
                describe(teacher_names)
            )));
        }
        let Some(count) = student.iter().flatten().max().map(|m| m + 1) else {
            return Err(fail("maps no teacher class".into()));
        };
        let names = (0..count)
            .map(|s| {
                let mapped: Vec<&str> = (0..teacher_names.len())
                    .filter(|&t| student[t] == Some(s))
                    .map(|t| teacher_names[t].as_str())
                    .collect();
                if mapped.is_empty() { format!("class{s}") } else { mapped.join("+") }
            })
            .collect();
        Ok(Self { student, names })
    }

    /// The student class of teacher class `t` (`None`: dropped, or out of range).
    pub fn map(&self, teacher_class: usize) -> Option<usize> {
        self.student.get(teacher_class).copied().flatten()
    }

    /// Projects a teacher score vector onto student classes: each student class gets the highest
    /// score of the teacher classes mapped to it (0 if none). An empty vector stays empty.
    pub fn project(&self, teacher_scores: &[f32]) -> Vec<f32> {
        if teacher_scores.is_empty() {
            return Vec::new();
        }
        let mut out = vec![0f32; self.names.len()];
        for (t, s) in teacher_scores.iter().enumerate() {
            if let Some(c) = self.map(t) {
                out[c] = out[c].max(*s);
            }
        }
        out
    }
}

fn describe(names: &[String]) -> String {
    names.iter().enumerate().map(|(i, n)| format!("{i}={n}")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn teacher() -> Vec<String> {
        ["circle", "rectangle", "triangle"].map(String::from).to_vec()
    }

    #[test]
    fn parses_ids_and_names_and_names_student_classes() {
        let map = ClassMap::parse("0=1, triangle=0 # comment\n", "--class-map", &teacher()).expect("valid");
        assert_eq!(map.student, vec![Some(1), None, Some(0)]);
        assert_eq!(map.names, vec!["triangle", "circle"]);
        assert_eq!(map.project(&[0.9, 0.5, 0.2]), vec![0.2, 0.9]);
        let merged = ClassMap::parse("0=0\n1=0\n", "map.txt", &teacher()).expect("valid");
        assert_eq!(merged.names, vec!["circle+rectangle"]);
        assert_eq!(merged.project(&[0.3, 0.6, 0.9]), vec![0.6]);
        assert_eq!(ClassMap::identity(&teacher()).map(2), Some(2));
    }

    #[test]
    fn unknown_classes_are_one_error_naming_each() {
        let err = ClassMap::parse("0=0,dog=1,7=2", "--class-map", &teacher()).expect_err("unknown");
        let text = err.to_string();
        assert!(text.contains("`dog`") && text.contains("`7`") && text.contains("0=circle"), "{text}");
    }

    #[test]
    fn malformed_entries_are_errors() {
        for bad in ["0", "0=x", "0=1,0=2", "", "0=99999"] {
            assert!(ClassMap::parse(bad, "--class-map", &teacher()).is_err(), "`{bad}` accepted");
        }
    }
}
