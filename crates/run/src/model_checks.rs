//! Checks of a model file that need neither libtorch nor ONNX Runtime, so that a caller checking
//! before any work (`headroom field run`'s preflight, `headroom plan`) applies the rules training
//! applies, in any build: a float16 model is not trained; a dense-distillation teacher must see the
//! student's anchors.

use std::path::Path;

use headroom_onnx::inspect::{Inspection, inspect};
use headroom_onnx::{Dim, Model};

use crate::{Error, Result};

/// A model with float16 weights (headroom's FP16 export) cannot be trained: say which file to train.
pub fn refuse_fp16(path: &Path, model: &headroom_onnx::Model) -> Result<()> {
    if model.has_float16_weights() {
        return Err(Error::Input {
            path: path.to_path_buf(),
            reason: format!(
                "its weights are float16: this is an FP16 export; train {}",
                headroom_onnx::fp32_source(path)
            ),
        });
    }
    Ok(())
}

/// Checks, without opening a session, that the teacher at `path` can distil into `student` at
/// `imgsz` (width, height): the rule [`open`] applies, for callers that check before any work
/// (`headroom field run` before labelling). An error names the file and what does not match.
pub fn check_pairing(path: &Path, student: &Inspection, imgsz: [u32; 2]) -> Result<()> {
    load_paired(path, student, imgsz).map(|_| ())
}

/// The teacher at `path`, read and checked against `student` at `imgsz`.
pub(crate) fn load_paired(path: &Path, student: &Inspection, imgsz: [u32; 2]) -> Result<(Model, Inspection)> {
    // The model's errors name the file: say only which flag gave it.
    let flag = |e: &dyn std::fmt::Display| Error::Spec { key: "--teacher".into(), reason: e.to_string() };
    let model = Model::load(path).map_err(|e| flag(&e))?;
    let teacher = inspect(&model).map_err(|e| flag(&e))?;
    check_compatible(&teacher, student, imgsz)
        .map_err(|reason| Error::Input { path: path.to_path_buf(), reason })?;
    Ok((model, teacher))
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
