//! What `tilemaxsim bench` reports, filled by the CPU and GPU runs alike, printed as a table or
//! JSON and drawn on the roofline.

use serde::Serialize;

#[derive(Serialize)]
pub(crate) struct CaseResult {
    pub name: String,
    pub dtype: String,
    pub nq: usize,
    pub dim: usize,
    pub docs: usize,
    pub queries: usize,
    pub doc_len: String,
    pub tokens: usize,
    pub ms: f64,
    pub ms_min: f64,
    pub docs_per_s: f64,
    pub gb_per_s: f64,
    pub gflop_per_s: f64,
    pub pct_ceiling: f64,
    /// GPU: the median time of one isolated call (the host waits for each before the next),
    /// launch latency included; `ms` is the time per call back to back.
    pub latency_ms: Option<f64>,
    /// GPU with `--ceiling-at-case`: the bulk-copy read ceiling over this case's corpus bytes
    /// (GB/s), timed as the case is (calls back to back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub case_ceiling_gbps: Option<f64>,
}

#[derive(Serialize)]
pub(crate) struct Report {
    pub device: String,
    pub kernel: String,
    pub threads: usize,
    pub ceiling_gflops: f64,
    pub ceiling_read_gbps: f64,
    /// GPU: the read ceilings `ceiling_read_gbps` is the fastest of: 16-byte loads, and bulk
    /// copies into shared memory (sm_90+; the fastest of `ceiling_read_copy_shapes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling_read_loads_gbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling_read_copies_gbps: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ceiling_read_copy_shapes: Vec<CopyShape>,
    /// GPU: the bytes each ceiling kernel read a call (0 on the CPU).
    #[serde(skip_serializing_if = "is_zero")]
    pub ceiling_bytes: usize,
    /// What `pct_ceiling` is a percentage of: `f32 FMA` (CPU) or `read` (GPU bandwidth).
    pub ceiling_name: String,
    pub results: Vec<CaseResult>,
}

/// One bulk-copy shape of the read ceiling: copies of `kib` KiB into `stages` stages.
#[derive(Serialize)]
pub(crate) struct CopyShape {
    pub kib: usize,
    pub stages: usize,
    pub gbps: f64,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
