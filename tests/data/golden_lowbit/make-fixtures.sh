#!/bin/bash
# Rebuilds the low-bit / mixed-type golden fixtures of this folder with llama.cpp v0.5.0 (see README.md).
# usage: make-fixtures.sh LLAMA_CPP_DIR WORK_DIR   (llama.cpp built for the CPU in LLAMA_CPP_DIR/build)
set -euo pipefail
LLAMA=$1
WORK=$2
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$LLAMA/build/bin
F32=$HERE/../golden/models/tiny-qwen35-f32.gguf
mkdir -p "$WORK"
for tool in dump_ref quant_tool; do
  g++ -O2 -std=c++17 -I"$LLAMA/include" -I"$LLAMA/ggml/include" -I"$LLAMA/vendor" "$HERE/$tool.cpp" \
      -o "$WORK/$tool" -L"$BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$BIN"
done
# Importance matrix (IQ1/IQ2 require one) from imatrix-text.txt, in chunks of 128 tokens.
"$WORK/quant_tool" imatrix "$F32" "$HERE/imatrix-text.txt" "$WORK/imatrix.bin" 128
# llama_model_quantize (what llama-quantize runs), 1 thread; ftype ids: 10 = Q2_K, 19 = IQ2_XXS, 30 = IQ4_XS.
# The MTP layer (blk.8) is never run, so the imatrix has no data for it: Q4_K there (IQ1/IQ2 need the data).
Q="$WORK/quant_tool quantize"
$Q "$F32" "$HERE/models/tiny-qwen35-q2_k.gguf" 10 -
$Q "$F32" "$HERE/models/tiny-qwen35-iq2_xxs.gguf" 19 "$WORK/imatrix.bin" 'blk\.8\.=q4_k'
$Q "$F32" "$HERE/models/tiny-qwen35-mix.gguf" 30 "$WORK/imatrix.bin" 'blk\.8\.=q4_k' token_embd=q3_k \
   blk.0.ffn_down=bf16 blk.1.ffn_down=f16 blk.2.ffn_down=q8_0 attn_qkv=iq3_xxs attn_gate=iq4_xs ssm_out=iq4_nl \
   ssm_alpha=iq1_s ssm_beta=iq1_m attn_q=iq3_s attn_k=iq2_s attn_v=iq2_xs attn_output=q2_k ffn_gate=tq1_0 \
   ffn_up=tq2_0 ffn_down=mxfp4
CASES=p0001_en,p0005_multi,p0017_en,p0200_multi,chat_multiturn
for m in q2_k iq2_xxs mix; do
  mkdir -p "$HERE/ref/tiny-qwen35-$m"
  "$WORK/dump_ref" "$HERE/models/tiny-qwen35-$m.gguf" "$HERE/prompts.json" "$HERE/ref/tiny-qwen35-$m" "$CASES"
done
