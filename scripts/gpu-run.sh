#!/usr/bin/env bash
# One call on a lent GPU machine: the CUDA tests, the GPU benchmarks and the PyTorch comparison.
#
#   bash scripts/gpu-run.sh          # HERE: build with CUDA on (build-gpu/, portable -march),
#                                    # pack binaries + the shared libraries they need into
#                                    # build-gpu/pack/driftlab-gpu.tar.xz, print the run-tool call
#   bash scripts/gpu-run.sh remote   # THERE (what the printed call runs): unpack, run, write $OUT
#
# What is packed: driftlab_tests, bm_cuda, driftlab, Fashion-MNIST, and every shared library ldd names except
# the C library family, the NVIDIA driver (libcuda) and cuBLAS/cuDNN: those two are far over
# the 64 MiB a run may carry (libcublasLt alone is 540 MB), so the remote side takes them from
# the PyTorch install there (its nvidia-*-cu13 wheels) or a CUDA 13 toolkit, and stops with a
# clear message if it finds no libcublas.so.13 / libcudnn.so.9.
# GoogleTest is linked statically (Debian's libgtest.a); Google Benchmark is packed as .so.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${GPU_BUILD_DIR:-build-gpu}
PACK=$BUILD/pack
TARBALL=$PACK/driftlab-gpu.tar.xz

pack() {
  while [ -e /tmp/driftlab_bench.lock ]; do sleep 20; done  # the lead is timing benchmarks
  # -DDRIFTLAB_NATIVE=OFF: the lent machine's CPU may lack this machine's instruction sets.
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DDRIFTLAB_NATIVE=OFF -DDRIFTLAB_CUDA=ON \
        -DDRIFTLAB_TESTS=ON -DDRIFTLAB_BENCH=ON
  cmake --build "$BUILD" -j"$(nproc)" --target ${GPU_TARGETS:-driftlab_tests bm_cuda driftlab cuda_step dl_kprof}
  ldd "$BUILD/bm_cuda" | grep -q libcublas || { echo "build has no CUDA backend (nvcc/cuDNN not found?)" >&2; exit 1; }
  local stage
  stage=$(mktemp -d)
  mkdir -p "$stage/driftlab-gpu/bin" "$stage/driftlab-gpu/lib"
  cp "$BUILD/driftlab_tests" "$BUILD/bm_cuda" "$BUILD/driftlab" "$BUILD/cuda_step" "$stage/driftlab-gpu/bin/"
  # The per-kernel profiler (scripts/gpu-profile.sh) and the CUPTI it loads.
  cp "$BUILD/libdl_kprof.so" "$stage/driftlab-gpu/lib/"
  for bin in "$BUILD/driftlab_tests" "$BUILD/bm_cuda" "$BUILD/driftlab" "$BUILD/cuda_step" "$BUILD/libdl_kprof.so"; do
    ldd "$bin" | awk '/=> \//{print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*) ;;  # system / driver
      libcublas*|libcudnn*) ;;                                                        # from the lent machine
      *) cp -L "$lib" "$stage/driftlab-gpu/lib/" ;;
    esac
  done
  # Fashion-MNIST (Debian's dataset-fashion-mnist, 30 MB of .gz) for the LSTM/GRU epochs: the
  # lent machine has no apt.
  # DRIFTLAB_PACK_TRAIN_IMAGES=N: only the first N training images and labels (IDX counts
  # rewritten), for a run whose carry would pass 64 MiB with the 26 MB training set (the CLI device
  # test reads 64 of them; the epoch steps need them all).
  local fm=/usr/share/datasets/fashion-mnist
  mkdir -p "$stage/driftlab-gpu/data/fashion-mnist"
  cp "$fm"/*.gz "$stage/driftlab-gpu/data/fashion-mnist/"
  if [ -n "${DRIFTLAB_PACK_TRAIN_IMAGES:-}" ]; then
    python3 - "$fm" "$stage/driftlab-gpu/data/fashion-mnist" "$DRIFTLAB_PACK_TRAIN_IMAGES" <<'PY'
import gzip, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for name, item in (("train-images-idx3-ubyte.gz", 28 * 28), ("train-labels-idx1-ubyte.gz", 1)):
    raw = gzip.open(f"{src}/{name}").read()
    head = 16 if item > 1 else 8
    out = raw[:4] + struct.pack(">I", n) + raw[8:head] + raw[head:head + n * item]
    with gzip.open(f"{dst}/{name}", "wb") as f:
        f.write(out)
PY
  fi
  git rev-parse HEAD > "$stage/driftlab-gpu/commit.txt"
  git status --short > "$stage/driftlab-gpu/worktree-status.txt"
  mkdir -p "$PACK"
  rm -f "$PACK"/*.tar.xz
  tar -C "$stage" -cJf "$TARBALL" driftlab-gpu
  rm -rf "$stage"
  local size
  size=$(du -m "$TARBALL" | cut -f1)
  echo "packed $TARBALL (${size} MiB; the run tool carries at most 64 MiB)"
  [ "$size" -lt 64 ] || { echo "pack too large to carry" >&2; exit 1; }
  cat <<EOT

Run on the lent GPU machine with the run tool (one call, about 5 minutes):
  run(command="bash scripts/gpu-run.sh remote", carry=["$PACK"], timeout_s=600)
Its \$OUT comes back with (the tool returns at most 8 files): env.txt (nvidia-smi, driver, commit,
each step's exit status and seconds), cuda_tests.txt (gtest output), bm_cuda.json + bm_cuda.txt
(Google Benchmark), torch_cuda.jsonl + .err (PyTorch on the same GPU), runs.txt (one ResNet-20
epoch with --device cuda, LSTM/GRU epochs on sequential Fashion-MNIST: cuDNN, own kernels,
fallback; the VGG-16 OOM message and --max-batch; ResNet-20 predictions).
EOT
}

find_lib() {  # prints the directory holding $1, searching the PyTorch wheels, toolkits, ldconfig
  local name=$1 d
  local py_dirs
  py_dirs=$(python3 - <<'PY' 2>/dev/null || true
import glob, os, site, sys
roots = set(site.getsitepackages() + [site.getusersitepackages()])
try:
    import torch
    roots.add(os.path.dirname(os.path.dirname(torch.__file__)))
except Exception:
    pass
for r in roots:
    for d in glob.glob(os.path.join(r, "nvidia", "**", "lib"), recursive=True) + [os.path.join(r, "torch", "lib")]:
        print(d)
PY
)
  for d in $py_dirs /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-*/lib64 /usr/local/cuda-*/lib \
           /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/$name" ] && { echo "$d"; return 0; }
  done
  d=$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1==n{print $NF; exit}')
  [ -n "$d" ] && { dirname "$d"; return 0; }
  return 1
}

remote() {
  # The run tool brings back at most 8 files from $OUT, so the models trained here go to /tmp and
  # every CLI run appends to one runs.txt. Each step gets min(its own limit, what is left of
  # DRIFTLAB_GPU_DEADLINE seconds) so that a hang in one step cannot eat the whole lease; the most
  # valuable steps (the CUDA tests, then the benchmarks beside PyTorch) run first.
  : "${OUT:=$ROOT/gpu-out}"
  mkdir -p "$OUT"
  local t0=$SECONDS deadline=${DRIFTLAB_GPU_DEADLINE:-540}
  local work=/tmp/driftlab-gpu-run
  rm -rf "$work" && mkdir -p "$work/out"
  tar -C "$work" -xJf "$TARBALL"
  local base=$work/driftlab-gpu
  local libs=$base/lib
  for name in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9; do
    local d
    if ! d=$(find_lib "$name"); then
      echo "not found on this machine: $name (driftlab is built against CUDA 13 / cuDNN 9; PyTorch here has" \
           "$(python3 -c 'import torch; print("CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())' 2>&1))" \
        | tee "$OUT/missing-libs.txt" >&2
      exit 2
    fi
    libs=$libs:$d
  done
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  {
    echo "commit: $(cat "$base/commit.txt")"
    echo "date: $(date -u +%FT%TZ)"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    nvidia-smi || true
    nproc; grep -m1 'model name' /proc/cpuinfo || true
    python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())' || true
    ldd "$base/bin/driftlab_tests" | grep -E "cublas|cudnn|dnnl|benchmark|not found" || true
  } > "$OUT/env.txt" 2>&1
  # The CLI tests read Fashion-MNIST where Debian puts it (CI installs it there): point that
  # path at the packed copy (the lent machine runs as root and has no such package).
  if [ ! -e /usr/share/datasets/fashion-mnist ]; then
    mkdir -p /usr/share/datasets && ln -s "$base/data/fashion-mnist" /usr/share/datasets/fashion-mnist
  fi
  local rc=0
  # DRIFTLAB_GPU_ONLY (a bash regex): run only the steps whose names match (a short rerun).
  local only=${DRIFTLAB_GPU_ONLY:-.}
  step() {  # step NAME LIMIT_S LOGFILE CMD...: run with a timeout, log the time taken
    local name=$1 limit=$2 log=$3; shift 3
    [[ $name =~ $only ]] || return 0
    local left=$((deadline - (SECONDS - t0)))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -le 5 ]; then echo "SKIPPED (no time left): $name" | tee -a "$OUT/env.txt"; rc=1; return; fi
    local s=$SECONDS r=0
    echo "=== $name (limit ${limit}s)" >> "$log"
    timeout --kill-after=5 "$limit" "$@" >> "$log" 2>&1 || r=$?
    echo "step $name: exit $r, $((SECONDS - s)) s" | tee -a "$OUT/env.txt"
    [ "$r" -eq 0 ] || rc=1
  }
  # The CUDA suites and the --device CLI test (which runs the packed driftlab); a skip here
  # ("no CUDA device") means the run did not happen: fail.
  export DRIFTLAB_CLI_PATH=$base/bin/driftlab
  step cuda_tests 240 "$OUT/cuda_tests.txt" "$base/bin/driftlab_tests" --gtest_filter='*Cuda*:CliDevice*'
  if [ -e "$OUT/cuda_tests.txt" ] && grep -q "no CUDA device" "$OUT/cuda_tests.txt"; then
    echo "CUDA tests skipped on the GPU machine: $(grep -m1 'no CUDA device' "$OUT/cuda_tests.txt")" | tee -a "$OUT/env.txt" >&2
    rc=1
  fi
  [ -e "$OUT/cuda_tests.txt" ] && tail -5 "$OUT/cuda_tests.txt"
  # PyTorch's reduced-precision math on this GPU (TF32 operand rounding in cuBLAS and cuDNN, autocast
  # outputs and op lists, GradScaler's scale trajectory), kept as fixtures for the CPU emulation
  # (bench/peers/reduced_precision_capture.py): one .npz, its log in env.txt.
  step rp_capture 90 "$OUT/env.txt" python3 bench/peers/reduced_precision_capture.py "$OUT/rp_capture.npz"
  # DRIFTLAB_BM_FILTER / DRIFTLAB_TORCH_PARTS: a rerun of some benchmarks only (e.g. 'CudaAttack' and
  # 'attacks'; default: all of both).
  step bm_cuda 200 "$OUT/bm_cuda.txt" "$base/bin/bm_cuda" --benchmark_out="$OUT/bm_cuda.json" \
    --benchmark_out_format=json --benchmark_min_time=0.2 --benchmark_filter="${DRIFTLAB_BM_FILTER:-.}"
  step torch_cuda 150 "$OUT/torch_cuda.err" sh -c "python3 bench/peers/cuda_torch.py \
    --parts '${DRIFTLAB_TORCH_PARTS:-kernels,models,attacks}' > '$OUT/torch_cuda.jsonl'"
  # Per-kernel time shares of driftlab's and PyTorch's same steps (LeNet-5 and ResNet-20 training,
  # 10,000 LeNet-5 predictions, 128 LSTM sequences): profile.md.
  step profile 150 "$OUT/profile.md" bash "$ROOT/scripts/gpu-profile.sh" "$base" "$OUT/profile.md"
  # What the CUDA backend must show (docs/CUDA.md): a ResNet-20 epoch on synthetic CIFAR-shaped data
  # with --device cuda (progress bar on stderr), and the out-of-memory message of an oversize
  # prediction batch (VGG-16, 200,000 inputs at once), then the same prediction in chunks with
  # --max-batch.
  local dl=$base/bin/driftlab runs=$OUT/runs.txt
  step train_resnet20 90 "$runs" "$dl" train --model resnet20 --dataset synthetic-cifar10 --device cuda --epochs 1 \
    --batch 128 --out "$work/out/resnet20_cuda"
  # The recurrent models on the device: an LSTM and a GRU epoch of sequential Fashion-MNIST with the
  # recipe of docs/RNN.md (torch preset: cuDNN's RNN; torch with cuda_kernels=own: driftlab's
  # kernels; tensorflow: hard-sigmoid cells, which cuDNN lacks, so the own kernels run, logged).
  local fm=$base/data/fashion-mnist
  for spec in lstm:torch gru:torch lstm:torch,cuda_kernels=own gru:tensorflow; do
    local model=${spec%%:*} policy=${spec#*:}
    local tag=${model}_${policy//[,=]/_}
    step "train_rnn_$tag" 60 "$runs" "$dl" train --model "$model" --policy "$policy" --dataset seq-fashion-mnist \
      --data-dir "$fm" --device cuda --epochs 1 --batch 128 --lr 0.05 --momentum 0.9 --normalize --seed 1 \
      --no-progress --out "$work/out/rnn_$tag"
  done
  step train_vgg16 60 "$runs" "$dl" train --model vgg16 --dataset synthetic-cifar10 --limit 256 --device cuda \
    --epochs 1 --no-progress --out "$work/out/vgg16_cuda"
  echo "=== predict_oom (expected to fail: 200,000 VGG-16 inputs at once)" >> "$runs"
  if [[ predict_oom =~ $only ]] && timeout 60 "$dl" predict --weights "$work/out/vgg16_cuda/model.dlm" --device cuda --dataset synthetic-cifar10 \
       --limit 200000 --sizes 200000 >> "$runs" 2>&1; then
    echo "expected an out-of-memory error for 200,000 VGG-16 inputs at once" >> "$runs"; rc=1
  fi
  step predict_vgg16_max_batch 60 "$runs" "$dl" predict --weights "$work/out/vgg16_cuda/model.dlm" --device cuda \
    --dataset synthetic-cifar10 --limit 200000 --sizes 200000 --max-batch 10000
  step predict_resnet20 30 "$runs" "$dl" predict --weights "$work/out/resnet20_cuda/model.dlm" --device cuda \
    --dataset synthetic-cifar10 --sizes 1000,10000
  # int8 on the device (quant/device_qlayers.cpp): a LeNet-5 trained one epoch on the device,
  # quantized (tflite scheme, calibrated on 1,000 training images), evaluated on the CPU and on the
  # device (the accuracy must be the same: the logits are bit-identical), and predicted on both.
  step int8_lenet5 90 "$runs" sh -c "'$dl' train --model lenet5 --data-dir '$fm' --device cuda --epochs 1 \
      --no-progress --out '$work/out/lenet5_cuda' && '$dl' quantize --weights '$work/out/lenet5_cuda/model.dlm' \
      --scheme tflite --data-dir '$fm' --out '$work/out/lenet5_int8.dlm' && for d in cpu cuda; do \
      '$dl' eval --weights '$work/out/lenet5_int8.dlm' --data-dir '$fm' --device \$d || exit 1; done && \
      '$dl' predict --weights '$work/out/lenet5_int8.dlm' --data-dir '$fm' --device cuda --sizes 1000,10000"
  # Attacks on the device: FGSM and BIM on the LeNet-5 trained above, 1,000 test images, on the CPU
  # and with --device cuda (the success rates and norms should agree: the gradients differ only by
  # rounding), and Boundary on its int8 version's decisions on the device (20 images, 100 steps).
  step attack_lenet5 60 "$runs" sh -c "for d in cpu cuda; do for a in fgsm bim; do '$dl' attack \
      --weights '$work/out/lenet5_cuda/model.dlm' --attack \$a --eps 0.1 --step 0.02 --steps 10 --data-dir '$fm' \
      --limit 1000 --device \$d --out '$work/out/attack_'\$a'_'\$d || exit 1; done; done && '$dl' attack \
      --weights '$work/out/lenet5_int8.dlm' --attack boundary --iterations 100 --data-dir '$fm' --limit 20 \
      --device cuda --out '$work/out/attack_boundary_int8'"
  # An int8 ResNet-20 on the device (qresidual, qglobal_avg_pool): the ResNet-20 trained above,
  # quantized under torch_qnnpack, evaluated on the CPU and on the device (the same accuracy and
  # loss to the last digit: the logits are bit-identical).
  step int8_resnet20 90 "$runs" sh -c "'$dl' quantize --weights '$work/out/resnet20_cuda/model.dlm' \
      --scheme torch_qnnpack --dataset synthetic-cifar10 --calib 256 --out '$work/out/resnet20_int8.dlm' && \
      for d in cpu cuda; do '$dl' eval --weights '$work/out/resnet20_int8.dlm' --dataset synthetic-cifar10 \
      --limit 2000 --device \$d || exit 1; done && '$dl' predict --weights '$work/out/resnet20_int8.dlm' \
      --dataset synthetic-cifar10 --device cuda --sizes 1000,10000"
  echo "total: $((SECONDS - t0)) s, rc $rc" | tee -a "$OUT/env.txt"
  exit $rc
}

case "${1:-pack}" in
  pack) pack ;;
  remote) remote ;;
  *) echo "usage: $0 [pack|remote]" >&2; exit 64 ;;
esac
