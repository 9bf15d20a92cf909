// The one NVRTC program: every kernel family, in this order. compile.rs embeds each file of this
// folder and resolves the includes itself (each file once, headers where first included), so
// the program needs no CUDA headers and no files on disk; bench/nvrtc_ptx.py does the same.
#include "ablation.cu"
#include "utility.cu"
#include "mma.cu"
#include "bulk.cu"
#include "span.cu"
#include "gemm.cu"
#include "ring.cu"
#include "bulk_split.cu"
#include "wgmma.cu"
#include "topk.cu"
#include "codec.cu"
#include "compress.cu"
#include "codec_wgmma.cu"
#include "codec_lut.cu"
#include "codec_bulk.cu"
#include "train.cu"
