//! `--allocator pooled` (the default): libtorch's CPU tensors come from headroom's pool. One test in
//! its own process (the setting is process-wide): a freed tensor's block serves the next tensor of
//! its size without new memory, a training-like loop stays within the pool's bound, and `trim`
//! returns what it kept.
#![cfg(all(feature = "libtorch", target_os = "linux", target_env = "gnu"))]

use headroom_train::cpu_pool;
use headroom_train::memory_guard::{Allocator, set_allocator, status_bytes};
use headroom_train::tch::{Device, Kind, Tensor};

const MIB: f64 = 1024.0 * 1024.0;

fn resident() -> f64 {
    status_bytes("VmRSS:").expect("VmRSS") as f64 / MIB
}

#[test]
fn freed_tensors_serve_the_next_of_their_size_within_the_bound() {
    assert!(set_allocator(Allocator::Pooled), "libtorch took the pool");
    let start = cpu_pool::stats().expect("the pool is installed");
    let elements = 1024 * 1024; // 4 MiB of f32

    // A small tensor stays with glibc: the pool does not see it.
    drop(Tensor::ones([16], (Kind::Float, Device::Cpu)));
    assert_eq!(cpu_pool::stats().unwrap().misses, start.misses);

    let a = Tensor::ones([elements], (Kind::Float, Device::Cpu));
    let after_a = cpu_pool::stats().unwrap();
    assert_eq!(after_a.misses, start.misses + 1, "fresh pages for the first 4 MiB: {after_a:?}");
    drop(a);
    assert!(cpu_pool::stats().unwrap().kept >= 4 << 20, "the freed block is kept");
    let before = resident();
    for _ in 0..50 {
        // Autograd-like work: products, sums, their gradients; every block the same few sizes.
        let x = Tensor::ones([elements], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let y = (&x * 2.0).sigmoid() * &x;
        y.sum(Kind::Float).backward();
        assert!(x.grad().double_value(&[0]) > 0.0);
    }
    let after = cpu_pool::stats().unwrap();
    assert!(after.hits >= 100, "kept blocks reused: {after:?}");
    assert!(after.misses <= after_a.misses + 8, "few fresh blocks after the first pass: {after:?}");
    let held = (after.in_use + after.kept) as f64;
    assert!(
        held <= after.high_water as f64 * (1.0 + cpu_pool::DEFAULT_SLACK) + 1.0,
        "within the bound: {after:?}"
    );
    assert!(resident() - before < 40.0, "the resident set did not grow with each pass");

    let kept = after.kept as f64 / MIB;
    let before_trim = resident();
    cpu_pool::trim();
    assert_eq!(cpu_pool::stats().unwrap().kept, 0);
    assert!(
        before_trim - resident() > kept * 0.8,
        "trim returned {kept:.1} MiB to the system: {before_trim:.1} -> {:.1}",
        resident()
    );
}
