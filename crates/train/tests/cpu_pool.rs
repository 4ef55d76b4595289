//! `--allocator pooled` (the default): libtorch's CPU tensors come from headroom's pool. One test in
//! its own process (the setting is process-wide): a freed tensor's block serves the next tensor of
//! its size without fresh pages, a training-like loop stays within the pool's bound, and `trim`
//! returns the free pages to the system.
#![cfg(all(feature = "libtorch", target_os = "linux", target_env = "gnu"))]

use headroom_train::cpu_pool;
use headroom_train::memory_guard::{Allocator, set_allocator, status_bytes};
use headroom_train::tch::{Device, Kind, Tensor};

const MIB: f64 = 1024.0 * 1024.0;

fn resident_mib() -> f64 {
    status_bytes("VmRSS:").expect("VmRSS") as f64 / MIB
}

fn stats() -> cpu_pool::PoolStats {
    cpu_pool::stats().expect("the pool is installed")
}

#[test]
fn freed_tensors_serve_the_next_of_their_size_within_the_bound() {
    assert!(set_allocator(Allocator::Pooled), "libtorch took the pool");
    let start = stats();
    let elements = 1024 * 1024; // 4 MiB of f32

    // A small tensor stays with glibc: the pool does not see it.
    drop(Tensor::ones([16], (Kind::Float, Device::Cpu)));
    let small = stats();
    assert_eq!((small.grown, small.reused), (start.grown, start.reused), "{small:?}");

    let a = Tensor::ones([elements], (Kind::Float, Device::Cpu));
    let after_a = stats();
    assert_eq!(after_a.grown, start.grown + 1, "the first 4 MiB grew the heap: {after_a:?}");
    assert!(after_a.in_use >= 4 << 20);
    drop(a);
    let b = Tensor::ones([elements], (Kind::Float, Device::Cpu));
    let after_b = stats();
    assert_eq!(after_b.grown, after_a.grown, "the freed block served the next: {after_b:?}");
    assert_eq!(after_b.reused, after_a.reused + 1, "{after_b:?}");
    assert_eq!(after_b.grown_bytes, after_a.grown_bytes, "no fresh pages: {after_b:?}");
    drop(b);

    let before = resident_mib();
    for _ in 0..50 {
        // Autograd-like work: products, sums, their gradients; every block the same few sizes.
        let x = Tensor::ones([elements], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let y = (&x * 2.0).sigmoid() * &x;
        y.sum(Kind::Float).backward();
        assert!(x.grad().double_value(&[0]) > 0.0);
    }
    let after = stats();
    assert!(after.reused >= after_b.reused + 100, "free ranges reused: {after:?}");
    assert!(after.grown <= after_b.grown + 8, "few requests took fresh pages: {after:?}");
    assert!(
        after.resident as f64 <= after.high_water as f64 * (1.0 + cpu_pool::DEFAULT_SLACK) + 1.0,
        "within the bound: {after:?}"
    );
    assert!(resident_mib() - before < 40.0, "the resident set did not grow with each pass");

    let free = (after.resident - after.in_use) as f64 / MIB;
    assert!(free >= 4.0, "freed blocks stay resident until trimmed: {after:?}");
    let before_trim = resident_mib();
    cpu_pool::trim();
    let trimmed = stats();
    assert_eq!(trimmed.resident, trimmed.in_use, "{trimmed:?}");
    assert!(
        before_trim - resident_mib() > free * 0.8,
        "trim returned {free:.1} MiB to the system: {before_trim:.1} -> {:.1}",
        resident_mib()
    );
    // The heap keeps working on released pages.
    let c = Tensor::ones([elements], (Kind::Float, Device::Cpu));
    assert_eq!(c.double_value(&[elements - 1]), 1.0);
}
