//! The teacher of dense distillation (`teacher` in the spec, `--teacher T.onnx`): opened in ONNX
//! Runtime on its raw head tensors (per level: box distribution, class logits, found by shape as
//! `inspect` finds them), run on each training batch. It must see the student's anchors: the same
//! classes (in the same order), the same box distribution, the same strides, and an input that
//! takes the training size.

use std::path::Path;

use headroom_infer::provider::SessionOptions;
use headroom_infer::trunk::OrtTrunk;
use headroom_onnx::inspect::{Inspection, inspect};
use headroom_onnx::{Dim, Model};
use headroom_train::tch::Device;
use headroom_train::trainer::Teacher;

use crate::trunk::ort_outputs;
use crate::{Error, Result};

/// A teacher session and the names of its head tensors, in the student's order.
pub struct TeacherSession {
    ort: OrtTrunk,
}

impl std::fmt::Debug for TeacherSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeacherSession").field("ort", &self.ort).finish()
    }
}

/// Opens the teacher at `path` for a student described by `student` training at `imgsz` (width,
/// height). An error names the file and what does not match.
pub fn open(path: &Path, student: &Inspection, imgsz: [u32; 2], threads: usize) -> Result<TeacherSession> {
    let fail = |reason: String| Error::Input { path: path.to_path_buf(), reason };
    // The model's errors name the file: say only which flag gave it.
    let flag = |e: &dyn std::fmt::Display| Error::Spec { key: "--teacher".into(), reason: e.to_string() };
    let model = Model::load(path).map_err(|e| flag(&e))?;
    let teacher = inspect(&model).map_err(|e| flag(&e))?;
    check_compatible(&teacher, student, imgsz).map_err(fail)?;
    let outputs: Vec<String> =
        teacher.head.levels.iter().flat_map(|l| [l.box_output.clone(), l.class_output.clone()]).collect();
    let options = SessionOptions { intra_threads: threads, spinning: false, ..Default::default() };
    let ort = OrtTrunk::open(&model, &outputs, &options)?;
    Ok(TeacherSession { ort })
}

impl TeacherSession {
    /// The teacher as the trainer runs it: images in, head tensors on `device` out.
    pub fn into_teacher<'a>(mut self, device: Device) -> Box<Teacher<'a>> {
        Box::new(move |images| ort_outputs(&mut self.ort, images, device))
    }
}

/// Why `teacher` cannot distil into `student` at `imgsz`, if it cannot.
fn check_compatible(teacher: &Inspection, student: &Inspection, imgsz: [u32; 2]) -> Result<(), String> {
    if teacher.classes != student.classes {
        return Err(format!(
            "the teacher has {} classes, the student {}: dense distillation needs the same classes",
            teacher.classes, student.classes
        ));
    }
    if let (Some(t), Some(s)) = (&teacher.names, &student.names)
        && t != s
    {
        return Err(format!(
            "the teacher's classes are {} but the student's are {}: the same classes in the same order are needed",
            t.join(", "),
            s.join(", ")
        ));
    }
    if teacher.head.reg_max != student.head.reg_max || teacher.strides != student.strides {
        return Err(format!(
            "the teacher's head (box bins {}, strides {:?}) is not laid out as the student's (box bins {}, \
             strides {:?}): their anchors do not match",
            teacher.head.reg_max, teacher.strides, student.head.reg_max, student.strides
        ));
    }
    let [w, h] = imgsz;
    let fixed = |i: usize| match teacher.input_shape.get(i) {
        Some(Dim::Known(n)) => Some(*n),
        _ => None,
    };
    if let (Some(th), Some(tw)) = (fixed(2), fixed(3))
        && (th != i64::from(h) || tw != i64::from(w))
    {
        return Err(format!(
            "the teacher takes {tw}x{th} images only and the student trains at {w}x{h}: export the teacher at \
             {w}x{h} or with dynamic axes"
        ));
    }
    Ok(())
}
