//! `--allocator compact`: freed tensors go back to the system. One test in its own process (the
//! setting is process-wide): with glibc's defaults a freed 4 MiB tensor that is not at the top of
//! the heap stays resident; with the compact setting it is unmapped.
#![cfg(all(feature = "libtorch", target_os = "linux", target_env = "gnu"))]

use headroom_train::memory_guard::{Allocator, set_allocator, status_bytes};
use headroom_train::tch::{Device, Kind, Tensor};

const MIB: f64 = 1024.0 * 1024.0;

fn resident() -> f64 {
    status_bytes("VmRSS:").expect("VmRSS") as f64 / MIB
}

#[test]
fn a_freed_tensor_leaves_the_resident_set() {
    assert!(set_allocator(Allocator::Compact));
    let elements = 1024 * 1024; // 4 MiB of f32
    // Warm-up: glibc raises its dynamic threshold after the first large free (what compact stops).
    drop(Tensor::ones([elements], (Kind::Float, Device::Cpu)));
    let before = resident();
    let a = Tensor::ones([elements], (Kind::Float, Device::Cpu));
    let b = Tensor::ones([elements], (Kind::Float, Device::Cpu));
    let both = resident();
    drop(a);
    let after = resident();
    assert!(both - before > 7.0, "two 4 MiB tensors resident: {before:.1} -> {both:.1} MiB");
    assert!(both - after > 3.5, "the freed one left the resident set: {both:.1} -> {after:.1} MiB");
    drop(b);
}
