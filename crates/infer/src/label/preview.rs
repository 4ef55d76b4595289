//! `labels_preview.jpg`: a mosaic of up to 16 labelled images of the dataset with their
//! pseudo-label boxes, class name and teacher confidence, to check the labels at a glance.

use std::path::{Path, PathBuf};

use headroom_core::boxes::Xyxy;

use super::output::Job;
use crate::preview::{MOSAIC_IMAGES, PreviewBox, read_tile};
use crate::soft_scores::{SoftScores, read_soft_scores};
use crate::{Error, Result};

/// The preview's file name, at the root of the dataset.
pub const PREVIEW_FILE: &str = "labels_preview.jpg";

/// Which of `count` finished images the preview shows: up to [`MOSAIC_IMAGES`], spread evenly over
/// them in their (sorted) order, so that a dataset of several scenes shows several.
pub fn preview_picks(count: usize) -> Vec<usize> {
    let shown = count.min(MOSAIC_IMAGES);
    (0..shown).map(|i| i * count / shown).collect()
}

/// The boxes of an image `width` × `height` from its soft-score records (one per label line, with
/// the teacher's confidence).
fn boxes_of(soft: &SoftScores, width: u32, height: u32) -> Vec<PreviewBox> {
    let to_pixels =
        |[cx, cy, w, h]: [f32; 4]| Xyxy::from_cxcywh(cx, cy, w, h).scale(width as f32, height as f32);
    soft.kept
        .iter()
        .filter_map(|r| Some(PreviewBox { class: r.class?, bbox: to_pixels(r.bbox), score: Some(r.score) }))
        .collect()
}

/// Writes [`PREVIEW_FILE`] into `out` from the finished images among `jobs` (`finished[i]`: job
/// `i` is labelled, by this run or an earlier one). Images that cannot be read are left out.
/// Returns the file written, or `None` when no image could be shown.
pub fn write_preview(
    out: &Path,
    jobs: &[Job],
    finished: &[bool],
    names: &[String],
) -> Result<Option<PathBuf>> {
    let done: Vec<usize> = (0..jobs.len()).filter(|&i| finished.get(i).copied().unwrap_or(false)).collect();
    let mut tiles = Vec::new();
    for pick in preview_picks(done.len()) {
        let i = done[pick];
        let job = &jobs[i];
        // A finished image's soft-score file always reads.
        let tile = read_soft_scores(&job.scores)
            .and_then(|soft| read_tile(&job.source, |w, h| boxes_of(&soft, w, h)));
        match tile {
            Ok(mut tile) => {
                tile.boxes.retain(|b| b.class < names.len());
                tiles.push(tile);
            }
            Err(e) => tracing::debug!("{PREVIEW_FILE}: leaving out {}: {e}", job.source.display()),
        }
    }
    if tiles.is_empty() {
        return Ok(None);
    }
    let path = out.join(PREVIEW_FILE);
    headroom_plot::write_mosaic(&path, &tiles, names).map_err(Error::from)?;
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_spread_over_the_finished_images() {
        assert_eq!(preview_picks(0), Vec::<usize>::new());
        assert_eq!(preview_picks(3), vec![0, 1, 2]);
        assert_eq!(preview_picks(16), (0..16).collect::<Vec<_>>());
        let picks = preview_picks(100);
        assert_eq!(picks.len(), 16);
        assert_eq!((picks[0], picks[1], picks[15]), (0, 6, 93));
    }
}
