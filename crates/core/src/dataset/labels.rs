//! YOLO label files: one `class cx cy w h` line per box, coordinates normalised to [0, 1].

use std::path::Path;

use crate::boxes::Xyxy;
use crate::{Error, LabelProblem, Result};

/// One labelled box, normalised to the image size.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct YoloLabel {
    /// Class id.
    pub class: usize,
    /// Centre x in [0, 1].
    pub cx: f32,
    /// Centre y in [0, 1].
    pub cy: f32,
    /// Width in [0, 1].
    pub w: f32,
    /// Height in [0, 1].
    pub h: f32,
}

impl YoloLabel {
    /// The box in pixels of an image `width` × `height`.
    pub fn to_pixels(self, width: u32, height: u32) -> Xyxy {
        Xyxy::from_cxcywh(self.cx, self.cy, self.w, self.h).scale(width as f32, height as f32)
    }

    /// The label of a pixel box in an image `width` × `height`.
    pub fn from_pixels(class: usize, bbox: Xyxy, width: u32, height: u32) -> Self {
        let [cx, cy, w, h] = bbox.scale(1.0 / width as f32, 1.0 / height as f32).to_cxcywh();
        Self { class, cx, cy, w, h }
    }

    /// The line as Ultralytics writes it (`class cx cy w h`, six decimals), without newline.
    pub fn to_line(self) -> String {
        format!("{} {:.6} {:.6} {:.6} {:.6}", self.class, self.cx, self.cy, self.w, self.h)
    }
}

/// Formats labels as the text of a label file (one line each, newline-terminated).
pub fn format_labels(labels: &[YoloLabel]) -> String {
    labels.iter().map(|l| l.to_line() + "\n").collect()
}

/// Writes a label file atomically (see [`crate::fsio::write_atomic`]).
pub fn write_label_file(path: &Path, labels: &[YoloLabel]) -> Result<()> {
    crate::fsio::write_atomic(path, format_labels(labels).as_bytes())
}

/// Parses one non-empty label line. `nc` is the number of classes of the dataset.
///
/// Accepts what Ultralytics' `verify_image_label` accepts for detection: `class cx cy w h`, or a
/// polygon `class x1 y1 x2 y2 x3 y3 ...` (segmentation labels), which becomes its bounding box.
/// The class must be an integer in `0..nc`; `cx cy w h` must lie in `[0, 1]` with Ultralytics' 1%
/// tolerance (`[-0.01, 1.01]`, `w`, `h` not negative). Corners may stick out by up to half a box:
/// Ultralytics does not check them either, and clips later.
pub fn parse_label_line(line: &str, nc: usize) -> Result<YoloLabel, LabelProblem> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let polygon = fields.len() > 6;
    if fields.len() != 5 && !(polygon && fields.len() % 2 == 1) {
        return Err(LabelProblem::FieldCount { found: fields.len() });
    }
    let mut values = vec![0f32; fields.len()];
    for (i, (field, value)) in fields.iter().zip(values.iter_mut()).enumerate() {
        *value = field
            .parse::<f32>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| LabelProblem::NotANumber { field: i + 1, text: (*field).to_string() })?;
    }
    let class = values[0];
    if class < 0.0 || class.fract() != 0.0 || class as usize >= nc {
        return Err(LabelProblem::ClassOutOfRange { text: fields[0].to_string(), nc });
    }
    let [cx, cy, w, h] =
        if polygon { polygon_box(&values[1..]) } else { [values[1], values[2], values[3], values[4]] };
    // Ultralytics' limits: every value <= 1.01, and >= 0 or (>= -0.01 with w, h >= 0).
    let upper = [cx, cy, w, h].into_iter().all(|v| v <= 1.01);
    let lower = cx >= -0.01 && cy >= -0.01 && w >= 0.0 && h >= 0.0;
    if !(upper && lower) {
        return Err(LabelProblem::OutOfBounds { cx, cy, w, h });
    }
    Ok(YoloLabel { class: class as usize, cx, cy, w, h })
}

/// The `[cx, cy, w, h]` bounding box of polygon points `x1 y1 x2 y2 ...` (Ultralytics' `segments2boxes`).
fn polygon_box(points: &[f32]) -> [f32; 4] {
    let (mut x1, mut y1, mut x2, mut y2) =
        (f32::INFINITY, f32::INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY);
    for xy in points.chunks_exact(2) {
        (x1, x2) = (x1.min(xy[0]), x2.max(xy[0]));
        (y1, y2) = (y1.min(xy[1]), y2.max(xy[1]));
    }
    Xyxy::new(x1, y1, x2, y2).to_cxcywh()
}

/// One parsed row of a label file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabelRow {
    /// 1-based line number in the file.
    pub line: usize,
    /// The box.
    pub label: YoloLabel,
    /// Whether the line was a polygon (`class x1 y1 x2 y2 ...`) turned into its bounding box.
    pub polygon: bool,
}

/// Parses the text of a label file into rows with their line numbers, as Ultralytics reads it: a UTF-8
/// byte-order mark is ignored, blank lines are skipped, and polygon rows may not be mixed with box
/// rows. Errors name `path` and the 1-based line.
pub fn parse_label_rows(path: &Path, text: &str, nc: usize) -> Result<Vec<LabelRow>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let label_error = |line: usize, problem| Error::Label { path: path.to_path_buf(), line, problem };
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        let label = parse_label_line(line, nc).map_err(|problem| label_error(i + 1, problem))?;
        rows.push(LabelRow { line: i + 1, label, polygon: line.split_whitespace().count() > 5 });
    }
    if let Some(polygon) = rows.iter().find(|r| r.polygon)
        && let Some(boxed) = rows.iter().find(|r| !r.polygon)
    {
        let problem = LabelProblem::MixedPolygonsAndBoxes { polygon_line: polygon.line };
        return Err(label_error(boxed.line, problem));
    }
    Ok(rows)
}

/// Removes rows that repeat an earlier row exactly (same class and coordinates), keeping the first, as
/// Ultralytics does. Returns one [`Error::Label`] with [`LabelProblem::Duplicate`] per removed row.
pub fn remove_duplicate_rows(path: &Path, rows: &mut Vec<LabelRow>) -> Vec<Error> {
    let key = |l: &YoloLabel| (l.class, [l.cx, l.cy, l.w, l.h].map(f32::to_bits));
    let mut first_line = std::collections::HashMap::new();
    let mut removed = Vec::new();
    rows.retain(|row| match first_line.entry(key(&row.label)) {
        std::collections::hash_map::Entry::Occupied(first) => {
            let problem = LabelProblem::Duplicate { first_line: *first.get() };
            removed.push(Error::Label { path: path.to_path_buf(), line: row.line, problem });
            false
        }
        std::collections::hash_map::Entry::Vacant(slot) => {
            slot.insert(row.line);
            true
        }
    });
    removed
}

/// Parses the text of a label file; errors name `path` and the 1-based line. Duplicate rows are kept
/// (see [`remove_duplicate_rows`]).
pub fn parse_labels(path: &Path, text: &str, nc: usize) -> Result<Vec<YoloLabel>> {
    Ok(parse_label_rows(path, text, nc)?.into_iter().map(|r| r.label).collect())
}

/// Reads and parses a label file; a missing file is an error (callers decide whether it means
/// "no boxes").
pub fn read_label_file(path: &Path, nc: usize) -> Result<Vec<YoloLabel>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse_labels(path, &text, nc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_round_trip() {
        let l = YoloLabel { class: 2, cx: 0.5, cy: 0.25, w: 0.1, h: 0.2 };
        assert_eq!(l.to_line(), "2 0.500000 0.250000 0.100000 0.200000");
        assert_eq!(parse_label_line(&l.to_line(), 3), Ok(l));
    }

    #[test]
    fn each_bad_line_gets_its_problem() {
        let cases = [
            ("0 0.5 0.5 0.1", LabelProblem::FieldCount { found: 4 }),
            ("0 0.5 x 0.1 0.1", LabelProblem::NotANumber { field: 3, text: "x".into() }),
            ("0 0.5 nan 0.1 0.1", LabelProblem::NotANumber { field: 3, text: "nan".into() }),
            ("3 0.5 0.5 0.1 0.1", LabelProblem::ClassOutOfRange { text: "3".into(), nc: 3 }),
            ("1.5 0.5 0.5 0.1 0.1", LabelProblem::ClassOutOfRange { text: "1.5".into(), nc: 3 }),
            ("-1 0.5 0.5 0.1 0.1", LabelProblem::ClassOutOfRange { text: "-1".into(), nc: 3 }),
            ("0 1.5 0.5 0.1 0.1", LabelProblem::OutOfBounds { cx: 1.5, cy: 0.5, w: 0.1, h: 0.1 }),
            ("0 1.02 0.5 0.1 0.1", LabelProblem::OutOfBounds { cx: 1.02, cy: 0.5, w: 0.1, h: 0.1 }),
            ("0 -0.02 0.5 0.1 0.1", LabelProblem::OutOfBounds { cx: -0.02, cy: 0.5, w: 0.1, h: 0.1 }),
            ("0 0.5 0.5 -0.1 0.1", LabelProblem::OutOfBounds { cx: 0.5, cy: 0.5, w: -0.1, h: 0.1 }),
            ("0 0.5 0.5 0.1 1.2", LabelProblem::OutOfBounds { cx: 0.5, cy: 0.5, w: 0.1, h: 1.2 }),
            ("0 0.5 0.5 0.1 0.1 0.1", LabelProblem::FieldCount { found: 6 }),
            ("0 0.1 0.1 0.2 0.1 0.2 0.3 0.4", LabelProblem::FieldCount { found: 8 }),
            ("", LabelProblem::FieldCount { found: 0 }),
        ];
        for (line, problem) in cases {
            assert_eq!(parse_label_line(line, 3), Err(problem), "line `{line}`");
        }
    }

    #[test]
    fn accepts_what_ultralytics_accepts() {
        // A corner outside the image is fine (Ultralytics checks cx cy w h only), as is 1% slack.
        let l = parse_label_line("0 0.99 0.5 0.1 0.1", 1).expect("corner outside");
        assert_eq!((l.cx, l.w), (0.99, 0.1));
        parse_label_line("0 1.005 -0.005 0.1 1.01", 1).expect("within 1%");
        parse_label_line("2.0 0.5 0.5 0.1 0.1", 3).expect("integer-valued float class");
    }

    #[test]
    fn polygon_rows_become_their_bounding_box() {
        let l = parse_label_line("1 0.1 0.2 0.5 0.2 0.3 0.6", 2).expect("triangle");
        let [cx, cy, w, h] = [l.cx, l.cy, l.w, l.h];
        assert_eq!(l.class, 1);
        for (got, want) in [(cx, 0.3), (cy, 0.4), (w, 0.4), (h, 0.4)] {
            assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        }
        let err = parse_label_rows(Path::new("l.txt"), "0 0.1 0.2 0.5 0.2 0.3 0.6\n0 0.5 0.5 0.1 0.1\n", 1)
            .expect_err("mixed rows");
        assert_eq!(
            err.to_string(),
            "l.txt:2: box row in a file of polygon rows (line 1 is a polygon): use one kind per file"
        );
    }

    #[test]
    fn byte_order_mark_and_duplicates() {
        let path = Path::new("labels/d.txt");
        let text = "\u{feff}0 0.5 0.5 0.1 0.1\n1 0.5 0.5 0.1 0.1\n\n0 0.5 0.5 0.1 0.1\n";
        let mut rows = parse_label_rows(path, text, 2).expect("valid");
        assert_eq!(rows.len(), 3);
        let removed = remove_duplicate_rows(path, &mut rows);
        assert_eq!(rows.iter().map(|r| r.line).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].to_string(), "labels/d.txt:4: duplicate of line 1 (removed)");
    }

    #[test]
    fn file_errors_name_path_and_line() {
        let err = parse_labels(Path::new("labels/a.txt"), "0 0.5 0.5 0.1 0.1\n\n0 0.5\n", 1)
            .expect_err("line 3 is short");
        assert_eq!(err.to_string(), "labels/a.txt:3: expected 5 fields `class cx cy w h`, found 2");
    }
}
