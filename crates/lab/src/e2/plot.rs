//! SVG figures beside the paper's: X-MAC duration and energy against CI (Fig. 2), beacon-mode
//! duration against BI (Fig. 3), TSCH paper against simulated (Tables I/II); and DTLS 1.2
//! against 1.3 on each link of the variants, in seconds and in frames.

use super::{tsch, variants, xmac, Report};
use crate::report::svg::category_label;
use plotters::prelude::*;
use std::path::Path;

const COLORS: [RGBColor; 4] = [BLUE, RED, GREEN, MAGENTA];

pub fn all(r: &Report, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    xmac_figure(r, &dir.join("e2-xmac-duration.svg"), "handshake duration, s", |row| {
        row.handshake.fixed.duration_s
    })?;
    xmac_figure(r, &dir.join("e2-xmac-energy.svg"), "client energy (radio + MCU), mJ", |row| {
        row.energy_fixed.total_mj()
    })?;
    beacon_figure(r, &dir.join("e2-beacon-duration.svg"))?;
    tsch_figure(&r.tsch, &dir.join("e2-tsch.svg"))?;
    versions_figure(&r.variants, &dir.join("e2-dtls13-duration.svg"), "handshake duration, s", |m| {
        m.duration_s
    })?;
    versions_figure(&r.variants, &dir.join("e2-dtls13-frames.svg"), "data frames on the air", |m| {
        m.data_frames
    })?;
    Ok(())
}

/// The variants compared across versions, in the order of the legend.
const VERSION_SERIES: [&str; 7] = [
    "PSK",
    "1.3 PSK (psk_ke)",
    "1.3 PSK + x25519 (psk_dhe_ke)",
    "1.3 PSK + X25519MLKEM768",
    "ECDHE-ECDSA",
    "1.3 ECDHE-ECDSA",
    "1.3 resumed + 32 B of 0-RTT data",
];

/// One point per link and hop count for each variant of [`VERSION_SERIES`] (the headline
/// timer), log scale: what 1.3, a post-quantum key share and 0-RTT cost beside 1.2 on each MAC.
fn versions_figure(
    s: &variants::Section,
    path: &Path,
    y_desc: &str,
    y: impl Fn(&super::handshake::Mean) -> f64,
) -> anyhow::Result<()> {
    let mut links: Vec<(String, usize)> = Vec::new();
    for row in &s.rows {
        if !links.contains(&(row.link.clone(), row.hops)) {
            links.push((row.link.clone(), row.hops));
        }
    }
    let values: Vec<f64> = s.rows.iter().map(|row| y(row.handshake.main())).filter(|v| *v > 0.0).collect();
    let (low, high) = values.iter().fold((f64::MAX, 0.0f64), |(l, h), &v| (l.min(v), h.max(v)));
    let (low, high) = if values.is_empty() { (0.1, 1.0) } else { (low / 2.0, high * 2.0) };
    let n = links.len();
    let root = SVGBackend::new(path, (1100, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("DTLS 1.2 and 1.3 on each link: {y_desc}"), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (low..high).log_scale())?;
    let labels: Vec<String> = links.iter().map(|(link, hops)| format!("{link}, {hops} hop(s)")).collect();
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| category_label(&labels, *x))
        .y_desc(y_desc)
        .draw()?;
    let colors = [BLUE, GREEN, CYAN, MAGENTA, RED, RGBColor(255, 140, 0), BLACK];
    for (k, variant) in VERSION_SERIES.iter().enumerate() {
        let color = colors[k % colors.len()];
        // Side by side within a link's slot.
        let offset = (k as f64 - (VERSION_SERIES.len() - 1) as f64 / 2.0) * 0.1;
        let points: Vec<(f64, f64)> = links
            .iter()
            .enumerate()
            .filter_map(|(i, (link, hops))| {
                let row =
                    s.rows.iter().find(|r| &r.link == link && r.hops == *hops && r.variant == *variant)?;
                Some((i as f64 + offset, y(row.handshake.main())))
            })
            .collect();
        let style = color.filled();
        let marker = move |p: (f64, f64)| -> DynElement<'static, SVGBackend, (f64, f64)> {
            if variant.starts_with("1.3") {
                Circle::new(p, 5, style).into_dyn()
            } else {
                TriangleMarker::new(p, 6, style).into_dyn()
            }
        };
        chart
            .draw_series(points.into_iter().map(marker))?
            .label(if variant.starts_with("1.3") { variant.to_string() } else { format!("1.2 {variant}") })
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
    }
    chart.configure_series_labels().position(SeriesLabelPosition::UpperLeft).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}

/// A line per (PDR, hops) against CI, log-log, with the paper's ranges as dashed bounds.
fn xmac_figure(r: &Report, path: &Path, y_desc: &str, y: impl Fn(&xmac::Row) -> f64) -> anyhow::Result<()> {
    let rows = &r.xmac.rows;
    let ys: Vec<f64> = rows.iter().map(&y).collect();
    let ymax = ys.iter().copied().fold(1.0, f64::max) * 1.5;
    let ymin = ys.iter().copied().fold(f64::INFINITY, f64::min).min(1.0) * 0.7;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("X-MAC, our PSK handshake, fixed 2 s timer: {y_desc}"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d((100.0f64..5000.0).log_scale(), (ymin..ymax).log_scale())?;
    chart.configure_mesh().x_desc("check interval, ms").y_desc(y_desc).draw()?;
    let (lo, hi, anchor) = if y_desc.contains("energy") {
        (10.0, 200.0, Some(xmac::PAPER_MJ_AT_500))
    } else {
        (1.0, 50.0, None)
    };
    for bound in [lo, hi] {
        chart
            .draw_series(DashedLineSeries::new(vec![(100.0, bound), (5000.0, bound)], 6, 4, BLACK.into()))?
            .label(format!("paper's range {lo}-{hi}"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    }
    if let Some(a) = anchor {
        chart
            .draw_series([Cross::new((500.0, a), 8, BLACK.stroke_width(2))])?
            .label(format!("paper: {a} mJ at CI 500 ms"))
            .legend(|(x, y)| Cross::new((x + 10, y), 5, BLACK.stroke_width(2)));
    }
    for (pi, &pdr) in xmac::PDRS.iter().enumerate() {
        for (hi_, &hops) in xmac::HOPS.iter().enumerate() {
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|row| row.pdr == pdr && row.hops == hops)
                .map(|row| (row.check_interval_ms, y(row)))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let color = COLORS[hi_ % COLORS.len()];
            let style = if pi == 0 { color.stroke_width(2) } else { color.stroke_width(1) };
            chart
                .draw_series(LineSeries::new(pts, style))?
                .label(format!("PDR {:.0} %, {hops} hop(s)", pdr * 100.0))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        }
    }
    chart.configure_series_labels().position(SeriesLabelPosition::UpperLeft).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}

fn beacon_figure(r: &Report, path: &Path) -> anyhow::Result<()> {
    let rows = &r.beacon.rows;
    let ymax = rows.iter().map(|row| row.handshake.fixed.duration_s).fold(40.0, f64::max) * 1.1;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Beacon-enabled 802.15.4, our PSK handshake, fixed 2 s timer", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d((200.0f64..5000.0).log_scale(), 0.0..ymax)?;
    chart.configure_mesh().x_desc("beacon interval, ms").y_desc("handshake duration, s").draw()?;
    for (bound, label) in
        [(1.88, "paper 1.88 s"), (16.6, "paper 16.6 s"), (35.0, "paper 35 s at BI about 4 s")]
    {
        chart
            .draw_series(DashedLineSeries::new(vec![(200.0, bound), (5000.0, bound)], 6, 4, BLACK.into()))?
            .label(label)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    }
    for (si, &so) in super::beacon::SUPERFRAME_ORDERS.iter().enumerate() {
        for &hops in &[1usize, 4] {
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|row| row.superframe_order == so && row.hops == hops)
                .map(|row| (row.bi_ms, row.handshake.fixed.duration_s))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let color = COLORS[si % COLORS.len()];
            let style = if hops == 1 { color.stroke_width(2) } else { color.stroke_width(1) };
            chart
                .draw_series(LineSeries::new(pts, style))?
                .label(format!("CAP {:.1} ms, {hops} hop(s)", super::beacon::order_ms(so)))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        }
    }
    chart.configure_series_labels().position(SeriesLabelPosition::UpperLeft).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}

fn tsch_figure(s: &tsch::Section, path: &Path) -> anyhow::Result<()> {
    let rows: Vec<&tsch::TableRow> = s.rows.iter().filter(|row| row.paper_is_table).collect();
    let n = rows.len();
    let root = SVGBackend::new(path, (1100, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("TSCH handshake duration: paper (Tables I, II) vs simulated", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(70)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (1.0f64..500.0f64).log_scale())?;
    let labels: Vec<String> = rows.iter().map(|row| format!("L{} C{} H{}", row.l, row.c, row.h)).collect();
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| category_label(&labels, *x))
        .y_desc("handshake duration, s")
        .draw()?;
    let at = |l: u32, c: u32, h: usize| rows.iter().position(|row| row.l == l && row.c == c && row.h == h);
    let paper: Vec<(f64, f64)> = rows.iter().enumerate().map(|(i, row)| (i as f64, row.paper_s)).collect();
    let sim: Vec<(f64, f64)> =
        rows.iter().enumerate().map(|(i, row)| (i as f64, row.simulated.mean_latency_s)).collect();
    let real: Vec<(f64, f64)> = s
        .real
        .iter()
        .filter_map(|r| at(r.l, r.c, r.h).map(|i| (i as f64, r.handshake.main().duration_s)))
        .collect();
    chart
        .draw_series(paper.iter().map(|&p| Cross::new(p, 7, BLUE.stroke_width(2))))?
        .label("paper (Tables I, II)")
        .legend(|(x, y)| Cross::new((x + 10, y), 5, BLUE.stroke_width(2)));
    chart
        .draw_series(sim.iter().map(|&p| Circle::new(p, 5, RED.stroke_width(2))))?
        .label(format!("simulated, 10 frames, mean of {} seeds", s.table_seeds))
        .legend(|(x, y)| Circle::new((x + 10, y), 4, RED.stroke_width(2)));
    chart
        .draw_series(real.iter().map(|&p| TriangleMarker::new(p, 6, GREEN.stroke_width(2))))?
        .label(format!("our real handshake, mean of {} seeds", s.real_seeds))
        .legend(|(x, y)| TriangleMarker::new((x + 10, y), 5, GREEN.stroke_width(2)));
    chart.configure_series_labels().position(SeriesLabelPosition::UpperLeft).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}
