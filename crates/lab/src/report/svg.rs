//! The page's plots, described as data ([`Chart`]) and drawn with plotters: axes with units, a
//! legend, our series, and the paper's values as reference lines or points (in black).

use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use std::ops::Range;
use std::path::Path;

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];

/// The label of category axis position `x`: the category at a whole position, nothing between.
pub(crate) fn category_label(labels: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    labels.get(i as usize).cloned().unwrap_or_default()
}

#[derive(Clone, Debug, Default)]
pub struct Chart {
    pub title: String,
    pub x_desc: String,
    pub y_desc: String,
    pub log_x: bool,
    pub log_y: bool,
    pub series: Vec<Series>,
    pub references: Vec<Reference>,
    /// Names for the x positions 0, 1, 2 ... (a categorical axis); empty: numbers.
    pub x_labels: Vec<String>,
}

#[derive(Clone, Debug, Default)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Half-widths of a confidence interval per point (drawn as bars), if any.
    pub errors: Vec<f64>,
    /// Points only, no line between them.
    pub markers_only: bool,
    /// A thin dashed line (a second family beside a solid one, e.g. multihomed).
    pub dashed: bool,
    /// The palette's colour to use (series of one family share one); default: the series' index.
    pub palette: Option<usize>,
}

impl Series {
    pub fn line(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { label: label.into(), points, ..Series::default() }
    }

    pub fn markers(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { label: label.into(), points, markers_only: true, ..Series::default() }
    }
}

/// The paper's values, drawn in black.
#[derive(Clone, Debug)]
pub enum Reference {
    /// A dashed horizontal line across the plot.
    Level { y: f64, label: String },
    /// Crosses at the paper's points.
    Points { points: Vec<(f64, f64)>, label: String },
    /// A dashed curve (a formula, a bound).
    Curve { points: Vec<(f64, f64)>, label: String },
}

impl Chart {
    fn all_points(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        let refs = self.references.iter().flat_map(|r| match r {
            Reference::Level { y, .. } => vec![(f64::NAN, *y)],
            Reference::Points { points, .. } | Reference::Curve { points, .. } => points.clone(),
        });
        self.series.iter().flat_map(|s| s.points.iter().copied()).chain(refs)
    }

    fn range(&self, axis: fn((f64, f64)) -> f64, log: bool) -> Range<f64> {
        let values: Vec<f64> =
            self.all_points().map(axis).filter(|v| v.is_finite() && (!log || *v > 0.0)).collect();
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !lo.is_finite() || !hi.is_finite() {
            return if log { 0.1..10.0 } else { 0.0..1.0 };
        }
        // The legend sits in the upper left: room above the data keeps it off the points.
        let headroom = if axis((0.0, 1.0)) == 1.0 { 1.0 } else { 0.0 };
        if log {
            (lo / 1.6)..(hi * 1.6 * 10f64.powf(headroom * (hi / lo).log10().max(1.0) * 0.6))
        } else {
            let span = (hi - lo).max(hi.abs() * 0.1).max(1e-9);
            let lo = if lo >= 0.0 && lo - 0.08 * span <= 0.0 { 0.0 } else { lo - 0.08 * span };
            lo..(hi + (0.12 + 0.6 * headroom) * span)
        }
    }

    /// Draws the chart into `path`.
    pub fn draw(&self, path: &Path) -> anyhow::Result<()> {
        let root = SVGBackend::new(path, (860, 500)).into_drawing_area();
        root.fill(&WHITE)?;
        let x = if self.x_labels.is_empty() {
            self.range(|p| p.0, self.log_x)
        } else {
            -0.5..(self.x_labels.len() as f64 - 0.5)
        };
        let y = self.range(|p| p.1, self.log_y);
        macro_rules! on {
            ($x:expr, $y:expr) => {
                self.fill(
                    ChartBuilder::on(&root)
                        .caption(&self.title, ("sans-serif", 18))
                        .margin(14)
                        .x_label_area_size(46)
                        .y_label_area_size(70)
                        .build_cartesian_2d($x, $y)?,
                )?
            };
        }
        match (self.log_x, self.log_y) {
            (false, false) => on!(x, y),
            (true, false) => on!(x.log_scale(), y),
            (false, true) => on!(x, y.log_scale()),
            (true, true) => on!(x.log_scale(), y.log_scale()),
        }
        root.present()?;
        Ok(())
    }

    fn fill<'a, 'b: 'a, X, Y>(
        &self,
        mut chart: ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>,
    ) -> anyhow::Result<()>
    where
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let labels = &self.x_labels;
        let x_label = |v: &f64| {
            if labels.is_empty() {
                return tick(*v);
            }
            category_label(labels, *v)
        };
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(&self.x_desc)
            .y_desc(&self.y_desc)
            .x_label_formatter(&x_label)
            .y_label_formatter(&|v| tick(*v))
            .light_line_style(WHITE.mix(0.0));
        if !labels.is_empty() {
            // Short names, level: a rotated label would sit across the axis.
            mesh.disable_x_mesh().x_labels(labels.len().max(2) * 2 + 1).x_label_style(("sans-serif", 11));
        }
        mesh.draw()?;
        let x_range = chart.x_range();
        let (mut curves, mut levels) = (0, 0);
        for reference in &self.references {
            match reference {
                Reference::Level { y, label } => {
                    // Several levels on one plot must not look alike: dash length and grey differ.
                    let (dash, grey) = [(10, 0), (3, 90), (6, 160)][levels % 3];
                    levels += 1;
                    let style = RGBColor(grey, grey, grey).stroke_width(2);
                    chart
                        .draw_series(DashedLineSeries::new(
                            vec![(x_range.start, *y), (x_range.end, *y)],
                            dash,
                            4,
                            style,
                        ))?
                        .label(label.clone())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                }
                Reference::Points { points, label } => {
                    chart
                        .draw_series(points.iter().map(|&p| Cross::new(p, 7, BLACK.stroke_width(2))))?
                        .label(label.clone())
                        .legend(|(x, y)| Cross::new((x + 10, y), 5, BLACK.stroke_width(2)));
                }
                Reference::Curve { points, label } => {
                    // Two curves side by side must not look alike: long dashes, then grey dots.
                    let (dash, color) =
                        if curves % 2 == 0 { (8, BLACK) } else { (2, RGBColor(120, 120, 120)) };
                    curves += 1;
                    let style = color.stroke_width(2);
                    chart
                        .draw_series(DashedLineSeries::new(points.clone(), dash, 3, style))?
                        .label(label.clone())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                }
            }
        }
        for (i, series) in self.series.iter().enumerate() {
            let color = PALETTE[series.palette.unwrap_or(i) % PALETTE.len()];
            let style = color.stroke_width(if series.dashed { 1 } else { 2 });
            for (&(px, py), &half) in series.points.iter().zip(&series.errors) {
                chart.draw_series([PathElement::new(
                    vec![(px, py - half), (px, py + half)],
                    color.stroke_width(1),
                )])?;
            }
            let markers = series.points.iter().map(move |&p| Circle::new(p, 4, style.filled()));
            let drawn = if series.markers_only {
                chart.draw_series(markers)?
            } else {
                chart.draw_series(markers)?;
                if series.dashed {
                    chart.draw_series(DashedLineSeries::new(series.points.clone(), 5, 4, style))?
                } else {
                    chart.draw_series(LineSeries::new(series.points.clone(), style))?
                }
            };
            drawn.label(series.label.clone()).legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (20, 0)], style)
                    + Circle::new((10, 0), 3, style.filled())
            });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}

/// A tick label with at most three significant digits and no float noise (0.30000000000000004).
fn tick(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let magnitude = v.abs().log10().floor() as i32;
    if !(-3..6).contains(&magnitude) {
        return format!("{v:.1e}");
    }
    let decimals = (2 - magnitude).max(0) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Bars made of stacked layers (bytes per protocol layer, say), one bar per category.
#[derive(Clone, Debug, Default)]
pub struct StackedBars {
    pub title: String,
    pub y_desc: String,
    /// The layers, bottom first.
    pub layers: Vec<String>,
    /// One bar per category: its label under the axis and one value per layer.
    pub bars: Vec<(String, Vec<f64>)>,
    /// The paper's levels, drawn as dashed lines across the plot.
    pub levels: Vec<(f64, String)>,
}

impl StackedBars {
    pub fn draw(&self, path: &Path) -> anyhow::Result<()> {
        let width = (140 + 46 * self.bars.len()).max(860) as u32;
        let root = SVGBackend::new(path, (width, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let top = self
            .bars
            .iter()
            .map(|(_, v)| v.iter().sum::<f64>())
            .chain(self.levels.iter().map(|l| l.0))
            .fold(1.0, f64::max);
        let n = self.bars.len();
        let labels: Vec<String> = self.bars.iter().map(|b| b.0.clone()).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 18))
            .margin(14)
            .x_label_area_size(120)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..top * 1.35)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n.max(2) * 2 + 1)
            .x_label_formatter(&|v| category_label(&labels, *v))
            .x_label_style(("sans-serif", 11).into_font().transform(FontTransform::Rotate90))
            .y_desc(&self.y_desc)
            .y_label_formatter(&|v| tick(*v))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for (layer, name) in self.layers.iter().enumerate() {
            let color = PALETTE[layer % PALETTE.len()];
            let rects = self.bars.iter().enumerate().map(move |(i, (_, values))| {
                let below: f64 = values.iter().take(layer).sum();
                let x = i as f64;
                Rectangle::new(
                    [(x - 0.38, below), (x + 0.38, below + values.get(layer).copied().unwrap_or(0.0))],
                    color.filled(),
                )
            });
            chart
                .draw_series(rects)?
                .label(name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
        }
        for (i, (y, label)) in self.levels.iter().enumerate() {
            let (dash, grey) = [(10, 0), (3, 90), (6, 160)][i % 3];
            let style = RGBColor(grey, grey, grey).stroke_width(2);
            chart
                .draw_series(DashedLineSeries::new(vec![(-0.5, *y), (n as f64 - 0.5, *y)], dash, 4, style))?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    }
}
