//! Records which libtorch headers tch's C++ wrapper is compiled against, so that `headroom
//! --version` and `doctor` can say it and compare it with the library loaded at run time.
//! headroom's torch-sys (vendor/torch-sys, `links = "tch"`) reads the version from the headers and
//! passes it as DEP_TCH_LIBTORCH_VERSION.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_VERSION");
    let version = std::env::var("DEP_TCH_LIBTORCH_VERSION").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=HEADROOM_LIBTORCH_HEADERS={version}");
}
