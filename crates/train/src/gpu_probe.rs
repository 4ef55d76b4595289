//! `headroom doctor`'s work on a visible GPU: loading libtorch's CUDA part proves the loader chain,
//! not that one kernel runs. Each step here launches real kernels — a convolution forward and
//! backward (cuDNN), a matrix product (cuBLAS), a mixed-precision step (autocast, the loss scale,
//! an SGD update), the caching allocator's counters, and a forward and backward of an ONNX model in
//! the executor — and the first CUDA error is kept in libtorch's own words with what to do about it
//! ([`remedy`]).

use std::path::Path;

use tch::{Device, Kind, Tensor};

use crate::Result;

/// One step of [`run`]: its name and what it showed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GpuStep {
    /// `conv`, `gemm`, `amp`, `allocator`, `executor`.
    pub name: &'static str,
    /// Whether it ran.
    pub ok: bool,
    /// What it computed, or libtorch's error with the remedy.
    pub detail: String,
}

/// Runs every step on CUDA device `device` (the executor step on `model` when given); stops at the
/// first failure (later steps would fail the same way).
pub fn run(device: usize, model: Option<&Path>) -> Vec<GpuStep> {
    let cuda = Device::Cuda(device);
    let steps: [(&'static str, &dyn Fn() -> Result<String>); 5] = [
        ("conv", &|| conv(cuda)),
        ("gemm", &|| gemm(cuda)),
        ("amp", &|| amp_step(cuda)),
        ("allocator", &|| allocator(device)),
        ("executor", &|| match model {
            Some(path) => executor_step(path, cuda),
            None => Ok("skipped: no --model given".into()),
        }),
    ];
    let mut done = Vec::new();
    for (name, step) in steps {
        let outcome = step();
        let ok = outcome.is_ok();
        let detail = outcome.unwrap_or_else(|e| {
            let message = e.to_string();
            match remedy(&message) {
                Some(what) => format!("{message} — {what}"),
                None => message,
            }
        });
        done.push(GpuStep { name, ok, detail });
        if !ok {
            break;
        }
    }
    done
}

/// What to do about a CUDA error, from libtorch's words.
pub fn remedy(message: &str) -> Option<&'static str> {
    const KNOWN: [(&str, &str); 7] = [
        (
            "no kernel image is available",
            "this libtorch has no code for this GPU (`headroom doctor`'s `gpu code` row names what it carries): \
             on an Orin take a torch built for sm_87 (JetPack 7.2: scripts/jetson-bundle.sh --jetpack 7; JetPack 6: \
             NVIDIA's or the Jetson AI Lab wheels; docs/GUIDE.md)",
        ),
        (
            "driver version is insufficient",
            "the NVIDIA driver is older than the CUDA runtime this libtorch was built with: update the driver \
             (JetPack) or take a libtorch built for the installed CUDA",
        ),
        (
            "CUDNN_STATUS_NOT_INITIALIZED",
            "cuDNN could not start: its version must match libtorch's build (JetPack's cuDNN for a JetPack torch)",
        ),
        (
            "CUBLAS_STATUS_NOT_INITIALIZED",
            "cuBLAS could not start: usually out of memory at start-up, or a cuBLAS of another CUDA version",
        ),
        (
            "out of memory",
            "the GPU's memory is taken: stop other GPU processes (on a Jetson, the shared RAM)",
        ),
        (
            "PTX JIT compiler library not found",
            "the driver's PTX compiler (libnvidia-ptxjitcompiler.so) is missing: install the driver's full libraries",
        ),
        (
            "unsupported toolchain",
            "the PTX was made by a newer CUDA than the driver's: update the driver or take a matching libtorch",
        ),
    ];
    KNOWN.iter().find(|(needle, _)| message.contains(needle)).map(|(_, what)| *what)
}

fn conv(device: Device) -> Result<String> {
    tch::manual_seed(0);
    let x = Tensor::f_randn([2, 3, 64, 64], (Kind::Float, device))?;
    let w = Tensor::f_randn([16, 3, 3, 3], (Kind::Float, device))?.set_requires_grad(true);
    let y = x.f_conv2d(&w, None::<&Tensor>, [1, 1], [1, 1], [1, 1], 1)?;
    y.f_square()?.f_mean(Kind::Float)?.f_backward()?;
    let grad = w.grad().f_abs()?.f_sum(Kind::Float)?.f_double_value(&[])?;
    // The same convolution on the CPU: the GPU's kernels compute what the CPU's do.
    let cpu = x.f_to(Device::Cpu)?.f_conv2d(
        &w.f_detach()?.f_to(Device::Cpu)?,
        None::<&Tensor>,
        [1, 1],
        [1, 1],
        [1, 1],
        1,
    )?;
    let diff = y.f_to(Device::Cpu)?.f_sub(&cpu)?.f_abs()?.f_max()?.f_double_value(&[])?;
    anyhow_check(diff < 1e-2 && grad.is_finite() && grad > 0.0, || {
        format!("the convolution differs from the CPU's by {diff:.3e} (gradient sum {grad})")
    })?;
    Ok(format!("3→16 channels at 64×64, forward and backward; largest difference from the CPU {diff:.1e}"))
}

fn gemm(device: Device) -> Result<String> {
    let a = Tensor::f_randn([512, 512], (Kind::Float, device))?;
    let b = Tensor::f_randn([512, 512], (Kind::Float, device))?;
    let c = a.f_matmul(&b)?;
    let cpu = a.f_to(Device::Cpu)?.f_matmul(&b.f_to(Device::Cpu)?)?;
    let diff = c.f_to(Device::Cpu)?.f_sub(&cpu)?.f_abs()?.f_max()?.f_double_value(&[])?;
    // TF32 matrix products (the default for convolutions on Ampere) differ by ~1e-3 relative.
    anyhow_check(diff < 1.0, || format!("512×512 product differs from the CPU's by {diff:.3e}"))?;
    Ok(format!("512×512 float product; largest difference from the CPU {diff:.1e}"))
}

fn amp_step(device: Device) -> Result<String> {
    let x = Tensor::f_randn([4, 3, 32, 32], (Kind::Float, device))?;
    let w = Tensor::f_randn([8, 3, 3, 3], (Kind::Float, device))?.f_mul_scalar(0.1)?.set_requires_grad(true);
    let scale = 65536.0;
    let (loss, kind) = tch::autocast(true, || -> Result<(Tensor, Kind)> {
        let y = x.f_conv2d(&w, None::<&Tensor>, [1, 1], [1, 1], [1, 1], 1)?;
        let kind = y.kind();
        Ok((y.f_to_kind(Kind::Float)?.f_square()?.f_mean(Kind::Float)?, kind))
    })?;
    loss.f_mul_scalar(scale)?.f_backward()?;
    let before = loss.f_double_value(&[])?;
    let _no_grad = tch::no_grad_guard();
    let mut grad = w.grad();
    let _unscaled = grad.f_div_scalar_(scale)?;
    let finite = grad.f_isfinite()?.f_all()?.int64_value(&[]) == 1;
    anyhow_check(finite, || "the unscaled gradient is not finite".into())?;
    let mut w2 = w.f_detach()?;
    let _stepped = w2.f_sub_(&grad.f_mul_scalar(0.1)?)?;
    let after =
        x.f_conv2d(&w2, None::<&Tensor>, [1, 1], [1, 1], [1, 1], 1)?.f_square()?.f_mean(Kind::Float)?;
    let after = after.f_double_value(&[])?;
    anyhow_check(kind == Kind::Half || kind == Kind::BFloat16, || {
        format!("autocast ran the convolution in {kind:?}, not half precision")
    })?;
    anyhow_check(after < before, || format!("the loss did not fall ({before:.4} → {after:.4})"))?;
    Ok(format!(
        "autocast conv in {kind:?}, loss scaled ×{scale}, gradients finite; loss {before:.4} → {after:.4}"
    ))
}

fn allocator(device: usize) -> Result<String> {
    match crate::cuda_memory(device) {
        Ok(m) => Ok(format!(
            "caching allocator: {} MiB reserved ({} MiB at most), {} MiB in tensors",
            m.reserved >> 20,
            m.reserved_peak >> 20,
            m.allocated >> 20
        )),
        Err(why) => {
            Ok(format!("no reading ({why:?}): the run's memory figure falls back to the resident set"))
        }
    }
}

fn executor_step(path: &Path, device: Device) -> Result<String> {
    let model = headroom_onnx::Model::load(path)?;
    let executor = crate::Executor::new(&model.graph, device)?;
    let input =
        model.graph.inputs.first().ok_or_else(|| crate::Error::UnknownTensor { name: "input".into() })?;
    let declared = input.shape.clone().unwrap_or_else(|| vec![headroom_onnx::Dim::Known(1); 4]);
    let shape: Vec<i64> = declared
        .iter()
        .enumerate()
        .map(|(i, d)| match d {
            headroom_onnx::Dim::Known(n) => *n,
            _ if i == 0 => 1,
            _ => 160,
        })
        .collect();
    let image = Tensor::f_rand(shape.as_slice(), (Kind::Float, device))?;
    let weights: Vec<Tensor> = model
        .graph
        .initializers
        .keys()
        .filter_map(|name| executor.weight(name))
        .filter(|t| t.kind() == Kind::Float && t.dim() == 4)
        .take(4)
        .map(|t| t.shallow_clone().set_requires_grad(true))
        .collect();
    // The same tensors as the executor's (a shallow clone shares them): backward reaches them.
    let outputs = executor.run(vec![(input.name.clone(), image)], &[])?;
    let first = outputs.first().ok_or_else(|| crate::Error::UnknownTensor { name: "output".into() })?;
    let total = first.f_mean(Kind::Float)?;
    anyhow_check(total.f_double_value(&[])?.is_finite(), || "the model's output is not finite".into())?;
    total.f_backward()?;
    let mut gradient = 0.0;
    for w in &weights {
        gradient += w.grad().f_abs()?.f_sum(Kind::Float)?.f_double_value(&[])?;
    }
    anyhow_check(gradient.is_finite() && gradient > 0.0, || format!("the gradient sum is {gradient}"))?;
    Ok(format!(
        "{}: forward {:?} → {:?} and backward to {} convolution weights (gradient sum {gradient:.3e})",
        path.display(),
        shape,
        first.size(),
        weights.len()
    ))
}

fn anyhow_check(ok: bool, why: impl FnOnce() -> String) -> Result<()> {
    if ok { Ok(()) } else { Err(crate::Error::Check { reason: why() }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_kernel_image_names_the_sm_87_route() {
        let message = "CUDA error: no kernel image is available for execution on the device\nCUDA kernel errors \
                       might be asynchronously reported";
        let what = remedy(message).expect("known");
        assert!(what.contains("sm_87") && what.contains("jetson-bundle.sh"), "{what}");
        assert!(remedy("CUDA error: out of memory").is_some_and(|w| w.contains("memory")));
        assert_eq!(remedy("something else"), None);
    }

    #[test]
    fn the_steps_compute_on_the_cpu_as_they_would_on_a_gpu() {
        // The same code with the CPU as the device: what the GPU's results are compared with.
        assert!(conv(Device::Cpu).expect("conv").contains("forward and backward"));
        assert!(gemm(Device::Cpu).expect("gemm").contains("512×512"));
        let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/demo/yolov8n-shapes-160.onnx");
        let step = executor_step(&demo, Device::Cpu).expect("executor");
        assert!(step.contains("backward to 4 convolution weights"), "{step}");
        // Autocast is CUDA's: on the CPU the convolution stays in float, which the step refuses.
        let amp = amp_step(Device::Cpu).expect_err("no half precision on the CPU");
        assert!(amp.to_string().contains("not half precision"), "{amp}");
    }

    #[test]
    fn without_a_gpu_the_first_step_fails_in_libtorchs_words() {
        if crate::cuda_available() {
            return;
        }
        let steps = run(0, None);
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert!(!steps[0].ok && steps[0].name == "conv", "{steps:?}");
    }
}
