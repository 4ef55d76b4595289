//! Where images and labels live: the image list of a split and the images/ ↔ labels/ mapping, as
//! Ultralytics' `BaseDataset.get_img_files` and `img2label_paths` compute them.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use crate::{Error, Result};

/// Image file extensions Ultralytics lists (`IMG_FORMATS`), lowercase. headroom decodes PNG, JPEG (and
/// MPO, a JPEG), BMP, WebP and TIFF; files of the other formats (AVIF, DNG, HEIC/HEIF, JPEG 2000) are
/// listed and then reported as unreadable.
pub const IMG_FORMATS: [&str; 13] =
    ["avif", "bmp", "dng", "heic", "heif", "jp2", "jpeg", "jpg", "mpo", "png", "tif", "tiff", "webp"];

/// Whether `path` names an image by its extension (case-insensitive), as Ultralytics decides it.
pub fn is_image_path(path: &Path) -> bool {
    path.extension()
        .and_then(OsStr::to_str)
        .is_some_and(|ext| IMG_FORMATS.iter().any(|f| f.eq_ignore_ascii_case(ext)))
}

/// The label file of an image: the last `images` folder of the path becomes `labels`, the extension
/// becomes `.txt` (`/data/images/train/a.jpg` → `/data/labels/train/a.txt`). A path without an
/// `images` folder keeps its folder, as in Ultralytics.
pub fn label_path_for(image: &Path) -> PathBuf {
    swap_folder(image, "images", "labels").with_extension("txt")
}

/// `path` with its last folder component named `from` (not the file name) renamed `to`.
fn swap_folder(path: &Path, from: &str, to: &str) -> PathBuf {
    let components: Vec<Component<'_>> = path.components().collect();
    let last_folder = components.len().saturating_sub(1);
    let at = components[..last_folder].iter().rposition(|c| c.as_os_str() == from);
    components
        .iter()
        .enumerate()
        .map(|(i, c)| if Some(i) == at { OsStr::new(to) } else { c.as_os_str() })
        .collect()
}

/// The images of a split, sorted, as Ultralytics lists them: a folder is searched recursively (hidden
/// files and folders skipped); any other file is a UTF-8 list of image paths, one a line, where `./x`
/// is relative to the list's folder, another relative path is tried relative to the list's folder and
/// then to the working directory, and an absolute one is used as is. Only names with an image
/// extension ([`IMG_FORMATS`]) are kept. Listed images are not checked here, except that a FIFO, a
/// socket or a device (links followed) is left out with a warning naming it: opening one would hang
/// or never end ([`crate::fsio::special_file`]).
///
/// Errors name `config` (the data.yaml) and `key`: a source that does not exist, or no image at all.
/// A `key` that starts with `--` is a command-line flag (`--calib`, `--images`): `config` is then the
/// folder given with it, and errors name the flag, not a YAML key.
pub fn list_images(config: &Path, key: &str, sources: &[PathBuf]) -> Result<Vec<PathBuf>> {
    list_images_excluding(config, key, sources, &[])
}

/// How an error names where the images come from: a flag as given, a data.yaml key as key `val:`.
fn source_name(key: &str) -> String {
    if key.starts_with("--") { key.to_string() } else { format!("key `{key}:`") }
}

/// [`list_images`], never entering the folders in `exclude` (e.g. an output folder inside the
/// images). Folders are visited once each, by their real path: a symbolic link that leads back into
/// a folder already walked (a loop, or a second way to the same folder) adds nothing.
pub fn list_images_excluding(
    config: &Path,
    key: &str,
    sources: &[PathBuf],
    exclude: &[PathBuf],
) -> Result<Vec<PathBuf>> {
    let images = find_images_excluding(config, key, sources, exclude)?;
    if images.is_empty() {
        let message = if key.starts_with("--") {
            format!("no images for {key} in this folder (extensions: {})", IMG_FORMATS.join(", "))
        } else {
            let list: Vec<String> = sources.iter().map(|s| s.display().to_string()).collect();
            format!(
                "key `{key}:` has no images in {} (extensions: {})",
                list.join(", "),
                IMG_FORMATS.join(", ")
            )
        };
        return Err(Error::Dataset { path: config.to_path_buf(), message });
    }
    Ok(images)
}

/// [`list_images_excluding`], where finding no image is an answer (an empty list), not an error: a
/// camera folder that is empty tonight.
pub fn find_images_excluding(
    config: &Path,
    key: &str,
    sources: &[PathBuf],
    exclude: &[PathBuf],
) -> Result<Vec<PathBuf>> {
    let mut walk = Walk {
        visited: HashSet::new(),
        exclude: exclude.iter().filter_map(|p| std::fs::canonicalize(p).ok()).collect(),
        skipped_links: 0,
        read: read_folder,
    };
    let mut images = Vec::new();
    for source in sources {
        if source.is_dir() {
            walk.folder(source, &mut images)?;
        } else if source.is_file() {
            images.extend(read_image_list(source)?.into_iter().filter(|p| !is_image_path(p) || regular(p)));
        } else if let Some(kind) = crate::fsio::special_file(source) {
            let message = format!("{} points to {}, which is {kind}", source_name(key), source.display());
            return Err(Error::Dataset { path: config.to_path_buf(), message });
        } else {
            let message =
                format!("{} points to {}, which does not exist", source_name(key), source.display());
            return Err(Error::Dataset { path: config.to_path_buf(), message });
        }
    }
    if walk.skipped_links > 0 {
        tracing::warn!(
            "{} folder link(s) under {} lead to a folder already listed (a loop or a second path to it): \
             each folder is read once",
            walk.skipped_links,
            sources.iter().map(|s| s.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    images.retain(|p| is_image_path(p));
    images.sort_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
    Ok(images)
}

/// A recursive folder walk that visits each real folder once.
struct Walk {
    /// Real paths of the folders entered so far.
    visited: HashSet<PathBuf>,
    /// Real paths never entered.
    exclude: Vec<PathBuf>,
    /// Folders reached again through a link (reported once, at the end).
    skipped_links: usize,
    /// The entries of a folder ([`read_folder`]; a test gives one that fails).
    read: fn(&Path) -> std::io::Result<Vec<PathBuf>>,
}

/// The paths of the entries of `folder`.
fn read_folder(folder: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::read_dir(folder)?.map(|entry| entry.map(|e| e.path())).collect()
}

impl Walk {
    /// Files under `folder` with a dot in their name, recursively, skipping hidden entries (like
    /// Python's `glob("**/*.*", recursive=True)`, but entering each real folder once).
    ///
    /// A folder below the first that cannot be read (`lost+found` on an SD card, for a user other
    /// than root) is left out with a warning naming it, as an unreadable image is: one folder never
    /// stops the listing. The first folder itself must be readable.
    fn folder(&mut self, folder: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let real = std::fs::canonicalize(folder).map_err(|e| Error::io(folder, e))?;
        if self.exclude.contains(&real) {
            return Ok(());
        }
        if !self.visited.insert(real) {
            self.skipped_links += 1;
            return Ok(());
        }
        let entries = (self.read)(folder).map_err(|e| Error::io(folder, e))?;
        for path in entries {
            let Some(name) = path.file_name() else { continue };
            if name.as_encoded_bytes().first() == Some(&b'.') {
                continue;
            }
            if path.is_dir() {
                if let Err(e) = self.folder(&path, out) {
                    tracing::warn!("{}: skipped, its images left out: {e}", path.display());
                }
            } else if name.as_encoded_bytes().contains(&b'.') && (!is_image_path(&path) || regular(&path)) {
                out.push(path);
            }
        }
        Ok(())
    }
}

/// Whether `path` may be listed as an image: anything but a FIFO, a socket or a device (links
/// followed; a path that cannot be read is listed, and reported when it is read). Warns of the
/// others, naming what they are.
fn regular(path: &Path) -> bool {
    match crate::fsio::special_file(path) {
        None => true,
        Some(kind) => {
            tracing::warn!("{}: skipped: it is {kind}, not a regular file", path.display());
            false
        }
    }
}

/// The entries of an image list file (see [`list_images`]).
fn read_image_list(list: &Path) -> Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string(list).map_err(|e| Error::io(list, e))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let folder = list.parent().unwrap_or(Path::new(""));
    let entries = text.trim().lines().map(|line| {
        if let Some(rest) = line.strip_prefix("./") {
            return folder.join(rest);
        }
        let entry = PathBuf::from(line);
        let beside_list = folder.join(&entry);
        if entry.is_relative() && (beside_list.exists() || !entry.exists()) { beside_list } else { entry }
    });
    Ok(entries.collect())
}

/// Label files (`*.txt`) in the label folders of `images` that belong to no image: no file with the
/// same name and an image extension in the matching images/ folder. `classes.txt` (written by
/// labelImg and CVAT beside the labels) is not a label file and is never reported.
pub fn orphan_labels(images: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut label_folders: Vec<PathBuf> = images
        .iter()
        .filter_map(|image| label_path_for(image).parent().map(Path::to_path_buf))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    label_folders.sort();
    let mut orphans = Vec::new();
    for folder in label_folders {
        if !folder.is_dir() {
            continue;
        }
        let image_folder = swap_folder(&folder.join("x"), "labels", "images");
        let stems = image_stems(image_folder.parent().unwrap_or(Path::new("")));
        let entries = std::fs::read_dir(&folder).map_err(|e| Error::io(&folder, e))?;
        for entry in entries {
            let path = entry.map_err(|e| Error::io(&folder, e))?.path();
            let is_label = path.extension() == Some(OsStr::new("txt")) && path.is_file();
            if !is_label || path.file_name() == Some(OsStr::new("classes.txt")) {
                continue;
            }
            if !path.file_stem().is_some_and(|stem| stems.contains(stem)) {
                orphans.push(path);
            }
        }
    }
    orphans.sort();
    Ok(orphans)
}

/// Stems of the image files directly in `folder` (empty if it cannot be read).
fn image_stems(folder: &Path) -> HashSet<OsString> {
    let Ok(entries) = std::fs::read_dir(folder) else { return HashSet::new() };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_image_path(p))
        .filter_map(|p| p.file_stem().map(OsStr::to_os_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_paths_as_ultralytics() {
        let cases = [
            ("/d/images/train/a.jpg", "/d/labels/train/a.txt"),
            ("/images/d/images/b.PNG", "/images/d/labels/b.txt"),
            ("/d/images/x.tar.jpeg", "/d/labels/x.tar.txt"),
            ("/d/pics/a.jpg", "/d/pics/a.txt"),
            ("/d/images", "/d/images.txt"),
            ("rel/images/a.webp", "rel/labels/a.txt"),
        ];
        for (image, label) in cases {
            assert_eq!(label_path_for(Path::new(image)), Path::new(label), "{image}");
        }
    }

    #[test]
    fn image_extensions() {
        assert!(is_image_path(Path::new("a.JPG")));
        assert!(is_image_path(Path::new("a.tiff")));
        assert!(!is_image_path(Path::new("a.gif")));
        assert!(!is_image_path(Path::new("jpg")));
    }

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, b"x").expect("write");
    }

    #[test]
    fn folders_recursive_sorted_hidden_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        for name in
            ["images/b.png", "images/sub/a.jpg", "images/c.txt", "images/.hidden.png", "images/.h/x.png"]
        {
            touch(&d.join(name));
        }
        let got = list_images(Path::new("data.yaml"), "train", &[d.join("images")]).expect("listed");
        assert_eq!(got, [d.join("images/b.png"), d.join("images/sub/a.jpg")]);
    }

    #[test]
    fn an_unreadable_subfolder_is_left_out_and_the_first_folder_must_be_readable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        for name in ["camera/a.png", "camera/lost+found/x.png", "camera/day2/b.jpg"] {
            touch(&d.join(name));
        }
        // As `read_dir` answers a user other than root for `lost+found` (mode 0700, owner root).
        fn refusing(folder: &Path) -> std::io::Result<Vec<PathBuf>> {
            if folder.ends_with("lost+found") {
                return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
            }
            read_folder(folder)
        }
        let walk = |root: &Path| {
            let mut walk =
                Walk { visited: HashSet::new(), exclude: Vec::new(), skipped_links: 0, read: refusing };
            let mut out = Vec::new();
            walk.folder(root, &mut out).map(|()| {
                out.sort();
                out
            })
        };
        let got = walk(&d.join("camera")).expect("one unreadable subfolder does not stop the listing");
        assert_eq!(got, [d.join("camera/a.png"), d.join("camera/day2/b.jpg")]);
        let err = walk(&d.join("camera/lost+found")).expect_err("the first folder must be readable");
        assert!(err.to_string().contains("lost+found"), "{err}");
    }

    #[test]
    fn image_lists_resolve_relative_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        touch(&d.join("lists/images/a.jpg"));
        touch(&d.join("lists/images/b.jpg"));
        let absolute = d.join("elsewhere/images/c.png");
        let list = d.join("lists/train.txt");
        let text = format!("\u{feff}./images/a.jpg\nimages/b.jpg\n{}\nnotes.md\n\n", absolute.display());
        std::fs::write(&list, text).expect("write");
        let got = list_images(Path::new("data.yaml"), "train", &[list]).expect("listed");
        assert_eq!(got, [absolute, d.join("lists/images/a.jpg"), d.join("lists/images/b.jpg")]);
    }

    #[test]
    fn missing_source_and_no_images_name_yaml_and_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let err = list_images(Path::new("ds/data.yaml"), "val", &[d.join("nowhere")]).expect_err("missing");
        assert!(err.to_string().starts_with("ds/data.yaml: key `val:` points to "), "{err}");
        std::fs::create_dir_all(d.join("empty")).expect("mkdir");
        let err = list_images(Path::new("ds/data.yaml"), "val", &[d.join("empty")]).expect_err("empty");
        assert!(err.to_string().starts_with("ds/data.yaml: key `val:` has no images in "), "{err}");
        let err = list_images(&d.join("empty"), "--calib", &[d.join("empty")]).expect_err("empty");
        assert!(err.to_string().contains("empty: no images for --calib in this folder"), "{err}");
        assert!(!err.to_string().contains("key"), "{err}");
    }

    #[test]
    fn orphans_are_labels_without_images() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        for name in ["images/a.jpg", "images/b.png", "labels/a.txt", "labels/b.txt", "labels/c.txt"] {
            touch(&d.join(name));
        }
        touch(&d.join("labels/classes.txt"));
        let images = [d.join("images/a.jpg")];
        assert_eq!(orphan_labels(&images).expect("listed"), [d.join("labels/c.txt")]);
    }
}

#[cfg(all(test, unix))]
mod link_tests {
    use super::*;

    /// Regression: a FIFO named like an image hung every command that read the split (the open
    /// waits for a writer); a link to /dev/zero would be read forever.
    #[test]
    fn regression_fifos_sockets_and_devices_are_left_out_of_walks_and_lists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = dir.path().join("images");
        std::fs::create_dir_all(images.join("sub")).expect("mkdir");
        std::fs::write(images.join("a.jpg"), b"x").expect("write");
        std::os::unix::fs::symlink(images.join("a.jpg"), images.join("sub/link.jpg")).expect("link");
        let fifo = images.join("sub/pipe.jpg");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
        let _socket = std::os::unix::net::UnixListener::bind(images.join("socket.png")).expect("socket");
        std::os::unix::fs::symlink("/dev/zero", images.join("zero.jpg")).expect("link");
        let cfg = Path::new("data.yaml");
        let walked = list_images(cfg, "val", std::slice::from_ref(&images)).expect("lists");
        assert_eq!(walked, [images.join("a.jpg"), images.join("sub/link.jpg")]);
        let list = dir.path().join("val.txt");
        std::fs::write(&list, "images/a.jpg\nimages/sub/pipe.jpg\nimages/zero.jpg\n").expect("write");
        let listed = list_images(cfg, "val", &[list]).expect("lists");
        assert_eq!(listed, [dir.path().join("images/a.jpg")]);
        let err = list_images(cfg, "val", &[fifo]).expect_err("a FIFO as the source");
        assert!(err.to_string().contains("which is a FIFO (named pipe)"), "{err}");
    }

    #[test]
    fn regression_symlink_loops_are_walked_once_and_excluded_folders_not_at_all() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("photos");
        std::fs::create_dir_all(root.join("day")).expect("mkdir");
        std::fs::write(root.join("day/a.jpg"), b"x").expect("write");
        std::fs::write(root.join("b.jpg"), b"x").expect("write");
        // Two loops back to the root (one through a link to a link), and a second way to `day`.
        std::os::unix::fs::symlink(&root, root.join("day/up")).expect("link");
        std::os::unix::fs::symlink(root.join("day/up"), root.join("again")).expect("link");
        std::os::unix::fs::symlink(root.join("day"), root.join("day2")).expect("link");
        // An output folder inside the images, holding links to them (what `label --out` writes).
        std::fs::create_dir_all(root.join("out/images")).expect("mkdir");
        std::os::unix::fs::symlink(root.join("b.jpg"), root.join("out/images/b.jpg")).expect("link");
        let cfg = Path::new("data.yaml");
        let all = list_images(cfg, "val", std::slice::from_ref(&root)).expect("lists");
        let names: Vec<String> =
            all.iter().map(|p| p.strip_prefix(&root).expect("under root").display().to_string()).collect();
        assert_eq!(names.len(), 3, "each real folder once: {names:?}");
        assert!(names.contains(&"b.jpg".to_string()) && names.contains(&"out/images/b.jpg".to_string()));
        let without_out = list_images_excluding(cfg, "val", std::slice::from_ref(&root), &[root.join("out")])
            .expect("lists");
        assert_eq!(without_out.len(), 2, "{without_out:?}");
        assert!(without_out.iter().all(|p| !p.starts_with(root.join("out"))));
    }
}
