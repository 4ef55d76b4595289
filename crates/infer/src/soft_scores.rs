//! The soft-score file of one pseudo-labelled image (`labels/<stem>.scores.bin`): for each box of the
//! label file, the teacher's per-class confidences, and optionally the best pre-NMS candidates.
//!
//! Binary, little-endian, version 1 (docs/LABEL.md has the same table):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `HRSS` |
//! | 2 | version `u16` = 1 |
//! | 2 | flags `u16`: bit 0 set when the labels are in `<stem>.teacher.txt` beside a human label |
//! | 2 | `nc` `u16`: length of every score vector (student classes; 0 when the teacher gives none) |
//! | 2 | reserved, 0 |
//! | 4 | `kept` `u32`: records that match the label file's lines, in order |
//! | 4 | `top_k` `u32`: pre-NMS candidate records that follow them |
//! | 32 | SHA-256 of the label file's bytes (how a rerun knows the label is complete and unedited) |
//! | … | `kept + top_k` records |
//!
//! A record: `class u16` (student class; `u16::MAX` for a candidate whose teacher class is
//! unmapped), `teacher_class u16`, `score f32`, box `cx cy w h` as 4 × `f32` normalised to the image,
//! then `nc` × `u16` confidences quantised as `round(s · 65535)` (error ≤ 7.7e-6).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

const MAGIC: &[u8; 4] = b"HRSS";
const VERSION: u16 = 1;
const HEADER_LEN: usize = 52;
const FLAG_BESIDE_HUMAN: u16 = 1;
/// The quantisation step of stored confidences.
pub const SCORE_STEP: f32 = 1.0 / 65535.0;

/// One box with its per-class confidences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftRecord {
    /// Student class (`None`: a candidate whose teacher class the class map drops).
    pub class: Option<usize>,
    /// Teacher class.
    pub teacher_class: usize,
    /// Confidence of the box.
    pub score: f32,
    /// `cx cy w h`, normalised to the image (as in the label file).
    pub bbox: [f32; 4],
    /// Per-student-class confidence (quantised to [`SCORE_STEP`] when read back).
    pub scores: Vec<f32>,
}

/// The content of one soft-score file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftScores {
    /// The labels are in `<stem>.teacher.txt` because a human label file was there first.
    pub beside_human: bool,
    /// Length of every score vector.
    pub nc: usize,
    /// SHA-256 of the label file these records belong to.
    pub label_sha256: [u8; 32],
    /// One record per line of the label file, in order.
    pub kept: Vec<SoftRecord>,
    /// The best pre-NMS candidates (empty unless `--topk` was given).
    pub top_k: Vec<SoftRecord>,
}

impl SoftScores {
    /// Encodes the file. Errors when a vector length differs from `nc` or a count overflows.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let bad = |reason: String| Error::SoftScores { path: "<encoding>".into(), reason };
        let nc = u16::try_from(self.nc).map_err(|_| bad(format!("{} classes is too many", self.nc)))?;
        let count = |n: usize| u32::try_from(n).map_err(|_| bad(format!("{n} records is too many")));
        let mut out =
            Vec::with_capacity(HEADER_LEN + (self.kept.len() + self.top_k.len()) * (24 + 2 * self.nc));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(if self.beside_human { FLAG_BESIDE_HUMAN } else { 0 }).to_le_bytes());
        out.extend_from_slice(&nc.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&count(self.kept.len())?.to_le_bytes());
        out.extend_from_slice(&count(self.top_k.len())?.to_le_bytes());
        out.extend_from_slice(&self.label_sha256);
        for record in self.kept.iter().chain(&self.top_k) {
            if record.scores.len() != self.nc {
                return Err(bad(format!(
                    "a score vector has {} values, not {}",
                    record.scores.len(),
                    self.nc
                )));
            }
            let class = record.class.map_or(Ok(u16::MAX), |c| {
                u16::try_from(c).map_err(|_| bad(format!("class {c} does not fit 16 bits")))
            })?;
            let teacher = u16::try_from(record.teacher_class)
                .map_err(|_| bad(format!("class {} does not fit 16 bits", record.teacher_class)))?;
            out.extend_from_slice(&class.to_le_bytes());
            out.extend_from_slice(&teacher.to_le_bytes());
            out.extend_from_slice(&record.score.to_le_bytes());
            for v in record.bbox {
                out.extend_from_slice(&v.to_le_bytes());
            }
            for s in &record.scores {
                out.extend_from_slice(&quantise(*s).to_le_bytes());
            }
        }
        Ok(out)
    }

    /// Decodes the bytes of the file at `path` (named in errors).
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Self> {
        let bad = |reason: String| Error::SoftScores { path: path.to_path_buf(), reason };
        let mut reader = Reader { bytes, at: 0 };
        let header = reader.take(HEADER_LEN).ok_or_else(|| bad("shorter than its header".into()))?;
        if &header[..4] != MAGIC {
            return Err(bad("not a headroom soft-score file (magic is not HRSS)".into()));
        }
        let u16_at = |i: usize| u16::from_le_bytes([header[i], header[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
        if u16_at(4) != VERSION {
            return Err(bad(format!(
                "version {} is not supported (this headroom reads {VERSION})",
                u16_at(4)
            )));
        }
        let nc = usize::from(u16_at(8));
        let (kept, top_k) = (u32_at(12) as usize, u32_at(16) as usize);
        let mut label_sha256 = [0u8; 32];
        label_sha256.copy_from_slice(&header[20..52]);
        let record_len = 24 + 2 * nc;
        let expected = (kept + top_k).checked_mul(record_len).and_then(|n| n.checked_add(HEADER_LEN));
        if expected != Some(bytes.len()) {
            return Err(bad(format!(
                "{} bytes, but the header announces {kept} + {top_k} records of {record_len} bytes (truncated?)",
                bytes.len()
            )));
        }
        let mut records = Vec::with_capacity(kept + top_k);
        for _ in 0..kept + top_k {
            let r = reader.take(record_len).ok_or_else(|| bad("truncated record".into()))?;
            let f32_at = |i: usize| f32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
            let class = u16::from_le_bytes([r[0], r[1]]);
            records.push(SoftRecord {
                class: (class != u16::MAX).then_some(usize::from(class)),
                teacher_class: usize::from(u16::from_le_bytes([r[2], r[3]])),
                score: f32_at(4),
                bbox: [f32_at(8), f32_at(12), f32_at(16), f32_at(20)],
                scores: r[24..]
                    .chunks_exact(2)
                    .map(|q| f32::from(u16::from_le_bytes([q[0], q[1]])) * SCORE_STEP)
                    .collect(),
            });
        }
        let top = records.split_off(kept);
        Ok(Self {
            beside_human: u16_at(6) & FLAG_BESIDE_HUMAN != 0,
            nc,
            label_sha256,
            kept: records,
            top_k: top,
        })
    }
}

/// Reads a soft-score file.
pub fn read_soft_scores(path: &Path) -> Result<SoftScores> {
    let bytes = std::fs::read(path).map_err(|e| Error::Core(headroom_core::Error::io(path, e)))?;
    SoftScores::from_bytes(path, &bytes)
}

/// Writes a soft-score file atomically.
pub fn write_soft_scores(path: &Path, scores: &SoftScores) -> Result<()> {
    Ok(headroom_core::fsio::write_atomic(path, &encode_for(path, scores)?)?)
}

/// Writes `scores` to `path` as part of a [`headroom_core::fsio::DurableBatch`].
pub fn write_soft_scores_in(
    batch: &mut headroom_core::fsio::DurableBatch,
    path: &Path,
    scores: &SoftScores,
) -> Result<()> {
    Ok(batch.write(path, &encode_for(path, scores)?)?)
}

fn encode_for(path: &Path, scores: &SoftScores) -> Result<Vec<u8>> {
    scores.to_bytes().map_err(|e| match e {
        Error::SoftScores { reason, .. } => Error::SoftScores { path: path.to_path_buf(), reason },
        other => other,
    })
}

fn quantise(score: f32) -> u16 {
    (score.clamp(0.0, 1.0) * 65535.0).round() as u16
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SoftScores {
        let record = |class, s: [f32; 3]| SoftRecord {
            class,
            teacher_class: 4,
            score: 0.75,
            bbox: [0.5, 0.25, 0.1, 0.2],
            scores: s.to_vec(),
        };
        SoftScores {
            beside_human: true,
            nc: 3,
            label_sha256: [7; 32],
            kept: vec![record(Some(2), [0.1, 0.2, 0.75]), record(Some(0), [0.9, 0.0, 1.0])],
            top_k: vec![record(None, [0.0, 0.5, 0.3])],
        }
    }

    #[test]
    fn round_trips_within_the_quantisation_step() {
        let original = sample();
        let bytes = original.to_bytes().expect("encode");
        assert_eq!(bytes.len(), HEADER_LEN + 3 * (24 + 6));
        let back = SoftScores::from_bytes(Path::new("x.scores.bin"), &bytes).expect("decode");
        assert_eq!((back.beside_human, back.nc, back.label_sha256), (true, 3, [7; 32]));
        assert_eq!((back.kept.len(), back.top_k.len()), (2, 1));
        for (a, b) in original.kept.iter().chain(&original.top_k).zip(back.kept.iter().chain(&back.top_k)) {
            assert_eq!(
                (a.class, a.teacher_class, a.score, a.bbox),
                (b.class, b.teacher_class, b.score, b.bbox)
            );
            for (x, y) in a.scores.iter().zip(&b.scores) {
                assert!((x - y).abs() <= SCORE_STEP / 2.0 + 1e-7, "{x} vs {y}");
            }
        }
    }

    #[test]
    fn truncated_or_foreign_files_are_errors_naming_the_file() {
        let bytes = sample().to_bytes().expect("encode");
        let path = Path::new("dir/a.scores.bin");
        for bad in [
            &bytes[..bytes.len() - 1],
            &bytes[..10],
            b"PNG\x00not scores at all, no no no no no no no no no no no",
        ] {
            let err = SoftScores::from_bytes(path, bad).expect_err("bad file");
            assert!(err.to_string().contains("dir/a.scores.bin"), "{err}");
        }
        let mut wrong = sample();
        wrong.kept[0].scores.pop();
        assert!(wrong.to_bytes().is_err());
    }

    #[test]
    fn writes_and_reads_a_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("labels/a.scores.bin");
        write_soft_scores(&path, &sample()).expect("write");
        assert_eq!(read_soft_scores(&path).expect("read").kept.len(), 2);
    }
}
