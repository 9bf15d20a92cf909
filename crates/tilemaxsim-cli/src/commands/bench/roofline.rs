//! `bench --plot roofline.png`: the measured cases on a roofline picture (plotters, PNG).
//!
//! x: arithmetic intensity, FLOP per byte of document read (the bytes the bench's GB/s counts);
//! y: GFLOP/s. The memory roof is the read ceiling the bench measured; the compute roof is the
//! bench's measured compute ceiling (the CPU's f32 FMA peak) or the one given with
//! `--compute-ceiling` (a GPU's tensor-core rate, e.g. the cuBLAS figure of bench/peers_gpu.py).

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Result, anyhow, bail};
use plotters::prelude::*;

use super::report::Report;

/// DejaVu Sans Mono (assets/DejaVu-LICENSE.txt): embedded so the picture needs no system fonts.
static FONT: &[u8] = include_bytes!("../../../assets/DejaVuSansMono.ttf");
const FAMILY: &str = "sans-serif";

fn font_ready() -> Result<()> {
    static READY: OnceLock<bool> = OnceLock::new();
    if *READY
        .get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok())
    {
        Ok(())
    } else {
        Err(anyhow!("the embedded font could not be loaded"))
    }
}

/// Log-spaced samples from `lo` to `hi`.
fn log_space(lo: f64, hi: f64, n: usize) -> impl Iterator<Item = f64> {
    let (a, b) = (lo.ln(), hi.ln());
    (0..n).map(move |i| (a + (b - a) * i as f64 / (n - 1) as f64).exp())
}

/// The plot's arguments, checked before the bench runs (a long run is not lost to a typo).
pub(crate) fn check(path: &Path, compute_gflops: Option<f64>) -> Result<()> {
    let png = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    if !png {
        bail!("--plot writes a PNG: give a path ending in .png");
    }
    if let Some(c) = compute_gflops
        && !(c.is_finite() && c > 0.0)
    {
        bail!("--compute-ceiling must be a positive number of GFLOP/s");
    }
    Ok(())
}

/// Draw `report` on a roofline into the PNG at `path`.
pub(crate) fn plot(report: &Report, path: &Path, compute_gflops: Option<f64>) -> Result<()> {
    check(path, compute_gflops)?;
    let points: Vec<(f64, f64, &str)> = report
        .results
        .iter()
        .filter(|r| r.gb_per_s > 0.0 && r.gflop_per_s > 0.0)
        .map(|r| (r.gflop_per_s / r.gb_per_s, r.gflop_per_s, r.name.as_str()))
        .filter(|(x, y, _)| x.is_finite() && y.is_finite())
        .collect();
    if points.is_empty() {
        bail!("no measured case to plot");
    }
    let bw = report.ceiling_read_gbps;
    let peak = compute_gflops.or((report.ceiling_gflops > 0.0).then_some(report.ceiling_gflops));
    let ridge = peak.filter(|_| bw > 0.0).map(|p| p / bw);
    let (mut x_lo, mut x_hi) = points
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    if let Some(r) = ridge {
        x_lo = x_lo.min(r);
        x_hi = x_hi.max(r);
    }
    let (x_lo, x_hi) = (x_lo / 4.0, x_hi * 4.0);
    let roof = |x: f64| {
        let m = if bw > 0.0 { bw * x } else { f64::INFINITY };
        peak.map_or(m, |p| m.min(p))
    };
    let y_max = points.iter().map(|p| p.1).fold(0f64, f64::max);
    let y_min = points.iter().map(|p| p.1).fold(f64::MAX, f64::min);
    let y_hi = 2.0
        * y_max
            .max(peak.unwrap_or(0.0))
            .max(roof(x_hi).min(100.0 * y_max));
    let y_lo = (y_min / 4.0).min(roof(x_lo).max(y_min / 100.0));

    font_ready()?;
    let err = |e: &dyn std::fmt::Display| anyhow!("writing {}: {e}", path.display());
    let root = BitMapBackend::new(path, (1280, 800)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("tilemaxsim roofline: {}", report.device),
            (FAMILY, 22),
        )
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(90)
        .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity (FLOP per document byte read)")
        .y_desc("GFLOP/s")
        .label_style((FAMILY, 14))
        .draw()
        .map_err(|e| err(&e))?;
    if bw > 0.0 || peak.is_some() {
        let label = match (bw > 0.0, peak) {
            (true, Some(p)) => format!("roof: read {bw:.0} GB/s, compute {p:.0} GFLOP/s"),
            (true, None) => format!("roof: read {bw:.0} GB/s"),
            (false, Some(p)) => format!("roof: compute {p:.0} GFLOP/s"),
            (false, None) => unreachable!(),
        };
        chart
            .draw_series(LineSeries::new(
                log_space(x_lo, x_hi, 256).map(|x| (x, roof(x))),
                BLUE.stroke_width(2),
            ))
            .map_err(|e| err(&e))?
            .label(label)
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    }
    // Each point carries its number (staggered over three lines: cases of one intensity, f16
    // and bf16, stand together); the key above the memory roof, where no point can be, names it.
    chart
        .draw_series(points.iter().enumerate().map(|(i, &(x, y, _))| {
            EmptyElement::at((x, y))
                + Circle::new((0, 0), 5, RED.filled())
                + Text::new(
                    format!("{}", i + 1),
                    (8, 12 * (i % 3) as i32 - 16),
                    (FAMILY, 13),
                )
        }))
        .map_err(|e| err(&e))?
        .label("measured cases")
        .legend(|(x, y)| Circle::new((x + 10, y), 5, RED.filled()));
    let (left, top) = chart.plotting_area().get_base_pixel();
    let key: Vec<String> = points
        .iter()
        .enumerate()
        .map(|(i, &(x, y, name))| {
            let of_roof = match roof(x) {
                r if r.is_finite() => format!(", {:.0}% of the roof", 100.0 * y / r),
                _ => String::new(),
            };
            format!("{:>2}  {name}: {y:.0} GFLOP/s{of_roof}", i + 1)
        })
        .collect();
    // A white box under the key (8 px per character of the 13 px monospace font).
    let width = 8 * key.iter().map(|l| l.chars().count()).max().unwrap_or(0) as i32 + 16;
    let height = 16 * key.len() as i32 + 12;
    let corner = (left + 6, top + 6);
    root.draw(&Rectangle::new(
        [corner, (corner.0 + width, corner.1 + height)],
        WHITE.filled(),
    ))
    .map_err(|e| err(&e))?;
    root.draw(&Rectangle::new(
        [corner, (corner.0 + width, corner.1 + height)],
        BLACK,
    ))
    .map_err(|e| err(&e))?;
    for (i, line) in key.into_iter().enumerate() {
        root.draw(&Text::new(
            line,
            (left + 14, top + 12 + 16 * i as i32),
            (FAMILY, 13),
        ))
        .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .label_font((FAMILY, 14))
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
