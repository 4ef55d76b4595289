#!/usr/bin/env bash
# Tests of scripts/jetson-bundle.sh's logic that need no Jetson, no cargo build and no network: the
# REAL script runs with --check (find and check the libraries, print the scripts/bundle.sh command,
# build nothing) against
#   - a stub `python3` first on PATH, which fails `import torch` / `import onnxruntime` with a given
#     error (the import errors the Jetson AI Lab wheels give on JetPack 6 when a native library is
#     missing), or answers with the paths of a fake site-packages;
#   - a fake virtual environment (bin/python linked to this machine's real interpreter beside a
#     pyvenv.cfg, as `python3 -m venv` lays it out) holding fake torch and onnxruntime packages, given
#     as PYTHON=VENV/bin/python: real Python tracebacks and the real venv detection.
# Each scenario checks the exit status, what the script printed and that bash's error trap did not
# fire. Plain bash, coreutils and python3 (the venv scenarios are skipped without python3); ~1 s.
#
# Usage: scripts/tests/jetson_bundle_logic.sh   prints `ok - ...` / `FAIL - ...` per scenario, then
#        `N passed, M failed`; exits 1 if any failed. HEADROOM_TEST_KEEP=1 keeps the temp folder.
# shellcheck disable=SC2001  # sed indents multi-line text
set -uo pipefail   # not -e: the scenarios fail on purpose; every status is checked explicitly

scripts=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
unset PYTHON HEADROOM_STEP CARGO_TARGET_DIR VIRTUAL_ENV
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jetson-bundle-logic.XXXXXX") || { echo "cannot create a temp folder" >&2; exit 1; }
if [ "${HEADROOM_TEST_KEEP:-0}" = 1 ]; then echo "keeping $tmp" >&2; else trap 'rm -rf "$tmp"' EXIT; fi

# ------------------------------------------------------------------------------------------
# a fake site-packages: torch (version.py, include/torch, lib/libtorch_cuda.so) and onnxruntime
# ------------------------------------------------------------------------------------------
make_site() {   # DIR TORCH_VERSION ORT_VERSION
  mkdir -p "$1/torch/include/torch" "$1/torch/lib" "$1/onnxruntime/capi"
  echo "__version__ = '$2'" > "$1/torch/version.py"
  : > "$1/torch/lib/libtorch_cuda.so"
  : > "$1/torch/lib/libc10.so"
  : > "$1/onnxruntime/capi/libonnxruntime.so.$3"
  : > "$1/torch/__init__.py"
  : > "$1/onnxruntime/__init__.py"
}
site="$tmp/site"
make_site "$site" 2.8.0 1.23.0

# The stub python3: answers the script's three calls (interpreter info, import torch, import
# onnxruntime) from STUB_TORCH_ERROR / STUB_ORT_ERROR (an import that fails with that text, as a
# traceback) and STUB_SITE.
stubs="$tmp/stubs"
mkdir -p "$stubs"
cat > "$stubs/python3" <<'EOF'
#!/usr/bin/env bash
code=${2:-}
traceback() {
  echo 'Traceback (most recent call last):' >&2
  echo '  File "<string>", line 1, in <module>' >&2
  echo "  File \"/usr/local/lib/python3.10/dist-packages/$1/__init__.py\", line 290, in <module>" >&2
  echo "$2" >&2
  exit 1
}
case "$code" in
  *base_prefix*) echo "3.10.12 no venv /usr" ;;
  *'import os, torch'*)
    [ -z "${STUB_TORCH_ERROR:-}" ] || traceback torch "$STUB_TORCH_ERROR"
    echo "HEADROOM_PATH=$STUB_SITE/torch" ;;
  *'import os, onnxruntime'*)
    [ -z "${STUB_ORT_ERROR:-}" ] || traceback onnxruntime "$STUB_ORT_ERROR"
    echo "HEADROOM_PATH=$STUB_SITE/onnxruntime/capi" ;;
  *) echo "stub python3: unexpected call: $*" >&2; exit 99 ;;
esac
EOF
chmod +x "$stubs/python3"

passed=0 failed=0 skipped=0
out="" rc=0 problems=()
# run ENV... -- ARGS...: the real script with --check, the stub python3 first on PATH.
run() {
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  out=$(env PATH="$stubs:$PATH" STUB_SITE="$site" "${envs[@]}" bash "$scripts/jetson-bundle.sh" --check "$@" 2>&1)
  rc=$?
  problems=()
}
expect_rc() { [ "$rc" = "$1" ] || problems+=("expected exit status $1, got $rc"); }
expect_output() { grep -qE -- "$1" <<< "$out" || problems+=("expected the output to match: $1"); }
expect_no_output() { ! grep -qE -- "$1" <<< "$out" || problems+=("expected the output NOT to match: $1"); }
expect_fixed() { grep -qF -- "$1" <<< "$out" || problems+=("expected the output to contain: $1"); }
# The error trap of scripts/lib/errtrap.sh ("error at line N") means an unexpected failure.
expect_no_trap() { expect_no_output 'error at line [0-9]+'; }
report() {   # NAME
  if [ ${#problems[@]} -eq 0 ]; then
    passed=$((passed + 1)); echo "ok - $1"
  else
    failed=$((failed + 1)); echo "FAIL - $1"
    printf '    %s\n' "${problems[@]}"
    sed 's/^/    | /' <<< "$out"
  fi
}

# ------------------------------------------------------------------------------------------
# import errors, with the stub python3 on PATH (PYTHON unset)
# ------------------------------------------------------------------------------------------
run STUB_TORCH_ERROR="ImportError: libcudss.so.0: cannot open shared object file: No such file or directory" --
expect_rc 1; expect_no_trap
expect_fixed "python3 cannot import torch. Python says:"
expect_fixed "    ImportError: libcudss.so.0: cannot open shared object file: No such file or directory"
expect_output 'cuDSS \(JetPack 6\): .*apt-get install cudss'
expect_no_output 'cuSPARSELt|libopenblas|GLIBCXX|a native library the wheel'
expect_fixed "or pass --libtorch DIR"
expect_no_output 'would run'
report "torch 2.8 without cuDSS: Python's ImportError line, the cuDSS hint only, exit 1"

run STUB_TORCH_ERROR="OSError: libcusparseLt.so.0: cannot open shared object file: No such file or directory" --
expect_rc 1; expect_no_trap
expect_fixed "    OSError: libcusparseLt.so.0: cannot open shared object file"
expect_output 'cuSPARSELt \(JetPack 6\): .*libcusparse_lt-linux-aarch64-.*_cuda12.*ldconfig'
expect_no_output 'apt-get install cudss'
report "torch without cuSPARSELt: the error and the cuSPARSELt hint, exit 1"

run STUB_TORCH_ERROR="ImportError: libopenblas.so.0: cannot open shared object file: No such file or directory" --
expect_rc 1; expect_no_trap
expect_output 'libopenblas.so.0: apt-get install libopenblas-dev'
report "torch without OpenBLAS: the libopenblas-dev hint, exit 1"

run STUB_TORCH_ERROR="ImportError: /lib/aarch64-linux-gnu/libstdc++.so.6: version \`GLIBCXX_3.4.32' not found (required by /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cpu.so)" --
expect_rc 1; expect_no_trap
expect_fixed "version \`GLIBCXX_3.4.32' not found (required by"
expect_output 'GLIBCXX_3.4.32 is GCC 13.*ppa:ubuntu-toolchain-r/test.*libstdc\+\+6'
expect_no_output 'a native library the wheel'
report "torch on Ubuntu 22.04's libstdc++: the GLIBCXX_3.4.32 line and the toolchain PPA hint, exit 1"

run STUB_TORCH_ERROR="ModuleNotFoundError: No module named 'torch'" --
expect_rc 1; expect_no_trap
expect_fixed "ModuleNotFoundError: No module named 'torch'"
expect_output 'PYTHON=/path/to/venv/bin/python.*JetPack 7 pip installs only into a venv'
report "torch not installed for python3: says to point PYTHON at the venv, exit 1"

run STUB_TORCH_ERROR="ImportError: libnvToolsExt.so.1: cannot open shared object file: No such file or directory" --
expect_rc 1; expect_no_trap
expect_fixed "    ImportError: libnvToolsExt.so.1: cannot open shared object file"
expect_output 'a native library the wheel was built against is missing'
expect_no_output 'cuDSS|cuSPARSELt|libopenblas-dev|GLIBCXX_3.4.32 is'
report "an unknown missing library: the error and the general hint only, exit 1"

run STUB_ORT_ERROR="ImportError: libcudss.so.0: cannot open shared object file: No such file or directory" --
expect_rc 1; expect_no_trap
expect_fixed "python3 cannot import onnxruntime. Python says:"
expect_output 'apt-get install cudss'
expect_fixed "or pass --onnxruntime FILE"
report "onnxruntime's import failing: the same treatment, with --onnxruntime FILE, exit 1"

run PYTHON="$tmp/no-such-venv/bin/python" --
expect_rc 1; expect_no_trap
expect_fixed "PYTHON=$tmp/no-such-venv/bin/python is not an executable file"
report "PYTHON naming no interpreter: refused before any import, exit 1"

# ------------------------------------------------------------------------------------------
# the libraries given: no Python needed at all
# ------------------------------------------------------------------------------------------
run PYTHON="$tmp/no-such-venv/bin/python" -- --libtorch "$site/torch" --onnxruntime "$site/onnxruntime/capi/libonnxruntime.so.1.23.0" --label test
expect_rc 0; expect_no_trap
expect_output 'PyTorch 2\.8\.0 \(CUDA build: yes\) .* ONNX Runtime 1\.23\.0 .*features: cuda,tensorrt; label: test'
expect_output "scripts/bundle\.sh --target native .*--libtorch $site/torch --onnxruntime $site/onnxruntime/capi/libonnxruntime\.so\.1\.23\.0 --features cuda,tensorrt --label test"
expect_no_output '^jetson-bundle: Python:'
report "--libtorch and --onnxruntime given: PYTHON is not used, the bundle.sh command is printed, exit 0"

no_lib_site="$tmp/no-lib-site"
make_site "$no_lib_site" 2.8.0 1.23.0
rm "$no_lib_site/onnxruntime/capi/libonnxruntime.so.1.23.0"
run STUB_SITE="$no_lib_site" --
expect_rc 1; expect_no_trap
expect_output "no libonnxruntime\.so\.\* in $no_lib_site/onnxruntime/capi: .*pass --onnxruntime FILE"
report "an onnxruntime wheel without libonnxruntime.so: says to pass --onnxruntime FILE, exit 1"

cpu_site="$tmp/cpu-site"
make_site "$cpu_site" 2.5.1 1.20.1
rm "$cpu_site/torch/lib/libtorch_cuda.so"
run -- --libtorch "$cpu_site/torch" --onnxruntime "$cpu_site/onnxruntime/capi/libonnxruntime.so.1.20.1"
expect_rc 1; expect_no_trap
expect_output 'PyTorch 2\.5\.1 in .* has no lib/libtorch_cuda\.so \(a CPU build\), but --features cuda,tensorrt asks for CUDA'
expect_no_output 'would run'
report "a CPU torch with the default features (cuda,tensorrt): refused before any build, exit 1"

run -- --libtorch "$cpu_site/torch" --onnxruntime "$cpu_site/onnxruntime/capi/libonnxruntime.so.1.20.1" --features "" --label cpu
expect_rc 0; expect_no_trap
expect_output 'PyTorch 2\.5\.1 \(CUDA build: no\) .*features: none'
expect_fixed "--features '' --label cpu"
report "a CPU torch with --features \"\": accepted (as scripts/tests/bundle.sh runs it), exit 0"

run -- --help
expect_rc 0
expect_output 'PYTHON=~/headroom-venv/bin/python'
expect_output 'PEP 668'
report "--help says PYTHON takes a venv's interpreter (JetPack 7, PEP 668)"

# ------------------------------------------------------------------------------------------
# a virtual environment given as PYTHON=VENV/bin/python (the real interpreter)
# ------------------------------------------------------------------------------------------
real_python=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || real_python=""
if [ -z "$real_python" ] || [ ! -x "$real_python" ]; then
  skipped=$((skipped + 4)); echo "skip - the venv scenarios (no python3 here)"
else
  pyver=$("$real_python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  make_venv() {   # DIR TORCH_VERSION: as `python3 -m venv` lays it out, without pip
    mkdir -p "$1/bin"
    ln -s "$real_python" "$1/bin/python"
    printf 'home = %s\ninclude-system-site-packages = false\nversion = %s\n' "$(dirname "$real_python")" "$pyver" > "$1/pyvenv.cfg"
    make_site "$1/lib/python$pyver/site-packages" "$2" 1.23.2
  }

  venv="$tmp/venv ok"   # a space in the path, on purpose
  make_venv "$venv" 2.8.0
  run PYTHON="$venv/bin/python" --
  expect_rc 0; expect_no_trap
  expect_output "^jetson-bundle: Python: $venv/bin/python \\([0-9.]+ venv $venv\\)"
  expect_output "PyTorch 2\.8\.0 \(CUDA build: yes\) from $venv/lib/python$pyver/site-packages/torch; ONNX Runtime 1\.23\.2"
  expect_fixed "--libtorch $(printf '%q' "$venv/lib/python$pyver/site-packages/torch")"
  expect_fixed "--onnxruntime $(printf '%q' "$venv/lib/python$pyver/site-packages/onnxruntime/capi/libonnxruntime.so.1.23.2")"
  report "PYTHON=VENV/bin/python (not activated, a space in the path): the venv's torch and onnxruntime, exit 0"

  # As torch/__init__.py fails when a library is missing: ctypes' OSError, re-raised.
  venv="$tmp/venv-cudss"
  make_venv "$venv" 2.8.0
  cat > "$venv/lib/python$pyver/site-packages/torch/__init__.py" <<'EOF'
import ctypes
def _load_global_deps():
    try:
        ctypes.CDLL("libcudss.so.0", mode=ctypes.RTLD_GLOBAL)
    except OSError as err:
        raise ImportError(str(err)) from err
_load_global_deps()
EOF
  run PYTHON="$venv/bin/python" --
  expect_rc 1; expect_no_trap
  expect_fixed "$venv/bin/python cannot import torch. Python says:"
  expect_output '^    ImportError: libcudss\.so\.0: cannot open shared object file'
  expect_output 'apt-get install cudss'
  report "a venv whose torch fails to load libcudss.so.0 (a real traceback): its last line and the cuDSS hint, exit 1"

  venv="$tmp/venv-old"
  make_venv "$venv" 2.4.1
  run PYTHON="$venv/bin/python" --
  expect_rc 1; expect_no_trap
  expect_output 'PyTorch 2\.4\.1 in .*: headroom builds against libtorch 2\.5 to 2\.13'
  report "a venv with torch 2.4.1: refused with the range, exit 1"

  # python3 on PATH being a venv's (an activated venv): found without PYTHON.
  venv="$tmp/venv-active"
  make_venv "$venv" 2.13.0
  ln -s python "$venv/bin/python3"
  out=$(env PATH="$venv/bin:$PATH" bash "$scripts/jetson-bundle.sh" --check 2>&1); rc=$?; problems=()
  expect_rc 0; expect_no_trap
  expect_output "^jetson-bundle: Python: python3 \\([0-9.]+ venv $venv\\)"
  expect_output 'PyTorch 2\.13\.0 '
  report "an activated venv (its python3 first on PATH), PYTHON unset: its libraries, exit 0"
fi

# ------------------------------------------------------------------------------------------
# --jetpack 7: an L4T release file, a stub python3.12 whose `-m venv` lays out a venv whose python
# answers the import calls (the stub python3's) and logs `-m pip install` (failing on
# STUB_PIP_ERROR), as jetson-containers' index would serve torch 2.12.0 and onnxruntime-gpu 1.25.1.
# ------------------------------------------------------------------------------------------
jp7_site="$tmp/jp7-site"
make_site "$jp7_site" 2.12.0 1.25.1
cat > "$stubs/python3.12" <<'EOF'
#!/usr/bin/env bash
[ "$1 $2" = "-m venv" ] || { echo "stub python3.12: unexpected call: $*" >&2; exit 99; }
if [ -n "${STUB_VENV_ERROR:-}" ]; then echo "$STUB_VENV_ERROR" >&2; exit 1; fi
mkdir -p "$3/bin"
cat > "$3/bin/python" <<'PY'
#!/usr/bin/env bash
if [ "$1 $2" = "-m pip" ]; then
  echo "pip $*" >> "$STUB_LOG"
  if [ -n "${STUB_PIP_ERROR:-}" ]; then echo "$STUB_PIP_ERROR" >&2; exit 1; fi
  exit 0
fi
case "${2:-}" in *base_prefix*) echo "3.12.3 venv ${0%/bin/python}"; exit 0 ;; esac
exec python3 "$@"
PY
chmod +x "$3/bin/python"
EOF
chmod +x "$stubs/python3.12"
release() { printf '# R%s (release), REVISION: %s, GCID: 1, BOARD: generic, EABI: aarch64, DATE: x\n# KERNEL_VARIANT: oot\n' "$1" "$2" > "$tmp/nv_tegra_release"; }

release 39 2.0
run HEADROOM_NV_TEGRA_RELEASE="$tmp/nv_tegra_release" STUB_SITE="$jp7_site" STUB_LOG="$tmp/pip.log" -- \
  --jetpack 7 --venv "$tmp/jp7-venv"
expect_rc 0; expect_no_trap
expect_output "making the venv $tmp/jp7-venv \(python3\.12 -m venv\)"
expect_output 'installing torch==2\.12\.0 and onnxruntime-gpu==1\.25\.1 from https://pypi\.jetson-ai-lab\.io/jp7/cu132'
grep -qF -- "--index-url https://pypi.jetson-ai-lab.io/jp7/cu132 torch==2.12.0 onnxruntime-gpu==1.25.1" "$tmp/pip.log" \
  || problems+=("pip was not asked for both from the index: $(cat "$tmp/pip.log" 2>/dev/null)")
expect_output "Python: $tmp/jp7-venv/bin/python \(3\.12\.3 venv"
expect_output 'PyTorch 2\.12\.0 \(CUDA build: yes\).*ONNX Runtime 1\.25\.1.*label: l4t-r39\.2'
expect_output 'bundle\.sh --target native .*--features cuda,tensorrt --label l4t-r39\.2'
report "--jetpack 7 on L4T R39.2: a Python 3.12 venv, torch 2.12.0 and onnxruntime-gpu 1.25.1 from jetson-containers' jp7/cu132 index, then the native bundle"

# A second run reuses the venv (no second `-m venv`), and takes the versions asked for.
run HEADROOM_NV_TEGRA_RELEASE="$tmp/nv_tegra_release" STUB_SITE="$jp7_site" STUB_LOG="$tmp/pip.log" \
  HEADROOM_JP7_TORCH=2.11.0 STUB_VENV_ERROR="a second venv was made" -- --jetpack 7 --venv "$tmp/jp7-venv" \
  --index-url https://example.invalid/sbsa/cu130
expect_rc 0; expect_no_trap
expect_no_output 'making the venv'
expect_output 'installing torch==2\.11\.0 and onnxruntime-gpu==1\.25\.1 from https://example\.invalid/sbsa/cu130'
report "--jetpack 7 again: the venv reused, HEADROOM_JP7_TORCH and --index-url honoured"

release 36 4
run HEADROOM_NV_TEGRA_RELEASE="$tmp/nv_tegra_release" STUB_SITE="$jp7_site" STUB_LOG="$tmp/pip.log" -- \
  --jetpack 7 --venv "$tmp/jp7-venv-36"
expect_rc 1; expect_no_trap
expect_output 'says R36 \(release\), REVISION: 4.*JetPack 6 or older; its route is this script without --jetpack'
[ ! -e "$tmp/jp7-venv-36" ] || problems+=("a venv was made on JetPack 6")
report "--jetpack 7 on L4T R36.4 (JetPack 6): refused before any venv, naming the route, exit 1"

release 39 2.1
run HEADROOM_NV_TEGRA_RELEASE="$tmp/nv_tegra_release" STUB_SITE="$jp7_site" STUB_LOG="$tmp/pip.log" \
  STUB_VENV_ERROR="The virtual environment was not created successfully because ensurepip is not available." -- \
  --jetpack 7 --venv "$tmp/jp7-venv-noensurepip"
expect_rc 1; expect_no_trap
expect_fixed "ensurepip is not available"
expect_output 'What to do: apt-get install python3\.12-venv'
report "--jetpack 7 without python3.12-venv: Python's words and the package to install, exit 1"

run HEADROOM_NV_TEGRA_RELEASE="$tmp/nv_tegra_release" STUB_SITE="$jp7_site" STUB_LOG="$tmp/pip.log" \
  STUB_PIP_ERROR="ERROR: No matching distribution found for torch==2.12.0" -- --jetpack 7 --venv "$tmp/jp7-venv-nopip"
expect_rc 1; expect_no_trap
expect_fixed "No matching distribution found for torch==2.12.0"
expect_output 'pip could not install torch==2\.12\.0 and onnxruntime-gpu==1\.25\.1 from https://pypi\.jetson-ai-lab\.io/jp7/cu132.*HEADROOM_JP7_TORCH'
report "--jetpack 7 when the index has no such torch: pip's words, the index and how to pick another version, exit 1"

run -- --jetpack 7 --libtorch "$site/torch"
expect_rc 1; expect_no_trap
expect_output '--jetpack 7 installs torch and onnxruntime-gpu itself: not with --libtorch'
report "--jetpack 7 with --libtorch: refused, exit 1"

run -- --jetpack 5
expect_rc 1; expect_no_trap
expect_output '--jetpack 5: only 7'
report "--jetpack 5: refused, exit 1"

if [ "$skipped" -gt 0 ]; then echo "$passed passed, $failed failed, $skipped skipped"; else echo "$passed passed, $failed failed"; fi
[ "$failed" = 0 ]
