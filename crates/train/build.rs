//! Records which libtorch headers tch's C++ wrapper is compiled against, so that `headroom
//! --version` and `doctor` can say it and compare it with the library loaded at run time.
//! torch-sys (`links = "tch"`) passes its LIBTORCH's lib folder as DEP_TCH_LIBTORCH_LIB.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let version = std::env::var("DEP_TCH_LIBTORCH_LIB").ok().and_then(|lib| {
        let include = Path::new(&lib).parent()?.join("include");
        // Newer libtorch defines the numbers in torch/headeronly/version.h (the older file includes
        // it); older ones in torch/csrc/api/include/torch/version.h.
        ["torch/headeronly/version.h", "torch/csrc/api/include/torch/version.h"].iter().find_map(|file| {
            let header = include.join(file);
            println!("cargo:rerun-if-changed={}", header.display());
            header_version(&std::fs::read_to_string(header).ok()?)
        })
    });
    println!("cargo:rustc-env=HEADROOM_LIBTORCH_HEADERS={}", version.as_deref().unwrap_or("unknown"));
}

/// `MAJOR.MINOR.PATCH` from the `#define TORCH_VERSION_MAJOR 2` lines of torch's version.h.
fn header_version(text: &str) -> Option<String> {
    let part = |name: &str| {
        text.lines().find_map(|line| {
            let rest = line.trim().strip_prefix("#define ")?.strip_prefix(name)?;
            rest.trim().parse::<u32>().ok()
        })
    };
    Some(format!(
        "{}.{}.{}",
        part("TORCH_VERSION_MAJOR")?,
        part("TORCH_VERSION_MINOR")?,
        part("TORCH_VERSION_PATCH")?
    ))
}
