//! The `headroom` binary: parse, run, report (the verbs are the `headroom_cli` library's).

// The docs test (README and docs/ against this binary's flags and the benchmarks), kept out of src/.
#[cfg(all(test, feature = "onnxruntime", feature = "libtorch"))]
#[path = "../tests/unit/docs.rs"]
mod docs_test;

fn main() -> std::process::ExitCode {
    headroom_cli::main(headroom_cli::Hooks::default())
}
