//! A load generator for `tilemaxsim serve` (built as the `serve_load` example of
//! tilemaxsim-cli; `bench/serve_load.sh` runs it): closed-loop clients at each concurrency
//! level, bounded in requests and time, measuring QPS and p50/p90/p99 latency, and the mean
//! batch the server formed (from its /metrics); or an open-loop soak at a fixed request rate
//! that samples the server's resident memory. Loopback only: it refuses other hosts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use serde_json::{Value, json};

#[derive(Parser, Debug)]
#[command(about = "Load generator for tilemaxsim serve (loopback only)")]
struct Args {
    /// The server (http://127.0.0.1:PORT or http://localhost:PORT).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Concurrency levels (closed-loop clients).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8,16,32,64,128,256"
    )]
    concurrency: Vec<usize>,
    /// Seconds per level (after --warmup-s).
    #[arg(long, default_value_t = 10.0)]
    duration_s: f64,
    /// Requests per level at most.
    #[arg(long, default_value_t = 200_000)]
    max_requests: usize,
    /// Seconds of load before each level's measurement starts.
    #[arg(long, default_value_t = 2.0)]
    warmup_s: f64,
    /// Query tokens per query.
    #[arg(long, default_value_t = 32)]
    tokens: usize,
    /// Queries per request.
    #[arg(long, default_value_t = 1)]
    queries_per_request: usize,
    #[arg(long, short = 'k', default_value_t = 10)]
    top_k: usize,
    /// How queries travel: f32 or f16 (base64) or json (rows of numbers).
    #[arg(long, default_value = "f32")]
    encoding: String,
    /// Soak instead: an open loop at this many requests/s for --soak-s seconds.
    #[arg(long)]
    rate: Option<f64>,
    #[arg(long, default_value_t = 600.0)]
    soak_s: f64,
    /// The server's pid, to sample its resident memory during the soak.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Write the results as JSON here too.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// The request bodies: a pool of distinct seeded unit-norm queries, encoded once.
fn bodies(a: &Args, dim: usize) -> Result<Vec<Arc<Vec<u8>>>> {
    let mut rng = StdRng::seed_from_u64(a.seed);
    let mut out = Vec::new();
    for _ in 0..64 {
        let mut queries = Vec::new();
        for _ in 0..a.queries_per_request {
            let mut v: Vec<f32> = (0..a.tokens * dim)
                .map(|_| rng.sample(StandardNormal))
                .collect();
            for row in v.chunks_mut(dim) {
                let n = row.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                row.iter_mut().for_each(|x| *x /= n);
            }
            let b64 = |bytes: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(bytes);
            queries.push(match a.encoding.as_str() {
                "json" => json!({ "embeddings": v.chunks(dim).collect::<Vec<_>>() }),
                "f32" => json!({ "embeddings_b64": b64(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
                                 "dtype": "f32", "shape": [a.tokens, dim] }),
                "f16" => json!({ "embeddings_b64": b64(v.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect()),
                                 "dtype": "f16", "shape": [a.tokens, dim] }),
                e => bail!("--encoding {e:?}: expected f32, f16 or json"),
            });
        }
        out.push(Arc::new(serde_json::to_vec(
            &json!({ "queries": queries, "k": a.top_k }),
        )?));
    }
    Ok(out)
}

/// One request: its status (0: no answer) and latency.
async fn one(client: &reqwest::Client, url: &str, body: Arc<Vec<u8>>) -> (u16, Duration) {
    let t = Instant::now();
    let r = client
        .post(url)
        .header("content-type", "application/json")
        .body((*body).clone())
        .send()
        .await;
    let status = match r {
        Ok(r) => {
            let s = r.status().as_u16();
            // Read the whole answer, as a client would.
            match r.bytes().await {
                Ok(_) => s,
                Err(_) => 0,
            }
        }
        Err(_) => 0,
    };
    (status, t.elapsed())
}

/// A metric's value from the server's /metrics (0 when absent).
async fn metric(client: &reqwest::Client, base: &str, name: &str) -> f64 {
    let Ok(r) = client.get(format!("{base}/metrics")).send().await else {
        return 0.0;
    };
    let text = r.text().await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

struct Level {
    ok: Vec<f64>,
    errors: std::collections::BTreeMap<u16, usize>,
    seconds: f64,
}

/// Closed loop: `c` clients, each sending its next request when the last is answered.
async fn closed_loop(
    client: &reqwest::Client,
    url: &str,
    bodies: &[Arc<Vec<u8>>],
    c: usize,
    warmup: Duration,
    duration: Duration,
    max_requests: usize,
) -> Level {
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + duration;
    let sent = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..c {
        let (client, url, sent) = (client.clone(), url.to_string(), Arc::clone(&sent));
        let bodies: Vec<_> = bodies.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            let mut n = i;
            while Instant::now() < end && sent.fetch_add(1, Ordering::Relaxed) < max_requests {
                let (status, lat) = one(&client, &url, Arc::clone(&bodies[n % bodies.len()])).await;
                n += 1;
                // Requests answered inside the window count (throughput = answers per second).
                let done = Instant::now();
                if done >= measure_from && done <= end {
                    mine.push((status, lat.as_secs_f64()));
                }
            }
            mine
        }));
    }
    let mut level = Level {
        ok: Vec::new(),
        errors: Default::default(),
        seconds: 0.0,
    };
    for t in tasks {
        for (status, lat) in t.await.unwrap_or_default() {
            if status == 200 {
                level.ok.push(lat);
            } else {
                *level.errors.entry(status).or_default() += 1;
            }
        }
    }
    // The window, or less where --max-requests ended the level early.
    level.seconds = (Instant::now().min(end) - measure_from.min(Instant::now())).as_secs_f64();
    level.ok.sort_by(f64::total_cmp);
    level
}

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Open loop at `rate` requests/s for `secs`, at most 1024 in flight.
async fn soak(
    client: &reqwest::Client,
    url: &str,
    bodies: &[Arc<Vec<u8>>],
    rate: f64,
    secs: f64,
    pid: Option<u32>,
) -> Value {
    let total = (rate * secs).ceil() as usize;
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let in_flight = Arc::new(tokio::sync::Semaphore::new(1024));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut rss = Vec::new();
    let mut next_sample = start;
    let mut skipped = 0usize;
    for i in 0..total {
        tick.tick().await;
        if let Some(pid) = pid
            && Instant::now() >= next_sample
        {
            rss.push(json!([start.elapsed().as_secs_f64().round(), rss_kib(pid)]));
            next_sample += Duration::from_secs(10);
        }
        let Ok(permit) = Arc::clone(&in_flight).try_acquire_owned() else {
            skipped += 1;
            continue;
        };
        let (client, url, tx) = (client.clone(), url.to_string(), tx.clone());
        let body = Arc::clone(&bodies[i % bodies.len()]);
        tokio::spawn(async move {
            let r = one(&client, &url, body).await;
            drop(permit);
            let _ = tx.send(r);
        });
    }
    drop(tx);
    let mut ok = Vec::new();
    let mut errors: std::collections::BTreeMap<u16, usize> = Default::default();
    while let Some((status, lat)) = rx.recv().await {
        if status == 200 {
            ok.push(lat.as_secs_f64());
        } else {
            *errors.entry(status).or_default() += 1;
        }
    }
    if let Some(pid) = pid {
        rss.push(json!([start.elapsed().as_secs_f64().round(), rss_kib(pid)]));
    }
    ok.sort_by(f64::total_cmp);
    let secs = start.elapsed().as_secs_f64();
    json!({
        "rate": rate, "seconds": secs, "sent": total - skipped, "ok": ok.len(),
        "errors": errors.iter().map(|(s, n)| (s.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "skipped_over_1024_in_flight": skipped,
        "qps": ok.len() as f64 / secs,
        "p50_ms": pct(&ok, 0.5) * 1e3, "p90_ms": pct(&ok, 0.9) * 1e3, "p99_ms": pct(&ok, 0.99) * 1e3,
        "rss_kib": rss,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let a = Args::parse();
    let host = a
        .url
        .trim_start_matches("http://")
        .split(['/', ':'])
        .next()
        .unwrap_or_default();
    if !matches!(host, "127.0.0.1" | "localhost" | "[::1]") {
        bail!(
            "--url {}: loopback only (127.0.0.1, localhost, [::1])",
            a.url
        );
    }
    if a.concurrency.is_empty() || a.concurrency.contains(&0) || a.duration_s <= 0.0 {
        bail!("--concurrency levels and --duration-s must be positive");
    }
    let base = a.url.trim_end_matches('/').to_string();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .pool_max_idle_per_host(1024)
        .build()?;
    let info: Value = client
        .get(format!("{base}/v1/info"))
        .send()
        .await
        .context("the server does not answer")?
        .json()
        .await?;
    let dim = info["dim"].as_u64().context("/v1/info has no dim")? as usize;
    let bodies = bodies(&a, dim)?;
    let url = format!("{base}/v1/search");
    eprintln!(
        "server: {} documents, d = {dim}, {} on {}; requests: {} × {} tokens, k = {}, {}",
        info["documents"],
        info["dtype"],
        info["engine"],
        a.queries_per_request,
        a.tokens,
        a.top_k,
        a.encoding
    );

    let mut out = json!({ "server": info, "tokens": a.tokens, "queries_per_request": a.queries_per_request,
                          "k": a.top_k, "encoding": a.encoding });
    if let Some(rate) = a.rate {
        if rate <= 0.0 || a.soak_s <= 0.0 {
            bail!("--rate and --soak-s must be positive");
        }
        eprintln!("soak: {rate:.1} requests/s for {:.0} s", a.soak_s);
        let r = soak(&client, &url, &bodies, rate, a.soak_s, a.server_pid).await;
        println!("{}", serde_json::to_string_pretty(&r)?);
        out["soak"] = r;
    } else {
        println!(
            "{:>11} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>11} {:>9} {:>12}",
            "concurrency",
            "requests",
            "errors",
            "QPS",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "mean batch",
            "batch ms",
            "engine busy"
        );
        let mut levels = Vec::new();
        for &c in &a.concurrency {
            let (b0, n0, c0) = (
                metric(&client, &base, "tilemaxsim_batch_queries_sum").await,
                metric(&client, &base, "tilemaxsim_batch_queries_count").await,
                metric(&client, &base, "tilemaxsim_compute_duration_seconds_sum").await,
            );
            let t0 = Instant::now();
            let l = closed_loop(
                &client,
                &url,
                &bodies,
                c,
                Duration::from_secs_f64(a.warmup_s),
                Duration::from_secs_f64(a.duration_s),
                a.max_requests,
            )
            .await;
            let (b1, n1, c1) = (
                metric(&client, &base, "tilemaxsim_batch_queries_sum").await,
                metric(&client, &base, "tilemaxsim_batch_queries_count").await,
                metric(&client, &base, "tilemaxsim_compute_duration_seconds_sum").await,
            );
            // The engine's share of the level's wall time (warm-up included), and its time per
            // batch: what the server spends outside the engine is what keeps busy below 100%.
            let busy = (c1 - c0) / t0.elapsed().as_secs_f64();
            let batch_ms = if n1 > n0 {
                (c1 - c0) / (n1 - n0) * 1e3
            } else {
                f64::NAN
            };
            let errors: usize = l.errors.values().sum();
            let qps = l.ok.len() as f64 / l.seconds;
            let batch = if n1 > n0 {
                (b1 - b0) / (n1 - n0)
            } else {
                f64::NAN
            };
            println!(
                "{c:>11} {:>9} {errors:>7} {qps:>10.1} {:>10.2} {:>10.2} {:>10.2} {batch:>11.1} {batch_ms:>9.1} {:>11.0}%",
                l.ok.len() + errors,
                pct(&l.ok, 0.5) * 1e3,
                pct(&l.ok, 0.9) * 1e3,
                pct(&l.ok, 0.99) * 1e3,
                busy * 100.0,
            );
            levels.push(json!({
                "concurrency": c, "ok": l.ok.len(), "errors": l.errors.iter().map(|(s, n)| (s.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
                "seconds": l.seconds, "qps": qps, "queries_per_s": qps * a.queries_per_request as f64,
                "p50_ms": pct(&l.ok, 0.5) * 1e3, "p90_ms": pct(&l.ok, 0.9) * 1e3, "p99_ms": pct(&l.ok, 0.99) * 1e3,
                "mean_batch_queries": batch, "batch_compute_ms": batch_ms, "engine_busy": busy,
            }));
        }
        out["levels"] = Value::Array(levels);
    }
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&out)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}
