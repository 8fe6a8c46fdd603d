//! A plot as data: what to draw and what to see in it. An experiment says
//! which plots its results make; the report draws them
//! (`report::plot::svg`).

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
        /// Right end of the x axis, to zoom on where things happen; points
        /// beyond it are left out.
        x_max: Option<f64>,
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
    /// Title, drawn in the plot.
    pub title: String,
    /// One line under the plot saying what to see in it.
    pub caption: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// What to draw.
    pub shape: Shape,
}

impl Plot {
    /// A line plot; `caption` says what to see in it.
    pub fn line(
        key: &str,
        (title, caption): (&str, &str),
        x_label: &str,
        y_label: &str,
        series: Vec<Series>,
        log_y: bool,
    ) -> Plot {
        Plot {
            key: key.into(),
            title: title.into(),
            caption: caption.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            shape: Shape::Lines {
                series,
                log_y,
                x_max: None,
            },
        }
    }

    /// A bar plot; `caption` says what to see in it. The y axis is
    /// logarithmic when the values span orders of magnitude.
    pub fn bars(
        key: &str,
        (title, caption): (&str, &str),
        y_label: &str,
        bars: Vec<(String, f64)>,
    ) -> Plot {
        Plot {
            key: key.into(),
            title: title.into(),
            caption: caption.into(),
            x_label: String::new(),
            y_label: y_label.into(),
            shape: Shape::Bars { bars },
        }
    }

    /// Ends the x axis of a line plot at `x_max`.
    pub fn zoom_x(mut self, x_max: f64) -> Plot {
        if let Shape::Lines { x_max: m, .. } = &mut self.shape {
            *m = Some(x_max);
        }
        self
    }
}
