//! Plots as SVG text (plotters' SVG backend), ready to inline in HTML or
//! to save next to the Markdown report.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Plot size in pixels.
const SIZE: (u32, u32) = (960, 460);
/// Width of the legend column beside line charts.
const LEGEND_WIDTH: u32 = 230;
/// Smallest value drawn on a log axis (values at or below zero are lifted
/// to it, so a measured zero still shows, at the bottom).
const LOG_FLOOR: f64 = 1e-3;

/// One named line or set of points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series named `name`.
    pub fn new(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.to_string(),
            points,
        }
    }
}

/// What a plot draws.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// Lines (with markers when there are few points).
    Lines {
        /// The series.
        series: Vec<Series>,
        /// Logarithmic y axis.
        log_y: bool,
    },
    /// One labelled bar per value.
    Bars {
        /// (label, value).
        bars: Vec<(String, f64)>,
    },
}

/// A plot and its titles.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    /// File-name stem (`plots/<key>.svg`).
    pub key: String,
    /// Caption.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// What to draw.
    pub shape: Shape,
}

impl Plot {
    /// A line plot.
    pub fn line(
        key: &str,
        title: &str,
        x_label: &str,
        y_label: &str,
        series: Vec<Series>,
        log_y: bool,
    ) -> Plot {
        Plot {
            key: key.into(),
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            shape: Shape::Lines { series, log_y },
        }
    }

    /// A bar plot.
    pub fn bars(key: &str, title: &str, y_label: &str, bars: Vec<(String, f64)>) -> Plot {
        Plot {
            key: key.into(),
            title: title.into(),
            x_label: String::new(),
            y_label: y_label.into(),
            shape: Shape::Bars { bars },
        }
    }

    /// Renders the plot as an SVG document.
    ///
    /// # Errors
    ///
    /// plotters' drawing error, as text.
    pub fn to_svg(&self) -> Result<String, String> {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            root.fill(&WHITE).map_err(|e| e.to_string())?;
            match &self.shape {
                Shape::Lines { series, log_y } => self.draw_lines(&root, series, *log_y),
                Shape::Bars { bars } => self.draw_bars(&root, bars),
            }
            .map_err(|e| format!("plot {}: {e}", self.key))?;
            root.present().map_err(|e| e.to_string())?;
        }
        Ok(svg)
    }

    fn draw_lines<DB: DrawingBackend>(
        &self,
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
                self,
                &chart_area,
                series,
                x0..x1,
                (lo..hi).log_scale(),
                &lift,
            )
        } else {
            let hi = if y1 <= 0.0 { 1.0 } else { y1 * 1.1 };
            draw_xy(self, &chart_area, series, x0..x1, 0.0..hi, &lift)
        }
    }

    fn draw_bars<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
        bars: &[(String, f64)],
    ) -> Result<(), String> {
        // Bar i spans [i + 0.1, i + 0.9] on a plain numeric x axis; its name
        // is drawn under its centre by hand, so the labels always line up
        // with the bars whatever their number.
        let n = bars.len().max(1) as f64;
        let hi = bars.iter().map(|b| b.1).fold(0.0_f64, f64::max);
        let hi = if hi <= 0.0 { 1.0 } else { hi * 1.15 };
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..n, 0.0..hi)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(&self.y_label)
            .draw()
            .map_err(|e| e.to_string())?;
        let below =
            TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        let above = TextStyle::from(("sans-serif", 13).into_font())
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        for (i, (name, v)) in bars.iter().enumerate() {
            let x = i as f64;
            let color = Palette99::pick(i).mix(0.85);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x + 0.1, 0.0), (x + 0.9, *v)],
                    color.filled(),
                )))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format_value(*v),
                    (x + 0.5, *v + hi * 0.01),
                    above.clone(),
                )))
                .map_err(|e| e.to_string())?;
            let (px, py) = chart.backend_coord(&(x + 0.5, 0.0));
            root.draw(&Text::new(name.clone(), (px, py + 8), below.clone()))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
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
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
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
        let color = Palette99::pick(i).to_rgba();
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

/// A number in a short, readable form for labels and tables.
pub fn format_value(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if v.fract() == 0.0 && a < 1e15 {
        // Counts (and whole numbers generally) print without decimals.
        format!("{v:.0}")
    } else if a >= 1000.0 {
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
            "Lines",
            "x",
            "y",
            vec![Series::new(
                "a",
                vec![(0.0, 0.0), (1.0, 10.0), (2.0, 1000.0)],
            )],
            true,
        );
        let svg = line.to_svg().unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50.min(svg.len())]);
        assert!(svg.contains("Lines"));
        let bars = Plot::bars(
            "b",
            "Bars",
            "ms",
            vec![("one".into(), 3.0), ("two".into(), 0.5)],
        );
        let svg = bars.to_svg().unwrap();
        assert!(svg.contains("two"));
        // Nothing to draw still yields a valid, empty chart.
        assert!(Plot::line("e", "E", "x", "y", vec![], false)
            .to_svg()
            .is_ok());
        assert!(Plot::bars("e", "E", "y", vec![]).to_svg().is_ok());
    }

    #[test]
    fn value_format() {
        assert_eq!(format_value(0.0), "0");
        assert_eq!(format_value(12345.6), "12346");
        assert_eq!(format_value(16.0), "16");
        assert_eq!(format_value(2.0), "2");
        assert_eq!(format_value(12.34), "12.3");
        assert_eq!(format_value(1.234), "1.23");
        assert_eq!(format_value(0.1234), "0.123");
        assert_eq!(format_value(0.001234), "0.0012");
    }
}
