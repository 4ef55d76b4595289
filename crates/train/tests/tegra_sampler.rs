//! The Tegra memory sampler's thread sees memory the process takes and gives back between two
//! readings. Its own test binary: the figure is the whole process's resident set, which tests
//! running beside it in one process would move.

use headroom_core::tegra_memory::Sample;
use headroom_train::memory_guard::TegraSampler;
use std::time::Duration;

#[test]
fn the_sampler_sees_memory_the_process_took_and_gave_back_before_the_peak_was_read() {
    let Some(start) = Sample::read() else { return };
    let sampler = TegraSampler::start(start, Duration::from_millis(20));
    let block = vec![1u8; 200 << 20];
    assert!(block.iter().step_by(4096).all(|b| *b == 1));
    std::thread::sleep(Duration::from_millis(500));
    // glibc gives a block this large back to the system when it is freed: the reading `peak` takes
    // now does not hold it, only the thread's samples can.
    drop(block);
    let after = Sample::read().expect("read once already");
    assert!(after.rss_anon < start.rss_anon + (100 << 20), "the block was not given back");
    let peak = sampler.peak();
    assert!(
        peak.peak() >= start.rss_anon + (190 << 20),
        "peak {} MiB, start {} MiB",
        peak.peak() >> 20,
        start.rss_anon >> 20
    );
}
