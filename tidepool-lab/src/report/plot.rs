//! Plots ([`Plot`], described by the experiments) drawn as SVG text
//! (plotters' SVG backend), ready to inline in HTML or to save next to the
//! Markdown report.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::model::plot::{Plot, Series, Shape};

/// Plot size in pixels.
const SIZE: (u32, u32) = (960, 460);
/// Width of the legend column beside line charts.
const LEGEND_WIDTH: u32 = 230;
/// Smallest value drawn on a log axis (values at or below zero are lifted
/// to it, so a measured zero still shows, at the bottom).
const LOG_FLOOR: f64 = 1e-3;

/// Line and bar colours: the Okabe-Ito palette (told apart with colour
/// blindness too), without its yellow, which vanishes on white. No two are
/// look-alikes, so a plot keeps to at most this many series.
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(230, 159, 0),   // orange
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(0, 0, 0),       // black
    RGBColor(86, 180, 233),  // sky blue (last: it is closest to blue)
];

/// Colour of series or bar `i`.
fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Bars whose largest value is at least this many times the smallest get
/// a log axis, so the small ones stay visible.
const LOG_BARS_FROM: f64 = 50.0;

/// Renders `plot` as an SVG document.
///
/// # Errors
///
/// plotters' drawing error, as text.
pub fn svg(plot: &Plot) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        match &plot.shape {
            Shape::Lines {
                series,
                log_y,
                x_max,
            } => {
                let shown: Vec<Series> = series
                    .iter()
                    .map(|s| Series {
                        name: s.name.clone(),
                        points: s
                            .points
                            .iter()
                            .copied()
                            .filter(|p| x_max.is_none_or(|m| p.0 <= m))
                            .collect(),
                    })
                    .collect();
                draw_lines(plot, &root, &shown, *log_y)
            }
            Shape::Bars { bars } => draw_bars(plot, &root, bars),
        }
        .map_err(|e| format!("plot {}: {e}", plot.key))?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

fn draw_lines<DB: DrawingBackend>(
    plot: &Plot,
    root: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[Series],
    log_y: bool,
) -> Result<(), String> {
    let lift = |y: f64| if log_y { y.max(LOG_FLOOR) } else { y };
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        let y = lift(y);
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let (chart_area, legend_area) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
    draw_legend(&legend_area, series)?;
    if log_y {
        let lo = y0.max(LOG_FLOOR) / 2.0;
        let hi = (y1 * 2.0).max(lo * 10.0);
        draw_xy(
            plot,
            &chart_area,
            series,
            x0..x1,
            (lo..hi).log_scale(),
            &lift,
        )
    } else {
        let hi = if y1 <= 0.0 { 1.0 } else { y1 * 1.1 };
        draw_xy(plot, &chart_area, series, x0..x1, 0.0..hi, &lift)
    }
}

fn draw_bars<DB: DrawingBackend>(
    plot: &Plot,
    root: &DrawingArea<DB, plotters::coord::Shift>,
    bars: &[(String, f64)],
) -> Result<(), String> {
    let positive: Vec<f64> = bars.iter().map(|b| b.1).filter(|v| *v > 0.0).collect();
    let lo = positive.iter().copied().fold(f64::MAX, f64::min);
    let hi = positive.iter().copied().fold(0.0_f64, f64::max);
    if !positive.is_empty() && hi / lo >= LOG_BARS_FROM {
        let range = ((lo / 3.0)..(hi * 3.0)).log_scale();
        draw_bars_on(plot, root, bars, range, lo / 3.0)
    } else {
        let top = if hi <= 0.0 { 1.0 } else { hi * 1.15 };
        draw_bars_on(plot, root, bars, 0.0..top, 0.0)
    }
}

/// Draws the bars on a y coordinate (linear or log) whose bottom is
/// `floor`.
fn draw_bars_on<DB, Y>(
    plot: &Plot,
    root: &DrawingArea<DB, plotters::coord::Shift>,
    bars: &[(String, f64)],
    y: Y,
    floor: f64,
) -> Result<(), String>
where
    DB: DrawingBackend,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    // Bar i spans [i + 0.1, i + 0.9] on a plain numeric x axis; its name
    // is drawn under its centre by hand, so the labels always line up
    // with the bars whatever their number.
    let n = bars.len().max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(&plot.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d::<RangedCoordf64, Y>((0.0..n).into(), y)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(&plot.y_label)
        .y_label_formatter(&|v| format_tick(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    let below =
        TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    let above =
        TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
    for (i, (name, v)) in bars.iter().enumerate() {
        let x = i as f64;
        let top = v.max(floor);
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x + 0.1, floor), (x + 0.9, top)],
                // One colour: the label under each bar names it.
                colour(0).mix(0.85).filled(),
            )))
            .map_err(|e| e.to_string())?;
        let (px, py) = chart.backend_coord(&(x + 0.5, top));
        root.draw(&Text::new(format_value(*v), (px, py - 3), above.clone()))
            .map_err(|e| e.to_string())?;
        // A long label goes on two lines, split before its "(...)".
        let (px, py) = chart.backend_coord(&(x + 0.5, floor));
        let (first, second) = match name.find(" (") {
            Some(at) => (&name[..at], Some(name[at + 1..].to_string())),
            None => (name.as_str(), None),
        };
        root.draw(&Text::new(first.to_string(), (px, py + 8), below.clone()))
            .map_err(|e| e.to_string())?;
        if let Some(second) = second {
            root.draw(&Text::new(second, (px, py + 24), below.clone()))
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Draws `series` on an x range and a y coordinate (linear or log).
fn draw_xy<DB, Y>(
    plot: &Plot,
    root: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[Series],
    x: std::ops::Range<f64>,
    y: Y,
    lift: &dyn Fn(f64) -> f64,
) -> Result<(), String>
where
    DB: DrawingBackend,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(&plot.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d::<RangedCoordf64, Y>(x.into(), y)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(&plot.x_label)
        .y_desc(&plot.y_label)
        .x_label_formatter(&|v| format_tick(*v))
        .y_label_formatter(&|v| format_tick(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in series.iter().enumerate() {
        let color = colour(i).to_rgba();
        let pts: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x, lift(y))).collect();
        let markers = pts.len() <= 60;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?;
        if markers {
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Draws the legend (a colour swatch and a name per series) in its own
/// area beside the chart, so it never hides data.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[Series],
) -> Result<(), String> {
    for (i, s) in series.iter().enumerate() {
        let color = colour(i).to_rgba();
        let y = 50 + 20 * i32::try_from(i).unwrap_or(i32::MAX / 40);
        area.draw(&Rectangle::new([(4, y - 4), (22, y + 4)], color.filled()))
            .map_err(|e| e.to_string())?;
        area.draw(&Text::new(
            s.name.clone(),
            (28, y),
            TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// An axis tick: [`format_value`] without trailing zeros, so ticks read
/// `0.5, 1, 1.5` rather than `0.500, 1, 1.50`.
pub fn format_tick(v: f64) -> String {
    let s = format_value(v);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A number in a short, readable form for labels and tables.
pub fn format_value(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        crate::report::table::group_digits(v)
    } else if v.fract() == 0.0 {
        // Counts (and whole numbers generally) print without decimals.
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_lines_and_bars() {
        let line = Plot::line(
            "l",
            ("Lines", "what to see"),
            "x",
            "y",
            vec![Series::new(
                "a",
                vec![(0.0, 0.0), (1.0, 10.0), (2.0, 1000.0)],
            )],
            true,
        );
        let drawn = svg(&line).unwrap();
        assert!(
            drawn.starts_with("<svg"),
            "{}",
            &drawn[..50.min(drawn.len())]
        );
        assert!(drawn.contains("Lines"));
        let bars = Plot::bars(
            "b",
            ("Bars", "what to see"),
            "ms",
            vec![("one".into(), 3.0), ("two".into(), 0.5)],
        );
        assert!(svg(&bars).unwrap().contains("two"));
        // Nothing to draw still yields a valid, empty chart.
        assert!(svg(&Plot::line("e", ("E", "c"), "x", "y", vec![], false)).is_ok());
        assert!(svg(&Plot::bars("e", ("E", "c"), "y", vec![])).is_ok());
        // Values across orders of magnitude: a log axis, plain tick labels.
        let wide = svg(&Plot::bars(
            "w",
            ("Wide", "c"),
            "ns",
            vec![("thread (a)".into(), 35_921.0), ("pool".into(), 173.0)],
        ))
        .unwrap();
        assert!(wide.contains("10,000"), "log ticks");
        assert!(
            !wide.contains("0000.0<") && !wide.contains(".0</text>"),
            "no decimals on whole ticks"
        );
    }

    #[test]
    fn value_format() {
        assert_eq!(format_value(0.0), "0");
        assert_eq!(format_tick(0.5), "0.5");
        assert_eq!(format_tick(1.5), "1.5");
        assert_eq!(format_tick(100_000.0), "100,000");
        assert_eq!(format_tick(0.001), "0.001");
        assert_eq!(format_value(12345.6), "12,346");
        assert_eq!(format_value(100_000.0), "100,000");
        assert_eq!(format_value(16.0), "16");
        assert_eq!(format_value(2.0), "2");
        assert_eq!(format_value(12.34), "12.3");
        assert_eq!(format_value(1.234), "1.23");
        assert_eq!(format_value(0.1234), "0.123");
        assert_eq!(format_value(0.001234), "0.0012");
    }
}
