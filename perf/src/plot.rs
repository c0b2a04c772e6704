//! SVG plots from report JSON (`magma-perf plot`): throughput against worker count, one line
//! per candidateNodeCount, from a sweep; and the arrival→claimed latency CDF of one or more runs,
//! from the `latency_cdf_ms` points every report carries. Text is emitted as SVG `<text>`, so
//! nothing needs system fonts.

use crate::report::json;
use plotters::prelude::*;
use serde_json::Value;
use std::path::Path;

/// `throughput-vs-workers.svg`: one line per K.
pub fn throughput_vs_workers(sweep: &[Value], out: &Path) -> anyhow::Result<()> {
    let mut by_k: Vec<(u64, Vec<(f64, f64)>)> = Vec::new();
    for v in sweep {
        let k = json::f(v, "candidates") as u64;
        let p = (json::f(v, "workers"), json::f(v, "throughput_pods_per_s"));
        match by_k.iter_mut().find(|(x, _)| *x == k) {
            Some((_, pts)) => pts.push(p),
            None => by_k.push((k, vec![p])),
        }
    }
    anyhow::ensure!(!by_k.is_empty(), "the sweep file holds no runs");
    let max_w = sweep
        .iter()
        .map(|v| json::f(v, "workers"))
        .fold(1.0, f64::max);
    let max_t = sweep
        .iter()
        .map(|v| json::f(v, "throughput_pods_per_s"))
        .fold(1.0, f64::max);
    let title = format!(
        "{}: {} nodes, {} pods",
        json::s(&sweep[0], "scenario"),
        json::f(&sweep[0], "nodes"),
        json::f(&sweep[0], "pods")
    );
    let root = SVGBackend::new(out, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.5f64..max_w + 0.5, 0f64..max_t * 1.15)?;
    chart
        .configure_mesh()
        .x_desc("workers")
        .y_desc("throughput (pods/s)")
        .x_labels(max_w as usize + 1)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    for (i, (k, mut pts)) in by_k.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(format!("K = {k}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(PointSeries::of_element(pts, 4, color, &|c, s, st| {
            Circle::new(c, s, st.filled())
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// `latency-cdf.svg`: percentile against arrival→claimed latency (log scale), one line per run.
pub fn latency_cdf(runs: &[Value], out: &Path) -> anyhow::Result<()> {
    let series: Vec<(String, Vec<(f64, f64)>)> = runs
        .iter()
        .filter_map(|v| {
            let pts: Vec<(f64, f64)> = v["latency_cdf_ms"]
                .as_array()?
                .iter()
                .filter_map(|p| Some((p[1].as_f64()?.max(1e-4), p[0].as_f64()?)))
                .collect();
            let label = format!(
                "{} {} nodes, {} workers, K={}",
                json::s(v, "scenario"),
                json::f(v, "nodes"),
                json::f(v, "workers"),
                json::f(v, "candidates")
            );
            (!pts.is_empty()).then_some((label, pts))
        })
        .collect();
    anyhow::ensure!(
        !series.is_empty(),
        "no run in the latency file has latency_cdf_ms points"
    );
    let all = series.iter().flat_map(|(_, p)| p.iter().map(|&(x, _)| x));
    let (lo, hi) = all.fold((f64::MAX, 0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (lo, hi) = (lo / 1.5, hi * 1.5);
    let root = SVGBackend::new(out, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("arrival → claimed latency (CDF)", ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..100.5)?;
    chart
        .configure_mesh()
        .x_desc("latency (ms, log scale)")
        .y_desc("percentile")
        .x_labels(8)
        .x_label_formatter(&|x| format!("{x}"))
        .draw()?;
    for (i, (label, pts)) in series.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
