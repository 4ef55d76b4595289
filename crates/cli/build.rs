//! Gives the `headroom` binary a RUNPATH of `$ORIGIN/../lib`, so an installed bundle
//! (`bin/headroom` beside `lib/` with libtorch; scripts/bundle.sh) starts with an empty environment.
//! A development build still finds libtorch through `LD_LIBRARY_PATH` (.deps/env.sh), which the
//! loader searches before RUNPATH. Lazy binding (`-z lazy`, Rust's default is `-z now`): a libtorch
//! of another minor version than the headers' loads, and `headroom` says so in its own words
//! (`--version`'s warning, `doctor`'s failed check, `train` refusing, naming both versions) instead
//! of the loader's "undefined symbol" before `main` (docs/DECISIONS.md, libtorch versions).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" {
        // `$ORIGIN` reaches the linker literally (no shell between cargo and it); RUNPATH, not the
        // older RPATH, so that LD_LIBRARY_PATH still overrides it.
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,$ORIGIN/../lib");
        println!("cargo:rustc-link-arg-bins=-Wl,--enable-new-dtags");
        println!("cargo:rustc-link-arg-bins=-Wl,-z,lazy");
    }
}
