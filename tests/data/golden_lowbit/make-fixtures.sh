#!/bin/bash
# Rebuilds the low-bit / mixed-type golden fixtures of this folder with llama.cpp v0.5.0 (see README.md).
# usage: make-fixtures.sh LLAMA_CPP_DIR (with a CPU build in LLAMA_CPP_DIR/build) WORK_DIR
set -euo pipefail
LLAMA=$1
WORK=$2
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$LLAMA/build/bin
F32=$HERE/../golden/models/tiny-qwen35-f32.gguf
mkdir -p "$WORK"
# The reference dumper (this folder's dump_ref.cpp), against libllama.
g++ -O2 -std=c++17 -I"$LLAMA/include" -I"$LLAMA/ggml/include" -I"$LLAMA/vendor" "$HERE/dump_ref.cpp" \
    -o "$WORK/dump_ref" -L"$BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$BIN"
# Importance matrix (IQ1/IQ2 require one) from imatrix-text.txt.
"$BIN/llama-imatrix" -m "$F32" -f "$HERE/imatrix-text.txt" -o "$WORK/imatrix.gguf" -c 128 -t 1 --no-ppl
q() { "$BIN/llama-quantize" "$@"; }
q "$F32" "$HERE/models/tiny-qwen35-q2_k.gguf" Q2_K 1
# The MTP layer (blk.8) is never run, so the imatrix has no data for it: Q4_K there (IQ1/IQ2 need the data).
q --imatrix "$WORK/imatrix.gguf" --tensor-type 'blk\.8\.=q4_k' "$F32" "$HERE/models/tiny-qwen35-iq2_xxs.gguf" IQ2_XXS 1
q --imatrix "$WORK/imatrix.gguf" --tensor-type 'blk\.8\.=q4_k' \
  --tensor-type token_embd=q3_k --tensor-type blk.0.ffn_down=bf16 --tensor-type blk.1.ffn_down=f16 \
  --tensor-type attn_qkv=iq3_xxs --tensor-type attn_gate=iq2_s --tensor-type ssm_out=iq4_nl \
  --tensor-type ssm_alpha=iq1_s --tensor-type ssm_beta=iq1_m --tensor-type attn_q=iq3_s \
  --tensor-type attn_k=iq2_xs --tensor-type attn_v=q8_0 --tensor-type attn_output=q2_k \
  --tensor-type ffn_gate=tq1_0 --tensor-type ffn_up=tq2_0 --tensor-type ffn_down=mxfp4 \
  "$F32" "$HERE/models/tiny-qwen35-mix.gguf" IQ4_XS 1
CASES=p0001_en,p0005_multi,p0017_en,p0200_multi,chat_multiturn
for m in q2_k iq2_xxs mix; do
  mkdir -p "$HERE/ref/tiny-qwen35-$m"
  "$WORK/dump_ref" "$HERE/models/tiny-qwen35-$m.gguf" "$HERE/prompts.json" "$HERE/ref/tiny-qwen35-$m" "$CASES"
done
