//! `index.html`: one self-contained page (CSS and SVG inline, no script, nothing fetched): the
//! summary table first, then a section per experiment.

use super::results::{format_value, verdict_label, Figure, Origin, Results, Section, Status, Table};
use std::fmt::Write;
use std::path::Path;

const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1180px; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2em; margin-top: 2.2em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; display: block; overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; vertical-align: top; }
th { background: #f2f2f2; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.met { background: #e3f6e3; } .notmet { background: #fbe3e3; }
.origin { color: #666; font-size: 0.85em; white-space: nowrap; }
.skipped { background: #fff6d6; padding: 0.4em 0.8em; border-left: 4px solid #e0b000; }
.failed { background: #fbe3e3; padding: 0.4em 0.8em; border-left: 4px solid #c00; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
.meta { color: #555; font-size: 0.9em; }
.meaning { background: #eef4fb; padding: 0.5em 0.9em; border-left: 4px solid #3a78c2; }
";

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

fn origin_label(origin: &Origin) -> String {
    match origin {
        Origin::Simulated => "simulated".into(),
        Origin::Analytic => "analytic".into(),
        Origin::Measured { runs } => format!("measured, median of {runs}"),
    }
}

fn verdict_class(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "notmet",
        None => "",
    }
}

fn ratio_cell(f: &Figure) -> String {
    f.ratio.map_or("—".into(), |r| format!("{r:.2}×"))
}

fn summary(out: &mut String, results: &Results) {
    out.push_str("<h2 id=\"summary\">Summary</h2>\n<table data-table=\"summary\">\n<tr><th>experiment</th><th>figure</th><th>paper / anchor</th><th>ours</th><th>unit</th><th>ratio</th><th>met?</th><th>how</th></tr>\n");
    for s in &results.experiments {
        if s.figures.is_empty() {
            let reason = match &s.status {
                Status::Ran => "no headline figure".to_string(),
                Status::Skipped { reason } => format!("skipped: {reason}"),
                Status::Failed { reason } => format!("failed: {reason}"),
            };
            let _ = writeln!(
                out,
                "<tr><td><a href=\"#{id}\">{id}</a></td><td colspan=\"7\">{}</td></tr>",
                escape(&reason),
                id = escape(&s.id)
            );
        }
        for f in &s.figures {
            let _ = writeln!(
                out,
                "<tr class=\"{class}\"><td><a href=\"#{id}\">{id}</a></td><td>{name}</td><td class=\"num\" title=\"{src}\">{anchor}</td><td class=\"num\">{ours}</td><td>{unit}</td><td class=\"num\">{ratio}</td><td>{met}</td><td class=\"origin\">{origin}</td></tr>",
                class = verdict_class(f.met),
                id = escape(&s.id),
                name = escape(&f.name),
                src = escape(&f.anchor_source),
                anchor = format_value(f.anchor),
                ours = format_value(f.ours),
                unit = escape(&f.unit),
                ratio = ratio_cell(f),
                met = verdict_label(f.met),
                origin = escape(&origin_label(&f.origin)),
            );
        }
    }
    out.push_str("</table>\n");
}

fn figure_table(out: &mut String, s: &Section) {
    if s.figures.is_empty() {
        return;
    }
    let _ = writeln!(out, "<table data-table=\"{}-figures\">", escape(&s.id));
    out.push_str("<tr><th>figure</th><th>paper / anchor</th><th>ours</th><th>unit</th><th>difference</th><th>met?</th><th>criterion</th><th>what the difference is</th></tr>\n");
    for f in &s.figures {
        let diff = f.ratio.map_or("—".into(), |r| format!("{:+.1} %", (r - 1.0) * 100.0));
        let _ = writeln!(
            out,
            "<tr class=\"{}\"><td>{}<div class=\"origin\">{}</div></td><td class=\"num\">{}<div class=\"origin\">{}</div></td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            verdict_class(f.met),
            escape(&f.name),
            escape(&origin_label(&f.origin)),
            format_value(f.anchor),
            escape(&f.anchor_source),
            format_value(f.ours),
            escape(&f.unit),
            diff,
            verdict_label(f.met),
            escape(&f.criterion),
            escape(&f.note)
        );
    }
    out.push_str("</table>\n");
}

fn table(out: &mut String, id: &str, index: usize, t: &Table) {
    let _ = writeln!(out, "<h4>{}</h4>\n<table data-table=\"{}-{}\">", escape(&t.title), escape(id), index);
    out.push_str("<tr>");
    for c in &t.columns {
        let _ = write!(out, "<th>{}</th>", escape(c));
    }
    out.push_str("</tr>\n");
    for row in &t.rows {
        out.push_str("<tr>");
        for cell in row {
            let numeric =
                cell.trim_start_matches(['-', '+']).chars().next().is_some_and(|c| c.is_ascii_digit());
            let _ = write!(out, "<td{}>{}</td>", if numeric { " class=\"num\"" } else { "" }, escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// The SVG file's markup, ready to sit inside the page.
fn inline_svg(dir: &Path, file: &str) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(file)).ok()?;
    let start = text.find("<svg")?;
    Some(text[start..].to_string())
}

fn section(out: &mut String, dir: &Path, s: &Section) {
    let _ = writeln!(out, "<section id=\"{id}\" data-experiment=\"{id}\">", id = escape(&s.id));
    let _ = writeln!(out, "<h2>{} — {}</h2>", escape(&s.id), escape(&s.title));
    let _ = writeln!(out, "<p class=\"meta\">{} · {:.1} s wall time</p>", escape(&s.source), s.elapsed_s);
    match &s.status {
        Status::Ran => {}
        Status::Skipped { reason } => {
            let _ = writeln!(out, "<p class=\"skipped\">Skipped: {}</p>", escape(reason));
        }
        Status::Failed { reason } => {
            let _ = writeln!(out, "<p class=\"failed\">Failed: {}</p>", escape(reason));
        }
    }
    let _ = writeln!(out, "<h3>What the paper measured</h3>\n<p>{}</p>", escape(&s.paper_method));
    let _ = writeln!(out, "<h3>Our setup</h3>\n<p>{}</p>", escape(&s.our_setup));
    if !s.figures.is_empty() {
        out.push_str("<h3>Ours beside the paper's</h3>\n");
        figure_table(out, s);
    }
    for (i, t) in s.tables.iter().enumerate() {
        table(out, &s.id, i, t);
    }
    for plot in &s.plots {
        match inline_svg(dir, &plot.file) {
            Some(svg) => {
                let _ = writeln!(
                    out,
                    "<figure data-plot=\"{file}\">{svg}<figcaption>{title} (<a href=\"{file}\">{file}</a>)</figcaption></figure>",
                    file = escape(&plot.file),
                    title = escape(&plot.title)
                );
            }
            None => {
                let _ = writeln!(out, "<p class=\"failed\">plot {} missing</p>", escape(&plot.file));
            }
        }
    }
    if let Some(c) = &s.capture {
        let _ = writeln!(
            out,
            "<p>Capture of a representative run: <a href=\"{f}\" data-capture=\"{f}\">{f}</a> — {}</p>",
            escape(&c.what),
            f = escape(&c.file)
        );
    }
    if !s.meaning.is_empty() {
        let _ = writeln!(out, "<p class=\"meaning\">{}</p>", escape(&s.meaning));
    }
    out.push_str("</section>\n");
}

/// The whole page; `dir` holds the plots it inlines.
pub fn page(results: &Results, dir: &Path) -> String {
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<title>fastshake lab: every experiment beside its paper</title>\n<style>");
    out.push_str(STYLE);
    out.push_str("</style>\n</head>\n<body>\n<h1>fastshake lab: every experiment beside its paper</h1>\n");
    let ids: Vec<&str> = results.experiments.iter().map(|s| s.id.as_str()).collect();
    let _ = writeln!(
        out,
        "<p class=\"meta\">seed {} · {} run · {} · {:.0} s wall time · <a href=\"results.json\">results.json</a> (schema {})</p>",
        results.seed,
        if results.quick { "quick" } else { "full" },
        escape(&ids.join(", ")),
        results.elapsed_s,
        escape(&results.schema),
    );
    out.push_str("<p class=\"meta\">Simulated figures run on virtual time: the same seed gives the same figure. \
        Measured figures are timed on this machine and vary from run to run; each is the median of the runs stated \
        beside it. Ratios are ours / the paper's (or the anchor's, measured in the same run).</p>\n");
    summary(&mut out, results);
    for s in &results.experiments {
        section(&mut out, dir, s);
    }
    out.push_str("</body>\n</html>\n");
    out
}
