// headroom's additions to tch's C API (vendor/torch-sys/README.md).
#include <ATen/ATen.h>
#include <ATen/Version.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {
// tch's handles (torch_api.h: `typedef torch::Tensor *tensor`) as a list for ATen.
std::vector<at::Tensor> tensors(at::Tensor *const *handles, long n) {
  std::vector<at::Tensor> list;
  list.reserve(static_cast<size_t>(n));
  for (long i = 0; i < n; ++i) {
    list.push_back(*handles[i]);
  }
  return list;
}

// Copies an exception's text (at most `len - 1` bytes and a NUL) into `err`; returns -1.
long failed(const std::exception &e, char *err, long len) {
  if (err != nullptr && len > 0) {
    std::string text = e.what();
    size_t n = text.size() < static_cast<size_t>(len - 1) ? text.size() : static_cast<size_t>(len - 1);
    std::memcpy(err, text.data(), n);
    err[n] = '\0';
  }
  return -1;
}
} // namespace

extern "C" {
// libtorch's own configuration text (at::show_config(): "TORCH_VERSION=2.5.1, ..."), so that a binary
// can tell which libtorch it really loaded. Copies at most `len - 1` bytes and a NUL into `buf`;
// returns the text's full length, or -1 when libtorch threw.
long headroom_show_config(char *buf, long len) {
  try {
    std::string text = at::show_config();
    if (buf != nullptr && len > 0) {
      size_t n = text.size() < static_cast<size_t>(len - 1) ? text.size() : static_cast<size_t>(len - 1);
      std::memcpy(buf, text.data(), n);
      buf[n] = '\0';
    }
    return static_cast<long>(text.size());
  } catch (...) {
    return -1;
  }
}

// libtorch's own profiler (torch::autograd::profiler::RecordProfile, in 2.5 to 2.13): every op run
// on this thread and on autograd's, forward and backward, until headroom_profile_stop, written then
// to `path` as a Chrome trace. Returns null when libtorch threw (a second profiler, a bad path).
void *headroom_profile_start(const char *path) {
  try {
    return new torch::autograd::profiler::RecordProfile(std::string(path));
  } catch (...) {
    return nullptr;
  }
}

// Stops what headroom_profile_start started and writes its trace.
void headroom_profile_stop(void *profile) {
  delete static_cast<torch::autograd::profiler::RecordProfile *>(profile);
}

// A named span in the profile (PyTorch's `record_function`), from here to headroom_scope_exit on
// the same thread. `name` must outlive the span (headroom passes static strings).
void *headroom_scope_enter(const char *name) {
  try {
    auto *span = new at::RecordFunction(at::RecordScope::USER_SCOPE);
    if (span->isActive()) {
      span->before(name, c10::ArrayRef<const c10::IValue>{});
    }
    return span;
  } catch (...) {
    return nullptr;
  }
}

void headroom_scope_exit(void *span) {
  delete static_cast<at::RecordFunction *>(span);
}

// The optimiser arithmetic over a whole list of tensors in one call (PyTorch's foreach and fused
// optimiser kernels, in libtorch 2.5 to 2.13 on the CPU and on CUDA), instead of a dozen tch calls
// per tensor. Each returns 0, or -1 with libtorch's message in `err` (at most `len` bytes).

// torch.optim.AdamW(fused=True)'s update of `n` parameters: their gradients, first and second
// moments (updated in place) at step `step` (1-based; one float tensor on the parameters' device).
long headroom_fused_adamw(at::Tensor *const *params, at::Tensor *const *grads, at::Tensor *const *exp_avgs,
                          at::Tensor *const *exp_avg_sqs, long n, at::Tensor *step, double lr, double beta1,
                          double beta2, double weight_decay, double eps, char *err, long len) {
  try {
    std::vector<at::Tensor> steps(static_cast<size_t>(n), *step);
    at::_fused_adamw_(tensors(params, n), tensors(grads, n), tensors(exp_avgs, n), tensors(exp_avg_sqs, n), {},
                      steps, lr, beta1, beta2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
    return 0;
  } catch (const std::exception &e) {
    return failed(e, err, len);
  }
}

// torch.optim.SGD(fused=True)'s update of `n` parameters (L2 weight decay, momentum without
// dampening, Nesterov or not): `momentum_buffers` are written from the gradients at the first step
// (`first`) and updated in place after.
long headroom_fused_sgd(at::Tensor *const *params, at::Tensor *const *grads, at::Tensor *const *momentum_buffers,
                        long n, double lr, double momentum, double weight_decay, bool nesterov, bool first, char *err,
                        long len) {
  try {
    at::_fused_sgd_(tensors(params, n), tensors(grads, n), tensors(momentum_buffers, n), weight_decay, momentum, lr,
                    /*dampening=*/0.0, nesterov, /*maximize=*/false, first);
    return 0;
  } catch (const std::exception &e) {
    return failed(e, err, len);
  }
}

// Ultralytics' ModelEMA update of `n` tensors: average = average * decay + value * (1 - decay), as
// one lerp per tensor (average + (1 - decay) * (value - average)).
long headroom_foreach_ema(at::Tensor *const *average, at::Tensor *const *value, long n, double decay, char *err,
                          long len) {
  try {
    at::_foreach_lerp_(tensors(average, n), tensors(value, n), at::Scalar(1.0 - decay));
    return 0;
  } catch (const std::exception &e) {
    return failed(e, err, len);
  }
}

// The joint L2 norm of `n` tensors (in double), into `norm`. As PyTorch's `clip_grad_norm_`: the
// per-tensor norms stacked on their device and reduced there, so one value is read back (one
// device sync on CUDA, not one per tensor).
long headroom_foreach_norm(at::Tensor *const *list, long n, double *norm, char *err, long len) {
  try {
    *norm = 0.0;
    if (n > 0) {
      std::vector<at::Tensor> norms = at::_foreach_norm(tensors(list, n), 2);
      for (at::Tensor &each : norms) {
        each = each.to(at::kDouble);
      }
      *norm = at::linalg_vector_norm(at::stack(norms), 2).item<double>();
    }
    return 0;
  } catch (const std::exception &e) {
    return failed(e, err, len);
  }
}

// Backward from `n` outputs, each seeded with its gradient (`torch.autograd.backward(outputs,
// grads)`, what `torch.utils.checkpoint` runs): a recomputed segment's backward without a surrogate
// `sum(output * grad)` and its own backward.
long headroom_backward(at::Tensor *const *outputs, at::Tensor *const *grads, long n, char *err, long len) {
  try {
    if (n > 0) {
      torch::autograd::backward(tensors(outputs, n), tensors(grads, n));
    }
    return 0;
  } catch (const std::exception &e) {
    return failed(e, err, len);
  }
}

// Multiplies `n` tensors in place by `factor`.
long headroom_foreach_mul(at::Tensor *const *list, long n, double factor, char *err, long len) {
  try {
    at::_foreach_mul_(tensors(list, n), at::Scalar(factor));
    return 0;
  } catch (const std::exception &e) {
    return failed(e, err, len);
  }
}

// Zeroes `n` tensors in place.
long headroom_foreach_zero(at::Tensor *const *list, long n, char *err, long len) {
  try {
    at::_foreach_zero_(tensors(list, n));
    return 0;
  } catch (const std::exception &e) {
    return failed(e, err, len);
  }
}
}
