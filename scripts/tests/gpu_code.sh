#!/usr/bin/env bash
# `headroom doctor` names the GPU code a libtorch carries without a GPU (issue 48): the real
# `libtorch_cuda.so` of the pinned x86 torch 2.13.0 wheel (470 MB, taken from setup.sh's wheel
# cache) is put beside its `libtorch_cpu.so`, where it cannot load (its cuBLAS, cuDNN … are not
# there), and doctor must still read its `.nv_fatbin`: SASS sm_75 … sm_120, no code for Orin's
# sm_87, the loader's words in the cuda row, exit 1.
# Usage: scripts/tests/gpu_code.sh [HEADROOM_BINARY]   (default: $CARGO_TARGET_DIR/debug/headroom)
# Needs scripts/setup.sh to have run (.deps/env.sh).
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
# shellcheck source=../lib/binary_test.sh
source "$(dirname "$0")/../lib/binary_test.sh"
# The version setup.sh pins, read from it (one place).
torch_version=$(sed -n 's/^TORCH_VERSION=\([0-9.]*\).*/\1/p' "$root/scripts/setup.sh" | head -n 1)
wheel_download "$wheels" x86_64 "torch==$torch_version" "torch-$torch_version-cp311-*.whl"
part="$deps/torch-$torch_version-cuda-part"
if [ ! -s "$part/torch/lib/libtorch_cuda.so" ]; then
  step "unpacking torch/lib/libtorch_cuda.so from $(basename "$WHEEL")"
  rm -rf "$part"
  wheel_extract "$WHEEL" "$part" torch/lib/libtorch_cuda.so
fi
cpu=$(readlink -f "$LIBTORCH/lib/libtorch_cpu.so")
[ -f "$cpu" ] || fail "no libtorch_cpu.so under $LIBTORCH/lib"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A folder where both are real files side by side (the kernel maps the real path, so links to the
# wheel's folder would put libtorch_cpu.so back there): hard links where the file system allows.
for f in "$cpu" "$part/torch/lib/libtorch_cuda.so"; do
  ln "$f" "$tmp/" 2>/dev/null || cp "$f" "$tmp/"
done
out=$(LD_LIBRARY_PATH="$tmp:$LD_LIBRARY_PATH" "$bin" doctor --json) && rc=0 || rc=$?
echo "$out" > "$tmp/doctor.json"
python3 - "$tmp/doctor.json" "$tmp/libtorch_cuda.so" "$rc" <<'PY' || fail "doctor on the wheel's libtorch_cuda.so (above)"
import json, re, sys
report, library, rc = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
code, cuda = report["gpu_code"], report["cuda"]
print("cuda     ", cuda["detail"])
print("gpu code ", code["detail"])
assert not cuda["ok"] and "cannot load" in cuda["detail"], "the wheel's libtorch_cuda.so cannot load here"
assert code["library"] == library, code
sass = [int(a) for a in re.findall(r"sm_(\d+)", code["detail"].split(";")[0])]
assert sass[0] == 75 and 120 in sass and 87 not in sass, sass
assert "Orin (sm_87): NO native code" in code["detail"], code["detail"]
assert "jetson-bundle.sh" in code["detail"], "names the route with sm_87 code"
assert rc == 1, f"exit {rc}, expected 1 (a check failed)"
PY
echo "gpu_code.sh: PASS: doctor read the SM targets of torch $torch_version's x86 libtorch_cuda.so without loading it"
