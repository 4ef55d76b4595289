//! The teacher of dense distillation (`teacher` in the spec, `--teacher T.onnx`): opened in ONNX
//! Runtime on its raw head tensors (per level: box distribution, class logits, found by shape as
//! `inspect` finds them), run on each training batch. It must see the student's anchors: the same
//! classes (in the same order), the same box distribution, the same strides, and an input that
//! takes the training size.

use std::path::Path;

use headroom_infer::provider::SessionOptions;
use headroom_infer::trunk::OrtTrunk;
use headroom_onnx::Dim;
use headroom_onnx::inspect::Inspection;
use headroom_plan::{Planner, TeacherCost};
use headroom_train::executor::Executor;
use headroom_train::tch::{Device, Tensor};
use headroom_train::trainer::Teacher;

use crate::model_checks::load_paired;
use crate::trunk::ort_outputs;
use crate::{Error, Result};

/// Where the teacher runs: ONNX Runtime (with `--trunk ort`), or headroom's libtorch executor
/// without gradients (with `--trunk torch`, the memory-minded choice: no second runtime resident
/// during training, and freed tensors go back through the run's allocator).
pub struct TeacherSession(Runtime, TeacherCost);

enum Runtime {
    /// An ONNX Runtime session on the head tensors.
    Ort(OrtTrunk),
    /// The executor, the input's name, the head tensors' names, and whether the export takes one
    /// image at a time.
    Torch { executor: Box<Executor>, input: String, outputs: Vec<String>, one_by_one: bool },
}

impl std::fmt::Debug for TeacherSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Runtime::Ort(ort) => f.debug_tuple("Ort").field(ort).finish(),
            Runtime::Torch { outputs, .. } => f.debug_struct("Torch").field("outputs", outputs).finish(),
        }
    }
}

/// Opens the teacher at `path` for a student described by `student` training at `imgsz` (width,
/// height), in ONNX Runtime or (`torch`) on libtorch on `device`. An error names the file and what
/// does not match.
pub fn open(
    path: &Path,
    student: &Inspection,
    imgsz: [u32; 2],
    threads: usize,
    torch: Option<Device>,
) -> Result<TeacherSession> {
    let fail = |reason: String| Error::Input { path: path.to_path_buf(), reason };
    let flag = |e: &dyn std::fmt::Display| Error::Spec { key: "--teacher".into(), reason: e.to_string() };
    let (model, teacher) = load_paired(path, student, imgsz)?;
    let outputs: Vec<String> =
        teacher.head.levels.iter().flat_map(|l| [l.box_output.clone(), l.class_output.clone()]).collect();
    let cost = Planner::new(&model, &teacher, 0)
        .teacher_cost([imgsz[1], imgsz[0]])
        .map_err(|e| fail(format!("estimating its memory: {e}")))?;
    if let Some(device) = torch {
        let executor = Box::new(Executor::new(&model.graph, device).map_err(|e| flag(&e))?);
        let input = executor.input_names().first().cloned().unwrap_or_default();
        let one_by_one = teacher.input_shape.first() == Some(&Dim::Known(1));
        return Ok(TeacherSession(Runtime::Torch { executor, input, outputs, one_by_one }, cost));
    }
    let options = SessionOptions { intra_threads: threads, spinning: false, ..Default::default() };
    let ort = OrtTrunk::open(&model, &outputs, &options)?;
    Ok(TeacherSession(Runtime::Ort(ort), cost))
}

impl TeacherSession {
    /// What the teacher adds to the run's memory, as the planner counts it.
    pub fn cost(&self) -> TeacherCost {
        self.1
    }

    /// The teacher as the trainer runs it: images in, head tensors on `device` out.
    pub fn into_teacher<'a>(self, device: Device) -> Box<Teacher<'a>> {
        match self.0 {
            Runtime::Ort(mut ort) => Box::new(move |images| ort_outputs(&mut ort, images, device)),
            Runtime::Torch { executor, input, outputs, one_by_one } => Box::new(move |images| {
                let _guard = headroom_train::tch::no_grad_guard();
                let targets: Vec<&str> = outputs.iter().map(String::as_str).collect();
                let batch = images.size().first().copied().unwrap_or(1);
                if !one_by_one || batch == 1 {
                    return executor.run(vec![(input.clone(), images.shallow_clone())], &targets);
                }
                let mut parts: Vec<Vec<Tensor>> = targets.iter().map(|_| Vec::new()).collect();
                for i in 0..batch {
                    let image = images.f_narrow(0, i, 1)?;
                    for (k, t) in
                        executor.run(vec![(input.clone(), image)], &targets)?.into_iter().enumerate()
                    {
                        parts[k].push(t);
                    }
                }
                parts.iter().map(|p| Ok(Tensor::f_cat(p, 0)?)).collect()
            }),
        }
    }
}
