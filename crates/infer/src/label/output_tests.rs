use headroom_core::boxes::Detection;
use headroom_core::letterbox::LetterboxOptions;
use std::time::Duration;

use super::*;

fn soft(class: usize, score: f32, bbox: Xyxy, scores: Vec<f32>) -> SoftDetection {
    SoftDetection { detection: Detection { bbox, score, class }, anchor: 0, scores }
}

fn job(dir: &Path) -> Job {
    let source = dir.join("src/a.png");
    std::fs::create_dir_all(dir.join("src")).expect("mkdir");
    image::RgbImage::new(8, 8).save(&source).expect("save");
    let (jobs, skipped) = plan_jobs(&dir.join("src"), &dir.join("out")).expect("plan");
    assert!(skipped.is_empty());
    assert_eq!(jobs[0].source, source);
    jobs[0].clone()
}

#[test]
fn records_map_classes_drop_small_boxes_and_line_up_with_labels() {
    // 160x160 input, 320x160 image: scale 0.5, 40 px of padding top and bottom.
    let geometry = Letterbox::new(320, 160, &LetterboxOptions::square(160));
    let names = ["a", "b", "c"].map(String::from);
    let map = ClassMap::parse("0=1,2=0", "--class-map", &names).expect("map");
    let decoded = SoftDecoded {
        kept: vec![
            soft(0, 0.9, Xyxy::new(10.0, 50.0, 30.0, 70.0), vec![0.9, 0.1, 0.2]),
            soft(1, 0.8, Xyxy::new(50.0, 50.0, 70.0, 70.0), vec![0.1, 0.8, 0.0]),
            soft(2, 0.7, Xyxy::new(90.0, 90.0, 91.0, 91.0), vec![0.0, 0.1, 0.7]),
            soft(2, 0.6, Xyxy::new(100.0, 60.0, 120.0, 80.0), vec![0.3, 0.0, 0.6]),
        ],
        top_k: vec![soft(1, 0.95, Xyxy::new(0.0, 40.0, 10.0, 50.0), vec![0.0, 0.95, 0.0])],
    };
    let (labels, soft, dropped) = image_records(&decoded, &geometry, &map, 4.0);
    assert_eq!(dropped, Dropped { unmapped: 1, small: 1 });
    assert_eq!(labels.iter().map(|l| l.class).collect::<Vec<_>>(), vec![1, 0]);
    assert_eq!(soft.nc, 2);
    assert_eq!(soft.kept.len(), labels.len());
    // Box 0: input (10,50)-(30,70) is image (20,20)-(60,60).
    let l = labels[0];
    assert!((l.cx - 40.0 / 320.0).abs() < 1e-6 && (l.w - 40.0 / 320.0).abs() < 1e-6, "{l:?}");
    assert_eq!(soft.kept[0].scores, vec![0.2, 0.9]);
    assert_eq!((soft.kept[1].class, soft.kept[1].teacher_class), (Some(0), 2));
    assert_eq!((soft.top_k[0].class, soft.top_k[0].teacher_class), (None, 1));
}

#[test]
fn finished_images_are_recognised_and_human_labels_are_protected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path());
    assert_eq!(job_state(&job, false), JobState::Todo { target: job.label.clone(), conflict: None });
    let labels = [YoloLabel { class: 0, cx: 0.5, cy: 0.5, w: 0.25, h: 0.25 }];
    let scores =
        SoftScores { beside_human: false, nc: 0, label_sha256: [0; 32], kept: Vec::new(), top_k: Vec::new() };
    let mut scores_one = scores.clone();
    scores_one.kept.push(SoftRecord {
        class: Some(0),
        teacher_class: 0,
        score: 0.9,
        bbox: [0.5; 4],
        scores: Vec::new(),
    });
    {
        let mut batch = DurableBatch::new(1, Duration::ZERO);
        write_image(&mut batch, &job, &job.label, &labels, scores_one, Placement::Symlink).expect("write")
    };
    assert_eq!(job_state(&job, false), JobState::Done(None));
    assert!(matches!(job_state(&job, true), JobState::Todo { conflict: None, .. }));
    assert!(job.image.symlink_metadata().expect("linked").file_type().is_symlink());
    // A person edits the label: it is theirs now.
    std::fs::write(&job.label, "0 0.5 0.5 0.2 0.2\n").expect("edit");
    let JobState::Todo { target, conflict: Some(_) } = job_state(&job, false) else {
        panic!("not protected")
    };
    assert_eq!(target, job.teacher_label);
    {
        let mut batch = DurableBatch::new(1, Duration::ZERO);
        write_image(&mut batch, &job, &target, &labels, scores, Placement::Symlink).expect("write beside")
    };
    assert_eq!(std::fs::read_to_string(&job.label).expect("human"), "0 0.5 0.5 0.2 0.2\n");
    assert!(matches!(job_state(&job, false), JobState::Done(Some(_))));
}

#[test]
fn a_label_without_scores_is_human_and_a_scores_file_alone_is_unfinished() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path());
    std::fs::create_dir_all(job.label.parent().expect("parent")).expect("mkdir");
    std::fs::write(&job.label, "").expect("human background label");
    assert!(matches!(job_state(&job, false), JobState::Todo { conflict: Some(_), .. }));
    std::fs::remove_file(&job.label).expect("rm");
    let scores =
        SoftScores { beside_human: false, nc: 0, label_sha256: [1; 32], kept: Vec::new(), top_k: Vec::new() };
    crate::soft_scores::write_soft_scores(&job.scores, &scores).expect("write");
    assert_eq!(job_state(&job, false), JobState::Todo { target: job.label.clone(), conflict: None });
}

#[test]
fn another_file_in_images_is_not_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path());
    std::fs::create_dir_all(job.image.parent().expect("parent")).expect("mkdir");
    std::fs::write(&job.image, b"other").expect("write");
    let empty =
        SoftScores { beside_human: false, nc: 0, label_sha256: [0; 32], kept: Vec::new(), top_k: Vec::new() };
    let mut batch = DurableBatch::new(1, Duration::ZERO);
    let err =
        write_image(&mut batch, &job, &job.label, &[], empty, Placement::Symlink).expect_err("occupied");
    assert!(matches!(err, Error::Output { .. }), "{err}");
    assert_eq!(std::fs::read(&job.image).expect("kept"), b"other");
}

#[test]
fn stale_temporaries_are_recognised() {
    assert!(is_temporary_name(".a.txt.1234.tmp"));
    assert!(
        !is_temporary_name("a.txt.1234.tmp")
            && !is_temporary_name(".a.txt.tmp")
            && !is_temporary_name(".x.ab.tmp")
    );
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("sub")).expect("mkdir");
    std::fs::write(dir.path().join("sub/.a.txt.99.tmp"), b"x").expect("write");
    std::fs::write(dir.path().join("sub/a.txt"), b"x").expect("write");
    assert_eq!(remove_stale_temporaries(dir.path()), 1);
    assert!(dir.path().join("sub/a.txt").exists());
}

/// A hard-linked image keeps the pixels that were labelled when the camera deletes its file or moves
/// its folder; a dangling symbolic link (the folder moved) is made again by `restore_image`.
#[test]
fn hard_linked_images_outlive_their_source_and_dangling_links_are_restored() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path());
    place_image(&job, Placement::Hardlink).expect("hard link");
    let (image, source) =
        (std::fs::metadata(&job.image).expect("image"), std::fs::metadata(&job.source).expect("src"));
    assert!(!job.image.symlink_metadata().expect("entry").file_type().is_symlink());
    assert_eq!((image.dev(), image.ino()), (source.dev(), source.ino()), "the same file");
    let bytes = std::fs::read(&job.source).expect("read");
    std::fs::remove_file(&job.source).expect("the camera deletes its frame");
    assert_eq!(std::fs::read(&job.image).expect("still there"), bytes);

    let dir = tempfile::tempdir().expect("tempdir");
    let linked = self::job(dir.path());
    place_image(&linked, Placement::Symlink).expect("symlink");
    let moved = dir.path().join("moved");
    std::fs::rename(dir.path().join("src"), &moved).expect("the folder moves");
    assert!(!linked.image.exists(), "dangling");
    let (jobs, _) = plan_jobs(&moved, &dir.path().join("out")).expect("plan");
    assert!(restore_image(&jobs[0], Placement::Symlink).expect("restore"));
    assert!(jobs[0].image.exists());
    assert!(!restore_image(&jobs[0], Placement::Symlink).expect("nothing to do"));
}
