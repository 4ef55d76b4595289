//! Issue 32, "an unattended field loop never gets stuck": what a deploy and a rollback keep (owner,
//! group, mode, a symbolic link), what a rollback refuses, the temporaries a kill leaves, a state
//! folder among the images, holdout images without labels, the service's paths and calendar, and an
//! image whose name holds a newline.

mod common;

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    use std::path::{Path, PathBuf};

    use crate::common::field::{field_args, run, scene, sha, work};
    use crate::common::{demo_model, headroom_command, output_text as text, repo_root, s};

    /// nobody:nogroup on Debian and Ubuntu (the tests run as root, which may give files to them).
    const NOBODY: u32 = 65534;

    fn teacher() -> PathBuf {
        repo_root().join("models/demo/teacher-shapes-160.onnx")
    }

    fn fixture(name: &str) -> PathBuf {
        repo_root().join("tests/fixtures/onnx").join(name)
    }

    fn owner_group_mode(path: &Path) -> (u32, u32, u32) {
        let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        (meta.uid(), meta.gid(), meta.mode() & 0o7777)
    }

    fn give_to_nobody(path: &Path) {
        std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).expect("chown nobody:nogroup");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o640)).expect("chmod 0640");
    }

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    fn rollback_args(model: &Path) -> Vec<String> {
        strings(&["field", "rollback", "--model", s(model)])
    }

    /// The names in `folder` ending in `.tmp`.
    fn temporaries(folder: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(folder)
            .map(|entries| {
                entries.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned())).collect()
            })
            .unwrap_or_default();
        names.retain(|n| n.ends_with(".tmp"));
        names.sort();
        names
    }

    /// Removes the label files of the first `n` images of a synthetic set's val split.
    fn remove_val_labels(data_yaml: &Path, n: usize) {
        let labels = data_yaml.parent().expect("folder").join("labels/val");
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(&labels).expect("labels").filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for file in files.iter().take(n) {
            std::fs::remove_file(file).expect("remove a label file");
        }
    }

    #[test]
    fn a_deploy_keeps_owner_group_mode_and_a_symlink_and_the_gate_counts_holdout_images_without_labels() {
        let scene = scene();
        // The service's model: a symbolic link to a versioned file owned by the service's user.
        let versions = scene.root.join("app/versions");
        std::fs::create_dir_all(&versions).expect("mkdir");
        let target = versions.join("v1.onnx");
        std::fs::rename(&scene.deployed, &target).expect("move the model");
        std::os::unix::fs::symlink("versions/v1.onnx", &scene.deployed).expect("symlink");
        give_to_nobody(&target);
        remove_val_labels(&scene.holdout, 1);

        let out = run(&field_args(&scene, &scene.always), &[]);
        assert!(out.status.success(), "{}", text(&out));
        let candidate = sha(&work(&scene).join("run/export/best.fp16.onnx"));
        let link = std::fs::symlink_metadata(&scene.deployed).expect("lstat");
        assert!(link.file_type().is_symlink(), "the deployed path stays a symbolic link");
        assert_eq!(std::fs::read_link(&scene.deployed).expect("readlink"), Path::new("versions/v1.onnx"));
        assert_eq!(sha(&target), candidate, "the link's target is the candidate");
        assert_eq!(owner_group_mode(&target), (NOBODY, NOBODY, 0o640), "owner, group and mode kept");
        let prev = scene.root.join("app/model.onnx.prev");
        assert_eq!(sha(&prev), scene.original, ".prev beside the link holds the original");
        assert_eq!(owner_group_mode(&prev), (NOBODY, NOBODY, 0o640), ".prev as private as the model");
        assert!(temporaries(&versions).is_empty() && temporaries(&scene.root.join("app")).is_empty());

        // The holdout image without a label file: warned, counted in gate.json and report.md.
        assert!(
            text(&out).contains("1 of the 12 images of its val split have no label file"),
            "{}",
            text(&out)
        );
        assert!(text(&out).contains("counts as background"), "{}", text(&out));
        let gate: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(work(&scene).join("run/gate.json")).expect("gate.json"),
        )
        .expect("gate json");
        assert_eq!(gate["holdout"]["without_labels"], 1, "{gate}");
        assert_eq!(gate["old"]["without_labels"], 0, "{gate}");
        let report = std::fs::read_to_string(work(&scene).join("run/report.md")).expect("report.md");
        assert!(report.contains("without label file (background)"), "{report}");
        assert!(report.contains("`) | 12 | 1 | "), "the holdout row counts 1 of 12: {report}");

        // A rollback through the link: the link stays, the target keeps its owner and mode.
        let out = run(&rollback_args(&scene.deployed), &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(std::fs::symlink_metadata(&scene.deployed).expect("lstat").file_type().is_symlink());
        assert_eq!((sha(&target), sha(&prev)), (scene.original.clone(), candidate));
        assert_eq!(owner_group_mode(&target), (NOBODY, NOBODY, 0o640));
    }

    #[test]
    fn rollback_refuses_a_previous_model_that_is_no_detector_like_the_deployed_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let deployed = dir.path().join("model.onnx");
        let prev = dir.path().join("model.onnx.prev");
        let cases: [(PathBuf, Option<&[u8]>, PathBuf, &str); 3] = [
            (demo_model(), Some(b"junk!"), PathBuf::new(), "model.onnx.prev"),
            (
                demo_model(),
                None,
                fixture("yolov8n-w00625-nc3-160.onnx"),
                "classes (0, 1, 2) are not the deployed",
            ),
            (
                fixture("yolov8n-w00625-nc3-160.onnx"),
                None,
                fixture("yolov8n-w00625-nc3-640.onnx"),
                "its input is 640x640, the deployed model's 160x160",
            ),
        ];
        for (current, junk, previous, expected) in cases {
            std::fs::copy(&current, &deployed).expect("copy");
            match junk {
                Some(bytes) => std::fs::write(&prev, bytes).expect("write"),
                None => std::fs::copy(&previous, &prev).map(drop).expect("copy"),
            }
            let (before, before_prev) = (sha(&deployed), sha(&prev));
            let out = run(&rollback_args(&deployed), &[]);
            assert_eq!(out.status.code(), Some(2), "{expected}: {}", text(&out));
            assert!(text(&out).contains(expected), "expected `{expected}` in {}", text(&out));
            assert!(text(&out).contains("nothing was changed"), "{}", text(&out));
            assert_eq!((sha(&deployed), sha(&prev)), (before, before_prev), "{expected}: nothing moved");
        }

        // A valid .prev with the deployed file missing: put in its place, and kept.
        std::fs::copy(teacher(), &prev).expect("copy");
        std::fs::remove_file(&deployed).expect("remove");
        let out = run(&rollback_args(&deployed), &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!((sha(&deployed), sha(&prev)), (sha(&teacher()), sha(&teacher())));

        // A rollback keeps the deployed file's owner, group and mode.
        std::fs::copy(demo_model(), &prev).expect("copy");
        give_to_nobody(&deployed);
        let out = run(&rollback_args(&deployed), &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(sha(&deployed), sha(&demo_model()));
        assert_eq!(owner_group_mode(&deployed), (NOBODY, NOBODY, 0o640));
    }

    /// A pid that ran and ended (the temporaries of a killed deploy name such a process).
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("/bin/true").spawn().expect("/bin/true");
        let pid = child.id();
        child.wait().expect("wait");
        pid
    }

    /// Stale temporaries of `model` (in its folder) and of `work`'s rollback scratch copy, and
    /// files that look alike but must stay; returns (stale, kept).
    fn litter(model: &Path, work: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let (dead, alive) = (dead_pid(), std::process::id());
        let folder = model.parent().expect("folder");
        let name = model.file_name().expect("name").to_string_lossy().into_owned();
        let stale = vec![
            folder.join(format!(".{name}.prev.{dead}.tmp")),
            folder.join(format!(".{name}.{dead}.tmp")),
            work.join(format!(".rollback-current.onnx.{dead}.tmp")),
        ];
        let kept = vec![
            folder.join(format!(".{name}.{alive}.tmp")),
            folder.join(format!(".{name}.prev.tmp")),
            folder.join(format!(".{name}.prev.12a.tmp")),
            folder.join(format!(".other.onnx.{dead}.tmp")),
            folder.join(format!("{name}.{dead}.tmp")),
        ];
        std::fs::create_dir_all(work).expect("mkdir");
        for file in stale.iter().chain(&kept) {
            std::fs::write(file, b"part of a model").expect("write");
        }
        (stale, kept)
    }

    #[test]
    fn stale_deploy_temporaries_are_removed_by_rollback_and_run_and_nothing_else() {
        let scene = scene();
        let work = work(&scene);
        std::fs::copy(teacher(), scene.root.join("app/model.onnx.prev")).expect("copy");
        let (stale, kept) = litter(&scene.deployed, &work);
        let out = run(&rollback_args(&scene.deployed), &[]);
        assert!(out.status.success(), "{}", text(&out));
        for file in &stale {
            assert!(!file.exists(), "{} stays after the rollback: {}", file.display(), text(&out));
        }
        for file in &kept {
            assert!(file.exists(), "{} was removed", file.display());
            std::fs::remove_file(file).expect("remove");
        }

        // `field run`, with the model a symbolic link: the target's temporaries too.
        let versions = scene.root.join("app/versions");
        std::fs::create_dir_all(&versions).expect("mkdir");
        let target = versions.join("v1.onnx");
        std::fs::rename(&scene.deployed, &target).expect("move");
        std::os::unix::fs::symlink(&target, &scene.deployed).expect("symlink");
        let (stale, kept) = litter(&scene.deployed, &work);
        let target_stale = versions.join(format!(".v1.onnx.{}.tmp", dead_pid()));
        std::fs::write(&target_stale, b"part").expect("write");
        let out = run(&field_args(&scene, &scene.always), &[("HEADROOM_FIELD_KILL_AT", "label")]);
        assert!(text(&out).contains("HEADROOM_FIELD_KILL_AT=label"), "{}", text(&out));
        for file in stale.iter().chain([&target_stale]) {
            assert!(!file.exists(), "{} stays after the run started: {}", file.display(), text(&out));
        }
        for file in &kept {
            assert!(file.exists(), "{} was removed", file.display());
        }
    }

    #[test]
    fn a_state_folder_inside_the_images_is_refused_before_anything_is_written() {
        let scene = scene();
        let inside = scene.images.join("state");
        let mut args = field_args(&scene, &scene.always);
        args.extend(["--work".into(), s(&inside).into()]);
        let out = run(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(
            text(&out).contains(&format!("--work {} is inside --images", inside.display())),
            "{}",
            text(&out)
        );
        assert!(!inside.exists() && !work(&scene).exists(), "nothing written");

        // The images folder itself, through a relative path with `..`.
        let mut args = field_args(&scene, &scene.always);
        args.extend(["--work".into(), format!("{}/../train", s(&scene.images))]);
        let out = run(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("is inside --images"), "{}", text(&out));

        // The default state folder, beside a model kept among the images.
        let model = scene.images.join("model.onnx");
        std::fs::copy(demo_model(), &model).expect("copy");
        let mut args = field_args(&scene, &scene.always);
        let at = args.iter().position(|a| a == "--model").expect("--model");
        args[at + 1] = s(&model).into();
        let out = run(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("(the default, beside --model) is inside --images"), "{}", text(&out));
        assert!(!scene.images.join(".headroom-field").exists(), "nothing written");
    }

    /// A holdout of 0-byte images (a copy cut short) is named as unusable images, not as images
    /// without label files; refused before any work.
    /// A tmpfs mounted on a folder for the test's length (unmounted when dropped).
    struct Tmpfs(PathBuf);

    impl Tmpfs {
        /// Mounts a tmpfs of `bytes` on `folder`; `None` where mounting is not allowed (not root).
        fn mount(folder: &Path, bytes: u64) -> Option<Tmpfs> {
            std::fs::create_dir_all(folder).expect("mkdir");
            let size = format!("size={bytes}");
            let status = std::process::Command::new("/usr/bin/mount")
                .args(["-t", "tmpfs", "-o", &size, "tmpfs"])
                .arg(folder)
                .status()
                .ok()?;
            status.success().then(|| Tmpfs(folder.to_path_buf()))
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("/usr/bin/umount").arg(&self.0).status();
        }
    }

    /// A file system too full for the new model at deploy time is named as one, the deployed model
    /// left as it was (it was reported as an ownership problem: "run as root or as that owner").
    /// The deployed file sits on a tmpfs with room for it and its `.prev` only.
    #[test]
    fn a_full_file_system_at_deploy_is_named_and_the_deployed_model_is_unchanged() {
        let scene = scene();
        let model_bytes = std::fs::metadata(&scene.deployed).expect("model").len();
        let Some(small) = Tmpfs::mount(&scene.root.join("small"), 2 * model_bytes + (256 << 10)) else {
            eprintln!("mounting a tmpfs needs root: the case runs where the tests run as root (CI)");
            return;
        };
        let deployed = small.0.join("model.onnx");
        std::fs::copy(&scene.deployed, &deployed).expect("copy the model");
        let mut args = field_args(&scene, &scene.always);
        let at = args.iter().position(|a| a == "--model").expect("--model");
        args[at + 1] = s(&deployed).to_string();
        args.extend(["--work".to_string(), s(&scene.root.join("work")).to_string()]);
        let out = run(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("is full (or its quota spent): free space there"), "{}", text(&out));
        assert!(!text(&out).contains("run as root or as that owner"), "{}", text(&out));
        assert_eq!(sha(&deployed), scene.original, "the deployed model is unchanged");
    }

    /// A memory cgroup (v1 or v2) with a limit, removed when dropped; `None` where none can be made
    /// (not root, no memory controller).
    struct MemoryCgroup {
        dir: PathBuf,
        procs: PathBuf,
    }

    impl MemoryCgroup {
        fn new(limit: u64) -> Option<MemoryCgroup> {
            let name = format!("headroom-test-{}", std::process::id());
            let v1 = Path::new("/sys/fs/cgroup/memory");
            let (dir, limit_file, procs) = if v1.join("memory.limit_in_bytes").is_file() {
                let dir = v1.join(&name);
                (dir.clone(), dir.join("memory.limit_in_bytes"), dir.join("tasks"))
            } else {
                let dir = Path::new("/sys/fs/cgroup").join(&name);
                (dir.clone(), dir.join("memory.max"), dir.join("cgroup.procs"))
            };
            std::fs::create_dir(&dir).ok()?;
            let group = MemoryCgroup { dir, procs };
            std::fs::write(&limit_file, limit.to_string()).ok()?;
            group.procs.is_file().then_some(group)
        }
    }

    impl Drop for MemoryCgroup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }

    /// A step the kernel's out-of-memory killer ends is named so, with what to do (it was reported
    /// as "signal: 9" only). The loop runs in a memory cgroup too small for its steps' children:
    /// 200 MiB, below the head-only training's peak with the oldest supported libraries too (250
    /// MiB was not: their runtime is about 20 MiB smaller).
    #[test]
    fn a_step_the_oom_killer_ends_is_named_as_such() {
        let scene = scene();
        let Some(group) = MemoryCgroup::new(200 << 20) else {
            eprintln!("making a memory cgroup needs root and a memory controller: the case runs in CI");
            return;
        };
        let binary = headroom_command();
        let mut command = std::process::Command::new("/bin/sh");
        // The shell puts itself in the group, then becomes headroom: the loop and its children.
        command.args(["-c", "echo $$ > \"$0\" && exec \"$@\""]).arg(&group.procs).arg(binary.get_program());
        command.args(binary.get_args()).args(field_args(&scene, &scene.always));
        let out =
            command.env("PATH", "").env_remove("HEADROOM_FIELD_KILL_AT").output().expect("headroom runs");
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("was killed by the kernel's out-of-memory killer"), "{}", text(&out));
        assert_eq!(sha(&scene.deployed), scene.original, "the deployed model is unchanged");
    }

    /// Gives `path` and everything under it to nobody, keeping the modes.
    fn give_tree_to_nobody(path: &Path) {
        std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY)).expect("chown nobody:nogroup");
        if path.is_dir() && !path.is_symlink() {
            for entry in std::fs::read_dir(path).expect("list") {
                give_tree_to_nobody(&entry.expect("entry").path());
            }
        }
    }

    /// An unreadable subfolder among the camera's images (`lost+found` on an SD card: root's, mode
    /// 700) is a warning naming it, and the night ends well: it was exit 2 every night. Root reads
    /// every folder, so when the tests run as root the loop runs as nobody (`setpriv`).
    #[test]
    fn an_unreadable_subfolder_of_the_images_is_a_warning_and_the_night_ends_well() {
        let scene = scene();
        let root = std::fs::metadata("/proc/self").expect("/proc/self").uid() == 0;
        if root {
            give_tree_to_nobody(&scene.root);
            std::fs::set_permissions(&scene.root, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let lost = scene.images.join("lost+found");
        std::fs::create_dir(&lost).expect("mkdir");
        let first = std::fs::read_dir(&scene.images).expect("images").flatten().find(|e| e.path().is_file());
        std::fs::copy(first.expect("an image").path(), lost.join("found.png")).expect("copy");
        std::fs::set_permissions(&lost, std::fs::Permissions::from_mode(0o700)).expect("chmod 700");
        if !root {
            std::fs::set_permissions(&lost, std::fs::Permissions::from_mode(0o000)).expect("chmod 000");
        }
        let binary = headroom_command();
        let mut command = if root {
            let mut c = std::process::Command::new("/usr/bin/setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(binary.get_program());
            c.args(binary.get_args());
            c
        } else {
            binary
        };
        let out = command
            .args(field_args(&scene, &scene.always))
            .env("PATH", "")
            .env("HOME", &scene.root)
            .env_remove("HEADROOM_FIELD_KILL_AT")
            .env_remove("TRTEXEC")
            .output()
            .expect("headroom runs (as nobody through /usr/bin/setpriv when root)");
        let _ = std::fs::set_permissions(&lost, std::fs::Permissions::from_mode(0o700));
        assert!(out.status.success(), "{}", text(&out));
        let warning = format!("{}: skipped, its images left out", lost.display());
        assert!(text(&out).contains(&warning), "{}", text(&out));
        assert!(text(&out).contains("Permission denied"), "{}", text(&out));
    }

    #[test]
    fn a_holdout_of_empty_images_is_refused_as_such() {
        let scene = scene();
        let val = scene.holdout.parent().expect("holdout").join("images/val");
        for entry in std::fs::read_dir(&val).expect("val images") {
            std::fs::write(entry.expect("entry").path(), b"").expect("truncate");
        }
        let out = run(&field_args(&scene, &scene.always), &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("none of the 12 images of its val split can be used"), "{}", text(&out));
        assert!(!text(&out).contains("has a label file"), "{}", text(&out));
    }

    #[test]
    fn holdout_and_old_images_without_label_files_are_counted_and_warned_about() {
        let scene = scene();
        remove_val_labels(&scene.holdout, 2);
        remove_val_labels(&scene.old, 1);
        let gate = strings(&[
            "field",
            "gate",
            "--candidate",
            s(&teacher()),
            "--model",
            s(&demo_model()),
            "--holdout",
            s(&scene.holdout),
            "--old",
            s(&scene.old),
            "--threads",
            "2",
            "--json",
        ]);
        let out = run(&gate, &[]);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("2 of the 12 images of its val split have no label file"), "{stderr}");
        assert!(stderr.contains("1 of the 8 images of its val split have no label file"), "{stderr}");
        assert!(stderr.contains("counts as background"), "{stderr}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json report");
        assert_eq!(report["holdout"]["without_labels"], 2, "{report}");
        assert_eq!(report["old"]["without_labels"], 1, "{report}");

        // `field run` warns before any step.
        let out = run(&field_args(&scene, &scene.always), &[("HEADROOM_FIELD_KILL_AT", "label")]);
        assert!(
            text(&out).contains("2 of the 12 images of its val split have no label file"),
            "{}",
            text(&out)
        );
        assert!(
            text(&out).contains("1 of the 8 images of its val split have no label file"),
            "{}",
            text(&out)
        );
    }

    #[test]
    fn install_service_writes_absolute_paths_and_refuses_what_is_not_a_calendar_event() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = &dir.path().join("here");
        // The files the flags name exist (install-service refuses a path that does not).
        for file in ["here/models/t.onnx", "app/m.onnx", "here/h.yaml", "t.onnx", "m.onnx", "h.yaml"] {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, b"").expect("touch");
        }
        for folder in ["here/new", "d/new"] {
            std::fs::create_dir_all(dir.path().join(folder)).expect("mkdir");
        }
        let install = |calendar: &str, path_var: &str, flags: &[&str]| {
            let mut args =
                strings(&["field", "install-service", "--unit-dir", "units", "--env-file", "field.env"]);
            args.extend(["--on-calendar".into(), calendar.into(), "--".into()]);
            args.extend(strings(flags));
            let mut command = headroom_command();
            command.args(&args).current_dir(root).env("PATH", path_var);
            command.output().expect("headroom runs")
        };
        std::fs::write(root.join("mine.toml"), "epochs = 1\n").expect("preset");
        let relative = [
            "--images",
            "new",
            "--teacher",
            "models/t.onnx",
            "--model",
            "../app/m.onnx",
            "--holdout=h.yaml",
            "--preset",
            "mine.toml",
            "--work",
            "/var/lib/field",
        ];
        let out = install("*-*-* 02:00:00", "", &relative);
        assert!(out.status.success(), "{}", text(&out));
        let env = std::fs::read_to_string(root.join("field.env")).expect("env file");
        let r = root.display();
        for expected in [
            format!("--images {r}/new "),
            format!("--teacher {r}/models/t.onnx "),
            format!("--model {r}/../app/m.onnx "),
            format!("--holdout={r}/h.yaml "),
            format!("--preset {r}/mine.toml "),
            "--work /var/lib/field\"".to_string(),
        ] {
            assert!(env.contains(&expected), "`{expected}` in {env}");
        }
        let service = std::fs::read_to_string(root.join("units/headroom-field.service")).expect("service");
        assert!(service.contains(&format!("EnvironmentFile={r}/field.env")), "{service}");

        // The usual forms pass the grammar (no systemd-analyze on an empty PATH).
        let d = dir.path().display().to_string();
        let (images, teacher, model, holdout) =
            (format!("{d}/d/new"), format!("{d}/t.onnx"), format!("{d}/m.onnx"), format!("{d}/h.yaml"));
        let flags = ["--images", &images, "--teacher", &teacher, "--model", &model, "--holdout", &holdout];
        // A path that does not exist: refused, nothing written.
        let typo = [
            "--images",
            &images,
            "--teacher",
            "/no/such/teacher.onnx",
            "--model",
            &model,
            "--holdout",
            &holdout,
        ];
        let out = install("daily", "", &typo);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("--teacher /no/such/teacher.onnx: no such file"), "{}", text(&out));
        for calendar in ["daily", "hourly", "Mon..Fri 03:00", "*-*-* 02:00:00", "weekly UTC"] {
            let out = install(calendar, "", &flags);
            assert!(out.status.success(), "{calendar}: {}", text(&out));
            let timer = std::fs::read_to_string(root.join("units/headroom-field.timer")).expect("timer");
            assert!(timer.contains(&format!("OnCalendar={calendar}\n")), "{timer}");
        }

        // Not a time: refused, nothing written.
        std::fs::remove_dir_all(root.join("units")).expect("rm units");
        std::fs::remove_file(root.join("field.env")).expect("rm env");
        for calendar in ["not a time", "25:00", "daily at 3"] {
            let out = install(calendar, "", &flags);
            assert_eq!(out.status.code(), Some(2), "{calendar}: {}", text(&out));
            assert!(
                text(&out).contains(&format!("--on-calendar {calendar:?}: not a calendar event")),
                "{}",
                text(&out)
            );
            assert!(!root.join("units").exists() && !root.join("field.env").exists(), "{calendar}: written");
        }
        // With systemd-analyze on PATH, its verdict counts (here a stand-in that refuses everything).
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        let analyze = bin.join("systemd-analyze");
        std::fs::write(&analyze, "#!/bin/sh\necho \"stand-in refuses $2\" >&2\nexit 1\n").expect("write");
        std::fs::set_permissions(&analyze, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let out = install("daily", s(&bin), &flags);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("says: stand-in refuses daily"), "{}", text(&out));
        assert!(!root.join("units").exists() && !root.join("field.env").exists());
    }

    #[test]
    fn an_image_named_with_a_newline_is_skipped_and_does_not_split_train_txt() {
        let scene = scene();
        let first = std::fs::read_dir(&scene.images)
            .expect("images")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .min()
            .expect("an image");
        let ext = first.extension().expect("extension").to_string_lossy().into_owned();
        std::fs::copy(&first, scene.images.join(format!("two\nlines.{ext}"))).expect("copy");
        std::fs::copy(&first, scene.images.join(format!("carriage\rreturn.{ext}"))).expect("copy");
        let out = run(&field_args(&scene, &scene.always), &[("HEADROOM_FIELD_KILL_AT", "train")]);
        assert!(text(&out).contains("HEADROOM_FIELD_KILL_AT=train"), "{}", text(&out));
        assert!(
            text(&out).contains(&format!("skipping \"{}/two\\nlines.{ext}\"", s(&scene.images))),
            "{}",
            text(&out)
        );
        assert!(text(&out).contains("carriage\\rreturn"), "{}", text(&out));
        let labelled = work(&scene).join("labelled");
        let mut listed = 0;
        for list in ["train.txt", "val.txt"] {
            let lines = std::fs::read_to_string(labelled.join(list)).expect("list");
            for line in lines.lines() {
                assert!(labelled.join(line).is_file(), "{list}: `{line}` is no image");
                listed += 1;
            }
        }
        assert_eq!(listed, 20, "the 20 images, each on one line");
    }
}
