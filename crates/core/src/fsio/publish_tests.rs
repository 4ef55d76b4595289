use super::*;

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read")
}

/// A journal as a publisher that died after `renamed` of its renames leaves it: the set's
/// temporaries written (as `pid`'s), `renamed` of them renamed over the old targets.
fn half_published(dir: &Path, pid: u32, renamed: usize) -> PathBuf {
    let journal = dir.join(".m.export.journal");
    let mut renames = Vec::new();
    for (i, name) in ["m.int8.onnx", "m.int8.calib", "m.fp16.onnx"].iter().enumerate() {
        let tmp = format!(".{name}.{pid}.tmp");
        std::fs::write(dir.join(&tmp), format!("B {name}")).expect("temporary");
        if i < renamed {
            std::fs::rename(dir.join(&tmp), dir.join(name)).expect("rename");
        }
        renames.push(Rename { temporary: tmp, target: name.to_string() });
    }
    let text = serde_json::to_vec(&Journal { pid, renames }).expect("json");
    std::fs::write(&journal, text).expect("journal");
    journal
}

fn old_set(dir: &Path) {
    for name in ["m.int8.onnx", "m.int8.calib", "m.fp16.onnx"] {
        std::fs::write(dir.join(name), format!("A {name}")).expect("old");
    }
}

#[test]
fn nothing_is_visible_before_publish_and_everything_after_with_no_journal_left() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    old_set(d);
    let mut set = FileSet::new(d.join(".m.export.journal"));
    let tmp = set.write(&d.join("m.int8.onnx"), b"B1").expect("write");
    assert_eq!(std::fs::read(&tmp).expect("the temporary holds it"), b"B1");
    set.write(&d.join("m.int8.onnx"), b"B m.int8.onnx").expect("rewrite");
    set.write(&d.join("m.int8.calib"), b"B m.int8.calib").expect("write");
    assert_eq!(read(&d.join("m.int8.onnx")), "A m.int8.onnx", "not visible before publish");
    let mut seen = Vec::new();
    let published = set.publish_observed(|n| seen.push(n)).expect("publish");
    assert_eq!(published, [d.join("m.int8.onnx"), d.join("m.int8.calib")]);
    assert_eq!(seen, [1, 2]);
    assert_eq!(
        (read(&d.join("m.int8.onnx")), read(&d.join("m.int8.calib"))),
        ("B m.int8.onnx".into(), "B m.int8.calib".into())
    );
    assert_eq!(names(d), ["m.fp16.onnx", "m.int8.calib", "m.int8.onnx"], "no temporary, no journal");
}

#[test]
fn a_dropped_set_removes_its_temporaries_and_a_file_elsewhere_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let mut set = FileSet::new(d.join(".j"));
    set.write(&d.join("a"), b"a").expect("write");
    std::fs::create_dir(d.join("sub")).expect("mkdir");
    let err = set.write(&d.join("sub/b"), b"b").expect_err("another folder");
    assert!(err.to_string().contains("not in the folder of the journal"), "{err}");
    drop(set);
    assert_eq!(names(d), ["sub"]);
}

#[test]
fn a_journal_with_every_file_there_is_completed() {
    for renamed in 0..=3 {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        old_set(d);
        let journal = half_published(d, 4_000_000, renamed);
        let recovery = recover_file_set(&journal).expect("recover");
        let expected: Vec<PathBuf> =
            ["m.int8.onnx", "m.int8.calib", "m.fp16.onnx"][renamed..].iter().map(|n| d.join(n)).collect();
        assert_eq!(recovery, Recovery::Completed { pid: 4_000_000, renamed: expected }, "{renamed}");
        for name in ["m.int8.onnx", "m.int8.calib", "m.fp16.onnx"] {
            assert_eq!(read(&d.join(name)), format!("B {name}"), "{renamed} renamed: {name}");
        }
        assert_eq!(names(d), ["m.fp16.onnx", "m.int8.calib", "m.int8.onnx"]);
        assert_eq!(recover_file_set(&journal).expect("again"), Recovery::Nothing);
    }
}

#[test]
fn a_journal_with_a_temporary_gone_is_undone_so_no_part_of_its_set_stays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    old_set(d);
    let journal = half_published(d, 4_000_000, 1);
    std::fs::remove_file(d.join(".m.fp16.onnx.4000000.tmp")).expect("lose one");
    let recovery = recover_file_set(&journal).expect("recover");
    let removed = vec![d.join("m.int8.onnx"), d.join(".m.int8.calib.4000000.tmp")];
    assert_eq!(recovery, Recovery::Abandoned { pid: 4_000_000, removed });
    assert_eq!(names(d), ["m.fp16.onnx", "m.int8.calib"], "B's int8 gone, A's others untouched");
    assert_eq!(read(&d.join("m.int8.calib")), "A m.int8.calib");
}

#[test]
fn a_journal_naming_files_elsewhere_is_refused_and_touches_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let journal = d.join(".j");
    let renames = vec![Rename { temporary: "../x".into(), target: "y".into() }];
    std::fs::write(&journal, serde_json::to_vec(&Journal { pid: 1, renames }).expect("json")).expect("write");
    let err = recover_file_set(&journal).expect_err("outside").to_string();
    assert!(err.contains("`../x` is not a file name") && err.contains("remove it"), "{err}");
    std::fs::write(&journal, b"{").expect("write");
    assert!(recover_file_set(&journal).is_err());
    assert!(journal.exists());
}
