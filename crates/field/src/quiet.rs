//! A quiet night is a good night. A finished run records the contents it was gated on
//! (`<work>/gated.json`: the SHA-256 of every image its labelled set indexed); before a fresh run
//! starts, the images are hashed again, and when none is new — an empty folder, a camera offline,
//! the same frames as last night — the loop neither labels, trains nor gates: it says so and the
//! night ends 0, with nothing set aside. Frames still being written (modified within
//! [`SETTLE_TIME`]) are waited for once, then counted.
//!
//! Contents, not paths: a folder moved or remounted with the same frames is not new, and a camera
//! that reuses file names with new pixels is.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::{Context as _, ensure};
use headroom_core::imageio::SETTLE_TIME;

/// The file in the state folder that records what the last finished run was gated on.
pub const GATED: &str = "gated.json";

/// What the last finished run was gated on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Gated {
    /// Its id.
    pub run: String,
    /// The SHA-256 of every image its labelled set indexed.
    pub images: BTreeSet<String>,
}

/// What a night found in the images folder.
#[derive(Debug, Clone, Serialize)]
pub struct Look {
    /// Images listed (as `headroom label` lists them).
    pub images: usize,
    /// Readable, settled images whose contents the last finished run did not see.
    pub new: usize,
    /// Images the last finished run saw (the same contents, under any name).
    pub seen: usize,
    /// Images still being written when looked at (after one wait of the settle time).
    pub fresh: usize,
    /// Images that could not be read, or are empty.
    pub unreadable: usize,
    /// The last finished run, when there is one.
    pub since: Option<String>,
}

impl Look {
    /// Whether there is nothing to train on that was not gated already.
    pub fn quiet(&self) -> bool {
        self.new == 0
    }

    /// The night's one line when it is quiet.
    pub fn message(&self, images: &Path) -> String {
        let mut parts = vec![match (&self.since, self.images) {
            (_, 0) => format!("no image in {}", images.display()),
            (Some(_), _) => format!("{} images, all seen by it", self.seen),
            (None, _) => format!("{} images, none usable", self.images),
        }];
        if self.fresh > 0 {
            parts.push(format!("{} still being written (left for the next night)", self.fresh));
        }
        if self.unreadable > 0 {
            parts.push(format!("{} unreadable or empty", self.unreadable));
        }
        let since = self.since.as_deref().map(|run| format!(" since run {run}")).unwrap_or_default();
        format!("nothing new{since}: {}; no training tonight, the deployed model stays", parts.join(", "))
    }
}

/// What the last finished run in `work` was gated on; a damaged file counts as none (the next run
/// trains, and writes it anew), with a warning.
pub fn gated(work: &Path) -> Gated {
    let path = work.join(GATED);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
            tracing::warn!("{}: damaged ({e}); tonight's images all count as new", path.display());
            Gated::default()
        }),
        Err(_) => Gated::default(),
    }
}

/// Records that run `run` was gated on the images its labelled set (`<work>/labelled`) indexed.
pub fn record(work: &Path, run: &str) -> crate::Result<()> {
    let images = crate::sources::indexed(&work.join("labelled"))?;
    let gated = Gated { run: run.to_string(), images };
    let text = serde_json::to_string(&gated)? + "\n";
    headroom_core::fsio::write_atomic(&work.join(GATED), text.as_bytes())?;
    Ok(())
}

/// Looks at `images` as the label step would list it (the state folder's `labelled` excluded), and
/// counts the contents the last finished run did not see. When nothing new is settled yet but some
/// frames are still being written, waits the settle time once and looks again.
pub fn look(images: &Path, work: &Path) -> crate::Result<Look> {
    let gated = gated(work);
    let since = Some(gated.run.clone()).filter(|r| !r.is_empty());
    let mut look = look_once(images, work, &gated, since.clone())?;
    if look.new == 0 && look.fresh > 0 {
        tracing::info!(
            "{} images are still being written: waiting {} s for them",
            look.fresh,
            SETTLE_TIME.as_secs()
        );
        std::thread::sleep(SETTLE_TIME + Duration::from_millis(100));
        look = look_once(images, work, &gated, since)?;
    }
    Ok(look)
}

fn look_once(images: &Path, work: &Path, gated: &Gated, since: Option<String>) -> crate::Result<Look> {
    ensure!(images.is_dir(), "{}: --images is not a folder (moved or unmounted?)", images.display());
    let listed = headroom_core::dataset::layout::find_images_excluding(
        images,
        "--images",
        &[images.to_path_buf()],
        &[work.join("labelled")],
    )
    .with_context(|| format!("listing {}", images.display()))?;
    let mut look = Look { images: listed.len(), new: 0, seen: 0, fresh: 0, unreadable: 0, since };
    let known = crate::sources::Known::read(&work.join("labelled"));
    let now = SystemTime::now();
    for source in &listed {
        let meta = match std::fs::metadata(source) {
            Ok(meta) if meta.len() > 0 => meta,
            _ => {
                look.unreadable += 1;
                continue;
            }
        };
        let modified = meta.modified().ok().and_then(|m| now.duration_since(m).ok());
        // As `headroom label` reads it: no time, or one in the future, is no write in progress.
        if modified.is_some_and(|age| age < SETTLE_TIME) {
            look.fresh += 1;
            continue;
        }
        let key = source.strip_prefix(images).unwrap_or(source).display().to_string();
        match known.sha256(&key, source) {
            Some(sha) if gated.images.contains(&sha) => look.seen += 1,
            Some(_) => look.new += 1,
            None => look.unreadable += 1,
        }
    }
    Ok(look)
}

#[cfg(test)]
mod tests {
    use super::{Gated, look, record};
    use std::time::{Duration, SystemTime};

    fn settle(path: &std::path::Path) {
        let file = std::fs::File::options().write(true).open(path).expect("open");
        file.set_modified(SystemTime::now() - Duration::from_secs(60)).expect("mtime");
    }

    #[test]
    fn an_empty_folder_is_a_quiet_night() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (images, work) = (dir.path().join("camera"), dir.path().join("work"));
        std::fs::create_dir_all(&images).expect("mkdir");
        let look = look(&images, &work).expect("look");
        assert!(look.quiet(), "{look:?}");
        assert!(look.message(&images).starts_with("nothing new: no image in"), "{}", look.message(&images));
    }

    #[test]
    fn contents_seen_by_the_last_run_are_not_new_under_any_name_and_changed_pixels_are() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (images, work) = (dir.path().join("camera"), dir.path().join("work"));
        std::fs::create_dir_all(work.join("labelled")).expect("mkdir");
        std::fs::create_dir_all(&images).expect("mkdir");
        let index = r#"{"a.png": "5d41402abc4b2a76b9719d911017c592"}"#;
        std::fs::write(work.join("labelled/field-sources.json"), index).expect("index");
        record(&work, "20261207T010000Z").expect("record");
        let gated: Gated =
            serde_json::from_str(&std::fs::read_to_string(work.join(super::GATED)).expect("read"))
                .expect("gated.json");
        assert_eq!(gated.run, "20261207T010000Z");
        // The same bytes under a new name: seen. (The index holds a made-up hash: only new bytes.)
        std::fs::write(images.join("frame.png"), b"pixels").expect("write");
        settle(&images.join("frame.png"));
        let first = look(&images, &work).expect("look");
        assert_eq!((first.new, first.seen), (1, 0), "{first:?}");
        let sha = headroom_core::hash::sha256_hex(b"pixels");
        std::fs::write(work.join("labelled/field-sources.json"), format!(r#"{{"x/old-name.png": "{sha}"}}"#))
            .expect("index");
        record(&work, "20261207T020000Z").expect("record");
        let renamed = look(&images, &work).expect("look");
        assert!(renamed.quiet() && renamed.seen == 1, "{renamed:?}");
        assert!(renamed.message(&images).contains("since run 20261207T020000Z: 1 images, all seen"));
        // The camera reuses the name with new pixels: new.
        std::fs::write(images.join("frame.png"), b"other pixels").expect("write");
        settle(&images.join("frame.png"));
        assert_eq!(look(&images, &work).expect("look").new, 1);
    }

    #[test]
    fn a_frame_still_being_written_is_waited_for_once_then_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (images, work) = (dir.path().join("camera"), dir.path().join("work"));
        std::fs::create_dir_all(&images).expect("mkdir");
        std::fs::write(images.join("frame.jpg"), b"just written").expect("write");
        let look = look(&images, &work).expect("look");
        assert_eq!((look.new, look.fresh), (1, 0), "waited the settle time, then counted: {look:?}");
    }
}
