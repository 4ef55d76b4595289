//! Records which libtorch headers tch's C++ wrapper is compiled against, so that `headroom
//! --version` and `doctor` can say it and compare it with the library loaded at run time.
//! headroom's torch-sys (vendor/torch-sys, `links = "tch"`) reads the version from the headers and
//! passes it as DEP_TCH_LIBTORCH_VERSION; DEP_TCH_LIBTORCH_CUDA is 1 for a CUDA libtorch.

fn main() {
    for name in ["DEP_TCH_LIBTORCH_VERSION", "DEP_TCH_LIBTORCH_CUDA"] {
        println!("cargo:rerun-if-env-changed={name}");
    }
    let version = std::env::var("DEP_TCH_LIBTORCH_VERSION").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=HEADROOM_LIBTORCH_HEADERS={version}");
    let cuda = std::env::var("DEP_TCH_LIBTORCH_CUDA").is_ok_and(|v| v == "1");
    println!("cargo:rustc-env=HEADROOM_LIBTORCH_CUDA_BUILD={}", u8::from(cuda));
}
