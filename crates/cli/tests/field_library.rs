//! The field loop through the library, in this test's process: `headroom_field::field_run::FieldRun`
//! runs the real `headroom` verbs as its children, and a runner stands in for a kill — before each
//! step, and after each step's work but before its state says so — by unwinding out of the loop with
//! nothing recorded, as SIGKILL leaves it. Each next start continues; the deployed file is the
//! original, whole, until the gate deploys; a step that fails twice alike sets the run aside.

mod common;

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use std::panic::AssertUnwindSafe;
    use std::path::{Path, PathBuf};

    use headroom_field::field_run::{FieldRun, Outcome, StepSettings};
    use headroom_field::gate::GateSettings;
    use headroom_field::inputs::{Given, check_inputs, work_dir};
    use headroom_field::report::Decision;
    use headroom_field::request::StepRequest;
    use headroom_field::runner::{ChildCall, ChildRunner, Ended, StepRunner};
    use headroom_field::served::Precision;
    use headroom_field::state::{RunSettings, RunState};
    use headroom_field::step::Step;
    use headroom_run::job::TrainRun;

    use crate::common::field::{Scene, scene, sha};
    use crate::common::repo_root;

    /// Where the stand-in kill lands.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum At {
        Before(Step),
        After(Step),
    }

    /// The real children, and a kill (an unwinding panic) at one point.
    struct KillingRunner {
        inner: ChildRunner,
        at: Option<At>,
        /// A step whose child is made to fail (its request names a file that does not exist),
        /// every time.
        failing: Option<Step>,
        /// Before this step starts, another updater moves its model over the deployed path
        /// (`mv THEIRS DEPLOYED`), as a service's own update does.
        updater: Option<(Step, PathBuf, PathBuf)>,
        /// Once this step's work is done, the camera rewrites this image in place with these bytes.
        rewrite: Option<(Step, PathBuf, Vec<u8>)>,
        /// The label children run.
        label_calls: usize,
    }

    const KILLED: &str = "killed by the test";

    impl KillingRunner {
        fn new(at: Option<At>) -> KillingRunner {
            let exe = PathBuf::from(env!("CARGO_BIN_EXE_headroom"));
            KillingRunner {
                inner: ChildRunner::new(exe, true, Box::new(|| None)),
                at,
                failing: None,
                updater: None,
                rewrite: None,
                label_calls: 0,
            }
        }
    }

    impl StepRunner for KillingRunner {
        fn run_child(&mut self, call: &ChildCall) -> headroom_field::Result<Ended> {
            self.label_calls += usize::from(call.step == Step::Label);
            if self.failing == Some(call.step) {
                let mut broken = call.clone();
                match &mut broken.request {
                    StepRequest::Train(job) => {
                        job.run = TrainRun::Resume { dir: "/no/such/run".into(), request: Default::default() }
                    }
                    StepRequest::Export(job) => job.export.model = "/no/such/model.onnx".into(),
                    StepRequest::Label(job) => job.teacher = "/no/such/teacher.onnx".into(),
                }
                return self.inner.run_child(&broken);
            }
            self.inner.run_child(call)
        }

        fn last_error(&mut self) -> Option<String> {
            self.inner.last_error()
        }

        fn starting(&mut self, step: Step) {
            if let Some((_, theirs, deployed)) = self.updater.as_ref().filter(|(at, ..)| *at == step) {
                std::fs::rename(theirs, deployed).expect("the other updater's mv");
            }
            if self.at == Some(At::Before(step)) {
                std::panic::panic_any(KILLED);
            }
        }

        fn finishing(&mut self, step: Step) {
            if let Some((_, image, bytes)) = self.rewrite.as_ref().filter(|(at, ..)| *at == step) {
                std::fs::write(image, bytes).expect("the camera rewrites its file in place");
            }
            if self.at == Some(At::After(step)) {
                std::panic::panic_any(KILLED);
            }
        }
    }

    /// What `headroom field run --preset <scene.always> --threads 2` resolves to.
    struct Night {
        work: PathBuf,
        deployed: PathBuf,
        settings: RunSettings,
        steps: StepSettings,
        board: headroom_plan::DevicePreset,
    }

    fn night(scene: &Scene) -> Night {
        night_at(scene, Precision::Fp32)
    }

    /// The night deploying `deploy`'s file.
    fn night_at(scene: &Scene, deploy: Precision) -> Night {
        let teacher = repo_root().join("models/demo/teacher-shapes-160.onnx");
        let inputs = check_inputs(Given {
            images: &scene.images,
            teacher: &teacher,
            model: &scene.deployed,
            holdout: &scene.holdout,
            old: Some(&scene.old),
        })
        .expect("the scene's inputs pass");
        let work = work_dir(None, &inputs.deployed, Some(&inputs.images)).expect("the state folder");
        let board = headroom_plan::System::host().detect(None).expect("this machine").preset;
        // The scene's `always` preset: 1 head-only epoch, a gate that deploys any candidate.
        let gate = GateSettings {
            min_gain: -100.0,
            old_tolerance: 100.0,
            class_tolerance: 100.0,
            resamples: 50,
            ..GateSettings::default()
        };
        let settings = RunSettings {
            images: inputs.images.clone(),
            teacher: inputs.teacher.clone(),
            holdout: inputs.holdout.clone(),
            old: inputs.old.clone(),
            preset: "always (library test)".into(),
            preset_toml: "epochs = 1\ntrain = \"head\"\n".into(),
            board: board.name.clone(),
            runs_on: "cpu".into(),
            reserve: headroom_plan::Bytes(0),
            overrides: headroom_run::request::RunRequest::default(),
            model: inputs.deployed.clone(),
            deploy: Some(deploy),
        };
        let steps = StepSettings {
            preset_name: settings.preset.clone(),
            gate,
            train: headroom_run::request::RunRequest {
                epochs: Some(1),
                part: Some(headroom_onnx::Trainable::Head),
                ..Default::default()
            },
            device: headroom_plan::DeviceChoice::Cpu,
            board: board.name.clone(),
            reserve: headroom_plan::Bytes(0),
            providers: None,
            threads: 2,
            max_images: 5000,
            max_pixels: headroom_core::imageio::MAX_PIXELS,
            inputs: inputs.clone(),
            deploy,
        };
        Night { work, deployed: inputs.deployed, settings, steps, board }
    }

    /// One start of the loop with `runner`: its outcome, or `None` when the stand-in kill ended it.
    fn start(night: &Night, runner: &mut KillingRunner) -> Option<headroom_field::Result<Outcome>> {
        let session = headroom_infer::provider::SessionOptions { intra_threads: 2, ..Default::default() };
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let mut run = FieldRun::open(&night.work, &night.deployed, &night.settings, 10)?;
            run.keep_board(&night.board)?;
            run.run(&night.steps, runner, &session)
        }));
        match result {
            Ok(outcome) => Some(outcome),
            Err(payload) if payload.downcast_ref::<&str>() == Some(&KILLED) => None,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }

    fn summary_gate(work: &Path) -> headroom_field::gate::GateReport {
        let text = std::fs::read_to_string(work.join("run/gate.json")).expect("gate.json");
        serde_json::from_str(&text).expect("a gate report")
    }

    fn state(work: &Path) -> RunState {
        RunState::load(&work.join("run")).expect("state.json loads")
    }

    /// At `--deploy int8` on an FP32 deployment (the upgrade's first night): the export step
    /// fine-tunes quantization-aware before the INT8 file, and the gate's INT8 comparison file is
    /// made inside the eval step, which a kill may cut too.
    #[test]
    fn killed_before_and_after_every_step_in_process_each_start_continues_and_deploys_once() {
        let scene = scene();
        let night = night_at(&scene, Precision::Int8);
        // Quiet hooks: the test's own panics are expected.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&KILLED) {
                hook(info);
            }
        }));
        let mut done_before: Vec<Step> = Vec::new();
        for step in Step::ALL {
            for at in [At::Before(step), At::After(step)] {
                let ended = start(&night, &mut KillingRunner::new(Some(at)));
                assert!(ended.is_none(), "{at:?}: the loop went past the kill: {ended:?}");
                let state = state(&night.work);
                assert_eq!(state.done, done_before, "{at:?}: the steps done");
                assert!(!state.finished, "{at:?}: finished");
                assert!(state.failure.is_none(), "{at:?}: a kill is not a failure: {:?}", state.failure);
                if step != Step::Deploy || at == At::Before(Step::Deploy) {
                    assert_eq!(sha(&night.deployed), scene.original, "{at:?}: the deployed model changed");
                }
            }
            done_before.push(step);
            // The next start finishes this step again (its work was done, its state did not say
            // so) and is killed as the next one starts.
            if let Some(next) = Step::ALL.iter().skip_while(|s| **s != step).nth(1) {
                let ended = start(&night, &mut KillingRunner::new(Some(At::Before(*next))));
                assert!(ended.is_none(), "stopped before {next}");
                assert_eq!(state(&night.work).done, done_before, "{step} done after its rerun");
            }
        }
        // Killed after its swap, the deploy step is redone: the candidate stays deployed, once.
        let outcome = start(&night, &mut KillingRunner::new(None)).expect("no kill").expect("the run ends");
        let Outcome::Finished(summary) = outcome else { panic!("stopped: {outcome:?}") };
        assert_eq!(summary.decision, Decision::Deployed, "{summary:?}");
        let candidate = sha(&night.work.join("run/export/best.int8.onnx"));
        assert_eq!(sha(&night.deployed), candidate, "the candidate's INT8 file is deployed");
        let compared = summary_gate(&night.work).compared.expect("the gate names its files");
        assert_eq!(compared.precision, Precision::Int8);
        assert!(compared.deployed.ends_with("export-serving/base.int8.onnx"), "{compared:?}");
        let kept =
            headroom_field::served::fp32_source(&night.work, &candidate).expect("its FP32 source is kept");
        // The INT8 file was written from the quantization-aware fine-tuning of the trained model on
        // the labelled set: that FP32 model is its source.
        let tuned = night.work.join("run/export/best.qat/best.onnx");
        assert_eq!(sha(&kept), sha(&tuned), "the fine-tuned FP32 model is kept as the source");
        let qat = std::fs::read_to_string(night.work.join("run/export/best.qat/train/config.toml"))
            .expect("QAT run");
        assert!(qat.contains("labelled/data.yaml"), "fine-tuned on the labelled set: {qat}");
        let prev = scene.root.join("app/model.onnx.prev");
        assert_eq!(sha(&prev), scene.original, "the original is kept as .prev, not the candidate");
        let state = state(&night.work);
        assert!(state.finished);
        assert_eq!(state.done, Step::ALL.to_vec());
        for step in Step::ALL {
            assert!(summary.step_seconds.contains_key(step.name()), "{step} timed: {summary:?}");
        }
    }

    #[test]
    fn a_step_failing_twice_alike_in_process_sets_the_run_aside_and_the_next_start_is_fresh() {
        let scene = scene();
        let night = night(&scene);
        let failing = |runner: &mut KillingRunner| runner.failing = Some(Step::Label);
        let mut runner = KillingRunner::new(None);
        failing(&mut runner);
        let first = start(&night, &mut runner).expect("no kill");
        let err = first.expect_err("label fails").chain();
        assert!(err.contains("step label failed (start 1 of 2"), "{err}");
        let failure = state(&night.work).failure.expect("the failure is recorded");
        assert_eq!((failure.step, failure.tries), (Step::Label, 1));
        assert!(
            failure.error.contains("opening the teacher /no/such/teacher.onnx"),
            "in the child's words: {failure:?}"
        );
        let second = start(&night, &mut runner).expect("no kill");
        let err = second.expect_err("label fails again").chain();
        assert!(err.contains("step label failed 2 starts in a row"), "{err}");
        assert!(!night.work.join("run").exists(), "the run is set aside");
        let history: Vec<String> = std::fs::read_dir(night.work.join("history"))
            .expect("history")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        assert!(history.len() == 1 && history[0].ends_with("-failed"), "{history:?}");
        // The next start begins a fresh run, which gets past the label step.
        let ended = start(&night, &mut KillingRunner::new(Some(At::Before(Step::Train))));
        assert!(ended.is_none(), "stopped before train");
        let fresh = state(&night.work);
        assert_eq!(fresh.done, vec![Step::Label]);
        assert!(fresh.failure.is_none());
        assert_eq!(sha(&night.deployed), scene.original);
    }

    /// A model given to the service by someone else while the run trains or exports (a routine
    /// update) is neither overwritten nor a failure: the night ends 0 as superseded, naming it.
    #[test]
    fn a_model_deployed_by_another_updater_during_the_run_supersedes_it_and_the_night_ends_well() {
        let scene = scene();
        let night = night(&scene);
        for step in [Step::Eval, Step::Deploy] {
            if night.work.exists() {
                std::fs::remove_dir_all(&night.work).expect("a fresh state folder");
            }
            std::fs::copy(repo_root().join("models/demo/yolov8n-shapes-160.onnx"), &night.deployed)
                .expect("copy");
            assert_eq!(sha(&night.deployed), scene.original);
            let theirs = scene.root.join("theirs.onnx");
            std::fs::copy(repo_root().join("models/demo/teacher-shapes-160.onnx"), &theirs).expect("copy");
            let their_sha = sha(&theirs);
            let mut runner = KillingRunner::new(None);
            runner.updater = Some((step, theirs, night.deployed.clone()));
            let outcome =
                start(&night, &mut runner).expect("no kill").expect("the night ends without an error");
            let Outcome::Finished(summary) = outcome else { panic!("stopped: {outcome:?}") };
            assert_eq!(summary.decision, Decision::Superseded, "{step}: {summary:?}");
            assert_eq!(sha(&night.deployed), their_sha, "{step}: the other updater's model stays");
            assert_eq!(summary.deployed_sha256, their_sha);
            assert!(summary.previous.is_none(), "{summary:?}");
            assert!(night.work.join("run/train/best.onnx").is_file(), "the candidate is kept");
        }
    }

    /// A camera that reuses its file names rewrites a frame in place after the label step: the frame
    /// is labelled again before training, never trained with the labels of the old pixels.
    #[test]
    fn a_frame_rewritten_between_label_and_train_is_labelled_again_first() {
        let scene = scene();
        let night = night(&scene);
        let mut frames: Vec<PathBuf> =
            std::fs::read_dir(&scene.images).expect("ls").map(|e| e.expect("entry").path()).collect();
        frames.sort();
        let other = std::fs::read(&frames[1]).expect("another frame's bytes");
        let mut runner = KillingRunner::new(None);
        runner.rewrite = Some((Step::Label, frames[0].clone(), other.clone()));
        let outcome = start(&night, &mut runner).expect("no kill").expect("the night ends");
        assert!(matches!(outcome, Outcome::Finished(_)), "{outcome:?}");
        assert_eq!(runner.label_calls, 2, "labelled once, then again for the rewritten frame");
        // Just rewritten, it is left for the next night (still being written, as far as anyone can
        // tell): its old labels are gone and it is in neither list, so nothing trained on them.
        let labelled = night.work.join("labelled");
        let stem = frames[0].file_stem().expect("stem").to_string_lossy().into_owned();
        assert!(!labelled.join(format!("labels/{stem}.txt")).exists());
        for list in ["train.txt", "val.txt"] {
            let text = std::fs::read_to_string(labelled.join(list)).unwrap_or_default();
            assert!(!text.contains(&format!("{stem}.")), "{list}: {text}");
        }
        // The next night it is labelled by its new pixels: as the frame they were copied from.
        let minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&frames[0])
            .expect("open")
            .set_modified(minute_ago)
            .expect("mtime");
        let mut next = KillingRunner::new(None);
        start(&night, &mut next).expect("no kill").expect("the next night ends");
        assert_eq!(next.label_calls, 1, "nothing rewritten: the label step runs once");
        let labels = |frame: &Path| {
            let stem = frame.file_stem().expect("stem").to_string_lossy().into_owned();
            std::fs::read_to_string(labelled.join(format!("labels/{stem}.txt"))).expect("labels")
        };
        assert_eq!(labels(&frames[0]), labels(&frames[1]));
        assert_eq!(
            std::fs::read(labelled.join("images").join(frames[0].file_name().expect("name"))).expect("read"),
            other
        );
    }

    /// The gate through the library, in process: a candidate identical to the deployed model gains
    /// nothing and is kept by the default gate (its interval is zero wide, short of `min_gain`),
    /// while the `always` gate deploys it; the old scenes are evaluated beside the holdout.
    #[test]
    fn the_gate_in_process_keeps_a_candidate_that_gains_nothing() {
        let scene = scene();
        let session = headroom_infer::provider::SessionOptions { intra_threads: 2, ..Default::default() };
        let names = headroom_field::detector::class_names("--model", &scene.deployed).expect("classes");
        let gate = |settings: &GateSettings| {
            headroom_field::gate::evaluate_gate(
                &scene.deployed,
                &scene.deployed,
                &scene.holdout,
                Some(&scene.old),
                &names,
                settings,
                &session,
            )
            .expect("the gate evaluates")
        };
        let kept = gate(&GateSettings::default());
        assert!(!kept.deploy, "{kept:?}");
        assert_eq!(kept.decided_by, "gain", "{kept:?}");
        assert!(kept.old.is_some(), "the old scenes are checked: {kept:?}");
        let always = night(&scene).steps.gate;
        let deployed = gate(&always);
        assert!(deployed.deploy, "{deployed:?}");
        assert_eq!(deployed.decided_by, "every condition held");
        assert_eq!(sha(&scene.deployed), scene.original, "the gate moves nothing");
    }
}
