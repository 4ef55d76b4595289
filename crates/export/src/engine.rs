//! Engines (`headroom export --engine`): TensorRT engines of the exported files, built with trtexec into the
//! export's file set (published with the ONNX files), or the commands to run on the device.

use std::path::{Path, PathBuf};

use headroom_core::fsio::FileSet;

use crate::report::EngineRow;
use crate::request::{EngineSettings, ExportRequest, Outputs};

/// One engine to build: from which ONNX file (its final path), at which precision, to where.
pub(crate) struct EngineJob {
    onnx: PathBuf,
    precision: headroom_trt::Precision,
    pub(crate) engine: PathBuf,
}

/// The engines `request` asks for (none without engine settings): fp16 from the FP32 model, int8
/// from the Q/DQ model.
pub(crate) fn engine_jobs(request: &ExportRequest, outputs: &Outputs) -> Vec<EngineJob> {
    use headroom_trt::Precision;
    let Some(settings) = &request.engine else { return Vec::new() };
    let board = settings.board().0;
    let mut jobs = Vec::new();
    if request.fp16 {
        jobs.push((request.model.clone(), Precision::Fp16));
    }
    if request.int8.is_some() {
        jobs.push((outputs.int8.clone(), Precision::Int8Qdq));
    }
    jobs.into_iter()
        .map(|(onnx, precision)| {
            let name = headroom_trt::engine_file_name(&onnx, &precision, &board, &request.trt_version);
            EngineJob { engine: outputs.dir.join(name), onnx, precision }
        })
        .collect()
}

/// Builds the engines asked for into `set` (engines and sidecars, unpublished; the Q/DQ model is
/// read where it lies unpublished, `int8_written`); `Err` holds the message (with the commands for the
/// device) when trtexec is missing or a build failed. Stops before the next engine once `stop`.
pub(crate) fn build_engines(
    model: &headroom_onnx::Model,
    (request, settings): (&ExportRequest, &EngineSettings),
    outputs: &Outputs,
    (set, int8_written): (&mut FileSet, Option<&Path>),
    stop: &dyn Fn() -> bool,
) -> Result<Vec<EngineRow>, String> {
    use headroom_trt::{EngineInfo, EngineRequest, InputShape, Precision, Shapes};
    let dir = &outputs.dir;
    let size = request.imgsz.map(u64::from);
    let input = model.graph.inputs.first().map(|i| i.name.clone()).unwrap_or_else(|| "images".into());
    let static_dims: Option<Vec<u64>> = model
        .graph
        .inputs
        .first()
        .and_then(|i| i.shape.as_ref())
        .and_then(|s| s.iter().map(|d| d.known().and_then(|v| u64::try_from(v).ok())).collect());
    let dims = static_dims.clone().or_else(|| size.map(|n| vec![1, 3, n, n])).unwrap_or(vec![1, 3, 640, 640]);
    let shapes = if static_dims.is_some() {
        Shapes::Static
    } else {
        Shapes::Dynamic { input: input.clone(), min: dims.clone(), opt: dims.clone(), max: dims.clone() }
    };
    // The builder shares the board's memory with everything else: bound it by the device's budget.
    let (board, preset) = settings.board();
    let workspace = settings.workspace.or_else(|| preset.map(|d| d.budget_bytes() / 2));
    let trtexec = headroom_trt::find_trtexec(settings.trtexec.as_deref());
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for job in engine_jobs(request, outputs) {
        if stop() {
            break;
        }
        // trtexec reads the Q/DQ model where it lies unpublished; the command for the device names
        // the published file.
        let read_from = match job.precision {
            Precision::Int8Qdq if trtexec.is_some() => {
                int8_written.map_or(job.onnx.clone(), Path::to_path_buf)
            }
            _ => job.onnx.clone(),
        };
        let build = EngineRequest {
            onnx: read_from.clone(),
            precision: job.precision.clone(),
            workspace_bytes: workspace,
            timing_cache: Some(dir.join("trt-timing.cache")),
            shapes: shapes.clone(),
            out: job.engine.clone(),
        };
        match headroom_trt::build_engine_unpublished(&build, trtexec.as_deref()) {
            Ok(built) => {
                set.adopt(&job.engine).map_err(|e| e.to_string())?;
                let version = built.version.unwrap_or(request.trt_version);
                if version != request.trt_version {
                    tracing::warn!(
                        "trtexec is TensorRT {version}, not --trt-version {}: the engine name says {}",
                        request.trt_version,
                        request.trt_version
                    );
                }
                let name =
                    job.engine.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let info = EngineInfo {
                    engine: name,
                    input: InputShape::fixed(&input, &dims),
                    classes: model.metadata.names.clone().unwrap_or_default(),
                    precision: job.precision.label().into(),
                    tensorrt: version,
                    gpu: built.gpu.unwrap_or_else(|| "unknown".into()),
                    device: board.clone(),
                    onnx_sha256: headroom_core::hash::sha256_file(&read_from).map_err(|e| e.to_string())?,
                    calibration_sha256: None,
                    headroom_version: env!("CARGO_PKG_VERSION").into(),
                };
                let sidecar = EngineInfo::sidecar_path(&job.engine);
                let text = info.to_json(&job.engine).map_err(|e| e.to_string())?;
                set.write(&sidecar, text.as_bytes()).map_err(|e| e.to_string())?;
                rows.push(EngineRow { precision: job.precision.label().into(), engine: job.engine, sidecar });
            }
            Err(headroom_trt::Error::TrtexecNotFound { command }) => missing.push(command),
            Err(e) => return Err(e.to_string()),
        }
    }
    if missing.is_empty() {
        Ok(rows)
    } else {
        Err(format!(
            "trtexec not found (--trtexec, $TRTEXEC, {}, PATH): no engine built here. On the device, run:\n  {}",
            headroom_trt::JETPACK_TRTEXEC,
            missing.join("\n  ")
        ))
    }
}
