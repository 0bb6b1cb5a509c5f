//! The figures of an incast report, PNG and SVG with plotters:
//!
//! - `incast-<cc>` per congestion-control mode (`+` in the mode's name
//!   becomes `-`): a 2×2 panel of the focus group's median-ICT run —
//!   per-flow goodput over time, the bottleneck queue (TBF backlog and the
//!   eBPF virtual queue, with Kmin/Kmax and the buffer), the CDF of flow
//!   completion times over all seeds, and the traced sender's cwnd /
//!   inflight / credit;
//! - `compare`: one column per mode with the same axes (queue over time,
//!   per-flow goodput), and for a sweep a row of ICT/ideal against N per
//!   mode, one panel per flow size.
//!
//! The focus group is the (senders, size) with the largest N, then the
//! largest size. Text is drawn with DejaVu Sans through ab_glyph (no system
//! font libraries): [`DEFAULT_FONT`] or `$UET_FONT`, loaded once.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::drawing::DrawingAreaErrorKind;
use plotters::prelude::*;
use plotters::style::register_font;

use super::metrics::{bytes_to_ns, cc_rank, delivered_at, size_label, summarize};
use super::model::{Report, Run};
use crate::error::{Error, Result};

/// The font the figures use unless `$UET_FONT` names another.
pub const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Points per drawn series at most (long series are thinned keeping each
/// bucket's minimum and maximum, so peaks survive).
const MAX_POINTS: usize = 1500;

/// Goodput bins per figure width, at most.
const GOODPUT_BINS: f64 = 150.0;

/// Registers the plot font with plotters, once per process.
fn load_font() -> Result<()> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let path =
            std::env::var_os("UET_FONT").map_or_else(|| PathBuf::from(DEFAULT_FONT), PathBuf::from);
        let bytes = read_font(&path)?;
        // plotters keeps registered fonts for the life of the process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        for family in ["sans-serif", "serif", "monospace"] {
            register_font(family, FontStyle::Normal, bytes).map_err(|_| {
                format!(
                    "{} is not a TrueType font plotters can use; install `fonts-dejavu-core` \
                     or point $UET_FONT at one",
                    path.display()
                )
            })?;
        }
        Ok(())
    })
    .clone()
    .map_err(|message| Error::Plot {
        what: "loading the plot font".into(),
        message,
    })
}

fn read_font(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| {
        format!(
            "cannot read the plot font {}: {e}; install it with `apt install fonts-dejavu-core` \
             or point $UET_FONT at a TrueType font",
            path.display()
        )
    })
}

/// One figure the report links: its file stem (`.png` and `.svg` exist)
/// and what it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// File name without extension.
    pub stem: String,
    /// One line for the report.
    pub caption: String,
}

/// The file stem of a mode's figure: `incast-<cc>`, `+` → `-`.
pub fn mode_stem(cc: &str) -> String {
    format!("incast-{}", cc.replace('+', "-"))
}

/// The (senders, size) the per-mode figures show: largest N, then size.
pub fn focus_group(report: &Report) -> Option<(usize, u64)> {
    report.runs.iter().map(|r| (r.senders, r.size)).max()
}

/// The modes of the focus group, in report order.
fn focus_modes(report: &Report, group: (usize, u64)) -> Vec<String> {
    let mut modes: Vec<String> = report
        .runs
        .iter()
        .filter(|r| (r.senders, r.size) == group)
        .map(|r| r.cc.clone())
        .collect();
    modes.sort_by(|a, b| cc_rank(a).cmp(&cc_rank(b)).then(a.cmp(b)));
    modes.dedup();
    modes
}

/// Whether the report holds more than one N or size (a sweep).
fn is_sweep(report: &Report) -> bool {
    let first = report.runs.first().map(|r| (r.senders, r.size));
    report
        .runs
        .iter()
        .any(|r| Some((r.senders, r.size)) != first)
}

/// The figures [`figures`] writes for this report, in order.
pub fn planned(report: &Report) -> Vec<Planned> {
    let Some(group @ (n, size)) = focus_group(report) else {
        return Vec::new();
    };
    let what = format!("N = {n}, {} per flow", size_label(size));
    let mut out: Vec<Planned> = focus_modes(report, group)
        .into_iter()
        .map(|cc| Planned {
            stem: mode_stem(&cc),
            caption: format!(
                "{cc}, {what}: per-flow goodput, bottleneck queue, FCT CDF, \
                 sender congestion state (median-ICT seed)"
            ),
        })
        .collect();
    out.push(Planned {
        stem: "compare".into(),
        caption: if is_sweep(report) {
            format!("all modes side by side, {what}; ICT/ideal against N per size")
        } else {
            format!("all modes side by side, {what}")
        },
    });
    out
}

/// Writes every figure of [`planned`] as PNG and SVG into `dir`; returns
/// the paths written.
pub fn figures(dir: &Path, report: &Report) -> Result<Vec<PathBuf>> {
    let Some(group) = focus_group(report) else {
        return Ok(Vec::new());
    };
    load_font()?;
    std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let modes: Vec<ModeData> = focus_modes(report, group)
        .iter()
        .filter_map(|cc| ModeData::new(report, cc, group))
        .collect();
    let mut out = Vec::new();
    for m in &modes {
        out.extend(render(dir, &mode_stem(&m.cc), &ModeFigure(m))?);
    }
    let compare = CompareFigure {
        title: format!(
            "incast, all modes — {}",
            modes.first().map_or("", |m| &m.setup_line)
        ),
        modes: &modes,
        sweep: is_sweep(report).then(|| Sweep::new(report)),
    };
    out.extend(render(dir, "compare", &compare)?);
    Ok(out)
}

/// A figure that can draw itself on any plotters backend.
trait Figure {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Drawn<DB>;
}

type Drawn<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn render(dir: &Path, stem: &str, fig: &impl Figure) -> Result<[PathBuf; 2]> {
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    {
        let root = BitMapBackend::new(&png, fig.size()).into_drawing_area();
        fig.draw(&root)
            .and_then(|()| root.present())
            .map_err(|e| Error::Plot {
                what: format!("drawing {}", png.display()),
                message: e.to_string(),
            })?;
    }
    {
        let root = SVGBackend::new(&svg, fig.size()).into_drawing_area();
        fig.draw(&root)
            .and_then(|()| root.present())
            .map_err(|e| Error::Plot {
                what: format!("drawing {}", svg.display()),
                message: e.to_string(),
            })?;
    }
    Ok([png, svg])
}

/// The time unit of an axis: µs below 2 ms of span, else ms.
#[derive(Debug, Clone, Copy)]
struct TimeUnit {
    ns: f64,
    name: &'static str,
}

impl TimeUnit {
    fn for_span(span_ns: f64) -> Self {
        if span_ns < 2e6 {
            Self {
                ns: 1e3,
                name: "µs",
            }
        } else {
            Self {
                ns: 1e6,
                name: "ms",
            }
        }
    }

    fn of(self, t_ns: f64) -> f64 {
        t_ns / self.ns
    }
}

type Series = Vec<(f64, f64)>;

/// What one mode's figures draw, in plot units (time in ns, converted when
/// drawn; bytes in KiB; rates in Mb/s).
#[derive(Debug)]
struct ModeData {
    cc: String,
    senders: usize,
    /// "N = 16 × 4 MiB, R = 1000 Mb/s, buffer 61 KiB (5.0 BDP)".
    setup_line: String,
    /// The shown run's ICT, ns.
    span_ns: f64,
    goodput: Vec<Series>,
    tbf: Series,
    vq: Series,
    ecn: Option<(f64, f64)>,
    buffer_kib: f64,
    /// FCTs in ns, sorted, over every seed of the group.
    fcts: Vec<f64>,
    seeds: usize,
    trace_sender: usize,
    cwnd: Series,
    inflight: Series,
    credit: Series,
}

fn kib(bytes: f64) -> f64 {
    bytes / 1024.0
}

fn run_ict(r: &Run) -> u64 {
    r.flows.iter().map(|f| f.end_ns).max().unwrap_or(0)
}

impl ModeData {
    fn new(report: &Report, cc: &str, (senders, size): (usize, u64)) -> Option<Self> {
        let mut runs: Vec<&Run> = report
            .runs
            .iter()
            .filter(|r| r.cc == cc && (r.senders, r.size) == (senders, size))
            .collect();
        runs.sort_by_key(|r| run_ict(r));
        let run = *runs.get(runs.len().saturating_sub(1) / 2)?;
        let setup = &report.setup;
        let span_ns = (run_ict(run) as f64).max(1.0);

        // Goodput bins: at least one chunk per flow at the fair share.
        let chunk_ns = bytes_to_ns(
            (setup.chunk * senders.max(1) as u64) as f64,
            setup.bottleneck_bps,
        );
        let bin = (span_ns / GOODPUT_BINS).max(chunk_ns).max(1.0);
        let goodput = run
            .flows
            .iter()
            .map(|f| {
                let mut s = Series::new();
                let mut a = 0.0;
                while a < span_ns {
                    let b = a + bin;
                    let bytes = delivered_at(f, b) - delivered_at(f, a);
                    s.push(((a + b) / 2.0, bytes * 8.0 * 1e3 / bin));
                    a = b;
                }
                s
            })
            .collect();

        let samples = run.queue.iter().filter(|s| s.t_ns >= 0);
        let tbf = thin(
            samples
                .clone()
                .map(|s| (s.t_ns as f64, kib(s.backlog_bytes as f64)))
                .collect(),
        );
        let vq = thin(
            samples
                .map(|s| (s.t_ns as f64, kib(s.vq_bytes as f64)))
                .collect(),
        );

        let mut fcts: Vec<f64> = runs
            .iter()
            .flat_map(|r| {
                r.flows
                    .iter()
                    .map(|f| f.end_ns.saturating_sub(f.start_ns) as f64)
            })
            .collect();
        fcts.sort_by(f64::total_cmp);

        let trace = run.cc_trace.iter().filter(|s| s.t_ns >= 0);
        let cwnd = thin(
            trace
                .clone()
                .map(|s| (s.t_ns as f64, kib(s.cwnd as f64)))
                .collect(),
        );
        let inflight = thin(
            trace
                .clone()
                .map(|s| (s.t_ns as f64, kib(s.inflight as f64)))
                .collect(),
        );
        let credit = thin(
            trace
                .filter_map(|s| Some((s.t_ns as f64, kib(s.credit? as f64))))
                .collect(),
        );

        let bdp = report.calibration.bdp_bytes;
        let in_bdp = if bdp > 0 {
            format!(" ({:.1} BDP)", setup.buffer_bytes as f64 / bdp as f64)
        } else {
            String::new()
        };
        Some(Self {
            cc: cc.to_string(),
            senders,
            setup_line: format!(
                "N = {senders} × {}, R = {:.0} Mb/s, buffer {:.0} KiB{in_bdp}",
                size_label(size),
                setup.bottleneck_bps as f64 / 1e6,
                kib(setup.buffer_bytes as f64),
            ),
            span_ns,
            goodput,
            tbf,
            vq,
            ecn: setup.ecn.map(|(lo, hi)| (kib(lo as f64), kib(hi as f64))),
            buffer_kib: kib(setup.buffer_bytes as f64),
            fcts,
            seeds: runs.len(),
            trace_sender: run.cc_trace_sender,
            cwnd,
            inflight,
            credit,
        })
    }

    fn goodput_max(&self) -> f64 {
        max_y(self.goodput.iter().flatten())
    }

    fn queue_max(&self) -> f64 {
        max_y(self.tbf.iter().chain(&self.vq)).max(self.buffer_kib)
    }
}

fn max_y<'a>(points: impl Iterator<Item = &'a (f64, f64)>) -> f64 {
    points.map(|p| p.1).fold(0.0, f64::max)
}

/// At most [`MAX_POINTS`] points: per bucket its lowest and highest point,
/// in time order.
fn thin(points: Series) -> Series {
    if points.len() <= MAX_POINTS {
        return points;
    }
    let per = points.len().div_ceil(MAX_POINTS / 2);
    let mut out = Series::with_capacity(MAX_POINTS);
    for bucket in points.chunks(per) {
        let lo = bucket.iter().min_by(|a, b| a.1.total_cmp(&b.1));
        let hi = bucket.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(&lo), Some(&hi)) = (lo, hi) {
            if lo.0 <= hi.0 {
                out.extend([lo, hi]);
            } else {
                out.extend([hi, lo]);
            }
        }
    }
    out
}

fn mode_color(cc: &str) -> RGBColor {
    match cc {
        "none" => RGBColor(90, 90, 90),
        "nscc" => RGBColor(31, 119, 180),
        "rccc" => RGBColor(44, 160, 44),
        "nscc+rccc" => RGBColor(148, 103, 189),
        "pft" => RGBColor(255, 127, 14),
        _ => RGBColor(214, 39, 40),
    }
}

/// Room above the data of the queue and congestion-state panels for their
/// legend (upper right), as a factor of the data's maximum.
const LEGEND_HEADROOM: f64 = 1.45;

const TITLE: (&str, u32) = ("sans-serif", 26);
const CAPTION: (&str, u32) = ("sans-serif", 19);

fn legend_box<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Drawn<DB> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 14))
        .position(position)
        .draw()
}

fn line_legend(color: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
}

/// A chart of f64 × f64.
type TimeChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A panel over time (x in `unit` up to `x_max`, y over `y`) with its
/// caption, mesh and axis names.
fn time_panel<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: &str,
    unit: TimeUnit,
    x_max: f64,
    y: std::ops::Range<f64>,
    y_desc: &str,
) -> Result<TimeChart<'a, DB>, DrawingAreaErrorKind<DB::ErrorType>> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, CAPTION)
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, y)?;
    chart
        .configure_mesh()
        .x_desc(format!("time ({})", unit.name))
        .y_desc(y_desc)
        .draw()?;
    Ok(chart)
}

/// Per-flow goodput, x in `unit` up to `x_max`, y Mb/s up to `y_max`.
fn goodput_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    m: &ModeData,
    caption: &str,
    unit: TimeUnit,
    x_max: f64,
    y_max: f64,
) -> Drawn<DB> {
    let mut chart = time_panel(area, caption, unit, x_max, 0.0..y_max, "goodput (Mb/s)")?;
    let labelled = m.goodput.len() <= 8;
    for (i, s) in m.goodput.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let series = chart.draw_series(LineSeries::new(
            s.iter().map(|&(t, v)| (unit.of(t), v)),
            color.stroke_width(2),
        ))?;
        if labelled {
            series
                .label(format!("flow {}", i + 1))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
    }
    if labelled {
        legend_box(&mut chart, SeriesLabelPosition::LowerLeft)?;
    }
    Ok(())
}

/// TBF backlog and virtual queue in KiB with the ECN thresholds and the
/// buffer.
fn queue_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    m: &ModeData,
    caption: &str,
    unit: TimeUnit,
    x_max: f64,
    y_max: f64,
) -> Drawn<DB> {
    let mut chart = time_panel(area, caption, unit, x_max, 0.0..y_max, "queue (KiB)")?;
    let tbf = RGBColor(31, 119, 180);
    let vq = RGBColor(255, 127, 14);
    chart
        .draw_series(LineSeries::new(
            m.tbf.iter().map(|&(t, v)| (unit.of(t), v)),
            tbf.stroke_width(1),
        ))?
        .label("TBF backlog")
        .legend(line_legend(tbf));
    chart
        .draw_series(LineSeries::new(
            m.vq.iter().map(|&(t, v)| (unit.of(t), v)),
            vq.stroke_width(1),
        ))?
        .label("eBPF virtual queue")
        .legend(line_legend(vq));
    let mut hline = |y: f64, color: RGBColor, label: String| {
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, y), (x_max, y)],
                8,
                5,
                color.stroke_width(1),
            ))
            .map(|s| {
                s.label(label).legend(line_legend(color));
            })
    };
    if let Some((lo, hi)) = m.ecn {
        hline(lo, RGBColor(120, 120, 120), format!("Kmin {lo:.1} KiB"))?;
        hline(hi, RGBColor(40, 40, 40), format!("Kmax {hi:.1} KiB"))?;
    }
    hline(m.buffer_kib, RED, format!("buffer {:.0} KiB", m.buffer_kib))?;
    legend_box(&mut chart, SeriesLabelPosition::UpperRight)
}

/// CDF of the flow completion times of every seed.
fn fct_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, m: &ModeData) -> Drawn<DB> {
    // Zoomed on the flows' range: the spread is the point of this panel.
    let unit = TimeUnit::for_span(m.fcts.last().copied().unwrap_or(0.0));
    let x_max = unit.of(m.fcts.last().copied().unwrap_or(1.0)).max(1e-3) * 1.02;
    let x_min = unit.of(m.fcts.first().copied().unwrap_or(0.0)) * 0.9;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "CDF of flow completion times ({} flows, {} seeds)",
                m.fcts.len(),
                m.seeds
            ),
            CAPTION,
        )
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_min..x_max, 0.0..1.02)?;
    chart
        .configure_mesh()
        .x_desc(format!("flow completion time ({})", unit.name))
        .y_desc("fraction of flows")
        .draw()?;
    let n = m.fcts.len() as f64;
    let steps = m.fcts.iter().enumerate().flat_map(|(i, &f)| {
        let x = unit.of(f);
        [(x, i as f64 / n), (x, (i + 1) as f64 / n)]
    });
    let color = mode_color(&m.cc);
    chart.draw_series(LineSeries::new(steps, color.stroke_width(2)))?;
    Ok(())
}

/// The traced sender's cwnd, inflight and credit.
fn cc_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    m: &ModeData,
    unit: TimeUnit,
    x_max: f64,
) -> Drawn<DB> {
    let all = m.cwnd.iter().chain(&m.inflight).chain(&m.credit);
    let y_max = max_y(all.clone()).max(1.0) * LEGEND_HEADROOM;
    let y_min = all.map(|p| p.1).fold(0.0, f64::min) * 1.1;
    let caption = format!("sender {}: congestion state", m.trace_sender);
    let mut chart = time_panel(area, &caption, unit, x_max, y_min..y_max, "KiB")?;
    for (s, label, color) in [
        (&m.cwnd, "cwnd", RGBColor(31, 119, 180)),
        (&m.inflight, "inflight", RGBColor(255, 127, 14)),
        (&m.credit, "credit", RGBColor(44, 160, 44)),
    ] {
        if s.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(
                s.iter().map(|&(t, v)| (unit.of(t), v)),
                color.stroke_width(1),
            ))?
            .label(label)
            .legend(line_legend(color));
    }
    if !(m.cwnd.is_empty() && m.inflight.is_empty() && m.credit.is_empty()) {
        legend_box(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}

struct ModeFigure<'a>(&'a ModeData);

impl Figure for ModeFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1600, 1100)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Drawn<DB> {
        let m = self.0;
        root.fill(&WHITE)?;
        let root = root.titled(&format!("incast {} — {}", m.cc, m.setup_line), TITLE)?;
        let panels = root.split_evenly((2, 2));
        let unit = TimeUnit::for_span(m.span_ns);
        let x_max = unit.of(m.span_ns) * 1.02;
        goodput_panel(
            &panels[0],
            m,
            &format!("per-flow goodput ({} flows)", m.senders),
            unit,
            x_max,
            m.goodput_max().max(1.0) * 1.1,
        )?;
        queue_panel(
            &panels[1],
            m,
            "bottleneck queue",
            unit,
            x_max,
            m.queue_max().max(1.0) * LEGEND_HEADROOM,
        )?;
        fct_panel(&panels[2], m)?;
        cc_panel(&panels[3], m, unit, x_max)
    }
}

/// ICT/ideal medians per (mode, size) against N.
#[derive(Debug)]
struct Sweep {
    sizes: Vec<u64>,
    max_n: usize,
    max_y: f64,
    /// (cc, size, [(N, median ICT/ideal)]).
    lines: Vec<(String, u64, Series)>,
}

impl Sweep {
    fn new(report: &Report) -> Self {
        let summaries = summarize(&report.runs);
        let mut sizes: Vec<u64> = summaries.iter().map(|s| s.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let mut lines: Vec<(String, u64, Series)> = Vec::new();
        for s in &summaries {
            let point = (s.senders as f64, s.ict_over_ideal.median);
            match lines.iter_mut().find(|l| l.0 == s.cc && l.1 == s.size) {
                Some(l) => l.2.push(point),
                None => lines.push((s.cc.clone(), s.size, vec![point])),
            }
        }
        for l in &mut lines {
            l.2.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        Self {
            sizes,
            max_n: summaries.iter().map(|s| s.senders).max().unwrap_or(1),
            max_y: max_y(lines.iter().flat_map(|l| &l.2)),
            lines,
        }
    }
}

struct CompareFigure<'a> {
    title: String,
    modes: &'a [ModeData],
    sweep: Option<Sweep>,
}

impl Figure for CompareFigure<'_> {
    fn size(&self) -> (u32, u32) {
        let w = (520 * self.modes.len().max(1) as u32 + 60).max(1100);
        (w, if self.sweep.is_some() { 1350 } else { 950 })
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Drawn<DB> {
        root.fill(&WHITE)?;
        let root = root.titled(&self.title, TITLE)?;
        let (top, bottom) = match &self.sweep {
            Some(_) => {
                let (top, bottom) = root.split_vertically(root.dim_in_pixel().1 * 2 / 3);
                (top, Some(bottom))
            }
            None => (root, None),
        };
        let span = self.modes.iter().map(|m| m.span_ns).fold(1.0, f64::max);
        let unit = TimeUnit::for_span(span);
        let x_max = unit.of(span) * 1.02;
        let q_max = self
            .modes
            .iter()
            .map(ModeData::queue_max)
            .fold(1.0, f64::max)
            * LEGEND_HEADROOM;
        let g_max = self
            .modes
            .iter()
            .map(ModeData::goodput_max)
            .fold(1.0, f64::max)
            * 1.1;
        let cols = self.modes.len().max(1);
        let cells = top.split_evenly((2, cols));
        for (i, m) in self.modes.iter().enumerate() {
            queue_panel(
                &cells[i],
                m,
                &format!("{}: bottleneck queue", m.cc),
                unit,
                x_max,
                q_max,
            )?;
            goodput_panel(
                &cells[cols + i],
                m,
                &format!("{}: per-flow goodput", m.cc),
                unit,
                x_max,
                g_max,
            )?;
        }
        if let (Some(sweep), Some(bottom)) = (&self.sweep, bottom) {
            let panels = bottom.split_evenly((1, sweep.sizes.len().max(1)));
            for (area, &size) in panels.iter().zip(&sweep.sizes) {
                sweep_panel(area, sweep, size)?;
            }
        }
        Ok(())
    }
}

/// ICT/ideal against N for one flow size, one line per mode.
fn sweep_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    sweep: &Sweep,
    size: u64,
) -> Drawn<DB> {
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "ICT / ideal against N, {} per flow (median over seeds)",
                size_label(size)
            ),
            CAPTION,
        )
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            0.0..sweep.max_n as f64 * 1.05 + 0.5,
            0.0..sweep.max_y.max(1.2) * 1.1,
        )?;
    chart
        .configure_mesh()
        .x_desc("senders N")
        .y_desc("ICT / ideal")
        .draw()?;
    chart.draw_series(DashedLineSeries::new(
        [(0.0, 1.0), (sweep.max_n as f64 * 1.05 + 0.5, 1.0)],
        6,
        4,
        BLACK.mix(0.5).stroke_width(1),
    ))?;
    for (cc, _, s) in sweep.lines.iter().filter(|l| l.1 == size) {
        let color = mode_color(cc);
        chart
            .draw_series(LineSeries::new(s.iter().copied(), color.stroke_width(2)).point_size(4))?
            .label(cc.as_str())
            .legend(line_legend(color));
    }
    legend_box(&mut chart, SeriesLabelPosition::UpperLeft)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incast::metrics::tests::{TestDir, synthetic_report};

    const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

    fn assert_png(path: &Path) {
        let bytes = std::fs::read(path).unwrap();
        assert!(
            bytes.starts_with(PNG_MAGIC),
            "{} is not a PNG",
            path.display()
        );
        assert!(
            bytes.len() > 20_000,
            "{}: only {} bytes",
            path.display(),
            bytes.len()
        );
    }

    #[test]
    fn one_figure_per_mode_and_a_comparison_as_png_and_svg() {
        let dir = TestDir::new("plot-modes");
        let report = synthetic_report(&["none", "nscc", "rccc", "nscc+rccc"], &[4], &[1 << 20], 2);
        let files = figures(dir.path(), &report).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "incast-none.png",
                "incast-none.svg",
                "incast-nscc.png",
                "incast-nscc.svg",
                "incast-rccc.png",
                "incast-rccc.svg",
                "incast-nscc-rccc.png",
                "incast-nscc-rccc.svg",
                "compare.png",
                "compare.svg",
            ]
        );
        let stems: Vec<String> = planned(&report).into_iter().map(|p| p.stem).collect();
        assert_eq!(
            stems,
            [
                "incast-none",
                "incast-nscc",
                "incast-rccc",
                "incast-nscc-rccc",
                "compare"
            ]
        );
        for png in files.iter().filter(|p| p.extension().unwrap() == "png") {
            assert_png(png);
        }
        let svg = std::fs::read_to_string(dir.path().join("incast-rccc.svg")).unwrap();
        for text in [
            "incast rccc — N = 4 × 1 MiB, R = 1000 Mb/s, buffer 31 KiB (5.0 BDP)",
            "per-flow goodput (4 flows)",
            "bottleneck queue",
            "Kmin 1.2 KiB",
            "buffer 31 KiB",
            "CDF of flow completion times (8 flows, 2 seeds)",
            "sender 1: congestion state",
            "credit",
            "time (ms)",
            "goodput (Mb/s)",
        ] {
            assert!(svg.contains(text), "incast-rccc.svg lacks {text:?}");
        }
        let compare = std::fs::read_to_string(dir.path().join("compare.svg")).unwrap();
        for cc in ["none", "nscc", "rccc", "nscc+rccc"] {
            assert!(compare.contains(&format!("{cc}: bottleneck queue")), "{cc}");
            assert!(compare.contains(&format!("{cc}: per-flow goodput")), "{cc}");
        }
        assert!(
            !compare.contains("ICT / ideal against N"),
            "one group is not a sweep"
        );
    }

    #[test]
    fn a_sweep_adds_ict_against_n_per_size_and_focuses_on_the_largest_group() {
        let dir = TestDir::new("plot-sweep");
        let report = synthetic_report(&["none", "rccc"], &[1, 2, 4], &[256 * 1024, 1 << 20], 1);
        assert_eq!(focus_group(&report), Some((4, 1 << 20)));
        let files = figures(dir.path(), &report).unwrap();
        assert_eq!(files.len(), 6);
        assert_png(&dir.path().join("compare.png"));
        let compare = std::fs::read_to_string(dir.path().join("compare.svg")).unwrap();
        assert!(compare.contains("ICT / ideal against N, 256 KiB per flow"));
        assert!(compare.contains("ICT / ideal against N, 1 MiB per flow"));
        assert!(compare.contains("senders N"));
        let rccc = std::fs::read_to_string(dir.path().join("incast-rccc.svg")).unwrap();
        assert!(rccc.contains("N = 4 × 1 MiB"));
    }

    #[test]
    fn an_empty_report_has_no_figures() {
        let dir = TestDir::new("plot-empty");
        let mut report = synthetic_report(&["none"], &[1], &[256 * 1024], 1);
        report.runs.clear();
        assert!(planned(&report).is_empty());
        assert!(figures(dir.path(), &report).unwrap().is_empty());
    }

    #[test]
    fn a_missing_font_names_the_package_to_install() {
        let err = read_font(Path::new("/nonexistent/DejaVuSans.ttf")).unwrap_err();
        assert!(err.contains("/nonexistent/DejaVuSans.ttf"), "{err}");
        assert!(err.contains("apt install fonts-dejavu-core"), "{err}");
    }

    #[test]
    fn thinning_keeps_the_peaks_and_the_time_order() {
        let mut points: Series = (0..10_000).map(|i| (i as f64, (i % 10) as f64)).collect();
        points[7_777].1 = 1e6;
        let thin = thin(points);
        assert!(thin.len() <= MAX_POINTS, "{}", thin.len());
        assert!(thin.contains(&(7_777.0, 1e6)));
        assert!(thin.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(thin.iter().map(|p| p.1).fold(f64::MAX, f64::min), 0.0);
    }
}
