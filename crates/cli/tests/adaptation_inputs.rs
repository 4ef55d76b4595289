//! Bad input to the adaptation parts of `headroom train` (issue "adaptation"): a replay set with
//! other class names, too few new images to re-normalise on, and an empty set of new images are
//! each refused in a line naming the file, before anything is written (no run folder).

mod common;

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use std::path::Path;

    use crate::common::{s, short_train, synth_field};

    /// `headroom train` on `data` with `extra`, in `project/run`: refused naming `file` and `want`,
    /// with no run folder left.
    fn refused(data: &Path, project: &Path, extra: &[&str], file: &Path, want: &str) {
        let out = short_train(data, project, "run", "1", false, extra);
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} trained:\n{text}");
        assert!(
            text.contains(s(file)) && text.contains(want),
            "{extra:?}: `{want}` or the file not in:\n{text}"
        );
        assert!(!project.join("run").exists(), "{extra:?}: a run folder was written");
    }

    /// A field dataset of `train` + `val` images under `dir`, and an old one of 8 beside it.
    fn datasets(dir: &Path, train: usize, val: usize) -> (std::path::PathBuf, std::path::PathBuf) {
        (synth_field(dir, train, val), synth_field(&dir.join("old"), 8, 1))
    }

    #[test]
    fn a_replay_set_of_other_classes_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (data, old) = datasets(dir.path(), 4, 2);
        let yaml = std::fs::read_to_string(&old).expect("data.yaml");
        let renamed = yaml.replace("circle", "bolt").replace("square", "nut").replace("triangle", "washer");
        assert_ne!(yaml, renamed, "the synth data.yaml names its classes");
        std::fs::write(&old, renamed).expect("write");
        let project = dir.path().join("runs");
        refused(
            &data,
            &project,
            &["--replay", s(&old)],
            &old,
            "are not the model's (circle, square, triangle)",
        );
    }

    #[test]
    fn too_few_new_images_to_renormalise_on_are_refused_naming_the_dataset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (data, old) = datasets(dir.path(), 4, 2);
        let project = dir.path().join("runs");
        refused(
            &data,
            &project,
            &["--replay", s(&old), "--renorm", "1"],
            &data,
            "4 training images are too few",
        );
    }

    #[test]
    fn an_empty_set_of_new_images_is_refused_naming_the_dataset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 1, 2);
        let images = data.parent().expect("dir").join("images/train");
        for entry in std::fs::read_dir(&images).expect("images") {
            std::fs::remove_file(entry.expect("entry").path()).expect("remove");
        }
        let project = dir.path().join("runs");
        refused(&data, &project, &[], &data, "has no images");
    }
}
